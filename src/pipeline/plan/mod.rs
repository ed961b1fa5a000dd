//! Planning: from a parsed file (+ profile and `--set` overrides) to validated stage
//! instances. Everything a user typed is checked here, before anything runs.
//!
//! This file holds what planning makes (the [`Plan`], its stages and instances) and its entry
//! point [`plan`]; the phases are in files named for them:
//! - `planner.rs`: the phases of one file in order (names, profile, axes, `--set`, the graph);
//! - `stage.rs`: the per-stage half (its `with:`, shape, instances, seeds, keys, built kind);
//! - `refs.rs`: `$axis` and `$axis.field` references, found, checked and substituted;
//! - `set.rs`: `--set` arguments;
//! - `located.rs`: errors located at file:line:col, the profile, or the `--set` argument.
//!
//! The store key an instance gets is made in [`super::key`], below planning.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_yaml_ng::{Mapping, Value};
use sha2::{Digest, Sha256};

use super::files::{self, InputFiles};
use super::key::{canonical, store_key, Key, KeyParts};
use super::locate::Locations;
use super::seed::instance_seed;
use super::spec::{
    name_problem, parse_axis, suggest, AxisValue, NameKind, RawPipeline, RawProfile, RawStage,
    Source, SpecError, SpecFile,
};
use crate::kind::{Gather, KindInfo, MissingColumn, ParamError, StageRun};
use crate::text::hex;

mod located;
mod only;
mod planner;
mod refs;
mod set;
mod stage;
#[cfg(test)]
mod tests;

use located::*;
use planner::*;
use refs::*;
use set::*;

/// The implicit axis of repetitions.
pub(crate) const REP: &str = "rep";

/// How the user asked to change the file's settings on the command line.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub profile: Option<String>,
    /// `axis=VALUES` pairs, VALUES in YAML (`[0.1, 1]`, `{from: 1, to: 5, step: 1}`, `0.5`).
    pub set: Vec<String>,
    /// Directories outside the pipeline's own from which its parameters may read files
    /// (`--allow-read`).
    pub allow_read: Vec<PathBuf>,
    /// Runs the stages' probes ([`crate::kind::Stage::probes`]) while planning: given only
    /// with the user's consent to run programs.
    pub prober: Option<ProberHandle>,
}

/// A [`Prober`](crate::kind::Prober) the planner may share.
#[derive(Clone)]
pub struct ProberHandle(pub std::sync::Arc<dyn crate::kind::Prober>);

impl std::fmt::Debug for ProberHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProberHandle")
    }
}

/// A validated pipeline, ready to execute.
pub struct Plan {
    pub file: PathBuf,
    pub base_dir: PathBuf,
    pub file_sha256: String,
    pub name: String,
    pub title: String,
    pub source: Source,
    pub description: String,
    /// The file's `findings:`, passed through to the manifest.
    pub findings: Vec<crate::verdict::Finding>,
    pub seed: u64,
    pub profile: Option<String>,
    pub axes: IndexMap<String, Vec<AxisValue>>,
    pub stages: Vec<PlannedStage>,
    /// What the profile in use replaces of the file's axes and parameters: `axis `eps`
    /// ([…] → […])`, ``noisy.samples` (1000 → 50)`.
    pub profile_replaces: Vec<String>,
    /// The files the stages' parameters name, read and checked once at planning.
    pub files: InputFiles,
    /// Where everything is in the file: an error found while running points there too.
    pub locs: Locations,
    /// The stages `--stages` asked for ([`Plan::run_only`]); empty for a run of the whole.
    pub asked: Vec<String>,
}

/// The hint of a plan error that is a failed probe: what the stage needs (an interpreter, a
/// library) is not on this machine, as a dataset may not be, and `--skip-unavailable` skips a
/// pipeline whose only errors are these.
pub const PROBE_FAILED: &str = "what the program needs is not installed here (a probe checks it): install it, or pass --skip-unavailable to skip pipelines that need what this machine lacks";

pub struct PlannedStage {
    pub name: String,
    pub kind: &'static KindInfo,
    /// Indices into `Plan::stages` (always earlier: stages are in topological order).
    pub inputs: Vec<usize>,
    pub store: bool,
    /// Not run by this run (`--stages` asked for others, see [`Plan::run_only`]): its instances
    /// are taken from the store when it has them and never computed; what the store lacks, the
    /// results directory keeps from its earlier run.
    pub kept: bool,
    /// The axes this stage varies over, in the pipeline's axis order (`rep` last).
    pub axes: Vec<String>,
    /// Axes of its inputs that it gathers into each instance.
    pub gathered: Vec<String>,
    /// Length of the longest input chain above this stage.
    pub depth: usize,
    /// `with:` after profile and `--set`, each `$axis` still in it.
    pub with: Value,
    /// Its own `repeat:` (after the profile), if any.
    pub repeat: Option<u64>,
    /// Its `only:` as written (checked against its axes): `dplab show` writes it back.
    pub only: IndexMap<String, Value>,
    /// The keys of `with:` the profile in use set, and those `--set` set (with the argument):
    /// an error about one points there, not at the file's `with:`.
    pub from_profile: Vec<String>,
    pub from_set: Vec<(String, String)>,
    /// The columns of its instances' frames (axis columns first), when its kind declares
    /// them ([`crate::kind::Stage::columns_out`]) and its inputs' are known.
    pub columns: Option<Vec<String>>,
    /// The programs its instances run, each an argv, distinct, in order
    /// ([`crate::kind::Stage::programs`]): the caller runs the plan only with the user's
    /// consent.
    pub programs: Vec<Vec<String>>,
    /// Whether the seed decides every instance's output ([`crate::kind::Stage::seeded`]):
    /// false for a program that cannot be seeded, which `--verify` leaves alone.
    pub seeded: bool,
    /// The files and trees its parameters name (as written), each with its sha256 (a tree's
    /// digest, [`super::files::InputFiles::tree_digest`]): the run record keeps them, so
    /// `--dry-run` names the file that changed.
    pub files: std::collections::BTreeMap<String, String>,
    /// What its instances run on, as the manifest records it: what each probe printed (by
    /// its command) and what the kind records ([`crate::kind::Stage::recorded`]). Not in the
    /// keys but through the probes the pipeline asks for.
    pub environment: std::collections::BTreeMap<String, String>,
    /// The external data its instances read ([`crate::kind::Stage::sources`]), distinct.
    pub sources: Vec<serde_json::Value>,
    pub instances: Vec<Instance>,
}

impl PlannedStage {
    /// An instance's parameters: `with:` with its axis values put in.
    pub fn params(&self, inst: &Instance) -> Value {
        substitute(&self.with, &inst.key())
    }

    /// An instance's parameters in canonical form (see [`canonical`]): what its store key
    /// hashes.
    pub(crate) fn canonical_params(&self, inst: &Instance) -> String {
        canonical(&self.params(inst))
    }

    /// An instance's runner: its parameters parsed and checked (planning checked them
    /// already, so this fails only if the kind's checks are not deterministic).
    pub fn build(&self, inst: &Instance) -> anyhow::Result<Box<dyn StageRun>> {
        (self.kind.build)(&self.params(inst)).map_err(|e| {
            anyhow::anyhow!(
                "its parameters no longer pass their checks at {}: {}",
                e.path.join("."),
                e.message
            )
        })
    }
}

/// An instance's axis values, in the stage's axis order. Axis names are shared by every
/// instance (a string per instance and axis was a tenth of a 10⁶-instance plan).
pub(crate) type AxisKey = Vec<(Arc<str>, AxisValue)>;

/// The values of a stage's axes (`rep` as 0, 1, …), shared by its instances: each instance
/// keeps only its position in their product ([`Instance::key`]), one number instead of a
/// vector of (axis, value) pairs (those were 100 bytes an instance, a tenth of a
/// 10⁶-instance run).
pub struct AxisGrid {
    names: Vec<Arc<str>>,
    values: Vec<Vec<AxisValue>>,
}

impl AxisGrid {
    pub fn new(names: &[String], values: Vec<Vec<AxisValue>>) -> Self {
        AxisGrid {
            names: names.iter().map(|n| Arc::from(n.as_str())).collect(),
            values,
        }
    }

    /// How many combinations of values there are (the first axis varies slowest).
    pub(crate) fn combinations(&self) -> u64 {
        self.values.iter().map(|v| v.len() as u64).product()
    }

    /// The combination at position `at` of the product.
    pub fn key(&self, mut at: u64) -> AxisKey {
        let mut idx = vec![0usize; self.values.len()];
        for (i, vals) in self.values.iter().enumerate().rev() {
            let n = vals.len() as u64;
            idx[i] = (at % n) as usize;
            at /= n;
        }
        self.names
            .iter()
            .zip(&self.values)
            .zip(idx)
            .map(|((a, vals), i)| (a.clone(), vals[i].clone()))
            .collect()
    }
}

/// One instance of a stage: only what differs from its stage's other instances. Its
/// parameters, runner and label are worked out from these when needed
/// ([`PlannedStage::params`], [`PlannedStage::build`], [`Instance::label`]): a plan of 10⁶
/// instances that kept them took 0.6 GB.
pub struct Instance {
    /// Its stage's axis values, and its position in their product (see [`Instance::key`]).
    pub grid: Arc<AxisGrid>,
    pub at: u64,
    /// Its key in the instance store (see [`store_key`]).
    pub store_key: Key,
    /// The same without its inputs' keys: with its inputs' digests, its key by content
    /// ([`super::key::content_key`]).
    pub own_key: Key,
    pub seed: u128,
    /// Per input: the indices of the upstream instances this instance reads (shared by
    /// consecutive instances that read the same ones).
    pub inputs: Arc<[Box<[usize]>]>,
}

impl Plan {
    /// Runs only the stages named and what they read, directly or not (`dplab run --stages`):
    /// the plan stays the whole pipeline's, so every instance has the key a run of the whole
    /// gives it and the store serves both; every other stage is marked [`PlannedStage::kept`].
    /// Returns the names of the stages kept; an error names a stage the plan does not have,
    /// with the ones it has.
    pub fn run_only(&mut self, names: &[String]) -> Result<Vec<String>, String> {
        let mut runs = vec![false; self.stages.len()];
        for n in names {
            match self.stages.iter().position(|s| &s.name == n) {
                Some(i) => runs[i] = true,
                None => {
                    let all: Vec<&str> = self.stages.iter().map(|s| s.name.as_str()).collect();
                    return Err(format!(
                        "--stages: pipeline `{}` has no stage `{n}` (its stages: {})",
                        self.name,
                        all.join(", ")
                    ));
                }
            }
        }
        // Stages are in topological order: one pass from the end reaches every input.
        for i in (0..self.stages.len()).rev() {
            if runs[i] {
                for &u in &self.stages[i].inputs {
                    runs[u] = true;
                }
            }
        }
        let mut kept = Vec::new();
        for (s, runs) in self.stages.iter_mut().zip(runs) {
            s.kept = !runs;
            if s.kept {
                kept.push(s.name.clone());
            }
        }
        self.asked.extend(names.iter().cloned());
        Ok(kept)
    }

    pub fn instance_count(&self) -> usize {
        self.stages.iter().map(|s| s.instances.len()).sum()
    }

    /// Every program the plan's stages run: (stage, argv). A kept stage runs none.
    pub fn programs(&self) -> Vec<(&str, &[String])> {
        self.stages
            .iter()
            .filter(|s| !s.kept)
            .flat_map(|s| s.programs.iter().map(|p| (s.name.as_str(), p.as_slice())))
            .collect()
    }
}

impl Instance {
    /// Its axis values, in the stage's axis order.
    pub fn key(&self) -> AxisKey {
        self.grid.key(self.at)
    }

    /// `eps=0.5, rep=3`, or empty for a stage without axes.
    pub fn label(&self) -> String {
        label(&self.key())
    }

    /// Its label with the axes in name order: what names it whatever order `axes:` lists
    /// them in (the run record's, so a swap of two axes is not "a new instance").
    pub(crate) fn label_by_name(&self) -> String {
        let mut key = self.key();
        key.sort_by(|a, b| a.0.cmp(&b.0));
        label(&key)
    }
}

fn label(key: &[(Arc<str>, AxisValue)]) -> String {
    key.iter()
        .map(|(a, v)| format!("{a}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Plans a parsed file with the stage kinds of `registry` (the caller's). Returns every error found (at most one per stage), not just the first, up to [`MAX_ERRORS`].
///
/// Every profile of the file is checked too, whether or not it is the one in use, so that a
/// profile naming a parameter or axis that does not exist fails `validate` at the profile's
/// line instead of being ignored until someone runs it.
pub fn plan(
    spec: &SpecFile,
    ov: &Overrides,
    registry: &'static [KindInfo],
) -> Result<Plan, Vec<SpecError>> {
    let limit = crate::limits::get().instances;
    let plan = plan_one(spec, ov, registry, limit, &mut 0).map_err(|e| capped(spec, e))?;
    if let (Some(p), [first, ..]) = (&ov.profile, plan.profile_replaces.as_slice()) {
        const SHOWN: usize = 8;
        let all = &plan.profile_replaces;
        let more = all.len().saturating_sub(SHOWN);
        tracing::info!(
            "{}: profile `{p}` replaces what the file sets for {first}{}{} (`dplab show` prints the pipeline as it runs)",
            plan.name,
            all[1..all.len().min(SHOWN)]
                .iter()
                .map(|r| format!(", {r}"))
                .collect::<String>(),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    for w in unread_fields(&plan) {
        tracing::warn!("{}: {w}", spec.path.display());
    }
    let mut errors = Vec::new();
    // The other profiles share one budget with the plan in use: checking them costs at most
    // what planning one pipeline at the limit costs, however many profiles a file holds.
    let mut budget = limit.saturating_sub(plan.instance_count() as u64);
    for name in spec.raw.profiles.keys() {
        if errors.len() >= MAX_ERRORS {
            break;
        }
        if ov.profile.as_deref() == Some(name.as_str()) {
            continue;
        }
        let other = Overrides {
            profile: Some(name.clone()),
            set: Vec::new(),
            allow_read: ov.allow_read.clone(),
            prober: ov.prober.clone(),
        };
        if budget == 0 {
            let mut e = spec.err(
                &format!("profiles.{name}"),
                format!("profile `{name}` and those after it were not checked: checking every profile of this file would plan more than {limit} instances in all (raise the limit with --max-instances if you mean it)"),
            );
            e.hint = Some("every profile is checked, also without --profile".into());
            errors.push(e);
            break;
        }
        let mut spent = 0;
        let result = plan_one(spec, &other, registry, budget, &mut spent);
        budget = budget.saturating_sub(spent);
        match result {
            Ok(_) => {}
            Err(errs) => {
                let over_budget =
                    budget < limit && errs.iter().any(|e| e.message.contains("--max-instances"));
                errors.extend(errs.into_iter().map(|mut e| {
                    if !e.message.starts_with("profile ") {
                        e.message = format!("profile `{name}`: {}", e.message);
                    }
                    if over_budget && e.hint.is_none() {
                        e.hint = Some(format!(
                            "every profile is checked, and all of them together may plan at most {limit} instances"
                        ));
                    }
                    e
                }));
            }
        }
    }
    if errors.is_empty() {
        Ok(plan)
    } else {
        Err(capped(spec, errors))
    }
}

/// Most errors one `validate` of a file reports. Each error costs work (a "did you mean"
/// search, a list of the axes) and memory until it is printed, so a file of a million typos
/// (`with: {x: [$zz, $zz, …]}` under a thousand axes: 5 s and 400 MB for 32 000 of them,
/// minutes and more than 4 GB for a 4 MiB file) must not produce a million errors. Planning
/// stops at this many; the first ones are the useful ones.
pub(crate) const MAX_ERRORS: usize = 100;

/// `errors` cut to [`MAX_ERRORS`], with a last one saying so.
fn capped(spec: &SpecFile, mut errors: Vec<SpecError>) -> Vec<SpecError> {
    if errors.len() >= MAX_ERRORS {
        errors.truncate(MAX_ERRORS);
        errors.push(SpecError {
            file: spec.path.clone(),
            pos: None,
            message: format!("stopped after {MAX_ERRORS} errors: fix these and validate again"),
            hint: None,
        });
    }
    errors
}

/// Plans the file under `ov` with at most `max_instances` instances in all. Adds to `spent`
/// the work done, counted in instances planned and axis values read (at least 1), whether
/// planning succeeds or not.
///
/// The phases, in order (each a method of [`Planner`], each adding what it finds wrong to
/// the errors; a phase whose output the next ones need stops planning when it fails):
/// 1. [`Planner::check_names`]: names that become paths;
/// 2. [`Planner::profile`]: the profile asked for;
/// 3. [`Planner::axes`]: the axes, from the file, then the profile;
/// 4. [`Planner::check_profile`]: what the profile names exists;
/// 5. [`Planner::overrides`]: `--set` (axes, parameters, the seed);
/// 6. [`Planner::graph`]: kinds, inputs, topological order;
/// 7. per stage in that order, [`Planner::stage`]: its `with:`, the axes it uses, its shape
///    (axes, repetitions, gathered axes) and its instances.
fn plan_one(
    spec: &SpecFile,
    ov: &Overrides,
    registry: &'static [KindInfo],
    max_instances: u64,
    spent: &mut u64,
) -> Result<Plan, Vec<SpecError>> {
    *spent += 1;
    let mut p = Planner {
        spec,
        ov,
        registry,
        max_instances,
        spent,
        errors: Vec::new(),
        replaced: Vec::new(),
        set_axes: HashMap::new(),
        input_files: InputFiles::default(),
        total_instances: 0,
    };
    p.check_names();
    p.stop()?;
    let profile = p.profile().map_err(|e| vec![e])?;
    let mut axes = p.axes(profile);
    p.check_profile(profile);
    let (seed, param_sets) = p.overrides(&mut axes);
    let graph = p.graph()?;
    let mut planned: Vec<Option<PlannedStage>> = (0..graph.names.len()).map(|_| None).collect();
    let mut reps: Vec<Option<u64>> = vec![None; graph.names.len()];
    for &si in &graph.order {
        if p.full() {
            break;
        }
        let env = StageEnv {
            graph: &graph,
            profile,
            axes: &axes,
            param_sets: &param_sets,
            seed,
        };
        if let Some((stage, rep)) = p.stage(si, &env, &planned, &reps) {
            planned[si] = Some(stage);
            reps[si] = rep;
        }
    }
    p.stop()?;
    // Re-index stages in topological order.
    let position: HashMap<usize, usize> = graph
        .order
        .iter()
        .enumerate()
        .map(|(p, &i)| (i, p))
        .collect();
    let mut stages = Vec::new();
    for &si in &graph.order {
        let mut st = planned[si].take().expect("planned");
        st.inputs = graph.inputs[si].iter().map(|i| position[i]).collect();
        stages.push(st);
    }
    let raw = &spec.raw;
    check_cells(&mut p, raw, &stages);
    p.stop()?;
    Ok(Plan {
        profile_replaces: p.replaced,
        file: spec.path.clone(),
        file_sha256: hex(&Sha256::digest(spec.text.as_bytes())),
        name: raw.name.clone(),
        title: raw.title.clone(),
        source: raw.source.clone(),
        description: raw.description.clone(),
        findings: raw.findings.clone(),
        seed,
        profile: ov.profile.clone(),
        axes,
        stages,
        files: p.input_files,
        base_dir: base_dir(spec),
        locs: spec.locs.clone(),
        asked: Vec::new(),
    })
}

/// The cells the description and the findings quote (`{{stage.column[row]}}`, see
/// [`crate::text::CellRef`]) name a stage that writes its frame, and a column it has where
/// its columns are known before running.
fn check_cells(p: &mut Planner, raw: &RawPipeline, stages: &[PlannedStage]) {
    let mut texts = vec![("description".to_string(), raw.description.as_str())];
    for (i, f) in raw.findings.iter().enumerate() {
        texts.push((format!("findings.{i}.claim"), f.claim.as_str()));
        texts.push((format!("findings.{i}.found"), f.found.as_str()));
        if let Some(why) = &f.why {
            texts.push((format!("findings.{i}.why"), why.as_str()));
        }
    }
    for (path, text) in texts {
        let refs = match crate::text::cell_refs(text) {
            Ok(refs) => refs,
            Err(e) => {
                p.err(&path, e);
                continue;
            }
        };
        for r in refs {
            let Some(stage) = stages.iter().find(|s| s.name == r.stage) else {
                let hint = suggest(&r.stage, stages.iter().map(|s| s.name.as_str()))
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                p.err(&path, format!("`{}.{}[{}]` quotes a cell of stage `{}`, which the pipeline does not have{hint}", r.stage, r.column, r.row, r.stage));
                continue;
            };
            if !stage.store {
                p.err(&path, format!("`{}.{}[{}]` quotes a cell of stage `{}`, which writes no frame (`store: false`)", r.stage, r.column, r.row, r.stage));
            } else if let Some(cols) = stage.columns.as_ref().filter(|c| !c.contains(&r.column)) {
                let names: Vec<&str> = cols.iter().map(String::as_str).collect();
                p.err(
                    &path,
                    format!(
                        "`{}.{}[{}]`: stage `{}` has {}",
                        r.stage,
                        r.column,
                        r.row,
                        r.stage,
                        no_column(&r.column, &names).replacen("in its input ", "", 1)
                    ),
                );
            }
        }
    }
}

/// The directory of the pipeline file: relative paths in parameters resolve against it.
fn base_dir(spec: &SpecFile) -> PathBuf {
    match spec.path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
