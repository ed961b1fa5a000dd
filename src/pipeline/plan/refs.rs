//! `$axis` and `$axis.field…` references in a stage's `with:`: finding them, checking
//! record fields against the axis's records, and substituting an instance's values.

use super::*;

/// The `$axis` references of a `with:`.
pub(super) type Refs = Vec<Ref>;

/// Where an axis's values were written.
pub(super) enum AxisOrigin<'a> {
    /// A `--set AXIS=…` argument.
    Set(&'a str),
    /// A path in the file (`axes.x` or `profiles.p.axes.x`) and the values written there.
    File(String, &'a Value),
    Unknown,
}

impl AxisOrigin<'_> {
    /// What an error about a reference adds when the axis's values were not the file's own.
    pub(super) fn note(&self) -> String {
        match self {
            AxisOrigin::Set(arg) => {
                format!(" (the axis as `--set {}` gives it)", brief_to(arg, 80))
            }
            AxisOrigin::File(path, _) if path.starts_with("profiles.") => {
                format!(" (the axis as `{path}` gives it)")
            }
            _ => String::new(),
        }
    }
}

/// One `$axis` or `$axis.field…` reference in a `with:`.
#[derive(Debug, PartialEq)]
pub(super) struct Ref {
    /// Where it is: the dotted path in `with:`.
    pub(super) path: String,
    pub(super) axis: String,
    /// The field path into a record (empty: the whole value).
    pub(super) field: Vec<String>,
}

/// A reference's path longer than this keeps only its leading keys (an error about it then
/// points at that ancestor). Real paths inside `with:` are a few dozen bytes.
pub(super) const MAX_REF_PATH: usize = 256;

/// `$name` and `$name.field…` strings inside `with`, with their dotted paths. `path` holds
/// the keys above `v`; a path is joined only for a reference, not for every node: joining at
/// every node copied each ancestor's key into every descendant (a 2 MiB key over 300 000
/// numbers: 29 s).
pub(super) fn collect_refs(v: &Value, path: &mut Vec<String>, out: &mut Refs) {
    match v {
        Value::String(s) => {
            if let Some((axis, field)) = axis_ref(s) {
                out.push(Ref {
                    path: ref_path(path),
                    axis: axis.to_string(),
                    field: field.map(str::to_string).collect(),
                });
            }
        }
        Value::Sequence(items) => {
            for (i, it) in items.iter().enumerate() {
                path.push(i.to_string());
                collect_refs(it, path, out);
                path.pop();
            }
        }
        Value::Mapping(m) => {
            for (k, it) in m {
                path.push(k.as_str().unwrap_or("?").to_string());
                collect_refs(it, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The dotted path of `keys`, cut after the last key that keeps it within [`MAX_REF_PATH`];
/// a cut path ends in `…`, which matches no parameter's path.
pub(super) fn ref_path(keys: &[String]) -> String {
    let mut out = String::new();
    for k in keys {
        let key: &str = if out.len() + 1 + k.len() > MAX_REF_PATH {
            "…"
        } else {
            k
        };
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
        if key == "…" {
            break;
        }
    }
    out
}

/// The axis and the field path of a reference: `$eps` → (`eps`, []), `$data.load.table` →
/// (`data`, [`load`, `table`]). Any other string is a plain value.
pub(super) fn axis_ref(s: &str) -> Option<(&str, std::str::Split<'_, char>)> {
    let body = s.strip_prefix('$')?;
    if !body.split('.').all(crate::axis::is_word) {
        return None;
    }
    let mut parts = body.split('.');
    let axis = parts.next()?;
    Some((axis, parts))
}

/// The fields of records that no stage reads, one line each (at most a few, then a count). A
/// misspelt field (`betta` beside `beta`) would otherwise leave its parameter at the default
/// without a word; a field kept only for people to read gets the same warning, which is cheap.
pub(super) fn unread_fields(plan: &Plan) -> Vec<String> {
    const SHOWN: usize = 8;
    let mut read: HashSet<(String, String)> = HashSet::new();
    for st in &plan.stages {
        let mut refs = Vec::new();
        collect_refs(&st.with, &mut Vec::new(), &mut refs);
        for r in refs {
            if let Some(f) = r.field.into_iter().next() {
                read.insert((r.axis, f));
            }
        }
    }
    let mut out = Vec::new();
    let mut more = 0usize;
    for (axis, values) in &plan.axes {
        let used: Vec<&str> = read
            .iter()
            .filter(|(a, _)| a == axis)
            .map(|(_, f)| f.as_str())
            .collect();
        let mut seen = HashSet::new();
        for v in values {
            let AxisValue::Record(r) = v else { continue };
            for k in r.fields.keys().filter_map(Value::as_str) {
                if k == "name" || read.contains(&(axis.clone(), k.to_string())) || !seen.insert(k) {
                    continue;
                }
                if out.len() == SHOWN {
                    more += 1;
                    continue;
                }
                let hint = suggest(k, used.iter().copied())
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                out.push(format!(
                    "axis `{axis}`: no stage reads the field `{k}` of record `{}` (as `${axis}.{k}`){hint}",
                    brief_to(&r.name, 40)
                ));
            }
        }
    }
    if more > 0 {
        out.push(format!("… and {more} more fields no stage reads"));
    }
    out
}

/// Whether every value of an axis can give `$axis.field`: the axis holds records and the
/// field is one of theirs. A record that lacks a field another has leaves the parameter out
/// (its default applies), so the field need be in one record only.
pub(super) fn check_field(
    axis: &str,
    field: &[String],
    values: &[AxisValue],
) -> Result<(), String> {
    let Some(first) = field.first() else {
        return Ok(());
    };
    let reference = brief_to(&format!("${axis}.{}", field.join(".")), 80);
    let records: Vec<&crate::axis::Record> = values
        .iter()
        .filter_map(|v| match v {
            AxisValue::Record(r) => Some(&**r),
            _ => None,
        })
        .collect();
    if records.is_empty() {
        return Err(format!(
            "`{reference}` reads a field, but axis `{axis}` holds {} values, not records (a record is `{{name: …, {first}: …}}`)",
            match values.first() {
                Some(AxisValue::Num(_) | AxisValue::Int(_)) => "number",
                _ => "text",
            }
        ));
    }
    let path: Vec<&str> = field.iter().map(String::as_str).collect();
    if records.iter().any(|r| r.field(&path).is_some()) {
        return Ok(());
    }
    let mut known: Vec<&str> = records
        .iter()
        .flat_map(|r| r.fields.keys().filter_map(Value::as_str))
        .collect();
    known.sort_unstable();
    known.dedup();
    let hint = suggest(first, known.iter().copied())
        .map(|s| format!("; did you mean `${axis}.{s}`?"))
        .unwrap_or_default();
    Err(format!(
        "`{reference}`: no record of axis `{axis}` has it{hint} (fields: {})",
        known.join(", ")
    ))
}

/// `with` with every `$axis` replaced by this instance's value, and every `$axis.field` by
/// that field of its record. A field this record lacks leaves its key out of a mapping (the
/// parameter's default applies) and is null in a list.
pub(super) fn substitute(v: &Value, key: &[(Arc<str>, AxisValue)]) -> Value {
    resolve(v, key).unwrap_or(Value::Null)
}

/// [`substitute`]; `None` for a field the record lacks.
pub(super) fn resolve(v: &Value, key: &[(Arc<str>, AxisValue)]) -> Option<Value> {
    Some(match v {
        Value::String(s) => {
            let Some((axis, field)) = axis_ref(s) else {
                return Some(v.clone());
            };
            let Some((_, val)) = key.iter().find(|(k, _)| &**k == axis) else {
                return Some(v.clone());
            };
            let field: Vec<&str> = field.collect();
            match (val, field.is_empty()) {
                (_, true) => val.to_yaml(),
                (AxisValue::Record(r), false) => r.field(&field)?.clone(),
                // Planning refused a field of a number or text axis.
                _ => v.clone(),
            }
        }
        Value::Sequence(items) => {
            Value::Sequence(items.iter().map(|i| substitute(i, key)).collect())
        }
        Value::Mapping(m) => Value::Mapping(
            m.iter()
                .filter_map(|(k, i)| Some((k.clone(), resolve(i, key)?)))
                .collect(),
        ),
        _ => v.clone(),
    })
}
