//! The pipeline file: its typed form, loading with located errors, and axis grids.

use std::fmt;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::Deserialize;
use serde_yaml_ng::Value;

use super::locate::{Locations, Pos};

/// An error in what the user wrote: printed as `file:line:col: message` (+ a hint);
/// exit code 2.
#[derive(Debug, Clone)]
pub struct SpecError {
    pub file: PathBuf,
    pub pos: Option<Pos>,
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pos {
            Some(p) => write!(
                f,
                "{}:{}:{}: {}",
                self.file.display(),
                p.line,
                p.col,
                self.message
            )?,
            None => write!(f, "{}: {}", self.file.display(), self.message)?,
        }
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecError {}

/// Top level of a pipeline file. Every struct denies unknown keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPipeline {
    pub name: String,
    pub title: String,
    pub source: Source,
    pub description: String,
    pub seed: u64,
    #[serde(default)]
    pub axes: IndexMap<String, Value>,
    pub stages: IndexMap<String, RawStage>,
    #[serde(default)]
    pub profiles: IndexMap<String, RawProfile>,
}

/// What a pipeline reproduces.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub paper: String,
    pub item: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStage {
    pub kind: String,
    #[serde(default)]
    pub input: Inputs,
    #[serde(default)]
    pub with: Option<Value>,
    /// Axes this stage gathers into one instance (`all`, or a list).
    #[serde(default)]
    pub over: Option<Value>,
    /// Write the stage's frame to the results directory.
    #[serde(default = "yes")]
    pub store: bool,
    /// Run the stage this many times (axis `rep` = 0, 1, …).
    #[serde(default)]
    pub repeat: Option<u64>,
}

fn yes() -> bool {
    true
}

/// `input: a` or `input: [a, b]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(untagged)]
pub enum Inputs {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl Inputs {
    pub fn names(&self) -> Vec<String> {
        match self {
            Inputs::None => Vec::new(),
            Inputs::One(s) => vec![s.clone()],
            Inputs::Many(v) => v.clone(),
        }
    }
}

/// Overrides applied by `--profile NAME`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    #[serde(default)]
    pub description: Option<String>,
    /// Replacement grids, by axis name.
    #[serde(default)]
    pub axes: IndexMap<String, Value>,
    /// Replacement repetition counts, by stage name.
    #[serde(default)]
    pub repeat: IndexMap<String, u64>,
    /// Parameter overrides merged into a stage's `with:`, by stage name.
    #[serde(default)]
    pub with: IndexMap<String, Value>,
}

/// One value of an axis.
#[derive(Debug, Clone, PartialEq)]
pub enum AxisValue {
    Num(f64),
    Text(String),
}

impl AxisValue {
    /// The canonical text of the value: the shortest decimal that round-trips. Seeds hash
    /// it, so it must never change for a given value.
    pub fn canonical(&self) -> String {
        match self {
            AxisValue::Num(x) => format!("{x}"),
            AxisValue::Text(s) => s.clone(),
        }
    }

    pub fn to_yaml(&self) -> Value {
        match self {
            AxisValue::Num(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => {
                Value::Number(serde_yaml_ng::Number::from(*x as i64))
            }
            AxisValue::Num(x) => Value::Number(serde_yaml_ng::Number::from(*x)),
            AxisValue::Text(s) => Value::String(s.clone()),
        }
    }
}

impl fmt::Display for AxisValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

/// Grids larger than this are refused as a likely typo (a step of 1e-9…).
pub const MAX_AXIS_LEN: usize = 1_000_000;

/// Rounds to 15 significant digits, so that `0.1 + 2·0.1` prints as 0.3 and seeds stay
/// stable under harmless floating-point noise in grid arithmetic.
fn tidy(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    format!("{x:.14e}").parse().unwrap_or(x)
}

/// Parses an axis grid: a list, a scalar, `{from, to, step}`, `{linspace: {from, to, num}}`
/// or `{logspace: {from, to, num}}`. Errors carry the path (relative to the axis) and message.
pub fn parse_axis(v: &Value) -> Result<Vec<AxisValue>, (String, String)> {
    let num = |v: &Value, key: &str| -> Result<f64, (String, String)> {
        v.as_f64()
            .filter(|x| x.is_finite())
            .ok_or_else(|| (key.to_string(), format!("`{key}` must be a finite number")))
    };
    let values = match v {
        Value::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(match item {
                    Value::Number(_) => AxisValue::Num(num(item, &i.to_string())?),
                    Value::String(s) => AxisValue::Text(s.clone()),
                    _ => {
                        return Err((
                            i.to_string(),
                            "axis values must be numbers or strings".into(),
                        ))
                    }
                });
            }
            let kinds = out
                .iter()
                .filter(|x| matches!(x, AxisValue::Num(_)))
                .count();
            if kinds != 0 && kinds != out.len() {
                return Err((String::new(), "an axis mixes numbers and strings".into()));
            }
            out
        }
        Value::Number(_) => vec![AxisValue::Num(num(v, "")?)],
        Value::String(s) => vec![AxisValue::Text(s.clone())],
        Value::Mapping(m) => {
            let keys: Vec<String> = m
                .keys()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect();
            let get = |k: &str| m.get(k);
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
                let n = field("num")?
                    .as_u64()
                    .filter(|&n| n >= 1 && n as usize <= MAX_AXIS_LEN)
                    .ok_or_else(|| {
                        (
                            format!("{which}.num"),
                            format!("`num` must be an integer in [1, {MAX_AXIS_LEN}]"),
                        )
                    })? as usize;
                if log && (from <= 0.0 || to <= 0.0) {
                    return Err((
                        which.into(),
                        format!("logspace needs from > 0 and to > 0 (got {from}, {to})"),
                    ));
                }
                (0..n)
                    .map(|i| {
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
                        AxisValue::Num(tidy(x))
                    })
                    .collect()
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
                let count = ((to - from) / step + 1e-9).floor() + 1.0;
                if count > MAX_AXIS_LEN as f64 {
                    return Err((
                        "step".into(),
                        format!("the grid would have {count} values (at most {MAX_AXIS_LEN})"),
                    ));
                }
                (0..count as usize)
                    .map(|i| AxisValue::Num(tidy(from + i as f64 * step)))
                    .collect()
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
    Ok(values)
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

pub use crate::text::suggest;

/// Rewrites serde's messages for people: unknown keys get the nearest valid key.
pub fn humanise_serde(msg: &str) -> String {
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
            let hint = suggest(field, valid.iter().copied())
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
    msg.replace("invalid type: ", "wrong type: ").replace(
        "data did not match any variant of untagged enum Inputs",
        "`input` must be a stage name or a list of stage names",
    )
}

/// A parsed file with its positions.
#[derive(Debug)]
pub struct SpecFile {
    pub path: PathBuf,
    pub text: String,
    pub raw: RawPipeline,
    pub locs: Locations,
}

impl SpecFile {
    pub fn err(&self, path: &str, message: impl Into<String>) -> SpecError {
        SpecError {
            file: self.path.clone(),
            pos: Some(self.locs.find(path)),
            message: message.into(),
            hint: None,
        }
    }
}

/// Reads and parses a pipeline file; every error names the file, line and column.
pub fn load(path: &Path) -> Result<SpecFile, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|e| SpecError {
        file: path.to_path_buf(),
        pos: None,
        message: format!("cannot read the pipeline file: {e}"),
        hint: None,
    })?;
    parse(path, text)
}

/// Parses pipeline text (`path` is used in messages and to resolve relative paths).
pub fn parse(path: &Path, text: String) -> Result<SpecFile, SpecError> {
    let locs = Locations::index(&text).map_err(|(pos, msg)| SpecError {
        file: path.to_path_buf(),
        pos: Some(pos),
        message: format!("YAML syntax error: {msg}"),
        hint: None,
    })?;
    let de = serde_yaml_ng::Deserializer::from_str(&text);
    let raw: RawPipeline = serde_path_to_error::deserialize(de).map_err(|e| {
        let dotted = e.path().to_string();
        let inner = e.into_inner();
        let pos = inner
            .location()
            .map(|l| Pos {
                line: l.line(),
                col: l.column(),
            })
            .filter(|p| p.line > 0)
            .or_else(|| (dotted != ".").then(|| locs.find(&dotted)));
        SpecError {
            file: path.to_path_buf(),
            pos,
            message: humanise_serde(&strip_location(&inner.to_string())),
            hint: None,
        }
    })?;
    Ok(SpecFile {
        path: path.to_path_buf(),
        text,
        raw,
        locs,
    })
}

/// serde_yaml appends " at line L column C"; we print the position ourselves.
fn strip_location(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
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
    }

    #[test]
    fn unknown_top_level_key_is_located_and_suggested() {
        let text = "name: a\ntitle: b\nsource: {paper: p, item: i}\ndescription: d\nseeed: 1\nstages: {}\n";
        let e = parse(Path::new("p.yaml"), text.into()).unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("p.yaml:5:1:"), "{s}");
        assert!(s.contains("did you mean `seed`"), "{s}");
    }
}
