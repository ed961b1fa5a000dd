//! Stage kinds: small adapters between result frames and the mechanisms of [`crate::mech`].
//!
//! A stage kind is one module holding its typed parameters (serde, `deny_unknown_fields`),
//! their validation, and a `run` that turns input frames into an output frame (and, for
//! plots and reports, files). Kinds register in [`registry`]; the engine looks them up by
//! name and never needs to know what they do, so adding a kind never touches the engine.

pub mod aggregate;
pub mod channel;
pub mod dataset;
pub mod evaluate;
pub mod frame;
pub mod load;
pub mod near_optimal;
pub mod noise;
pub mod plot;
pub mod report;
pub mod select;
pub mod smooth;
pub mod transform;
pub mod trigonometric;

use std::path::Path;

use polars::prelude::DataFrame;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use serde::de::DeserializeOwned;
use serde_yaml_ng::Value;

/// One parameter of a stage kind, as `dplab list` prints it.
pub struct ParamDoc {
    pub name: &'static str,
    pub ty: &'static str,
    /// `None` when the parameter is required.
    pub default: Option<&'static str>,
    pub meaning: &'static str,
}

/// Whether a kind, by default, gathers every axis of its inputs into one instance
/// (plots and reports do: one figure for the whole sweep).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gather {
    /// One instance per combination of the axes the stage varies over.
    Nothing,
    /// One instance for the whole sweep, unless `over:` says otherwise.
    All,
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

/// A confidence level in (0, 1).
pub fn check_level(level: f64) -> Result<(), ParamError> {
    if level > 0.0 && level < 1.0 {
        Ok(())
    } else {
        Err(ParamError::at(
            "level",
            format!("level = {level} is invalid: must be in (0, 1)"),
        ))
    }
}

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

/// A file a stage produces beside its frame (an SVG figure, a Markdown table).
/// The engine names it `<stage>.<ext>` and writes it atomically.
pub struct Artifact {
    pub ext: &'static str,
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
    /// Directory of the pipeline file: relative paths in parameters resolve against it.
    pub base_dir: &'a Path,
    /// The axis columns (`rep` included) the engine added to the input frames: a stage that
    /// reads "all numeric columns" as data must leave these out.
    pub axis_names: &'a [String],
    /// Stage name and the instance's axis values, for messages and figure titles.
    pub stage: &'a str,
    pub label: &'a str,
}

impl Ctx<'_> {
    /// An independent generator for chunk `i` of this instance's work. Heavy stages split
    /// their work into fixed chunks with one sub-stream each, so their result does not
    /// depend on how many threads run the chunks.
    pub fn substream(&self, i: u64) -> Pcg64Mcg {
        substream(self.seed, i)
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

/// A ready-to-run stage instance: parameters parsed and validated.
pub trait StageRun: Send + Sync {
    fn run(&self, ctx: &mut Ctx) -> anyhow::Result<Output>;
}

/// A stage kind's typed parameters. Implement this and add one line to [`registry`].
pub trait Stage: DeserializeOwned + Send + Sync + 'static {
    /// Checks ranges and relations the types cannot express (ε > 0, δ ∈ [0, 1), …).
    fn validate(&self) -> Result<(), ParamError> {
        Ok(())
    }
    fn run(&self, ctx: &mut Ctx) -> anyhow::Result<Output>;
}

struct Typed<T>(T);

impl<T: Stage> StageRun for Typed<T> {
    fn run(&self, ctx: &mut Ctx) -> anyhow::Result<Output> {
        self.0.run(ctx)
    }
}

/// Parses `with:` into `T` (reporting the path of a bad key) and validates it.
pub fn build<T: Stage>(with: &Value) -> Result<Box<dyn StageRun>, ParamError> {
    let params: T = serde_path_to_error::deserialize(with.clone()).map_err(|e| {
        let path = e
            .path()
            .iter()
            .filter_map(|seg| match seg {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
                _ => None,
            })
            .collect();
        ParamError {
            path,
            message: crate::pipeline::spec::humanise_serde(&e.into_inner().to_string()),
        }
    })?;
    params.validate()?;
    Ok(Box::new(Typed(params)))
}

/// A registered stage kind.
pub struct KindInfo {
    pub name: &'static str,
    pub summary: &'static str,
    pub params: &'static [ParamDoc],
    pub gather: Gather,
    pub build: fn(&Value) -> Result<Box<dyn StageRun>, ParamError>,
}

/// Every stage kind dplab knows, in the order `dplab list` prints them.
pub fn registry() -> &'static [KindInfo] {
    static KINDS: std::sync::OnceLock<Vec<KindInfo>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let mut kinds = Vec::new();
        kinds.extend(load::kinds());
        kinds.extend(dataset::kinds());
        kinds.extend(noise::kinds());
        kinds.extend(select::kinds());
        kinds.extend(channel::kinds());
        kinds.extend(near_optimal::kinds());
        kinds.extend(trigonometric::kinds());
        kinds.extend(smooth::kinds());
        kinds.extend(evaluate::kinds());
        kinds.extend(transform::kinds());
        kinds.extend(aggregate::kinds());
        kinds.extend(aggregate::fit_kinds());
        kinds.extend(plot::kinds());
        kinds.extend(report::kinds());
        kinds
    })
}

/// Looks a kind up by name.
pub fn find(name: &str) -> Option<&'static KindInfo> {
    registry().iter().find(|k| k.name == name)
}
