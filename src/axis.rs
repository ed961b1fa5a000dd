//! Axis values and grids: the sweep grammar of a pipeline file (`[…]`, `{from, to, step}`,
//! `{linspace: …}`, `{logspace: …}`, and for axes a list of records). Below the engine and the
//! stage kinds, which both read grids (the engine for axes, kinds for grid-valued parameters
//! such as a δ range).

use std::fmt;
use std::sync::Arc;

use serde_yaml_ng::Value;

use crate::text::suggest;

/// One value of an axis.
#[derive(Debug, Clone, PartialEq)]
pub enum AxisValue {
    Num(f64),
    /// A number of an axis written in integers (`[1, 2, 5]`, `{from: 1, to: 30, step: 1}`),
    /// and `rep`: its frame column holds integers. Its canonical text is the same as the
    /// float's, so seeds do not depend on how it was written.
    Int(i64),
    Text(String),
    /// A structured value (a dataset with its cleaning settings, a mechanism with its
    /// parameters) that stages read by field: `$data.drop`. Shared, since every instance's
    /// key holds one.
    Record(Arc<Record>),
}

/// A record on an axis: a YAML mapping with a text `name`. The name is the value as far as
/// the engine is concerned: the axis column of a frame holds it, seeds and file names use it,
/// and two records of one axis may not share it. The other fields reach stages only through
/// `$axis.field` references, and so reach the store keys of exactly the stages that read them.
#[derive(Debug, PartialEq)]
pub struct Record {
    pub name: String,
    /// The whole mapping, `name` included.
    pub fields: serde_yaml_ng::Mapping,
}

impl Record {
    /// The value at a dotted field path (`["load", "table"]`), if the record has it.
    pub(crate) fn field(&self, path: &[&str]) -> Option<&Value> {
        let (first, rest) = path.split_first()?;
        let mut at = self.fields.get(*first)?;
        for k in rest {
            at = at.as_mapping()?.get(*k)?;
        }
        Some(at)
    }
}

impl AxisValue {
    /// The canonical text of the value: the shortest decimal that round-trips, or a record's
    /// name. Seeds hash it, so it must never change for a given value.
    pub fn canonical(&self) -> String {
        match self {
            AxisValue::Num(x) => format!("{x}"),
            AxisValue::Int(i) => format!("{i}"),
            AxisValue::Text(s) => s.clone(),
            AxisValue::Record(r) => r.name.clone(),
        }
    }

    /// The value as written in a pipeline file (a record: its whole mapping).
    pub(crate) fn to_yaml(&self) -> Value {
        match self {
            AxisValue::Num(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => {
                Value::Number(serde_yaml_ng::Number::from(*x as i64))
            }
            AxisValue::Num(x) => Value::Number(serde_yaml_ng::Number::from(*x)),
            AxisValue::Int(i) => Value::Number(serde_yaml_ng::Number::from(*i)),
            AxisValue::Text(s) => Value::String(s.clone()),
            AxisValue::Record(r) => Value::Mapping(r.fields.clone()),
        }
    }

    /// The value as a number, or its text (a record's name). (An integer's frame column
    /// holds integers: see [`AxisValue::Int`].)
    pub fn cell(&self) -> Result<f64, &str> {
        match self {
            AxisValue::Num(x) => Ok(*x),
            AxisValue::Int(i) => Ok(*i as f64),
            AxisValue::Text(s) => Err(s),
            AxisValue::Record(r) => Err(&r.name),
        }
    }
}

impl fmt::Display for AxisValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

/// Grids larger than this are refused as a likely typo (a step of 1e-9…).
pub(crate) const MAX_AXIS_LEN: usize = 1_000_000;

/// Rounds to 15 significant digits, so that `0.1 + 2·0.1` prints as 0.3 and seeds stay
/// stable under harmless floating-point noise in grid arithmetic.
fn tidy(x: f64) -> f64 {
    if x == 0.0 {
        return 0.0; // −0 and 0 are one value
    }
    if !x.is_finite() {
        return x;
    }
    format!("{x:.14e}").parse().unwrap_or(x)
}

/// Parses an axis grid: a list, a scalar, `{from, to, step}`, `{linspace: {from, to, num}}`
/// or `{logspace: {from, to, num}}`. Errors carry the path (relative to the axis) and message.
pub(crate) fn parse_axis(v: &Value) -> Result<Vec<AxisValue>, (String, String)> {
    let mut out = Vec::new();
    walk(v, MAX_AXIS_LEN as u64, true, &mut |x| {
        out.push(x);
        Ok(())
    })?;
    // An axis written in integers keeps them (its frame column is of integers): `rep`, counts,
    // sizes. One float among them (`[1, 2.5]`) makes it an axis of floats.
    if written_in_integers(v) {
        for x in &mut out {
            if let AxisValue::Num(f) = *x {
                *x = AxisValue::Int(f as i64);
            }
        }
    }
    Ok(out)
}

/// Whether every number of the axis `v` is written as an integer of at most 2⁵³ in magnitude
/// (exact as a float too): a list or a single number of them, or `{from, to, step}` of them.
fn written_in_integers(v: &Value) -> bool {
    let int = |x: &Value| {
        x.as_i64()
            .is_some_and(|i| i.unsigned_abs() <= 9_007_199_254_740_992)
    };
    match v {
        Value::Number(_) => int(v),
        Value::Sequence(items) => {
            !items.is_empty()
                && items
                    .iter()
                    .all(|x| matches!(x, Value::Number(_)) && int(x))
        }
        Value::Mapping(m) => ["from", "to", "step"]
            .iter()
            .all(|k| m.get(*k).is_some_and(int)),
        _ => false,
    }
}

/// A count written as an integer or as a float with an integer value (`1e6`), as counts
/// elsewhere in a pipeline may be.
fn count_value(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|x| x.fract() == 0.0 && (0.0..=9.007_199_254_740_992e15).contains(x))
            .map(|x| x as u64)
    })
}

/// The number of values of `{from, to, step}`.
fn range_count(from: f64, to: f64, step: f64) -> f64 {
    ((to - from) / step + 1e-9).floor() + 1.0
}

/// How many values the grid `v` describes, worked out without building it; `None` when `v`
/// is not a well-formed grid (then [`parse_grid`] says why). Stage parameters that are grids
/// check this against a limit before [`parse_grid`] allocates.
pub(crate) fn grid_len(v: &Value) -> Option<u64> {
    match v {
        Value::Sequence(items) => Some(items.len() as u64),
        Value::Number(_) | Value::String(_) => Some(1),
        Value::Mapping(m) => {
            if let Some(spec) = m.get("linspace").or_else(|| m.get("logspace")) {
                count_value(spec.get("num")?)
            } else {
                let f = |k: &str| m.get(k)?.as_f64().filter(|x| x.is_finite());
                let (from, to, step) = (f("from")?, f("to")?, f("step")?);
                if step == 0.0 || (to - from) * step < 0.0 {
                    return None;
                }
                // Saturating: a step of 1e-300 gives u64::MAX, above every limit.
                Some(range_count(from, to, step) as u64)
            }
        }
        _ => None,
    }
}

/// [`parse_axis`] with `max_len` values at most instead of [`MAX_AXIS_LEN`] (what the
/// tests hold [`walk_grid`] to).
#[cfg(test)]
pub(crate) fn parse_grid(v: &Value, max_len: u64) -> Result<Vec<AxisValue>, (String, String)> {
    let mut out = Vec::new();
    walk_grid(v, max_len, &mut |x| {
        out.push(x);
        Ok(())
    })?;
    Ok(out)
}

/// The longest text axis value, in bytes. A value is copied into every instance's key, label
/// and file name: a long one times many instances is memory a planner cannot afford, and a
/// file name cannot hold it anyway.
pub(crate) const MAX_TEXT_VALUE: usize = 256;

/// A text axis value, checked: at most [`MAX_TEXT_VALUE`] bytes and no control characters
/// (labels are printed to terminals, where an escape sequence would be obeyed).
fn text(s: &str, at: &str) -> Result<AxisValue, (String, String)> {
    if s.len() > MAX_TEXT_VALUE {
        return Err((
            at.to_string(),
            format!(
                "a text value of {} bytes is too long: at most {MAX_TEXT_VALUE}",
                s.len()
            ),
        ));
    }
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return Err((
            at.to_string(),
            format!("text values may not hold control characters (found {c:?})"),
        ));
    }
    Ok(AxisValue::Text(s.to_string()))
}

/// The largest record on an axis, in bytes of YAML. Its fields are copied into the
/// parameters of every instance that reads them: a few KiB is a dataset's cleaning settings,
/// a megabyte is a mistake that would cost memory times the instances.
pub(crate) const MAX_RECORD: usize = 64 * 1024;

/// Whether `s` can be one step of a reference (`$axis.field.sub`): letters, digits and `_`,
/// as axis names are. A record's keys must be, so that every field can be read.
/// (`dplab schema` writes the same rule as a pattern: `pipeline::schema::AXIS_REF`.)
pub(crate) fn is_word(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A record axis value, checked: a mapping of identifier keys with a text `name`
/// ([`text`]'s rules), at most [`MAX_RECORD`] bytes.
fn record(m: &serde_yaml_ng::Mapping, at: &str) -> Result<AxisValue, (String, String)> {
    for k in m.keys() {
        if !k.as_str().is_some_and(is_word) {
            return Err((
                at.to_string(),
                format!(
                    "a record's keys are names (letters, digits, `_`), read as `$axis.key`: not {}",
                    crate::text::brief(
                        serde_yaml_ng::to_string(k).unwrap_or_default().trim_end(),
                        40
                    )
                ),
            ));
        }
    }
    let name = match m.get("name") {
        Some(Value::String(s)) => text(s, &format!("{at}.name"))?.canonical(),
        Some(_) => {
            return Err((
                format!("{at}.name"),
                "a record's `name` is text: it labels the record in frames, seeds and file names"
                    .into(),
            ))
        }
        None => {
            return Err((
                at.to_string(),
                "a record on an axis needs a `name:` (text): it labels the record in frames, seeds and file names".into(),
            ))
        }
    };
    let mut budget = MAX_RECORD;
    if !m
        .iter()
        .all(|(k, v)| fits(k, &mut budget) && fits(v, &mut budget))
    {
        return Err((
            at.to_string(),
            format!("the record is too large: at most {MAX_RECORD} bytes of keys and values"),
        ));
    }
    Ok(AxisValue::Record(Arc::new(Record {
        name,
        fields: m.clone(),
    })))
}

/// Whether `v`'s keys and values take at most `budget` bytes (a few per node besides its
/// text), counted down and stopped as soon as they do not: an alias-built record can stand
/// for far more than its file's bytes, and must not be measured by building it.
fn fits(v: &Value, budget: &mut usize) -> bool {
    let cost = match v {
        Value::String(s) => s.len() + 2,
        Value::Number(n) => n.to_string().len() + 2,
        Value::Tagged(t) => t.tag.to_string().len() + 2,
        _ => 2,
    };
    let Some(left) = budget.checked_sub(cost) else {
        return false;
    };
    *budget = left;
    match v {
        Value::Sequence(items) => items.iter().all(|i| fits(i, budget)),
        Value::Mapping(m) => m.iter().all(|(k, i)| fits(k, budget) && fits(i, budget)),
        Value::Tagged(t) => fits(&t.value, budget),
        _ => true,
    }
}

/// Checks the grid `v` as [`parse_grid`] does and hands its values to `sink` one by one,
/// without keeping them: a `{from, to, step}`, `linspace` or `logspace` grid of any length
/// is checked in constant memory (its values are monotone, so equal ones are neighbours).
/// Returns the number of values.
pub(crate) fn walk_grid(
    v: &Value,
    max_len: u64,
    sink: &mut dyn FnMut(AxisValue) -> Result<(), (String, String)>,
) -> Result<u64, (String, String)> {
    walk(v, max_len, false, sink)
}

/// [`walk_grid`], with records among a list's values when `records` (axes; a grid-valued
/// parameter holds numbers or text).
fn walk(
    v: &Value,
    max_len: u64,
    records: bool,
    sink: &mut dyn FnMut(AxisValue) -> Result<(), (String, String)>,
) -> Result<u64, (String, String)> {
    let num = |v: &Value, key: &str| -> Result<f64, (String, String)> {
        v.as_f64().filter(|x| x.is_finite()).ok_or_else(|| {
            let what = match key {
                "" => "the value".to_string(),
                // A list item: its place, not a key (`0` read as a key name).
                _ if key.bytes().all(|b| b.is_ascii_digit()) => format!("value {key}"),
                _ => format!("`{key}`"),
            };
            let shown = v.as_f64().map_or_else(|| "it".into(), |x| x.to_string());
            (
                key.to_string(),
                format!("{what} is {shown}: axis values are finite numbers"),
            )
        })
    };
    let values = match v {
        Value::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(match item {
                    // `0.0 + x` turns −0 into 0: they are one value.
                    Value::Number(_) => AxisValue::Num(0.0 + num(item, &i.to_string())?),
                    Value::String(s) => text(s, &i.to_string())?,
                    Value::Mapping(m) if records => record(m, &i.to_string())?,
                    _ if records => {
                        return Err((
                            i.to_string(),
                            "axis values are numbers, strings or records (`{name: …, field: …}`)"
                                .into(),
                        ))
                    }
                    _ => {
                        return Err((
                            i.to_string(),
                            "grid values must be numbers or strings".into(),
                        ))
                    }
                });
            }
            let sort = |x: &AxisValue| match x {
                AxisValue::Num(_) | AxisValue::Int(_) => "numbers",
                AxisValue::Text(_) => "strings",
                AxisValue::Record(_) => "records",
            };
            if let Some(odd) = out.iter().find(|x| sort(x) != sort(&out[0])) {
                return Err((
                    String::new(),
                    format!("an axis mixes {} and {}", sort(&out[0]), sort(odd)),
                ));
            }
            out
        }
        Value::Number(_) => vec![AxisValue::Num(0.0 + num(v, "")?)],
        Value::String(s) => vec![text(s, "")?],
        Value::Mapping(m) => {
            let keys: Vec<String> = m
                .keys()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect();
            let get = |k: &str| m.get(k);
            if records && get("name").is_some() {
                return Err((
                    String::new(),
                    "a record goes in a list, even alone: `[{name: …, …}]`".into(),
                ));
            }
            if let Some(spec) = get("linspace").or_else(|| get("logspace")) {
                let log = get("logspace").is_some();
                let which = if log { "logspace" } else { "linspace" };
                if keys.len() != 1 {
                    return Err((
                        String::new(),
                        format!("`{which}` must be the only key of the axis"),
                    ));
                }
                let Value::Mapping(s) = spec else {
                    return Err((which.into(), format!("`{which}` takes {{from, to, num}}")));
                };
                check_keys(s, &["from", "to", "num"], which)?;
                let field = |k: &str| {
                    s.get(k)
                        .ok_or_else(|| (which.to_string(), format!("`{which}` needs `{k}`")))
                };
                let from = num(field("from")?, &format!("{which}.from"))?;
                let to = num(field("to")?, &format!("{which}.to"))?;
                let n = count_value(field("num")?)
                    .filter(|&n| n >= 1 && n <= max_len)
                    .ok_or_else(|| {
                        (
                            format!("{which}.num"),
                            format!("`num` must be an integer in [1, {max_len}]"),
                        )
                    })? as usize;
                if log && (from <= 0.0 || to <= 0.0) {
                    return Err((
                        which.into(),
                        format!("logspace needs from > 0 and to > 0 (got {from}, {to})"),
                    ));
                }
                let at = move |i: usize| {
                    let t = if n == 1 {
                        0.0
                    } else {
                        i as f64 / (n - 1) as f64
                    };
                    let x = if log {
                        (from.ln() + t * (to.ln() - from.ln())).exp()
                    } else {
                        from + t * (to - from)
                    };
                    tidy(x)
                };
                return walk_monotone(n, &at, sink);
            } else {
                check_keys(m, &["from", "to", "step"], "axis")?;
                let field = |k: &str| {
                    m.get(k).ok_or_else(|| {
                        (
                            String::new(),
                            format!("a range axis needs `from`, `to` and `step` (missing `{k}`)"),
                        )
                    })
                };
                let from = num(field("from")?, "from")?;
                let to = num(field("to")?, "to")?;
                let step = num(field("step")?, "step")?;
                if step == 0.0 || (to - from) * step < 0.0 {
                    return Err((
                        "step".into(),
                        format!("step {step} never reaches {to} from {from}"),
                    ));
                }
                let count = range_count(from, to, step);
                if count > max_len as f64 {
                    return Err((
                        "step".into(),
                        format!("the grid would have {count} values (at most {max_len})"),
                    ));
                }
                let at = move |i: usize| tidy(from + i as f64 * step);
                return walk_monotone(count as usize, &at, sink);
            }
        }
        _ => {
            return Err((
                String::new(),
                "an axis is a list, a number, {from, to, step}, {linspace: …} or {logspace: …}"
                    .into(),
            ))
        }
    };
    if values.is_empty() {
        return Err((
            String::new(),
            "the axis is empty: give it at least one value".into(),
        ));
    }
    // Two equal values would give two instances with the same seed and key: every row
    // repeated, and gathered statistics (probabilities, sums) silently doubled.
    // Two values that differ only in the case of a letter (`CRM`, `crm`) name their
    // instances' files (`clean__dataset=CRM.md`) with names that a case-insensitive file
    // system (macOS, Windows) takes for one: the second would overwrite the first.
    let mut seen: std::collections::HashMap<String, (usize, String)> =
        std::collections::HashMap::with_capacity(values.len());
    let is_list = matches!(v, Value::Sequence(_));
    for (i, x) in values.iter().enumerate() {
        let text = x.canonical();
        if let Some((first, was)) = seen.insert(text.to_ascii_lowercase(), (i, text.clone())) {
            let sub = if is_list {
                i.to_string()
            } else {
                String::new()
            };
            let msg = if was == text {
                format!(
                    "the axis holds {text} twice (values {first} and {i}, counting from 0); each value may appear once"
                )
            } else {
                format!(
                    "the axis holds `{was}` and `{text}` (values {first} and {i}, counting from 0), which differ only in case: their instances' files (`<stage>__<axis>={was}.svg`) would be one file on a case-insensitive file system (macOS, Windows); rename one"
                )
            };
            return Err((sub, msg));
        }
    }
    let n = values.len() as u64;
    for x in values {
        sink(x)?;
    }
    Ok(n)
}

/// The `n` values `at(0)`, `at(1)`, … of a generated grid (non-decreasing or non-increasing),
/// each handed to `sink`; two equal values are an error, as in a list.
fn walk_monotone(
    n: usize,
    at: &dyn Fn(usize) -> f64,
    sink: &mut dyn FnMut(AxisValue) -> Result<(), (String, String)>,
) -> Result<u64, (String, String)> {
    let mut prev: Option<f64> = None;
    for i in 0..n {
        let x = at(i);
        if prev == Some(x) {
            let x = AxisValue::Num(x).canonical();
            return Err((
                String::new(),
                format!(
                    "the axis holds {x} twice (values {} and {i}, counting from 0); each value may appear once",
                    i - 1
                ),
            ));
        }
        prev = Some(x);
        sink(AxisValue::Num(x))?;
    }
    Ok(n as u64)
}

fn check_keys(
    m: &serde_yaml_ng::Mapping,
    valid: &[&str],
    what: &str,
) -> Result<(), (String, String)> {
    for k in m.keys() {
        let k = k.as_str().unwrap_or("?");
        if !valid.contains(&k) {
            let hint = suggest(k, valid.iter().copied())
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            return Err((
                k.to_string(),
                format!(
                    "unknown key `{k}` in {what}{hint} (valid: {})",
                    valid.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The JSON Schema of a grid (an axis, or a grid-valued parameter): a list or one value, a
/// `{from, to, step}` range, or `{linspace: …}` / `{logspace: …}`. Titled "grid" so that
/// `dplab list` names it in one word. The full checks (step sign, counts, limits) stay in
/// [`walk_grid`]; the schema gives editors the shape.
pub(crate) fn grid_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schema_of(false)
}

/// The JSON Schema of an axis: a grid ([`grid_schema`]), or a list of records
/// (`{name: …, field: …}`).
pub(crate) fn axis_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schema_of(true)
}

fn schema_of(records: bool) -> schemars::Schema {
    let space = serde_json::json!({
        "type": "object",
        "properties": {"from": {"type": "number"}, "to": {"type": "number"}, "num": {"type": "integer", "minimum": 1}},
        "required": ["from", "to", "num"],
        "additionalProperties": false
    });
    let scalar = serde_json::json!({"type": ["number", "string"]});
    let item = if records {
        serde_json::json!({"anyOf": [scalar, {
            "type": "object",
            "description": "a record: stages read its fields as `$axis.field`; its name labels it in frames, seeds and file names",
            "properties": {"name": {"type": "string", "maxLength": MAX_TEXT_VALUE}},
            "required": ["name"],
            "propertyNames": {"pattern": "^[A-Za-z0-9_]+$"}
        }]})
    } else {
        scalar.clone()
    };
    schemars::Schema::try_from(serde_json::json!({
        "title": if records { "axis" } else { "grid" },
        "anyOf": [
            {"type": "array", "items": item},
            scalar,
            {
                "type": "object",
                "properties": {"from": {"type": "number"}, "to": {"type": "number"}, "step": {"type": "number"}},
                "required": ["from", "to", "step"],
                "additionalProperties": false
            },
            {"type": "object", "properties": {"linspace": space}, "required": ["linspace"], "additionalProperties": false},
            {"type": "object", "properties": {"logspace": space}, "required": ["logspace"], "additionalProperties": false}
        ]
    }))
    .expect("an object is a schema")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(y: &str) -> Result<Vec<AxisValue>, (String, String)> {
        parse_axis(&serde_yaml_ng::from_str(y).unwrap())
    }

    #[test]
    fn axis_grids() {
        let v = axis("{from: 0.1, to: 1.0, step: 0.1}").unwrap();
        assert_eq!(v.len(), 10);
        assert_eq!(v[2].canonical(), "0.3");
        let v = axis("{logspace: {from: 0.01, to: 100, num: 5}}").unwrap();
        assert_eq!(
            v.iter().map(|x| x.canonical()).collect::<Vec<_>>(),
            ["0.01", "0.1", "1", "10", "100"]
        );
        let v = axis("{linspace: {from: 0, to: 1, num: 3}}").unwrap();
        assert_eq!(v[1], AxisValue::Num(0.5));
        assert_eq!(axis("[a, b]").unwrap()[1], AxisValue::Text("b".into()));
    }

    #[test]
    fn text_values_are_short_and_printable() {
        let long = format!("[a, {}]", "x".repeat(MAX_TEXT_VALUE + 1));
        let (at, msg) = axis(&long).unwrap_err();
        assert_eq!(at, "1");
        assert!(msg.contains("257 bytes"), "{msg}");
        assert!(axis(&format!("[{}]", "x".repeat(MAX_TEXT_VALUE))).is_ok());
        let (_, msg) = axis("[\"a\\e[2J\"]").unwrap_err();
        assert!(msg.contains("control"), "{msg}");
        assert!(axis("\"b\\tc\"").is_err());
    }

    #[test]
    fn bad_axis_grids() {
        assert!(axis("[]").unwrap_err().1.contains("empty"));
        assert!(axis("{from: 1, to: 0, step: 0.1}")
            .unwrap_err()
            .1
            .contains("never reaches"));
        let (k, m) = axis("{from: 1, to: 2, stp: 0.1}").unwrap_err();
        assert_eq!(k, "stp");
        assert!(m.contains("did you mean `step`"), "{m}");
        assert!(axis("[1, a]").is_err());
        assert!(axis("{logspace: {from: 0, to: 1, num: 3}}").is_err());
        // A non-finite list item is named by its place and value, not as a key `0`.
        assert_eq!(
            axis("[1, .inf]").unwrap_err(),
            (
                "1".into(),
                "value 1 is inf: axis values are finite numbers".into()
            )
        );
        let (k, m) = axis("{from: 1, to: .nan, step: 1}").unwrap_err();
        assert_eq!(
            (k.as_str(), m.as_str()),
            ("to", "`to` is NaN: axis values are finite numbers")
        );
    }

    #[test]
    fn records_are_named_mappings_read_by_field() {
        let v =
            axis("[{name: CRM, id: communities, clean: {drop: [a, b]}}, {name: WDBC, id: wdbc}]")
                .unwrap();
        let AxisValue::Record(r) = &v[0] else {
            panic!("{v:?}")
        };
        assert_eq!((r.name.as_str(), v[0].canonical()), ("CRM", "CRM".into()));
        assert_eq!(r.field(&["id"]), Some(&Value::String("communities".into())));
        assert_eq!(
            r.field(&["clean", "drop"])
                .and_then(Value::as_sequence)
                .map(Vec::len),
            Some(2)
        );
        assert_eq!(r.field(&["table"]), None);
        assert_eq!(r.field(&["id", "x"]), None);
        assert_eq!(v[1].cell(), Err("WDBC"));
        // The value as written comes back whole (`dplab show`).
        assert_eq!(
            v[1].to_yaml(),
            serde_yaml_ng::from_str::<Value>("{name: WDBC, id: wdbc}").unwrap()
        );
    }

    #[test]
    fn bad_records_are_refused_with_the_item() {
        let msg = |y: &str| {
            let (at, m) = axis(y).unwrap_err();
            format!("{at}: {m}")
        };
        assert!(msg("[{name: a}, {id: b}]").starts_with("1: a record on an axis needs a `name:`"));
        assert!(msg("[{name: 3}]").starts_with("0.name: a record's `name` is text"));
        assert!(msg("[{name: a}, {name: a, x: 1}]").contains("holds a twice"));
        assert!(msg("[{name: a}, 2]").contains("mixes records and numbers"));
        assert!(msg("{name: a, x: 1}").contains("a record goes in a list"));
        assert!(msg("[a, {name: b}]").contains("mixes strings and records"));
        assert!(msg("[{name: a, 'x.y': 1}]").contains("a record's keys are names"));
        assert!(msg("[{name: a, 1: 1}]").contains("a record's keys are names"));
        assert!(msg("[{name: \"a\\e[2J\"}]").contains("control"));
        let big = format!("[{{name: a, x: '{}'}}]", "y".repeat(MAX_RECORD));
        assert!(msg(&big).contains("too large"), "{}", msg(&big));
        // Numbers count by their text too.
        let numbers = format!(
            "[{{name: a, x: [{}]}}]",
            vec!["1.2345678901234567e-300"; 4000].join(", ")
        );
        assert!(msg(&numbers).contains("too large"), "{}", msg(&numbers));
        // Aliases make a record far larger than its text: refused without building it.
        let bomb = format!(
            "[{{name: a, s: &s '{}', l: [{}]}}]",
            "y".repeat(1000),
            vec!["*s"; 100].join(", ")
        );
        assert!(msg(&bomb).contains("too large"), "{}", msg(&bomb));
        // A grid-valued parameter holds numbers or text, never records.
        let grid: Value = serde_yaml_ng::from_str("[{name: a}]").unwrap();
        assert!(parse_grid(&grid, 10)
            .unwrap_err()
            .1
            .contains("numbers or strings"));
    }

    #[test]
    fn equal_axis_values_are_refused() {
        let (k, m) = axis("[0.5, 2.0, 2]").unwrap_err();
        assert_eq!(k, "2");
        assert!(m.contains("holds 2 twice"), "{m}");
        assert!(axis("[0.0, -0.0]").is_err());
        assert!(axis("[a, b, a]").is_err());
        assert!(axis("['a b', 'a_b']").is_ok());
        // A grid whose steps vanish below the canonical precision.
        assert!(axis("{linspace: {from: 1, to: 1.0000000000000002, num: 3}}").is_err());
        assert!(axis("{linspace: {from: 1, to: 1, num: 1}}").is_ok());
    }

    #[test]
    fn values_differing_only_in_case_are_refused() {
        let (k, m) = axis("[CRM, WDBC, crm]").unwrap_err();
        assert_eq!(k, "2");
        assert!(
            m.contains("`CRM` and `crm`") && m.contains("case-insensitive file system"),
            "{m}"
        );
        let (k, m) = axis("[{name: Adult}, {name: ADULT}]").unwrap_err();
        assert_eq!(k, "1");
        assert!(m.contains("differ only in case"), "{m}");
        // Other letters, accents and numbers written with an exponent are distinct.
        assert!(axis("[CRM, CRN, é, É]").is_ok());
        assert!(axis("[1e-9, 1E-8]").is_ok());
    }
}
