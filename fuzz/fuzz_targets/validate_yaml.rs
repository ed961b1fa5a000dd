//! `dplab validate` on mutated pipelines, structure-aware: the mutator parses the input as
//! YAML and edits the tree — a node replaced by a hostile scalar (`-1`, `.nan`, `1e300`, a
//! huge integer, `~`, `[]`, `../x`, …) or by a copy of another node, an entry deleted,
//! duplicated or renamed (to a key, stage kind or parameter name dplab knows), a number
//! scaled or negated, a node wrapped in a list — and writes it back. Inputs that are not
//! YAML, and one mutation in five, go through libFuzzer's byte-level mutations instead, so
//! the syntax keeps being fuzzed too. Seeded with real pipelines (fuzz/seeds).
#![no_main]

mod common;

use std::sync::OnceLock;

use serde_yaml_ng::{Mapping, Value};

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::validate(data));

libfuzzer_sys::fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut rng = Rng(u64::from(seed) ^ 0x9E37_79B9_7F4A_7C15);
    if rng.below(5) == 0 {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    let Some(mut root) = std::str::from_utf8(&data[..size])
        .ok()
        .and_then(|t| serde_yaml_ng::from_str::<Value>(t).ok())
    else {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    };
    for _ in 0..1 + rng.below(3) {
        mutate(&mut root, &mut rng);
    }
    match serde_yaml_ng::to_string(&root) {
        Ok(text) if text.len() <= max_size => {
            data[..text.len()].copy_from_slice(text.as_bytes());
            text.len()
        }
        _ => libfuzzer_sys::fuzzer_mutate(data, size, max_size),
    }
});

/// splitmix64: the mutation must be a function of libFuzzer's seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn choose<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Values a careless or hostile author might write anywhere.
const HOSTILE: &[&str] = &[
    "-1",
    "0",
    "-0",
    "-0.0",
    "1",
    "2",
    "0.5",
    "1e300",
    "-1e300",
    "1e-300",
    "5e-324",
    ".nan",
    ".inf",
    "-.inf",
    "''",
    "~",
    "[]",
    "{}",
    "[[]]",
    "[{}]",
    "true",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "9007199254740993",
    "4294967296",
    "1e6",
    "1e9",
    "1e12",
    "100000000000000000000000000000000",
    "../x",
    "/etc/passwd",
    "/dev/zero",
    "/proc/self/mem",
    ".",
    "all",
    "rep",
    "$eps",
    "$rep",
    "$",
    "'a__b'",
    "'é'",
    "{from: 0, to: 1, step: 1e-9}",
    "{from: 0, to: 1e300, step: 1}",
    "{linspace: {from: 0, to: 1, num: 1e6}}",
    "{logspace: {from: 1e-300, to: 1e300, num: 3}}",
];

/// Keys and names dplab knows: pipeline keys, grid keys, every stage kind and parameter.
fn names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut v: Vec<String> = [
            "name",
            "title",
            "source",
            "paper",
            "item",
            "description",
            "seed",
            "axes",
            "stages",
            "profiles",
            "kind",
            "input",
            "with",
            "over",
            "repeat",
            "store",
            "from",
            "to",
            "step",
            "num",
            "linspace",
            "logspace",
            "ci",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for k in dplab::stages::registry::all() {
            v.push(k.name.to_string());
            v.extend(k.params.iter().map(|p| p.name.to_string()));
        }
        v.sort();
        v.dedup();
        v
    })
}

fn hostile(rng: &mut Rng) -> Value {
    if rng.below(12) == 0 {
        return Value::String("x".repeat(1 + rng.below(5000)));
    }
    serde_yaml_ng::from_str(rng.choose(HOSTILE)).unwrap_or(Value::Null)
}

/// A name dplab knows, a stage or axis of this file, or an axis reference.
fn some_name(root: &Value, rng: &mut Rng) -> String {
    let keys = |k: &str| -> Vec<String> {
        root.get(k)
            .and_then(Value::as_mapping)
            .map(|m| m.keys().filter_map(|k| k.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    match rng.below(4) {
        0 => {
            let s = keys("stages");
            if s.is_empty() {
                rng.choose(names()).clone()
            } else {
                rng.choose(&s).clone()
            }
        }
        1 => {
            let a = keys("axes");
            if a.is_empty() {
                "$eps".into()
            } else {
                format!("${}", rng.choose(&a))
            }
        }
        _ => rng.choose(names()).clone(),
    }
}

/// A random node: from the root, step into a random child three times in four.
fn pick<'a>(v: &'a mut Value, rng: &mut Rng) -> &'a mut Value {
    let n = match &*v {
        Value::Mapping(m) => m.len(),
        Value::Sequence(s) => s.len(),
        Value::Tagged(_) => 1,
        _ => 0,
    };
    if n == 0 || rng.below(4) == 0 {
        return v;
    }
    let i = rng.below(n);
    match v {
        Value::Mapping(m) => pick(m.values_mut().nth(i).expect("i < len"), rng),
        Value::Sequence(s) => pick(&mut s[i], rng),
        Value::Tagged(t) => pick(&mut t.value, rng),
        _ => unreachable!("a scalar has no children"),
    }
}

fn mutate(root: &mut Value, rng: &mut Rng) {
    let donor = pick(&mut root.clone(), rng).clone();
    let name = some_name(root, rng);
    let value = if rng.below(2) == 0 {
        hostile(rng)
    } else {
        donor.clone()
    };
    let op = rng.below(10);
    if op == 9 {
        // Another kind for one stage.
        let kinds = dplab::stages::registry::all();
        let k = kinds[rng.below(kinds.len())].name;
        if let Some(Value::Mapping(stages)) = root.get_mut("stages") {
            if !stages.is_empty() {
                let i = rng.below(stages.len());
                if let Some(Value::Mapping(st)) = stages.values_mut().nth(i) {
                    st.insert(Value::String("kind".into()), Value::String(k.into()));
                    return;
                }
            }
        }
    }
    let node = pick(root, rng);
    match op {
        // Replace the node.
        0 | 1 => *node = hostile(rng),
        2 => *node = donor,
        // Rename, delete, add or duplicate an entry.
        3 => match node {
            Value::Mapping(m) if !m.is_empty() => {
                let i = rng.below(m.len());
                let key = m.keys().nth(i).expect("i < len").clone();
                let v = m.remove(&key).expect("present");
                m.insert(Value::String(name), v);
            }
            Value::String(_) => *node = Value::String(name),
            _ => *node = Value::String(name),
        },
        4 => match node {
            Value::Mapping(m) if !m.is_empty() => {
                let key = m.keys().nth(rng.below(m.len())).expect("i < len").clone();
                m.remove(&key);
            }
            Value::Sequence(s) if !s.is_empty() => {
                s.remove(rng.below(s.len()));
            }
            _ => *node = Value::Null,
        },
        5 => match node {
            Value::Mapping(m) => {
                m.insert(Value::String(name), value);
            }
            Value::Sequence(s) => {
                let at = rng.below(s.len() + 1);
                let v = if s.is_empty() || rng.below(2) == 0 {
                    value
                } else {
                    s[rng.below(s.len())].clone()
                };
                s.insert(at, v);
            }
            _ => *node = value,
        },
        // Numbers: scaled, negated, shifted, made whole or fractional.
        6 | 7 => {
            if let Some(x) = node.as_f64() {
                let y = match rng.below(7) {
                    0 => -x,
                    1 => x * 1e6,
                    2 => x / 1e6,
                    3 => x + 1.0,
                    4 => x - 1.0,
                    5 => x.round() + 0.5,
                    _ => x * x,
                };
                *node = if y.fract() == 0.0 && y.abs() < 9e18 {
                    Value::Number((y as i64).into())
                } else {
                    Value::Number(y.into())
                };
            } else {
                *node = hostile(rng);
            }
        }
        // Wrap in a list or a mapping, or unwrap.
        8 => {
            let inner = std::mem::take(node);
            *node = match (rng.below(3), inner) {
                (0, v) => Value::Sequence(vec![v]),
                (1, v) => {
                    let mut m = Mapping::new();
                    m.insert(Value::String(name), v);
                    Value::Mapping(m)
                }
                (_, Value::Sequence(mut s)) if !s.is_empty() => s.swap_remove(0),
                (_, Value::Mapping(m)) if !m.is_empty() => {
                    m.into_iter().next().expect("non-empty").1
                }
                (_, v) => Value::Sequence(vec![v.clone(), v]),
            };
        }
        // A kind name anywhere.
        _ => {
            let kinds = dplab::stages::registry::all();
            *node = Value::String(kinds[rng.below(kinds.len())].name.into());
        }
    }
}
