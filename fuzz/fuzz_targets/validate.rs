//! `dplab validate` on arbitrary bytes, mutated by libFuzzer's byte-level mutations (with the
//! dictionary fuzz/pipeline.dict and the seed corpus fuzz/seeds, real pipelines).
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::validate(data));
