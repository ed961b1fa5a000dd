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
                // A value outside its type's range says `key = value is invalid: must be …`.
                if let Some(rest) = message.strip_prefix(OUT_OF_RANGE) {
                    let key = match path.as_slice() {
                        [.., key, i] if i.parse::<usize>().is_ok() => format!("{key}.{i}"),
                        [.., key] => key.clone(),
                        [] => "the value".into(),
                    };
                    return Err(DeError {
                        message: format!("{key} = {rest}"),
                        path,
                    });
                }
                let mut message = humanise_serde(&message);
                // Say which key a type error is about (the position shows where).
                if let Some(key) = path.last().filter(|_| !message.starts_with("unknown key")) {
                    if !message.starts_with("missing required key") {
                        message = format!("`{key}`: {message}");
                    }
                }
                return Err(DeError { message, path });
            }
        }
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
    let msg = msg.replace("invalid type: ", "wrong type: ").replace(
        "data did not match any variant of untagged enum Inputs",
        "`input` must be a stage name or a list of stage names",
    );
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
