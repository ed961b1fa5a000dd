//! Typed reading of YAML values, shared by every layer: numbers written as `1e6` where a
//! count is expected, and serde's messages rewritten for people.

use serde::de::DeserializeOwned;
use serde_yaml_ng::Value;

/// A value that failed to deserialise: the path of keys (and list indices) to it, and why.
#[derive(Debug, Clone)]
pub(crate) struct DeError {
    pub path: Vec<String>,
    pub message: String,
}

/// Marks a deserialisation error of a value outside its type's range (see [`out_of_range`]):
/// [`deserialize`] puts the key in front, as `epsilon = -1 is invalid: must be > 0`.
const OUT_OF_RANGE: &str = "\u{1}out of range\u{1}";

/// The error message of a type whose values have a range (ε > 0, a level in (0, 1)), for
/// `serde::de::Error::custom`: `value` and the range it must be in (`must` is e.g. "> 0").
pub(crate) fn out_of_range(value: impl std::fmt::Display, must: &str) -> String {
    format!("{OUT_OF_RANGE}{value} is invalid: must be {must}")
}

/// Deserialises `value` into `T`. A float with an exact integer value (`1e6`, `20000.0`)
/// is accepted where `T` expects an integer: people write counts in scientific notation.
/// Only the values serde rejected as "floating point, expected an integer" are rewritten,
/// so a float kept in an untyped parameter stays a float.
pub(crate) fn deserialize<T: DeserializeOwned>(mut value: Value) -> Result<T, DeError> {
    // Each retry turns one more float into an integer; a file has finitely many floats.
    loop {
        match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(t) => return Ok(t),
            Err(e) => {
                let path: Vec<String> = e
                    .path()
                    .iter()
                    .filter_map(|seg| match seg {
                        serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                        serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
                        _ => None,
                    })
                    .collect();
                let message = e.into_inner().to_string();
                if message.starts_with("invalid type: floating point")
                    && integer_at(&mut value, &path)
                {
                    continue;
                }
                // A value outside its type's range says `key = value is invalid: must be …`,
                // the key by its whole path (`neighbours.same.bin[0]`): a list index alone
                // (`0`) or the last key alone names nothing a reader can find.
                if let Some(rest) = message.strip_prefix(OUT_OF_RANGE) {
                    let key = if path.is_empty() {
                        "the value".to_string()
                    } else {
                        dotted(&path)
                    };
                    return Err(DeError {
                        message: format!("{key} = {rest}"),
                        path,
                    });
                }
                let mut message = humanise_serde(&message);
                // A value of several forms (an untagged enum, whose `expecting` says which):
                // serde says only what it expected, so what was given is said here.
                if message.starts_with("expected ") {
                    message = format!("wrong type: {}, {message}", given(&value, &path));
                }
                // Say which value a type error is about, by its whole path (the position
                // shows where), and why the type is what it is where a person would ask.
                if !path.is_empty()
                    && !message.starts_with("unknown key")
                    && !message.starts_with("missing required key")
                {
                    message = format!("`{}`: {message}{}", dotted(&path), why_type(&message));
                }
                return Err(DeError { message, path });
            }
        }
    }
}

/// A path of keys and list indices as a person writes it: `neighbours.same.bin[0]`.
pub(crate) fn dotted(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        if seg.parse::<usize>().is_ok() && !out.is_empty() {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(seg);
        }
    }
    out
}

/// What the value at `path` is, as serde words it in its type errors (`integer `0``, `a
/// mapping`, `a list`), for the values serde does not describe itself.
fn given(value: &Value, path: &[String]) -> String {
    let mut v = value;
    for key in path {
        let next = match v {
            Value::Mapping(m) => m.get(key.as_str()),
            Value::Sequence(s) => key.parse::<usize>().ok().and_then(|i| s.get(i)),
            Value::Tagged(t) => Some(&t.value),
            _ => None,
        };
        match next {
            Some(x) => v = x,
            None => return "a value".into(),
        }
    }
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) if n.is_f64() => format!("floating point `{n}`"),
        Value::Number(n) => format!("integer `{n}`"),
        Value::String(s) => format!("string {:?}", crate::text::brief(s, 40)),
        Value::Sequence(s) => format!("a list of {} value(s)", s.len()),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

/// Why a value of another type is refused, where the type surprises: text (a label, a name,
/// a category) given as a number or a boolean, which YAML reads as such unless quoted.
fn why_type(message: &str) -> String {
    let Some((given, expected)) = message
        .strip_prefix("wrong type: ")
        .and_then(|m| m.split_once(", expected "))
    else {
        return String::new();
    };
    let text = expected.starts_with("a string") || expected == "string";
    let scalar = ["integer `", "floating point `", "boolean `"]
        .iter()
        .find_map(|p| given.strip_prefix(p))
        .and_then(|r| r.strip_suffix('`'));
    match scalar {
        Some(v) if text => format!(
            " (this value is text — a name, a label or a category — and YAML reads {v} unquoted as a number or a boolean: write \"{v}\")"
        ),
        _ => String::new(),
    }
}

/// Replaces the float at `path` by the integer it equals; false if it is not one.
fn integer_at(value: &mut Value, path: &[String]) -> bool {
    let mut v = value;
    for key in path {
        v = match v {
            Value::Mapping(m) => match m.get_mut(key.as_str()) {
                Some(x) => x,
                None => return false,
            },
            Value::Sequence(s) => match key.parse::<usize>().ok().and_then(|i| s.get_mut(i)) {
                Some(x) => x,
                None => return false,
            },
            Value::Tagged(t) => &mut t.value,
            _ => return false,
        };
    }
    let Some(x) = v.as_f64().filter(|_| v.is_f64()) else {
        return false;
    };
    // Exactly an integer, and inside the range where f64 → integer is exact and fits.
    let n = if x.fract() == 0.0 && (0.0..=9.007_199_254_740_992e15).contains(&x) {
        serde_yaml_ng::Number::from(x as u64)
    } else if x.fract() == 0.0 && (-9.007_199_254_740_992e15..0.0).contains(&x) {
        serde_yaml_ng::Number::from(x as i64)
    } else {
        return false;
    };
    *v = Value::Number(n);
    true
}

/// Rewrites serde's messages for people: unknown keys get the nearest valid key.
pub(crate) fn humanise_serde(msg: &str) -> String {
    // serde_yaml prefixes the dotted path ("stages.noisy: …"); we print a position instead.
    let owned;
    let msg = match msg.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') && !path.is_empty() => {
            if rest.starts_with("unknown field") || rest.starts_with("missing field") {
                rest
            } else {
                owned = format!("`{}`: {rest}", path.rsplit('.').next().unwrap_or(path));
                &owned
            }
        }
        _ => msg,
    };
    // serde: "unknown field `x`, expected one of `a`, `b`" / "expected `a` or `b`"
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        if let Some((field, tail)) = rest.split_once('`') {
            let valid: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
            let hint = crate::text::suggest(field, valid.iter().copied())
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            let list = if valid.is_empty() {
                "this mapping takes no keys".to_string()
            } else {
                format!("valid keys: {}", valid.join(", "))
            };
            return format!("unknown key `{field}`{hint} ({list})");
        }
    }
    if let Some(field) = msg
        .strip_prefix("missing field `")
        .and_then(|r| r.split('`').next())
    {
        return format!("missing required key `{field}`");
    }
    let msg = msg
        .replace("invalid type: ", "wrong type: ")
        .replace("wrong type: map,", "wrong type: a mapping,")
        .replace("wrong type: sequence,", "wrong type: a list,");
    readable_numbers(&msg)
}

/// serde's words for numbers a person did not mean: an integer beyond 64 bits ("integer `X` as
/// u128, expected any YAML value") says so, and a float serde wrote out in full
/// (`100000…0.0`, 300 digits for 1e300) is written as 1e300.
fn readable_numbers(msg: &str) -> String {
    for wide in ["u128", "i128"] {
        let tail = format!(" as {wide}, expected any YAML value");
        if let Some(head) = msg.strip_suffix(tail.as_str()) {
            return format!(
                "{} is too large: numbers here are at most 64-bit (up to 18446744073709551615)",
                head.replace("wrong type: ", "")
            );
        }
    }
    let Some((head, rest)) = msg.split_once("floating point `") else {
        return msg.to_string();
    };
    let Some((number, tail)) = rest.split_once('`') else {
        return msg.to_string();
    };
    match number.parse::<f64>() {
        Ok(x) if number.len() > 24 => format!("{head}floating point `{x:e}`{tail}"),
        _ => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct P {
        samples: u64,
        #[serde(default)]
        eps: Option<f64>,
        #[serde(default)]
        free: Option<Value>,
        #[serde(default)]
        counts: Vec<usize>,
        #[serde(default)]
        #[expect(dead_code, reason = "read only to be refused")]
        labels: std::collections::BTreeMap<String, Vec<String>>,
    }

    fn de(y: &str) -> Result<P, DeError> {
        deserialize(serde_yaml_ng::from_str(y).unwrap())
    }

    #[test]
    fn exact_integers_in_float_notation_are_counts() {
        let p = de("{samples: 1e6, eps: 2, free: 1.0, counts: [1, 2e3]}").unwrap();
        assert_eq!(p.samples, 1_000_000);
        assert_eq!(p.eps, Some(2.0));
        assert_eq!(p.counts, vec![1, 2000]);
        // Untyped values keep their float.
        assert!(p.free.unwrap().is_f64());
    }

    /// A refused value inside nested parameters is named by its whole path, and text given as
    /// a number says why it must be text.
    #[test]
    fn a_nested_value_is_named_by_its_path() {
        let e = de("{samples: 1, labels: {bin: [a, 0]}}").unwrap_err();
        assert_eq!(e.path, ["labels", "bin", "1"]);
        assert_eq!(
            e.message,
            "`labels.bin[1]`: wrong type: integer `0`, expected a string (this value is text — a name, a label or a category — and YAML reads 0 unquoted as a number or a boolean: write \"0\")"
        );
        let e = de("{samples: 1, counts: [1, x]}").unwrap_err();
        assert!(
            e.message.starts_with("`counts[1]`: wrong type: string"),
            "{}",
            e.message
        );
        assert_eq!(
            dotted(&["a".into(), "0".into(), "1".into(), "b".into()]),
            "a[0][1].b"
        );
    }

    #[test]
    fn non_integers_and_negatives_are_still_refused() {
        let e = de("{samples: 1.5}").unwrap_err();
        assert_eq!(e.path, vec!["samples"]);
        assert!(
            e.message.contains("wrong type: floating point"),
            "{}",
            e.message
        );
        assert!(de("{samples: -1e3}").is_err());
        // Numbers beyond 64 bits, and floats serde would print in full, read as written.
        let e = de("{samples: 1e300}").unwrap_err();
        assert!(e.message.contains("`1e300`"), "{}", e.message);
        let m = humanise_serde(
            "seed: invalid type: integer `99999999999999999999999` as u128, expected any YAML value",
        );
        assert_eq!(
            m,
            "`seed`: integer `99999999999999999999999` is too large: numbers here are at most 64-bit (up to 18446744073709551615)"
        );
        assert!(de("{samples: 1e300}").is_err());
        let e = de("{sample: 1}").unwrap_err();
        assert!(
            e.message.contains("did you mean `samples`"),
            "{}",
            e.message
        );
    }
}
