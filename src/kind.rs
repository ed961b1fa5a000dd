//! The contract between the pipeline engine and stage kinds: what a kind declares
//! ([`KindInfo`], [`Stage`]), what an instance gets while it runs ([`Ctx`]) and what it
//! returns ([`Output`]). The engine owns this contract and receives the registry of kinds
//! from its caller; it lives outside both `pipeline` and `stages` so that neither imports
//! the other. The engine reads nothing here about privacy: one method, [`Stage::privacy`],
//! carries a mechanism kind's promise from that kind to the audit kind that holds it to it
//! (stage to stage, as a value of the mechanism layer's [`crate::mech::Privacy`]), and the
//! engine never calls it.

use std::path::Path;

use polars::prelude::DataFrame;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde::de::DeserializeOwned;
use serde_yaml_ng::Value;

/// Whether a kind, by default, gathers every axis of its inputs into one instance
/// (plots and reports do: one figure for the whole sweep).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gather {
    /// One instance per combination of the axes the stage varies over.
    Nothing,
    /// One instance for the whole sweep, unless `over:` says otherwise.
    All,
    /// One instance per combination of the axes every input varies over; an axis only some
    /// inputs vary over is gathered, unless `over:` says otherwise. For kinds that put their
    /// inputs' rows side by side (`frame.stack`): the rows of an input that does not vary
    /// over an axis then appear once, with that axis's column empty, instead of once per
    /// value of an axis they do not depend on.
    Unshared,
}

/// A parameter that failed to parse or validate: where inside `with:` and why.
#[derive(Debug, Clone)]
pub struct ParamError {
    /// Path of keys (and list indices) inside the stage's `with:` mapping; empty = the mapping.
    pub path: Vec<String>,
    pub message: String,
}

impl ParamError {
    pub fn at(key: &str, message: impl Into<String>) -> Self {
        ParamError {
            path: key.split('.').map(str::to_string).collect(),
            message: message.into(),
        }
    }
}

/// A stage's `run` may also return a `ParamError`, for what only the data can show about a
/// parameter (a value outside the `bounds` it declares): the engine locates it as it locates a
/// [`MissingColumn`].
impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ParamError {}

/// The error a stage returns when an external input it needs (a dataset file) is not on this
/// machine. The engine marks such a failure as `unavailable`, so the CLI can skip the pipeline
/// (`--skip-unavailable`) instead of failing it; the message says how to obtain the input.
#[derive(Debug)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unavailable {}

/// The error a stage returns when a parameter names a column its input does not have. The
/// engine finds the parameter in the stage's `with:` (the value equal to `name`) and points at
/// it, file:line:col, with the nearest column that exists: the check of column names happens as
/// soon as the input frame exists, since what a frame holds is known only then.
#[derive(Debug)]
pub struct MissingColumn {
    pub name: String,
    /// The input's columns.
    pub available: Vec<String>,
}

impl std::fmt::Display for MissingColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no column `{}` in the input frame (columns: {})",
            self.name,
            self.available.join(", ")
        )
    }
}

impl std::error::Error for MissingColumn {}

/// A file a stage produces beside its frame (an SVG figure, a Markdown table).
/// The engine names it `<stage>.<ext>` and writes it atomically. `ext` is a plain name
/// ([`crate::text::plain_file_name`]): a kind's own (`svg`) or one an external program chose
/// (`figure.svg`, giving `<stage>.figure.svg`).
pub struct Artifact {
    pub ext: std::borrow::Cow<'static, str>,
    pub bytes: Vec<u8>,
}

/// What one stage instance returns.
pub struct Output {
    pub frame: DataFrame,
    pub artifacts: Vec<Artifact>,
}

impl From<DataFrame> for Output {
    fn from(frame: DataFrame) -> Self {
        Output {
            frame,
            artifacts: Vec::new(),
        }
    }
}

/// Everything a stage instance may use while it runs.
pub struct Ctx<'a> {
    /// One frame per declared input, in the order of `input:`. When the stage gathers
    /// axes, each frame is the concatenation of the matching upstream instances and
    /// carries one column per gathered axis.
    pub inputs: &'a [DataFrame],
    /// The stage names behind `inputs`.
    pub input_names: &'a [String],
    /// This instance's generator: PCG seeded from (pipeline seed, stage, axis values, rep).
    pub rng: Pcg64Mcg,
    /// The seed behind `rng`, for deriving independent sub-streams (see [`Ctx::substream`]).
    pub seed: u128,
    /// The files this instance's parameters name ([`Stage::files`]), checked and read by the
    /// engine before anything ran. Stages never open paths themselves.
    pub files: &'a dyn FileSource,
    /// The axis columns (`rep` included) the engine added to the input frames: a stage that
    /// reads "all numeric columns" as data must leave these out.
    pub axis_names: &'a [String],
    /// Stage name and the instance's axis values, for messages and figure titles.
    pub stage: &'a str,
    pub label: &'a str,
    /// The instance's axis values, in the stage's axis order (`rep` last), as data: what an
    /// external program is told of the instance it computes.
    pub axes: &'a [(std::sync::Arc<str>, crate::axis::AxisValue)],
    /// Whether this is a second computation of the instance (`--verify`): a kind that keeps
    /// anything from one instance to the next (the external kind's workers) computes it
    /// afresh, so a result that depended on the instances before it shows as a difference.
    pub again: bool,
}

impl Ctx<'_> {
    /// An independent generator for chunk `i` of this instance's work. Heavy stages split
    /// their work into fixed chunks with one sub-stream each, so their result does not
    /// depend on how many threads run the chunks.
    pub fn substream(&self, i: u64) -> Pcg64Mcg {
        substream(self.seed, i)
    }

    /// The bytes of a file this stage's parameters name (as written there).
    pub fn file(&self, path: &Path) -> anyhow::Result<&[u8]> {
        self.files.file(path).ok_or_else(|| {
            anyhow::anyhow!(
                "stage `{}`: {} was not declared by the kind's `files()` (a bug in the kind)",
                self.stage,
                path.display()
            )
        })
    }

    /// The files of a tree this stage's parameters name ([`Stage::trees`]).
    pub fn tree(&self, path: &Path) -> anyhow::Result<Vec<(std::path::PathBuf, &[u8])>> {
        self.files.tree(path).ok_or_else(|| {
            anyhow::anyhow!(
                "stage `{}`: {} was not declared by the kind's `trees()` (a bug in the kind)",
                self.stage,
                path.display()
            )
        })
    }

    /// Whether `column` of an input is one of the axis columns the engine added (which say
    /// which instance a row came from, and are not data).
    pub fn is_axis(&self, column: &str) -> bool {
        self.axis_names.iter().any(|a| a == column)
    }

    /// The single input of a stage that takes exactly one.
    pub fn input(&self) -> anyhow::Result<&DataFrame> {
        match self.inputs {
            [one] => Ok(one),
            _ => anyhow::bail!(
                "stage `{}` expects exactly one input, got {}",
                self.stage,
                self.inputs.len()
            ),
        }
    }
}

/// Sub-stream `i` of a seed: the seed is mixed with `i` through SplitMix64 steps so that
/// neighbouring indices give unrelated PCG states.
pub fn substream(seed: u128, i: u64) -> Pcg64Mcg {
    let lo = splitmix(seed as u64 ^ splitmix(i));
    let hi = splitmix((seed >> 64) as u64 ^ splitmix(i.wrapping_add(0x9E37_79B9_7F4A_7C15)));
    Pcg64Mcg::new(((hi as u128) << 64) | lo as u128 | 1)
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A generator from a 128-bit seed (the engine's per-instance seed).
pub fn rng_from_seed(seed: u128) -> Pcg64Mcg {
    Pcg64Mcg::from_seed(seed.to_le_bytes())
}

/// Where a stage finds the bytes of the files its parameters name.
pub trait FileSource: Sync {
    fn file(&self, path: &Path) -> Option<&[u8]>;
    /// The files of a tree ([`Stage::trees`]), each with its path (as written, plus the part
    /// below the tree) and bytes, in name order.
    fn tree(&self, path: &Path) -> Option<Vec<(std::path::PathBuf, &[u8])>> {
        self.file(path).map(|b| vec![(path.to_path_buf(), b)])
    }
}

/// A command a stage runs while the pipeline is planned ([`Stage::probes`]): what it prints
/// (an interpreter's or a library's version) is recorded in the manifest (`environment`)
/// and, for a probe the pipeline asks for, joins the store key of every instance of the
/// stage, so a changed environment reruns them. Also one of its [`Stage::programs`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Probe {
    pub argv: Vec<String>,
    /// Environment variables it sees beside the minimal ones (those its programs see).
    pub pass_env: Vec<String>,
    /// Whether what it prints joins the store keys. A probe a kind runs unasked (the
    /// interpreter's `--version`) is only recorded: upgrading Python shows in the manifest
    /// without discarding every stored instance, and the keys stay the same on every machine.
    pub keyed: bool,
}

/// Runs [`Probe`]s for the planner. The caller hands the planner one only with the user's
/// consent to run programs; without it, a probe's output stays out of the keys (said where
/// keys matter: `--dry-run`).
pub trait Prober: Send + Sync {
    /// What `probe` printed, or why it failed.
    fn probe(&self, probe: &Probe) -> Result<Vec<u8>, String>;
}

/// A ready-to-run stage instance: parameters parsed and validated.
pub trait StageRun: Send + Sync {
    fn run(&self, ctx: &mut Ctx) -> anyhow::Result<Output>;
    /// See [`Stage::files`].
    fn files(&self) -> Vec<(&'static str, &Path)>;
    /// See [`Stage::check_files`].
    fn check_files(&self, files: &dyn FileSource) -> Result<(), ParamError>;
    /// See [`Stage::sources`].
    fn sources(&self) -> Vec<serde_json::Value>;
    /// See [`Stage::trees`].
    fn trees(&self) -> Vec<(&'static str, &Path)>;
    /// See [`Stage::programs`].
    fn programs(&self) -> Vec<(String, Vec<String>)>;
    /// See [`Stage::probes`].
    fn probes(&self) -> Vec<Probe>;
    /// See [`Stage::recorded`].
    fn recorded(&self) -> Vec<(String, String)>;
    /// See [`Stage::columns_read`].
    fn columns_read(&self) -> Vec<(String, String)>;
    /// See [`Stage::columns_out`].
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>>;
    /// See [`Stage::privacy`].
    fn privacy(&self) -> Option<crate::mech::Privacy>;
    /// See [`Stage::seeded`].
    fn seeded(&self) -> bool {
        true
    }
    /// See [`Stage::stage_files`].
    fn stage_files(&self) -> anyhow::Result<Vec<Artifact>> {
        Ok(Vec::new())
    }
}

/// A stage kind's typed parameters. Implement this and add one line to the registry of kinds
/// (`stages::registry`).
pub trait Stage: DeserializeOwned + Send + Sync + 'static {
    /// Checks ranges and relations the types cannot express (ε > 0, δ ∈ [0, 1), …).
    fn validate(&self) -> Result<(), ParamError> {
        Ok(())
    }
    /// The files its parameters name, each with the parameter's key, relative to the
    /// pipeline file. The engine confines, checks and reads them before anything runs, and
    /// `run` gets their bytes from [`Ctx::file`].
    fn files(&self) -> Vec<(&'static str, &Path)> {
        Vec::new()
    }
    /// Checks what only the contents of those files can show about its parameters (a key
    /// column the paper's table lacks), when the pipeline is planned: `validate` finds it
    /// before anything runs. `files` holds the bytes of every file [`Stage::files`] named; the
    /// error is located at its parameter like one from [`Stage::validate`].
    fn check_files(&self, files: &dyn FileSource) -> Result<(), ParamError> {
        let _ = files;
        Ok(())
    }
    /// Identities of external data it reads that its parameters and files do not pin down
    /// (a dataset's registered files with their sha256, and how its tables are read), as JSON
    /// a reader of the manifest can use: they enter the instance's store key (as their JSON
    /// text), so a changed registry entry is a changed input.
    fn sources(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }
    /// Files and folders its parameters name whose whole content it uses (a program's code),
    /// each with the parameter's key. Read at planning like [`Stage::files`] (a folder: every
    /// regular file under it, in name order); their content enters the instance's store key,
    /// so editing one reruns exactly the instances that use it, and touching one without
    /// changing it reruns nothing. `run` gets the bytes from [`Ctx::tree`].
    fn trees(&self) -> Vec<(&'static str, &Path)> {
        Vec::new()
    }
    /// The programs it runs, each as its argv, with the parameter that gives it (a dotted
    /// path in `with:`). A pipeline is code once a stage runs a program: the engine lists
    /// them, and the caller runs the plan only with the user's consent. The listed command is
    /// the command that runs: the engine refuses an `$axis` reference inside that parameter
    /// (values reach a program through its files, never its command line).
    fn programs(&self) -> Vec<(String, Vec<String>)> {
        Vec::new()
    }
    /// Commands the engine runs once while it plans (each distinct one once per process),
    /// whose output joins the store key of every instance (see [`Probe`]); each must be among
    /// [`Stage::programs`] too, so consent covers it.
    fn probes(&self) -> Vec<Probe> {
        Vec::new()
    }
    /// What the manifest records of what its instances run on that needs no probe and is not
    /// in their keys, as (what, value): the Python helper the external kind hands programs.
    fn recorded(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// The input columns its parameters name: (path in `with:`, column), e.g.
    /// `("by.0", "eps")`. Checked before anything runs wherever the inputs' columns are known
    /// ([`Stage::columns_out`] of the stages above); a kind that declares none has its column
    /// names checked when its input exists ([`MissingColumn`]).
    fn columns_read(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// The columns it outputs, in order (without the axis columns the engine adds), given its
    /// inputs' columns where they are known; `None` when they are known only from the data (a
    /// CSV file) or from an input whose columns are unknown. The engine checks every output
    /// against it (when planning knew the columns), so a wrong declaration fails the first run.
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let _ = inputs;
        None
    }
    /// The confidence intervals its output holds, each as the columns of (estimate, lower
    /// end, upper end). See [`check_intervals`]: every run is held to them.
    fn intervals(&self) -> Vec<[String; 3]> {
        Vec::new()
    }
    /// The privacy a mechanism kind promises, from its own parameters (`None`: it states
    /// none, as most kinds, which release nothing private or whose claim depends on their
    /// data). An audit of the kind holds it to this claim when the pipeline writes none. The
    /// engine never reads it.
    fn privacy(&self) -> Option<crate::mech::Privacy> {
        None
    }
    /// Whether the seed decides its output (true for every kind of dplab's). False for a
    /// program that draws from a source the seed does not govern (a library that cannot be
    /// seeded, `seeded: false`): its results are not reproducible bit for bit, which its
    /// frames say where the kind has room for it (an audit's `reproducible` column), and
    /// `--verify` does not compute it twice to compare.
    fn seeded(&self) -> bool {
        true
    }
    /// Files about the stage as a whole rather than one instance (how the report shows its
    /// frame): the engine writes them once, `<stage>.<ext>` beside the stage's gathered frame,
    /// from its first instance's parameters. They follow from the parameters, which the
    /// manifest records, so the store does not keep them; a kind whose instances each make a
    /// file returns it from `run` instead ([`Output::artifacts`]).
    fn stage_files(&self) -> anyhow::Result<Vec<Artifact>> {
        Ok(Vec::new())
    }
    fn run(&self, ctx: &mut Ctx) -> anyhow::Result<Output>;
}

struct Typed<T>(T);

impl<T: Stage> StageRun for Typed<T> {
    fn run(&self, ctx: &mut Ctx) -> anyhow::Result<Output> {
        let out = self.0.run(ctx)?;
        check_intervals(&out.frame, &self.0.intervals())?;
        Ok(out)
    }
    fn files(&self) -> Vec<(&'static str, &Path)> {
        self.0.files()
    }
    fn check_files(&self, files: &dyn FileSource) -> Result<(), ParamError> {
        self.0.check_files(files)
    }
    fn sources(&self) -> Vec<serde_json::Value> {
        self.0.sources()
    }
    fn trees(&self) -> Vec<(&'static str, &Path)> {
        self.0.trees()
    }
    fn programs(&self) -> Vec<(String, Vec<String>)> {
        self.0.programs()
    }
    fn probes(&self) -> Vec<Probe> {
        self.0.probes()
    }
    fn recorded(&self) -> Vec<(String, String)> {
        self.0.recorded()
    }
    fn columns_read(&self) -> Vec<(String, String)> {
        self.0.columns_read()
    }
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        self.0.columns_out(inputs)
    }
    fn privacy(&self) -> Option<crate::mech::Privacy> {
        self.0.privacy()
    }
    fn seeded(&self) -> bool {
        self.0.seeded()
    }
    fn stage_files(&self) -> anyhow::Result<Vec<Artifact>> {
        self.0.stage_files()
    }
}

/// An interval must contain its estimate: in every row where the estimate and both ends are
/// numbers, lower ≤ estimate ≤ upper. An interval method that can leave its estimate (a basic
/// bootstrap near a boundary put [0, 0] around 3.2e-4) is a statistics bug that a figure's band
/// makes look like a result; checking here, for every kind that declares intervals
/// ([`Stage::intervals`]), fails the run at the first such row instead.
pub fn check_intervals(frame: &DataFrame, intervals: &[[String; 3]]) -> anyhow::Result<()> {
    let col = |name: &str| -> anyhow::Result<Vec<Option<f64>>> {
        let c = frame.column(name).map_err(|_| {
            anyhow::anyhow!("the kind declares the interval column `{name}` but did not write it (a bug in the kind)")
        })?;
        Ok(c.cast(&polars::prelude::DataType::Float64)?
            .f64()?
            .iter()
            .map(|v| v.filter(|x| x.is_finite()))
            .collect())
    };
    for [est, lo, hi] in intervals {
        let (e, l, h) = (col(est)?, col(lo)?, col(hi)?);
        for (row, ((e, l), h)) in e.iter().zip(&l).zip(&h).enumerate() {
            if let (Some(e), Some(l), Some(h)) = (e, l, h) {
                if !(l <= e && e <= h) {
                    anyhow::bail!(
                        "row {}: the interval [`{lo}`, `{hi}`] = [{l}, {h}] excludes its estimate `{est}` = {e}: an interval must contain its estimate (a bug in the kind's interval method)",
                        row + 1
                    );
                }
            }
        }
    }
    Ok(())
}

/// Parses `with:` into `T` (reporting the path of a bad key) and validates it.
///
/// Every number in `with:` must be finite, whatever the kind: `.nan` or `.inf` would pass
/// each `x > 0` test a kind forgets and come out as NaN frequencies or endless loops, so
/// they are refused here once, at their path, for every kind present and future.
pub fn build<T: Stage>(with: &Value) -> Result<Box<dyn StageRun>, ParamError> {
    let params: T = parse(with)?;
    params.validate()?;
    Ok(Box::new(Typed(params)))
}

/// The parameters of `with:` as `T`, refused as [`build`] refuses them (a non-finite number, a
/// bad key: located at its path), for a kind whose `build` makes more of them than [`Stage`]
/// can: an audit builds the stage it audits.
pub fn parse<T: DeserializeOwned>(with: &Value) -> Result<T, ParamError> {
    if let Some((path, x)) = first_non_finite(with, &mut Vec::new()) {
        return Err(ParamError {
            path,
            message: format!("{x} is not allowed: stage parameters are finite numbers"),
        });
    }
    let params: T = crate::yaml::deserialize(with.clone()).map_err(|e| ParamError {
        path: e.path,
        message: e.message,
    })?;
    Ok(params)
}

/// The path and value of the first NaN or infinite number in `v`.
fn first_non_finite(v: &Value, path: &mut Vec<String>) -> Option<(Vec<String>, f64)> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .filter(|x| !x.is_finite())
            .map(|x| (path.clone(), x)),
        Value::Sequence(items) => items.iter().enumerate().find_map(|(i, it)| {
            path.push(i.to_string());
            let r = first_non_finite(it, path);
            path.pop();
            r
        }),
        Value::Mapping(m) => m.iter().find_map(|(k, it)| {
            path.push(k.as_str().map_or_else(|| format!("{k:?}"), str::to_string));
            let r = first_non_finite(it, path);
            path.pop();
            r
        }),
        Value::Tagged(t) => first_non_finite(&t.value, path),
        _ => None,
    }
}

/// Checks that the list parameter `name` holds no value twice (lists that are sets:
/// quantiles, thresholds, column names, …): a repeated value would repeat rows or columns.
pub fn distinct<T: std::fmt::Display>(name: &str, items: &[T]) -> Result<(), ParamError> {
    // Compared by their shortest text (numbers round-trip through it): linear in the list.
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    for (i, x) in items.iter().enumerate() {
        let text = x.to_string();
        let text = if text == "-0" { "0".to_string() } else { text };
        if !seen.insert(text) {
            return Err(ParamError {
                path: vec![name.to_string(), i.to_string()],
                message: format!("`{name}` holds {x} twice"),
            });
        }
    }
    Ok(())
}

/// The JSON Schema of parameter type `T`, as a kind declares it in [`KindInfo::params`].
/// Draft 7, every subschema inline: what editors' YAML support reads best, and what
/// [`param_lines`] renders without resolving references.
pub fn params<T: JsonSchema>() -> Schema {
    schema_settings()
        .with(|s| s.meta_schema = None)
        .into_generator()
        .into_root_schema_for::<T>()
}

/// How every schema of dplab is generated (a kind's parameters, a whole pipeline file): draft
/// 7, for what is read (defaults, no serialisation-only keys), every subschema inline.
pub fn schema_settings() -> SchemaSettings {
    SchemaSettings::draft07()
        .with(|s| s.inline_subschemas = true)
        .for_deserialize()
}

/// One parameter as `dplab list` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamLine {
    pub name: String,
    /// "number > 0", "exponential | report_noisy_max", "list of strings", …
    pub ty: String,
    /// "required", "default 1", or "optional" (no default: absent means what `meaning` says).
    pub default: String,
    pub meaning: String,
}

impl KindInfo {
    /// The kind's parameters, in declaration order, as `dplab list` prints them.
    pub fn param_lines(&self) -> Vec<ParamLine> {
        param_lines(&(self.params)())
    }

    /// The names of the kind's parameters (the keys of `with:`).
    pub fn param_names(&self) -> Vec<String> {
        self.schema().as_value()["properties"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The JSON Schema of the kind's `with:` mapping.
    pub fn schema(&self) -> Schema {
        (self.params)()
    }
}

/// The lines of `dplab list` for a parameter type's schema (an object schema).
pub fn param_lines(schema: &Schema) -> Vec<ParamLine> {
    let v = schema.as_value();
    let required: Vec<&str> = v["required"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    let Some(props) = v["properties"].as_object() else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, p)| ParamLine {
            name: name.clone(),
            ty: type_text(p),
            default: if required.contains(&name.as_str()) {
                "required".into()
            } else {
                match p.get("default") {
                    Some(d) => format!("default {}", value_text(d)),
                    None => "optional".into(),
                }
            },
            meaning: meaning(p),
        })
        .collect()
}

/// A parameter's doc comment on one line, followed by those of its choices when it is one
/// of several documented values (`exponential: Pr ∝ …; gumbel_max: …`).
fn meaning(p: &serde_json::Value) -> String {
    let one_line = |v: &serde_json::Value| {
        v.as_str()
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut text = one_line(&p["description"]);
    // The choices of an enum, of a list of them, or of an optional one (`anyOf: [enum, null]`).
    let choices = p["oneOf"]
        .as_array()
        .or(p["items"]["oneOf"].as_array())
        .or_else(|| {
            p["anyOf"]
                .as_array()?
                .iter()
                .find_map(|alt| alt["oneOf"].as_array())
        });
    let documented: Vec<String> = choices
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let value = c.get("const").or_else(|| c["enum"].get(0))?;
            let doc = one_line(&c["description"]);
            (!doc.is_empty()).then(|| format!("{}: {doc}", value_text(value)))
        })
        .collect();
    if !documented.is_empty() {
        if !text.is_empty() {
            text.push_str(" — ");
        }
        text.push_str(&documented.join("; "));
    }
    text
}

/// A range as messages and `dplab list` write it: "> 0", "≥ 1", "≤ 12", "in (0, 1)",
/// "in [0, 1)"; each end is (value, included). `None` when both ends are open-ended. The one
/// renderer of ranges: the range types' messages (`stages::param`) and the types `dplab list`
/// reads off a schema both use it, so they never disagree.
pub fn range_text(lo: Option<(f64, bool)>, hi: Option<(f64, bool)>) -> Option<String> {
    Some(match (lo, hi) {
        (None, None) => return None,
        (Some((a, true)), None) => format!("≥ {}", crate::text::number_text(a)),
        (Some((a, false)), None) => format!("> {}", crate::text::number_text(a)),
        (None, Some((b, true))) => format!("≤ {}", crate::text::number_text(b)),
        (None, Some((b, false))) => format!("< {}", crate::text::number_text(b)),
        (Some((a, ai)), Some((b, bi))) => format!(
            "in {}{}, {}{}",
            if ai { '[' } else { '(' },
            crate::text::number_text(a),
            crate::text::number_text(b),
            if bi { ']' } else { ')' }
        ),
    })
}

/// A JSON value as a person writes it in YAML: `1`, `[2, 3]`, `{}`, `candidate`.
fn value_text(v: &serde_json::Value) -> String {
    use serde_json::Value as J;
    match v {
        J::Null => "null".into(),
        J::String(s) => s.clone(),
        J::Number(n) => n
            .as_f64()
            .map_or_else(|| n.to_string(), crate::text::number_text),
        J::Array(a) => format!(
            "[{}]",
            a.iter().map(value_text).collect::<Vec<_>>().join(", ")
        ),
        J::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, x)| format!("{k}: {}", value_text(x)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// A short type text for a schema: its `title` when it has one (types whose schema is long,
/// such as grids, name themselves), else read off `type`, `enum`, bounds, items.
fn type_text(p: &serde_json::Value) -> String {
    use serde_json::Value as J;
    if let Some(t) = p["title"].as_str() {
        return t.to_string();
    }
    if let Some(e) = p["enum"].as_array() {
        return e
            .iter()
            .filter(|x| !x.is_null())
            .map(value_text)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    if let Some(c) = p.get("const") {
        return value_text(c);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = p[key].as_array() {
            let texts: Vec<String> = alts
                .iter()
                .filter(|a| a["type"] != "null")
                .map(type_text)
                .collect();
            return texts.join(" | ");
        }
    }
    let types: Vec<&str> = match &p["type"] {
        J::String(t) => vec![t.as_str()],
        J::Array(a) => a.iter().filter_map(|x| x.as_str()).collect(),
        _ => Vec::new(),
    };
    let types: Vec<&str> = types.into_iter().filter(|t| *t != "null").collect();
    let end = |closed: &str, open: &str| {
        let num = |key: &str| p.get(key).and_then(serde_json::Value::as_f64);
        num(closed)
            .map(|x| (x, true))
            .or(num(open).map(|x| (x, false)))
    };
    let range = match range_text(
        end("minimum", "exclusiveMinimum"),
        end("maximum", "exclusiveMaximum"),
    ) {
        Some(r) => format!(" {r}"),
        None => String::new(),
    };
    match types.as_slice() {
        ["number"] => format!("number{range}"),
        ["integer"] => format!("integer{range}"),
        ["string"] => "string".into(),
        ["boolean"] => "bool".into(),
        ["array"] => {
            let item = type_text(&p["items"]);
            // "numbers in [0, 1]", not "number in [0, 1]".
            let item = match item.split_once(' ') {
                Some((w @ ("string" | "number" | "integer"), rest)) => format!("{w}s {rest}"),
                None if matches!(item.as_str(), "string" | "number" | "integer") => {
                    format!("{item}s")
                }
                _ => item,
            };
            format!("list of {item}")
        }
        ["object"] => match p.get("additionalProperties") {
            Some(a) if a.is_object() => format!("map → {}", type_text(a)),
            _ if p.get("properties").is_some() => {
                let keys: Vec<&str> = p["properties"]
                    .as_object()
                    .map(|m| m.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                format!("{{{}}}", keys.join(", "))
            }
            _ => "mapping".into(),
        },
        [] => "any value".into(),
        many => many.join(" | "),
    }
}

/// A registered stage kind.
pub struct KindInfo {
    pub name: &'static str,
    /// The implementation's version, part of the store key of every instance of the kind and,
    /// through upstream keys, of every instance downstream of it: raise it in the same commit as
    /// any change to what the kind outputs for the same parameters, seed and inputs, so that no
    /// stored result of the old code is ever reused. `make golden` refuses a golden frame that
    /// changed while its stage's store keys did not (the lock `tests/golden/VERSIONS` records a
    /// digest of them), and `cargo test` fails while a raised version is not yet in that lock.
    pub version: u32,
    /// Whether its instances draw randomness (`ctx.rng`, `ctx.seed`, `ctx.substream`). A kind
    /// that does not gets seed 0 whatever the pipeline's seed, so its output cannot depend on
    /// it, and the seed drops out of its store keys: the same deterministic work in two
    /// pipelines of different seeds (the true query answers of h14-table3.2 and 3.3) is one
    /// entry. Declaring `false` for a kind that does draw makes its repetitions identical,
    /// which its golden frames show.
    pub random: bool,
    /// Whether its instances run programs ([`Stage::programs`]): known from the kind alone,
    /// so the caller can tell before planning which pipelines need the user's consent (and
    /// plan only those to list their commands). The engine refuses a plan in which a kind
    /// that declares `false` names a program.
    pub runs_programs: bool,
    pub summary: &'static str,
    /// The JSON Schema of its parameter type, [`params::<T>`]: the type's field doc comments,
    /// serde defaults and range types are the one description of every parameter, which
    /// `dplab list`, `dplab schema` and the planner's did-you-mean read.
    pub params: fn() -> Schema,
    pub gather: Gather,
    pub build: fn(&Value) -> Result<Box<dyn StageRun>, ParamError>,
    /// For a kind that checks a claim (an audit): the [`Verdict`] an instance's frame states,
    /// read from the frame alone, so an instance taken from the store speaks up as one just
    /// computed. The engine reports each verdict as its instance finishes, and the caller
    /// exits with its own status when one differs from what was expected.
    pub verdict: Option<fn(&DataFrame) -> Option<Verdict>>,
}

/// What an instance of a checking kind found ([`KindInfo::verdict`]): whether it flagged
/// something, whether that differs from what its stage expected, and one line that says what
/// (the claim, the bound, the event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub flagged: bool,
    pub unexpected: bool,
    pub line: String,
}

/// One kind run on its own, as the engine runs one instance of it: for the test module beside
/// every kind (`src/stages/**`), which lives below the engine and so cannot call it. A test is
/// frames in, `with:` as YAML text, a seed, the output out:
///
/// ```ignore
/// let out = testing::run(&KIND, "{column: x, noise: laplace, epsilon: 1}", &[&input], 7)?;
/// ```
///
/// What the engine would refuse before or after `run` is refused here too: parameters that
/// fail the kind's checks (with their path, as `validate` shows them), files whose contents the
/// kind refuses ([`Stage::check_files`]), and an output whose columns are not the ones the kind
/// declares for its inputs' columns ([`Stage::columns_out`]), so every kind's test also holds
/// its declaration to what it outputs.
#[cfg(test)]
pub mod testing;

#[cfg(test)]
mod tests;
