//! The pipeline file: its typed form, loading with located errors, and axis grids.

use std::fmt;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use schemars::JsonSchema;
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

/// Top level of a pipeline file. Every struct denies unknown keys. The doc comments of these
/// types are also the descriptions of `dplab schema` (editors show them).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPipeline {
    /// The pipeline's name: its results directory, so letters, digits, `-`, `_` and `.` only.
    pub name: String,
    /// A one-line title, shown in the report.
    pub title: String,
    /// The paper and the item in it that this pipeline reproduces; none for an experiment of
    /// one's own.
    #[serde(default)]
    pub source: Source,
    /// What the experiment is and how we reproduce it (Markdown, shown in the report).
    pub description: String,
    /// The seed every instance's generator derives from (with the stage name, axis values and
    /// repetition).
    pub seed: u64,
    /// The sweep: each axis is a grid (a list, `{from, to, step}`, `{linspace: …}`,
    /// `{logspace: …}`) or a list of records (`{name: …, field: …}`); stages refer to an axis
    /// value as `$name` in `with:`, and to a record's field as `$name.field`.
    #[serde(default)]
    #[schemars(schema_with = "axes_schema")]
    pub axes: IndexMap<String, Value>,
    /// The stages, by name (a name becomes a file name: letters, digits, `-`, `_`).
    pub stages: IndexMap<String, RawStage>,
    /// Named variants of the pipeline (`--profile NAME`), e.g. `ci`: smaller grids, fewer
    /// repetitions.
    #[serde(default)]
    pub profiles: IndexMap<String, RawProfile>,
    /// What the experiment found about claims of the paper that are not printed numbers (a
    /// theorem, a figure's trend): each `{claim, found, verdict, why}`. Text the engine passes
    /// through to the manifest; the report shows and counts it.
    #[serde(default)]
    pub findings: Vec<crate::verdict::Finding>,
}

fn axes_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let axis = crate::axis::axis_schema(g);
    schemars::json_schema!({"type": "object", "additionalProperties": axis})
}

/// What a pipeline reproduces.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The paper (authors, year, title).
    pub paper: String,
    /// The figure, table or theorem in it.
    pub item: String,
}

impl Source {
    /// An experiment of one's own: no paper named.
    pub fn is_none(&self) -> bool {
        self.paper.is_empty() && self.item.is_empty()
    }
}

/// One stage: a kind, its inputs and its parameters.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawStage {
    /// The stage kind (`dplab list` lists them).
    pub kind: String,
    /// The stage (or list of stages) whose frames this one reads.
    #[serde(default)]
    pub input: Inputs,
    /// The kind's parameters (`dplab list KIND`); a value may be `$axis`.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub with: Option<Value>,
    /// Axes this stage gathers into one instance (`all`, or a list).
    #[serde(default)]
    #[schemars(schema_with = "over_schema")]
    pub over: Option<Value>,
    /// Write the stage's frame to the results directory.
    #[serde(default = "yes")]
    pub store: bool,
    /// Run the stage this many times (axis `rep` = 0, 1, …).
    #[serde(default)]
    pub repeat: Option<u64>,
    /// Run only at some values of its axes: per axis, a list of values to keep, or bounds
    /// (`{lt: 1}`, `le`, `gt`, `ge`). The stage has no instance (and no rows) elsewhere, nor
    /// do readers that would read nothing else.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub only: IndexMap<String, Value>,
}

fn over_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "anyOf": [{"const": "all"}, {"type": "array", "items": {"type": "string"}}]
    })
}

fn yes() -> bool {
    true
}

/// `input: a` or `input: [a, b]`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(untagged, expecting = "expected a stage name or a list of stage names")]
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
#[derive(Debug, Clone, Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    /// What the profile is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Replacement grids, by axis name.
    #[serde(default)]
    #[schemars(schema_with = "axes_schema")]
    pub axes: IndexMap<String, Value>,
    /// Replacement repetition counts, by stage name.
    #[serde(default)]
    pub repeat: IndexMap<String, u64>,
    /// Parameter overrides merged into a stage's `with:`, by stage name.
    #[serde(default)]
    #[schemars(with = "IndexMap<String, serde_json::Map<String, serde_json::Value>>")]
    pub with: IndexMap<String, Value>,
}

/// What a name becomes on disk, and so which characters it may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameKind {
    /// The results directory `OUT/<name>/`.
    Pipeline,
    /// Files `<stage>.csv`, `<stage>__<instance>.svg`: `__` is the separator.
    Stage,
    /// `$axis` in parameters, a column of every frame, part of instance file names.
    Axis,
}

impl NameKind {
    /// The rule in words, for error messages and the book.
    pub fn rule(self) -> &'static str {
        match self {
            NameKind::Pipeline => "1 to 100 ASCII letters, digits, `.`, `_` or `-`, starting with a letter or digit",
            NameKind::Stage => "1 to 64 ASCII letters, digits, `_` or `-`, starting with a letter or digit, without `__` (it separates a stage from its instance in file names) and not ending in `_`",
            NameKind::Axis => "1 to 64 ASCII letters, digits or `_`, starting with a letter or `_`",
        }
    }
}

/// Why `name` is not a valid name of this kind, if it is not. Pipeline and stage names
/// become file names under `--out`, so they must be one safe path component: no `/`, no
/// leading `.` (hidden files, `..`), nothing a shell or file system treats specially.
pub fn name_problem(name: &str, kind: NameKind) -> Option<String> {
    let max = if kind == NameKind::Pipeline { 100 } else { 64 };
    let first_ok = |c: char| match kind {
        NameKind::Axis => c.is_ascii_alphabetic() || c == '_',
        _ => c.is_ascii_alphanumeric(),
    };
    let char_ok = |c: char| {
        c.is_ascii_alphanumeric()
            || c == '_'
            || (c == '-' && kind != NameKind::Axis)
            || (c == '.' && kind == NameKind::Pipeline)
    };
    let ok = !name.is_empty()
        && name.len() <= max
        && name.chars().next().is_some_and(first_ok)
        && name.chars().all(char_ok)
        && !(kind == NameKind::Stage && (name.contains("__") || name.ends_with('_')));
    let what = match kind {
        NameKind::Pipeline => "pipeline name",
        NameKind::Stage => "stage name",
        NameKind::Axis => "axis name",
    };
    if !ok {
        return Some(format!(
            "{what} {name:?} is not allowed: use {}",
            kind.rule()
        ));
    }
    // Names whose files would be ones dplab writes itself: `OUT/<pipeline>/manifest.json`
    // (a stage `manifest` whose kind writes a `.json` layout), and `OUT/index.html`, the
    // report (a pipeline `index.html` would be a directory in its place). Refused here, not
    // when the results are written after the whole run.
    // `instances` too: `OUT/<pipeline>/instances.parquet`, the instances table.
    let reserved: &[&str] = match kind {
        NameKind::Stage => &["manifest", "instances"],
        NameKind::Pipeline => &["index.html"],
        NameKind::Axis => return None,
    };
    let taken = reserved.iter().find(|r| name.eq_ignore_ascii_case(r))?;
    Some(format!(
        "{what} {name:?} is not allowed: dplab writes a file of that name itself ({}); choose another",
        match *taken {
            "manifest" => "the results directory's manifest.json",
            "instances" => "the results directory's instances.parquet",
            _ => "the report, OUT/index.html",
        }
    ))
}

pub(crate) use crate::axis::parse_axis;
pub use crate::axis::AxisValue;

pub use crate::text::suggest;

pub(crate) use crate::yaml::humanise_serde;

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

/// A pipeline file larger than this is refused before it is read (a real one is a few KiB).
pub(crate) const MAX_FILE_BYTES: u64 = 4 << 20;

/// Reads and parses a pipeline file; every error names the file, line and column.
///
/// Only a regular file is read (a FIFO or device would block or never end): it is opened
/// without blocking, checked with `fstat` on the open handle (so it cannot be swapped after
/// the check), and read up to [`MAX_FILE_BYTES`].
pub fn load(path: &Path) -> Result<SpecFile, SpecError> {
    let fail = |message: String| SpecError {
        file: path.to_path_buf(),
        pos: None,
        message,
        hint: None,
    };
    let bytes = read_regular_file(path, MAX_FILE_BYTES).map_err(fail)?;
    let text = decode(path, &bytes)?;
    parse(path, text)
}

pub use crate::regular::read_regular_file;

/// Pipeline text from bytes: UTF-8, with an optional byte-order mark. UTF-16 or UTF-32,
/// invalid UTF-8 and NUL bytes are refused at the first bad byte's line and column.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<String, SpecError> {
    let at = |offset: usize, message: String| SpecError {
        file: path.to_path_buf(),
        pos: Some(pos_of_byte(bytes, offset)),
        message,
        hint: None,
    };
    const UTF16: [(&[u8], &str); 4] = [
        (&[0xFF, 0xFE, 0, 0], "UTF-32"),
        (&[0, 0, 0xFE, 0xFF], "UTF-32"),
        (&[0xFF, 0xFE], "UTF-16"),
        (&[0xFE, 0xFF], "UTF-16"),
    ];
    for (bom, name) in UTF16 {
        if bytes.starts_with(bom) {
            let mut e = at(
                0,
                format!("the file is {name}-encoded; pipeline files must be UTF-8"),
            );
            e.hint = Some("save it as UTF-8 (e.g. `iconv -f UTF-16 -t UTF-8`)".into());
            return Err(e);
        }
    }
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let skipped = bytes.len() - body.len();
    let text = match std::str::from_utf8(body) {
        Ok(t) => t,
        Err(e) => {
            let off = skipped + e.valid_up_to();
            return Err(at(
                off,
                format!(
                    "the file is not valid UTF-8 (byte 0x{:02X} at offset {off}); pipeline files must be UTF-8",
                    bytes[off]
                ),
            ));
        }
    };
    if let Some(i) = text.bytes().position(|b| b == 0) {
        return Err(at(
            skipped + i,
            "the file holds a NUL byte: is it a binary file?".into(),
        ));
    }
    Ok(text.to_string())
}

/// 1-based line and column (in characters) of a byte offset.
fn pos_of_byte(bytes: &[u8], offset: usize) -> Pos {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    Pos { line, col }
}

/// Parses pipeline text (`path` is used in messages and to resolve relative paths).
pub fn parse(path: &Path, text: String) -> Result<SpecFile, SpecError> {
    let locs = Locations::index(&text).map_err(|(pos, msg)| SpecError {
        file: path.to_path_buf(),
        pos: Some(pos),
        message: msg,
        hint: None,
    })?;
    let value: Value = serde_yaml_ng::from_str(&text).map_err(|e| SpecError {
        file: path.to_path_buf(),
        pos: e
            .location()
            .map(|l| Pos {
                line: l.line(),
                col: l.column(),
            })
            .filter(|p| p.line > 0)
            .or(locs
                .first_alias
                .filter(|_| e.to_string().contains("repetition limit"))),
        message: humanise_serde(&strip_location(&e.to_string())).replace(
            "repetition limit exceeded",
            "aliases expand to too many nodes (repetition limit exceeded)",
        ),
        hint: None,
    })?;
    if let Some(e) = missing_keys(path, &value) {
        return Err(e);
    }
    let raw: RawPipeline = crate::yaml::deserialize(value).map_err(|e| {
        let dotted = e.path.join(".");
        SpecError {
            file: path.to_path_buf(),
            pos: Some(if dotted.is_empty() {
                Pos { line: 1, col: 1 }
            } else {
                locs.find(&dotted)
            }),
            message: e.message,
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

/// Every required top-level key the file lacks, in one error with a skeleton of them (serde
/// would stop at the first): a newcomer's first file should need one round, not six. The
/// required keys are the schema's (`RawPipeline`'s fields without a default).
fn missing_keys(path: &Path, value: &Value) -> Option<SpecError> {
    let Value::Mapping(m) = value else {
        return None;
    };
    let schema = crate::kind::schema_settings()
        .into_generator()
        .into_root_schema_for::<RawPipeline>();
    // A misspelt key (`seeed`) is better said as such, with the key it resembles.
    let known = schema.get("properties")?.as_object()?;
    if m.keys()
        .any(|k| k.as_str().is_none_or(|k| !known.contains_key(k)))
    {
        return None;
    }
    let missing: Vec<String> = schema
        .get("required")?
        .as_array()?
        .iter()
        .filter_map(|k| k.as_str())
        .filter(|k| !m.contains_key(*k))
        .map(str::to_string)
        .collect();
    if missing.is_empty() {
        return None;
    }
    let skeleton: Vec<&str> = missing
        .iter()
        .map(|k| match k.as_str() {
            "name" => "name: my-experiment            # its results directory",
            "title" => "title: What the experiment shows",
            "description" => "description: What it is and how it is done (Markdown).",
            "seed" => "seed: 1                        # every instance's seed derives from it",
            "stages" => {
                "stages:
  data: {kind: load.table, with: {columns: {x: [1, 2, 3]}}}"
            }
            other => other,
        })
        .collect();
    let list: Vec<String> = missing.iter().map(|k| format!("`{k}`")).collect();
    Some(SpecError {
        file: path.to_path_buf(),
        pos: Some(Pos { line: 1, col: 1 }),
        message: format!(
            "missing required key{} {}",
            if missing.len() > 1 { "s" } else { "" },
            list.join(", ")
        ),
        hint: Some(format!(
            "add, for example:\n{}\n(`dplab new NAME` writes a whole pipeline that runs)",
            skeleton.join("\n")
        )),
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

    #[test]
    fn names_are_single_safe_path_components() {
        for bad in [
            "",
            "../victim",
            "/etc",
            ".hidden",
            "a/b",
            "a\\b",
            "-x",
            "a b",
            "é",
            "x\0",
        ] {
            assert!(name_problem(bad, NameKind::Pipeline).is_some(), "{bad:?}");
            assert!(name_problem(bad, NameKind::Stage).is_some(), "{bad:?}");
        }
        assert!(name_problem(&"a".repeat(101), NameKind::Pipeline).is_some());
        assert!(name_problem("h14-table3.2", NameKind::Pipeline).is_none());
        assert!(name_problem("crm_raw", NameKind::Stage).is_none());
        for bad in ["f__c=a", "f__c", "f_", "a.b"] {
            assert!(name_problem(bad, NameKind::Stage).is_some(), "{bad:?}");
        }
        assert!(name_problem("lambda_t2", NameKind::Axis).is_none());
        assert!(name_problem("2x", NameKind::Axis).is_some());
        assert!(name_problem("a-b", NameKind::Axis).is_some());
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
