//! An instance's store key: what it is ([`Key`]), what it is a function of ([`KeyParts`]) and
//! how it is made ([`store_key`], over parameters in [`canonical`] text).
//!
//! Kept apart from planning, which makes keys, and from the instance store, which files entries
//! under them, so that both (and the claims, the dry run and the run record) read the key from
//! below and none of them imports another to get it. A change here changes every key: every
//! store and the golden lock go stale, so the encoding is written once, here.

use std::sync::Arc;

use serde_yaml_ng::Value;
use sha2::{Digest, Sha256};

use super::spec::AxisValue;

/// An instance's store key: a sha256 (see [`store_key`]), shown and
/// named on disk as 64 hex digits. Kept as bytes: a 10⁶-instance plan held 88 MB of hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Key(pub [u8; 32]);

impl Key {
    /// The key written as 64 hex digits (either case), or `None`.
    pub fn parse(hex: &str) -> Option<Key> {
        key_bytes(hex).map(Key)
    }

    /// Its 64 lower-case hex digits, without allocating.
    pub(crate) fn hex_digits(&self) -> [u8; 64] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (i, b) in self.0.iter().enumerate() {
            out[2 * i] = DIGITS[usize::from(b >> 4)];
            out[2 * i + 1] = DIGITS[usize::from(b & 15)];
        }
        out
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.hex_digits();
        f.write_str(std::str::from_utf8(&d).expect("hex digits are ASCII"))
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({self})")
    }
}

/// A 64-hex-digit key as its 32 bytes.
fn key_bytes(key: &str) -> Option<[u8; 32]> {
    if key.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(key.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Everything an instance's output is a function of.
#[derive(Clone, Copy)]
pub struct KeyParts<'a> {
    pub kind: &'a str,
    pub version: u32,
    /// The stage's name and its inputs' names: a kind may use them in what it writes
    /// (messages, labels), so two stages share work only under the same names.
    pub stage: &'a str,
    pub inputs: &'a [&'a str],
    pub params: &'a str,
    pub seed: u128,
    /// The axis values, which become columns of its frame.
    pub axes: &'a [(Arc<str>, AxisValue)],
    /// The store keys of the upstream instances it reads, per input, in order.
    pub upstream: &'a [Vec<Key>],
    /// sha256 of each file its parameters name.
    pub files: &'a [String],
    /// See [`crate::kind::Stage::sources`].
    pub sources: &'a [serde_json::Value],
}

/// The store key of an instance: sha256 over a length-prefixed encoding of its [`KeyParts`]
/// (prefixes, so no two different part lists encode alike). The pipeline's name is not part
/// of it: identical work in two pipelines is one entry.
///
/// Axes are keyed by name, not by the order `axes:` lists them in: the seeds do not depend on
/// that order, the kinds are handed the axes in name order (see `exec`), and the engine puts
/// the axis columns in the stage's order when it takes an entry from the store. Swapping two
/// lines of `axes:` then keeps every instance; only those that read several instances of a
/// stage (gathered in plan order, which the swap changes) run again.
pub fn store_key(p: &KeyParts) -> Key {
    let mut h = Sha256::new();
    let mut put = |tag: &str, bytes: &[u8]| {
        h.update(tag.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    // 2: axes by name (1 keyed them in the order of `axes:`).
    put("dplab-instance", b"2");
    put("kind", p.kind.as_bytes());
    put("version", &p.version.to_le_bytes());
    put("stage", p.stage.as_bytes());
    for i in p.inputs {
        put("input", i.as_bytes());
    }
    put("params", p.params.as_bytes());
    put("seed", &p.seed.to_le_bytes());
    let mut axes: Vec<&(Arc<str>, AxisValue)> = p.axes.iter().collect();
    axes.sort_by(|a, b| a.0.cmp(&b.0));
    for (a, v) in axes {
        put("axis", a.as_bytes());
        put("value", v.canonical().as_bytes());
        // The frame's axis column is of integers: not the entry a float value left.
        if matches!(v, AxisValue::Int(_)) {
            put("integer", b"");
        }
    }
    for (k, keys) in p.upstream.iter().enumerate() {
        put("upstream", &(k as u64).to_le_bytes());
        for key in keys {
            // As hex digits: the encoding keys had when they were strings, so stores and
            // the golden lock stay valid.
            put("key", &key.hex_digits());
        }
    }
    for f in p.files {
        put("file", f.as_bytes());
    }
    for s in p.sources {
        put("source", s.to_string().as_bytes());
    }
    Key(h.finalize().into())
}

/// An instance's key by what it read rather than by where that came from (early cutoff, as
/// Bazel's and Shake's): its own key (its [`KeyParts`] without upstream keys) and, per input,
/// the digests of the frames it read ([`super::instance_store::InstanceResult::digest`]). An
/// edit upstream that leaves an input frame bit-identical leaves this key as it was, so the
/// instance is taken from the store under it instead of being computed again, and so is
/// everything below it. Tagged apart from [`store_key`]: the two never coincide.
pub fn content_key(own: &Key, inputs: &[Vec<[u8; 32]>]) -> Key {
    let mut h = Sha256::new();
    h.update(b"dplab-content-1");
    h.update(own.0);
    for (k, digests) in inputs.iter().enumerate() {
        h.update((k as u64).to_le_bytes());
        h.update((digests.len() as u64).to_le_bytes());
        for d in digests {
            h.update(d);
        }
    }
    Key(h.finalize().into())
}

/// `v` as canonical text: mappings with keys sorted, integers as digits, other numbers in
/// shortest round-trip form, strings JSON-quoted. Equal parameters give equal text.
pub fn canonical(v: &Value) -> String {
    fn go(v: &Value, out: &mut String) {
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    out.push_str(&i.to_string());
                } else if let Some(u) = n.as_u64() {
                    out.push_str(&u.to_string());
                } else {
                    let x = n.as_f64().unwrap_or(f64::NAN);
                    if x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 {
                        out.push_str(&(x as i64).to_string());
                    } else {
                        out.push_str(&format!("{x:?}"));
                    }
                }
            }
            Value::String(s) => {
                out.push_str(&serde_json::to_string(s).unwrap_or_default());
            }
            Value::Sequence(items) => {
                out.push('[');
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    go(it, out);
                }
                out.push(']');
            }
            Value::Mapping(m) => {
                let mut entries: Vec<(String, String)> = m
                    .iter()
                    .map(|(k, v)| {
                        let (mut ks, mut vs) = (String::new(), String::new());
                        go(k, &mut ks);
                        go(v, &mut vs);
                        (ks, vs)
                    })
                    .collect();
                entries.sort();
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(k);
                    out.push(':');
                    out.push_str(v);
                }
                out.push('}');
            }
            Value::Tagged(t) => {
                out.push_str(&format!("!{}", t.tag));
                go(&t.value, out);
            }
        }
    }
    let mut out = String::new();
    go(v, &mut out);
    out
}
