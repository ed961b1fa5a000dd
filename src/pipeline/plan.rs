//! Planning: from a parsed file (+ profile and `--set` overrides) to validated stage
//! instances. Everything a user typed is checked here, before anything runs.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_yaml_ng::{Mapping, Value};
use sha2::{Digest, Sha256};

use super::cache::Key;
use super::files::{self, InputFiles};
use super::locate::Locations;
use super::seed::instance_seed;
use super::spec::{
    name_problem, parse_axis, suggest, AxisValue, NameKind, RawPipeline, RawProfile, RawStage,
    Source, SpecError, SpecFile,
};
use crate::kind::{Gather, KindInfo, MissingColumn, ParamError, StageRun};

/// The implicit axis of repetitions.
pub const REP: &str = "rep";

/// How the user asked to change the file's settings on the command line.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub profile: Option<String>,
    /// `axis=VALUES` pairs, VALUES in YAML (`[0.1, 1]`, `{from: 1, to: 5, step: 1}`, `0.5`).
    pub set: Vec<String>,
    /// Directories outside the pipeline's own from which its parameters may read files
    /// (`--allow-read`).
    pub allow_read: Vec<PathBuf>,
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
}

pub struct PlannedStage {
    pub name: String,
    pub kind: &'static KindInfo,
    /// Indices into `Plan::stages` (always earlier: stages are in topological order).
    pub inputs: Vec<usize>,
    pub store: bool,
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
    /// The keys of `with:` the profile in use set, and those `--set` set (with the argument):
    /// an error about one points there, not at the file's `with:`.
    pub from_profile: Vec<String>,
    pub from_set: Vec<(String, String)>,
    /// The columns of its instances' frames (axis columns first), when its kind declares
    /// them ([`crate::kind::Stage::columns_out`]) and its inputs' are known.
    pub columns: Option<Vec<String>>,
    pub instances: Vec<Instance>,
}

impl PlannedStage {
    /// An instance's parameters: `with:` with its axis values put in.
    pub fn params(&self, inst: &Instance) -> Value {
        substitute(&self.with, &inst.key)
    }

    /// An instance's parameters in canonical form (see [`canonical`]): what its store key
    /// hashes.
    pub fn canonical_params(&self, inst: &Instance) -> String {
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
pub type AxisKey = Vec<(Arc<str>, AxisValue)>;

/// One instance of a stage: only what differs from its stage's other instances. Its
/// parameters, runner and label are worked out from these when needed
/// ([`PlannedStage::params`], [`PlannedStage::build`], [`Instance::label`]): a plan of 10⁶
/// instances that kept them took 0.6 GB.
pub struct Instance {
    pub key: AxisKey,
    /// Its key in the instance store (see [`store_key`]).
    pub store_key: Key,
    pub seed: u128,
    /// Per input: the indices of the upstream instances this instance reads (shared by
    /// consecutive instances that read the same ones).
    pub inputs: Arc<[Box<[usize]>]>,
}

impl Instance {
    /// `eps=0.5, rep=3`, or empty for a stage without axes.
    pub fn label(&self) -> String {
        label(&self.key)
    }
}

impl Plan {
    pub fn instance_count(&self) -> usize {
        self.stages.iter().map(|s| s.instances.len()).sum()
    }

    /// A stage's run-time error that a parameter names a column its input lacks, pointed at
    /// that parameter (the value in the instance's parameters equal to the name: in the file,
    /// the profile, or a `--set` argument) with the nearest column that exists.
    pub fn column_error(&self, si: usize, inst: &Instance, e: &MissingColumn) -> String {
        let stage = &self.stages[si];
        let available: Vec<&str> = e.available.iter().map(String::as_str).collect();
        let what = no_column(&e.name, &available);
        let mut at = Vec::new();
        find_string(&stage.params(inst), &e.name, &mut Vec::new(), &mut at);
        match at.first() {
            Some(path) => self.located(si, path, &what),
            None => what,
        }
    }

    /// `message` about the parameter at `path` in stage `si`'s `with:`, prefixed with where it
    /// was given: file:line:col (in the file or the profile) or the `--set` argument.
    pub fn located(&self, si: usize, path: &str, what: &str) -> String {
        let stage = &self.stages[si];
        let set = stage.from_set.iter().map(|(k, a)| (k.as_str(), a.as_str()));
        match given_at(
            &stage.name,
            path,
            self.profile.as_deref(),
            &stage.from_profile,
            set,
        ) {
            Err(arg) => format!("--set {}: `{path}`: {what}", brief_to(arg, 200)),
            Ok(in_file) => {
                let pos = self.locs.value(&in_file);
                format!(
                    "{}:{}:{}: `{path}`: {what}",
                    self.file.display(),
                    pos.line,
                    pos.col
                )
            }
        }
    }
}

/// `no column `c` in its input (columns: …)`, with the nearest that exists.
fn no_column(col: &str, available: &[&str]) -> String {
    let hint = suggest(col, available.iter().copied())
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default();
    format!(
        "no column `{col}` in its input (columns: {}){hint}",
        available.join(", ")
    )
}

/// Where the parameter at `path` in stage `stage`'s `with:` was given: its dotted path in the
/// file (under the profile's `with:` when the profile set its key), or `Err` with the `--set`
/// argument that set it (the last one, which won).
fn given_at<'s>(
    stage: &str,
    path: &str,
    profile: Option<&str>,
    from_profile: &[String],
    mut from_set: impl DoubleEndedIterator<Item = (&'s str, &'s str)>,
) -> Result<String, &'s str> {
    let top = path.split('.').next().unwrap_or_default();
    if let Some((_, arg)) = from_set.rfind(|(k, _)| *k == top) {
        return Err(arg);
    }
    Ok(match profile {
        Some(p) if from_profile.iter().any(|k| k == top) => {
            format!("profiles.{p}.with.{stage}.{path}")
        }
        _ => format!("stages.{stage}.with.{path}"),
    })
}

/// The paths (`x`, `values.1`) of the strings equal to `needle` in `v`.
fn find_string(v: &Value, needle: &str, path: &mut Vec<String>, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s == needle => out.push(path.join(".")),
        Value::Sequence(items) => {
            for (i, it) in items.iter().enumerate() {
                path.push(i.to_string());
                find_string(it, needle, path, out);
                path.pop();
            }
        }
        Value::Mapping(m) => {
            for (k, it) in m {
                path.push(k.as_str().map_or_else(|| canonical(k), str::to_string));
                find_string(it, needle, path, out);
                path.pop();
            }
        }
        _ => {}
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
pub const MAX_ERRORS: usize = 100;

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
    })
}

/// Planning one file: what every phase reads, and what the phases found so far.
struct Planner<'a> {
    spec: &'a SpecFile,
    ov: &'a Overrides,
    registry: &'static [KindInfo],
    max_instances: u64,
    /// Work done (see [`plan_one`]).
    spent: &'a mut u64,
    errors: Vec<SpecError>,
    /// What the profile replaces of the file: logged by [`plan`], since an edit to the
    /// file's `axes:` or a parameter is otherwise silently ignored under the profile.
    replaced: Vec<String>,
    /// The files the parameters name, read once.
    input_files: InputFiles,
    /// Instances of the stages planned so far.
    total_instances: u64,
    /// The axes a `--set AXIS=…` replaced, with the argument (the last one, which won).
    set_axes: HashMap<String, &'a str>,
}

/// The stages as a graph: names (file order), kinds, inputs and a topological order.
struct Graph<'a> {
    names: Vec<&'a str>,
    kinds: Vec<&'static KindInfo>,
    inputs: Vec<Vec<usize>>,
    order: Vec<usize>,
}

/// What planning a stage reads besides the stages before it.
struct StageEnv<'a, 'g> {
    graph: &'g Graph<'a>,
    profile: Option<&'a RawProfile>,
    axes: &'g IndexMap<String, Vec<AxisValue>>,
    param_sets: &'g [ParamSet],
    seed: u64,
}

/// A stage's `with:` after the profile and `--set`, and which of its keys they set (an error
/// in one is located at the profile's line, or names the `--set` argument).
struct ComposedWith<'s> {
    with: Value,
    from_profile: Vec<String>,
    from_set: Vec<(String, &'s str)>,
}

/// What every parameter set of a stage is built and located from: the same for all its
/// instances.
#[derive(Clone, Copy)]
struct StageParams<'c> {
    name: &'c str,
    kind: &'static KindInfo,
    composed: &'c ComposedWith<'c>,
    /// The `$axis` references of its `with:`, and the axes they name (its own axes).
    refs: &'c [Ref],
    own: &'c BTreeSet<String>,
}

/// The axes a stage varies over and how it gathers.
#[derive(Debug, PartialEq)]
struct Shape {
    /// Its axes, in the pipeline's order, `rep` last.
    axes: Vec<String>,
    gathered: BTreeSet<String>,
    /// Its own `repeat:` (after the profile).
    repeat: Option<u64>,
    /// How many repetitions `rep` counts when the stage varies over it.
    rep_count: Option<u64>,
    /// The repetitions its readers inherit (none once `rep` is gathered).
    reps_out: Option<u64>,
}

/// The `$axis` references of a `with:`.
type Refs = Vec<Ref>;

/// Where an axis's values were written.
enum AxisOrigin<'a> {
    /// A `--set AXIS=…` argument.
    Set(&'a str),
    /// A path in the file (`axes.x` or `profiles.p.axes.x`) and the values written there.
    File(String, &'a Value),
    Unknown,
}

impl AxisOrigin<'_> {
    /// What an error about a reference adds when the axis's values were not the file's own.
    fn note(&self) -> String {
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
struct Ref {
    /// Where it is: the dotted path in `with:`.
    path: String,
    axis: String,
    /// The field path into a record (empty: the whole value).
    field: Vec<String>,
}

/// One `--set` argument, parsed.
#[derive(Debug)]
enum SetArg {
    Seed(u64),
    Param(ParamSet),
    Axis(String, Vec<AxisValue>),
}

impl<'a> Planner<'a> {
    /// Whether as many errors as one run reports are found: later phases stop.
    fn full(&self) -> bool {
        self.errors.len() >= MAX_ERRORS
    }

    fn err(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(self.spec.err(path, message));
    }

    /// Stops planning when anything was found wrong.
    fn stop(&mut self) -> Result<(), Vec<SpecError>> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(std::mem::take(&mut self.errors))
        }
    }

    /// Phase 1: names that become paths are checked first, so nothing after ever sees an
    /// unsafe one.
    fn check_names(&mut self) {
        let spec = self.spec;
        let raw = &spec.raw;
        if let Some(msg) = name_problem(&raw.name, NameKind::Pipeline) {
            self.err("name", msg);
        }
        // Stage names become file names: two that differ only in case would overwrite each
        // other on a case-insensitive file system (macOS, Windows), so they are refused here.
        let mut folded: HashMap<String, &str> = HashMap::new();
        for name in raw.stages.keys() {
            if self.full() {
                break;
            }
            if let Some(msg) = name_problem(name, NameKind::Stage) {
                self.err(&format!("stages.{name}"), msg);
            } else if let Some(first) = folded.insert(name.to_lowercase(), name) {
                self.err(
                    &format!("stages.{name}"),
                    format!("stage names `{first}` and `{name}` differ only in case: their result files would collide on case-insensitive file systems; rename one"),
                );
            }
        }
        for name in raw.axes.keys() {
            if self.full() {
                break;
            }
            if let Some(msg) = name_problem(name, NameKind::Axis) {
                self.err(&format!("axes.{name}"), msg);
            }
        }
    }

    /// Phase 2: the profile asked for, if any.
    fn profile(&self) -> Result<Option<&'a RawProfile>, SpecError> {
        let raw = &self.spec.raw;
        let Some(p) = &self.ov.profile else {
            return Ok(None);
        };
        if let Some(prof) = raw.profiles.get(p) {
            return Ok(Some(prof));
        }
        let names: Vec<&str> = raw.profiles.keys().map(String::as_str).collect();
        let mut e = self
            .spec
            .err("profiles", format!("no profile `{p}` in this pipeline"));
        e.hint = Some(match suggest(p, names.iter().copied()) {
            Some(s) => format!("did you mean `{s}`? (profiles: {})", names.join(", ")),
            None if names.is_empty() => "this pipeline defines no profiles".into(),
            None => format!("profiles: {}", names.join(", ")),
        });
        Err(e)
    }

    /// Phase 3: the axes, from the file, each replaced by the profile's when it has one.
    fn axes(&mut self, profile: Option<&RawProfile>) -> IndexMap<String, Vec<AxisValue>> {
        let spec = self.spec;
        let raw = &spec.raw;
        let mut axes = IndexMap::new();
        for (name, v) in &raw.axes {
            if self.full() {
                break;
            }
            if name == REP {
                self.err(
                    &format!("axes.{name}"),
                    "`rep` is reserved for repetitions: use `repeat:` on a stage",
                );
                continue;
            }
            let from_profile = profile.and_then(|p| p.axes.get(name));
            if let Some(pv) = from_profile.filter(|pv| *pv != v) {
                self.replaced.push(format!(
                    "axis `{name}` ({} → {})",
                    brief(&canonical(v)),
                    brief(&canonical(pv))
                ));
            }
            let base = match from_profile {
                Some(_) => format!(
                    "profiles.{}.axes.{name}",
                    self.ov.profile.as_deref().unwrap_or("")
                ),
                None => format!("axes.{name}"),
            };
            match parse_axis(from_profile.unwrap_or(v)) {
                Ok(vals) => {
                    *self.spent = self.spent.saturating_add(vals.len() as u64);
                    axes.insert(name.clone(), vals);
                }
                Err((sub, msg)) => {
                    let path = if sub.is_empty() {
                        base
                    } else {
                        format!("{base}.{sub}")
                    };
                    self.err(&path, format!("axis `{name}`: {msg}"));
                }
            }
        }
        axes
    }

    /// Phase 4: what the profile names (axes, stages) exists, and its `with:` are mappings.
    fn check_profile(&mut self, profile: Option<&RawProfile>) {
        let (Some(p), Some(pname)) = (profile, &self.ov.profile) else {
            return;
        };
        let spec = self.spec;
        let raw = &spec.raw;
        for name in p.axes.keys() {
            if self.full() {
                break;
            }
            if !raw.axes.contains_key(name) {
                self.err(
                    &format!("profiles.{pname}.axes.{name}"),
                    format!(
                        "profile `{pname}` sets axis `{name}`, which the pipeline does not define"
                    ),
                );
            }
        }
        for (name, w) in &p.with {
            if self.full() {
                break;
            }
            if !matches!(w, Value::Mapping(_) | Value::Null) {
                self.err(
                    &format!("profiles.{pname}.with.{name}"),
                    format!("profile `{pname}`: `with.{name}` must be a mapping of parameters"),
                );
            }
        }
        for name in p.repeat.keys().chain(p.with.keys()) {
            if self.full() {
                break;
            }
            if !raw.stages.contains_key(name) {
                let hint = suggest(name, raw.stages.keys().map(String::as_str))
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                self.err(
                    &format!("profiles.{pname}"),
                    format!("profile `{pname}` names stage `{name}`, which does not exist{hint}"),
                );
            }
        }
    }

    /// Phase 5: `--set`, after the profile, so the command line wins. Returns the seed and
    /// the parameters set (applied per stage by [`Planner::with`]).
    fn overrides(&mut self, axes: &mut IndexMap<String, Vec<AxisValue>>) -> (u64, Vec<ParamSet>) {
        let (spec, ov) = (self.spec, self.ov);
        let mut seed = spec.raw.seed;
        let mut params = Vec::new();
        for s in &ov.set {
            if self.full() {
                break;
            }
            match parse_set(s, &spec.raw, self.registry, axes) {
                Ok(SetArg::Seed(n)) => seed = n,
                Ok(SetArg::Param(p)) => params.push(p),
                Ok(SetArg::Axis(name, vals)) => {
                    self.set_axes.insert(name.clone(), s);
                    axes.insert(name, vals);
                }
                Err(msg) => self.errors.push(SpecError {
                    file: spec.path.clone(),
                    pos: None,
                    message: format!("--set {}: {msg}", brief_to(s, 200)),
                    hint: None,
                }),
            }
        }
        (seed, params)
    }

    /// Phase 6: each stage's kind and inputs, and an order in which every stage comes after
    /// what it reads.
    fn graph(&mut self) -> Result<Graph<'a>, Vec<SpecError>> {
        let spec = self.spec;
        let raw = &spec.raw;
        let registry = self.registry;
        let names: Vec<&'a str> = raw.stages.keys().map(String::as_str).collect();
        let index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut kinds = Vec::new();
        let mut inputs: Vec<Vec<usize>> = Vec::new();
        for (name, st) in &raw.stages {
            // Not `break`: `kinds` and `inputs` must have one entry per stage.
            if self.full() {
                return Err(std::mem::take(&mut self.errors));
            }
            let kind = registry.iter().find(|k| k.name == st.kind);
            if kind.is_none() {
                let all: Vec<&str> = registry.iter().map(|k| k.name).collect();
                let mut e = self.spec.err(
                    &format!("stages.{name}.kind"),
                    format!("stage `{name}`: unknown kind `{}`", st.kind),
                );
                e.hint = Some(match suggest(&st.kind, all.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`? (`dplab list` shows every kind)"),
                    None => "`dplab list` shows every kind".into(),
                });
                self.errors.push(e);
            }
            // Unknown kinds are errors, so the graph is used only when every stage has one.
            kinds.extend(kind);
            let mut ins = Vec::new();
            for input in st.input.names() {
                if self.full() {
                    break;
                }
                match index.get(input.as_str()) {
                    Some(&i) => ins.push(i),
                    None => {
                        let mut e = self.spec.err(
                            &format!("stages.{name}.input"),
                            format!("stage `{name}` reads `{input}`, which is not a stage"),
                        );
                        e.hint = suggest(&input, names.iter().copied())
                            .map(|s| format!("did you mean `{s}`?"));
                        self.errors.push(e);
                    }
                }
            }
            inputs.push(ins);
        }
        if raw.stages.is_empty() {
            self.err("stages", "the pipeline has no stages");
        }
        match topo_order(&inputs) {
            Ok(order) => {
                self.stop()?;
                Ok(Graph {
                    names,
                    kinds,
                    inputs,
                    order,
                })
            }
            Err(cycle) => {
                let path: Vec<&str> = cycle.iter().map(|&i| names[i]).collect();
                self.err(
                    &format!("stages.{}.input", path[0]),
                    format!("the stages form a cycle: {}", path.join(" → ")),
                );
                Err(std::mem::take(&mut self.errors))
            }
        }
    }

    /// Phase 7: stage `si`, whose inputs are planned (or failed: then it is skipped). Returns
    /// the stage and the repetitions its readers inherit, or `None` when it has an error.
    fn stage(
        &mut self,
        si: usize,
        env: &StageEnv<'a, '_>,
        planned: &[Option<PlannedStage>],
        reps: &[Option<u64>],
    ) -> Option<(PlannedStage, Option<u64>)> {
        let name = env.graph.names[si];
        let spec = self.spec;
        let st = &spec.raw.stages[si];
        let kind = env.graph.kinds[si];
        let composed = self.with(name, st, env.profile, env.param_sets)?;
        let (refs, own) = self.axis_refs(name, &composed, env.axes)?;
        let inputs = &env.graph.inputs[si];
        let mut ups = Vec::with_capacity(inputs.len());
        for &ii in inputs {
            // An upstream stage that failed was reported already.
            ups.push((planned[ii].as_ref()?, reps[ii]));
        }
        let shape = self.shape(name, st, kind, env.profile, env.axes, &own, &ups)?;
        self.count(name, &shape, env.axes)?;
        let depth = ups.iter().map(|(u, _)| u.depth + 1).max().unwrap_or(0);
        let sp = StageParams {
            name,
            kind,
            composed: &composed,
            refs: &refs,
            own: &own,
        };
        let (instances, columns) = self.instances(&sp, env, &shape, &ups)?;
        let stage = PlannedStage {
            name: name.to_string(),
            kind,
            inputs: Vec::new(),
            store: st.store,
            axes: shape.axes,
            gathered: shape.gathered.into_iter().collect(),
            depth,
            with: composed.with,
            repeat: shape.repeat,
            from_profile: composed.from_profile,
            from_set: composed
                .from_set
                .into_iter()
                .map(|(k, a)| (k, a.to_string()))
                .collect(),
            columns,
            instances,
        };
        Some((stage, shape.reps_out))
    }

    /// A stage's `with:` after the profile's parameters, then `--set`'s.
    fn with<'s>(
        &mut self,
        name: &str,
        st: &RawStage,
        profile: Option<&RawProfile>,
        param_sets: &'s [ParamSet],
    ) -> Option<ComposedWith<'s>> {
        let mut with = st.with.clone().unwrap_or(Value::Mapping(Mapping::new()));
        if with.is_null() {
            with = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(ref mut wmap) = with else {
            self.err(
                &format!("stages.{name}.with"),
                format!("stage `{name}`: `with` must be a mapping of parameters"),
            );
            return None;
        };
        let mut from_profile = Vec::new();
        if let Some(Value::Mapping(extra)) = profile.and_then(|p| p.with.get(name)) {
            for (k, v) in extra {
                if let Some(old) = wmap.insert(k.clone(), v.clone()).filter(|old| old != v) {
                    self.replaced.push(format!(
                        "`{name}.{}` ({} → {})",
                        k.as_str().unwrap_or("?"),
                        brief(&canonical(&old)),
                        brief(&canonical(v))
                    ));
                }
                from_profile.push(k.as_str().unwrap_or("?").to_string());
            }
        }
        let mut from_set = Vec::new();
        for ps in param_sets.iter().filter(|p| p.stage == name) {
            match ps.apply(wmap) {
                Ok(()) => from_set.push((ps.path[0].clone(), ps.arg.as_str())),
                Err(msg) => self.errors.push(SpecError {
                    file: self.spec.path.clone(),
                    pos: None,
                    message: format!("--set {}: {msg}", brief_to(&ps.arg, 200)),
                    hint: None,
                }),
            }
        }
        Some(ComposedWith {
            with,
            from_profile,
            from_set,
        })
    }

    /// The axes `with:` refers to as `$name` (with their paths in it), each an axis of the
    /// pipeline, and each `$name.field` a field of its records. An error points where the
    /// reference was written: the file, the profile's `with:`, or the `--set` argument.
    fn axis_refs(
        &mut self,
        name: &str,
        composed: &ComposedWith,
        axes: &IndexMap<String, Vec<AxisValue>>,
    ) -> Option<(Refs, BTreeSet<String>)> {
        let mut refs = Vec::new();
        collect_refs(&composed.with, &mut Vec::new(), &mut refs);
        let mut own = BTreeSet::new();
        let mut bad = false;
        // Each (axis, field) is checked once however often it is written: a check reads every
        // record, and a file may hold many of both.
        let mut checked: HashMap<(&str, &[String]), Result<(), String>> = HashMap::new();
        for Ref { path, axis, field } in &refs {
            if self.full() {
                break;
            }
            let msg = if let Some(values) = axes.get(axis) {
                own.insert(axis.clone());
                let r = checked
                    .entry((axis.as_str(), field.as_slice()))
                    .or_insert_with(|| check_field(axis, field, values));
                match r {
                    Ok(()) => continue,
                    Err(m) => format!("{m}{}", self.axis_origin(axis).note()),
                }
            } else {
                let hint = suggest(axis, axes.keys().map(String::as_str))
                    .map(|s| format!("; did you mean `${s}`?"))
                    .unwrap_or_default();
                let avail = if axes.is_empty() {
                    "the pipeline defines no axes".to_string()
                } else {
                    format!(
                        "axes: {}",
                        axes.keys().cloned().collect::<Vec<_>>().join(", ")
                    )
                };
                format!("uses `${axis}`, which is not an axis{hint} ({avail})")
            };
            let set = composed.from_set.iter().map(|(k, a)| (k.as_str(), *a));
            let e = match given_at(
                name,
                path,
                self.ov.profile.as_deref(),
                &composed.from_profile,
                set,
            ) {
                Ok(at) => self.spec.err(&at, format!("stage `{name}`: {msg}")),
                Err(arg) => SpecError {
                    file: self.spec.path.clone(),
                    pos: None,
                    message: format!("--set {}: stage `{name}`: {msg}", brief_to(arg, 200)),
                    hint: None,
                },
            };
            self.errors.push(e);
            bad = true;
        }
        (!bad).then_some((refs, own))
    }

    /// Where the values of `axis` come from: the last `--set AXIS=…`, else the profile's
    /// `axes:`, else the file's.
    fn axis_origin(&self, axis: &str) -> AxisOrigin<'a> {
        if let Some(arg) = self.set_axes.get(axis) {
            return AxisOrigin::Set(arg);
        }
        let ov: &'a Overrides = self.ov;
        let spec: &'a SpecFile = self.spec;
        match ov.profile.as_deref().and_then(|p| {
            let items = spec.raw.profiles.get(p)?.axes.get(axis)?;
            Some((p, items))
        }) {
            Some((p, items)) => AxisOrigin::File(format!("profiles.{p}.axes.{axis}"), items),
            None => match spec.raw.axes.get(axis) {
                Some(items) => AxisOrigin::File(format!("axes.{axis}"), items),
                None => AxisOrigin::Unknown,
            },
        }
    }

    /// The axes a stage varies over: its own (`$axis` in `with:`), its inputs' not gathered,
    /// and `rep` when it or an input repeats.
    #[allow(clippy::too_many_arguments)]
    fn shape(
        &mut self,
        name: &str,
        st: &RawStage,
        kind: &KindInfo,
        profile: Option<&RawProfile>,
        axes: &IndexMap<String, Vec<AxisValue>>,
        own: &BTreeSet<String>,
        ups: &[(&PlannedStage, Option<u64>)],
    ) -> Option<Shape> {
        let mut inherited = BTreeSet::new();
        // The axes every input varies over.
        let mut shared: Option<BTreeSet<&String>> = None;
        let mut rep_in: Option<u64> = None;
        for (up, rep) in ups {
            inherited.extend(up.axes.iter().cloned());
            let mine: BTreeSet<&String> = up.axes.iter().collect();
            shared = Some(match shared {
                None => mine,
                Some(s) => s.intersection(&mine).copied().collect(),
            });
            if let Some(r) = *rep {
                if rep_in.is_some_and(|x| x != r) {
                    self.err(
                        &format!("stages.{name}.input"),
                        format!("stage `{name}` joins inputs repeated a different number of times"),
                    );
                }
                rep_in = Some(r);
            }
        }
        let from_profile = profile.and_then(|p| p.repeat.get(name).copied());
        let repeat = from_profile.or(st.repeat);
        // An error about it points where it was written: the profile's `repeat:` wins.
        let repeat_at = match (from_profile, self.ov.profile.as_deref()) {
            (Some(_), Some(p)) => format!("profiles.{p}.repeat.{name}"),
            _ => format!("stages.{name}.repeat"),
        };
        if let Some(n) = repeat {
            let problem = crate::limits::check(
                &format!("stage `{name}`: repeat"),
                n,
                self.max_instances,
                "--max-instances",
            )
            .err()
            .or_else(|| (n == 0).then(|| format!("stage `{name}`: repeat must be ≥ 1")))
            .or_else(|| {
                inherited.contains(REP).then(|| {
                    format!("stage `{name}` repeats, but its input already varies over `rep`")
                })
            });
            if let Some(msg) = problem {
                self.err(&repeat_at, msg);
                return None;
            }
        }
        let mut all_axes = own.clone();
        all_axes.extend(inherited.iter().cloned());
        if repeat.is_some() {
            all_axes.insert(REP.to_string());
        }
        let gathered: BTreeSet<String> = match &st.over {
            None => match kind.gather {
                Gather::All => inherited.difference(own).cloned().collect(),
                Gather::Nothing => BTreeSet::new(),
                Gather::Unshared => inherited
                    .difference(own)
                    .filter(|a| !shared.as_ref().is_some_and(|s| s.contains(a)))
                    .cloned()
                    .collect(),
            },
            Some(Value::String(s)) if s == "all" => inherited.difference(own).cloned().collect(),
            Some(Value::Sequence(items)) => {
                let mut g = BTreeSet::new();
                for (i, it) in items.iter().enumerate() {
                    if self.full() {
                        break;
                    }
                    let a = it.as_str().unwrap_or("");
                    if !inherited.contains(a) {
                        let mut e = self.spec.err(
                            &format!("stages.{name}.over.{i}"),
                            format!(
                                "stage `{name}` gathers `{a}`, but its inputs do not vary over it"
                            ),
                        );
                        e.hint = Some(if inherited.is_empty() {
                            "its inputs vary over no axis".into()
                        } else {
                            format!(
                                "its inputs vary over: {}",
                                inherited.iter().cloned().collect::<Vec<_>>().join(", ")
                            )
                        });
                        self.errors.push(e);
                    } else if own.contains(a) {
                        self.err(
                            &format!("stages.{name}.over.{i}"),
                            format!(
                                "stage `{name}` cannot gather `{a}`: its own parameters use `${a}`"
                            ),
                        );
                    }
                    g.insert(a.to_string());
                }
                g
            }
            Some(_) => {
                self.err(
                    &format!("stages.{name}.over"),
                    "`over` is `all` or a list of axis names",
                );
                return None;
            }
        };
        let stage_axes: Vec<String> = axes
            .keys()
            .chain(std::iter::once(&REP.to_string()))
            .filter(|a| all_axes.contains(*a) && !gathered.contains(*a))
            .cloned()
            .collect();
        let rep_count = if stage_axes.iter().any(|a| a == REP) {
            repeat.or(rep_in)
        } else {
            None
        };
        let reps_out = if gathered.contains(REP) {
            None
        } else {
            repeat.or(rep_in)
        };
        Some(Shape {
            axes: stage_axes,
            gathered,
            repeat,
            rep_count,
            reps_out,
        })
    }

    /// The stage's instance count, checked (against `--max-instances`, alone and with the
    /// stages before) before any instance (or list of repetitions) exists.
    fn count(
        &mut self,
        name: &str,
        shape: &Shape,
        axes: &IndexMap<String, Vec<AxisValue>>,
    ) -> Option<()> {
        let count = shape
            .axes
            .iter()
            .map(|a| {
                if a == REP {
                    shape.rep_count.unwrap_or(1)
                } else {
                    axes[a].len() as u64
                }
            })
            .try_fold(1u64, |acc, n| acc.checked_mul(n))
            .unwrap_or(u64::MAX);
        self.total_instances = self.total_instances.saturating_add(count);
        *self.spent = self
            .spent
            .saturating_add(count.min(self.max_instances.saturating_add(1)));
        if let Err(msg) = crate::limits::check(
            &format!(
                "stage `{name}`: instances ({})",
                if shape.axes.is_empty() {
                    "no axes".to_string()
                } else {
                    shape.axes.join(" × ")
                }
            ),
            count,
            self.max_instances,
            "--max-instances",
        ) {
            self.err(&format!("stages.{name}"), msg);
            return None;
        }
        if self.total_instances > self.max_instances {
            self.err(
                &format!("stages.{name}"),
                format!(
                    "the pipeline has more than {} instances up to stage `{name}` (raise the limit with --max-instances if you mean it)",
                    self.max_instances
                ),
            );
            return None;
        }
        Some(())
    }

    /// The stage's instances: one per combination of its axes' values, each with the
    /// upstream instances it reads, its seed and its store key. Every distinct parameter set
    /// is built (checked) here once.
    fn instances(
        &mut self,
        sp: &StageParams,
        env: &StageEnv<'a, '_>,
        shape: &Shape,
        ups: &[(&PlannedStage, Option<u64>)],
    ) -> Option<(Vec<Instance>, Option<Vec<String>>)> {
        let StageParams {
            name, kind, own, ..
        } = *sp;
        // The inputs' columns where known: what the parameters name is checked against them
        // when all are, and the kind's output columns may follow from them.
        let input_cols: Vec<Option<Vec<String>>> =
            ups.iter().map(|(up, _)| up.columns.clone()).collect();
        // The output columns of every parameter set, while they agree.
        let mut declared: Option<Option<Vec<String>>> = None;
        let value_lists: Vec<Vec<AxisValue>> = shape
            .axes
            .iter()
            .map(|a| {
                if a == REP {
                    (0..shape.rep_count.unwrap_or(1))
                        .map(|r| AxisValue::Num(r as f64))
                        .collect()
                } else {
                    env.axes[a].clone()
                }
            })
            .collect();
        // Wiring: each instance reads the upstream instances that agree with it on the axes
        // it keeps. Upstream instances are indexed once by their values on those axes, so
        // wiring is linear in the instance count (a scan per instance was quadratic: a
        // 10⁶-instance sweep never finished planning).
        let wiring: Vec<(Vec<&str>, ByAxes)> = ups
            .iter()
            .map(|(up, _)| {
                let kept: Vec<&str> = up
                    .axes
                    .iter()
                    .filter(|a| !shape.gathered.contains(*a))
                    .map(String::as_str)
                    .collect();
                let mut by_key: HashMap<Vec<String>, Vec<usize>> = HashMap::new();
                for (j, u) in up.instances.iter().enumerate() {
                    if let Some(k) = project(&kept, &u.key) {
                        by_key.entry(k).or_default().push(j);
                    }
                }
                (kept, by_key)
            })
            .collect();
        let input_names: Vec<&str> = ups.iter().map(|(up, _)| up.name.as_str()).collect();
        // Each distinct parameter set is built (checked) once, and its files hashed once;
        // repetitions share it. When every axis of the stage is its own, every instance has a
        // parameter set of its own, and the map would only cost memory. Instances keep none
        // of it: their parameters are the stage's `with:` with their axis values put in
        // (`PlannedStage::params`), built again when they run (a built parameter set and its
        // canonical text per instance were a third of a 10⁶-instance plan).
        let shared = shape.axes.iter().any(|a| !own.contains(a));
        let mut built: HashMap<Vec<String>, Built> = HashMap::new();
        let mut file_hash: HashMap<PathBuf, String> = HashMap::new();
        let keys = product(&shape.axes, &value_lists);
        let mut instances = Vec::with_capacity(keys.len());
        let mut last_inputs: Option<Arc<[Box<[usize]>]>> = None;
        for key in keys {
            let own_key: Vec<String> = if shared {
                key.iter()
                    .filter(|(a, _)| own.contains(&**a))
                    .map(|(_, v)| v.canonical())
                    .collect()
            } else {
                Vec::new()
            };
            let fresh;
            let set: &Built = match built.get(&own_key).filter(|_| shared) {
                Some(b) => b,
                None => {
                    let b = self.build(sp, &key, &input_cols, &mut file_hash)?;
                    if declared.as_ref().is_none_or(|d| *d == b.columns) {
                        declared = Some(b.columns.clone());
                    } else {
                        declared = Some(None);
                    }
                    if shared {
                        built.entry(own_key).or_insert(b)
                    } else {
                        fresh = b;
                        &fresh
                    }
                }
            };
            let reads: Vec<Box<[usize]>> = wiring
                .iter()
                .map(|(kept, by_key)| {
                    project(kept, &key)
                        .and_then(|k| by_key.get(&k))
                        .map_or_else(Box::default, |js| js.clone().into_boxed_slice())
                })
                .collect();
            // Consecutive instances mostly read the same upstream instances (every
            // repetition the same dataset): they share one list.
            let reads: Arc<[Box<[usize]>]> = match &last_inputs {
                Some(l) if **l == *reads => l.clone(),
                _ => reads.into(),
            };
            last_inputs = Some(reads.clone());
            let upstream: Vec<Vec<Key>> = ups
                .iter()
                .zip(reads.iter())
                .map(|((up, _), js)| js.iter().map(|&j| up.instances[j].store_key).collect())
                .collect();
            // A kind that draws no randomness gets seed 0 (see `KindInfo::random`).
            let seed = if kind.random {
                instance_seed(env.seed, name, &key)
            } else {
                0
            };
            let store_key = store_key(&KeyParts {
                kind: kind.name,
                version: kind.version,
                stage: name,
                inputs: &input_names,
                params: &set.params,
                seed,
                axes: &key,
                upstream: &upstream,
                files: &set.files,
                sources: &set.sources,
            });
            instances.push(Instance {
                key,
                store_key,
                seed,
                inputs: reads,
            });
        }
        let columns = declared.flatten().map(|cols| {
            let mut all = shape.axes.clone();
            all.extend(cols.into_iter().filter(|c| !shape.axes.contains(c)));
            all
        });
        Some((instances, columns))
    }

    /// Builds (checks) the parameters of the instance at `key`, reads and hashes the files
    /// they name; an error is located at the parameter (or the profile's line, or the
    /// `--set` argument), with the axis its value came from.
    fn build(
        &mut self,
        sp: &StageParams,
        key: &[(Arc<str>, AxisValue)],
        input_cols: &[Option<Vec<String>>],
        file_hash: &mut HashMap<PathBuf, String>,
    ) -> Option<Built> {
        let StageParams {
            name,
            kind,
            composed,
            ..
        } = *sp;
        let spec = self.spec;
        let ov = self.ov;
        let subst = substitute(&composed.with, key);
        let params = canonical(&subst);
        let r = match (kind.build)(&subst) {
            Ok(r) => r,
            Err(pe) => {
                let e = self.param_error(sp, key, pe);
                self.errors.push(e);
                return None;
            }
        };
        let mut failed = false;
        for (param, rel) in r.files() {
            if let Err(msg) = self.input_files.add(&base_dir(spec), rel, &ov.allow_read) {
                let at = if composed.from_profile.iter().any(|k| k == param) {
                    format!(
                        "profiles.{}.with.{name}.{param}",
                        ov.profile.as_deref().unwrap_or("")
                    )
                } else {
                    format!("stages.{name}.with.{param}")
                };
                let mut e = spec.err(&at, format!("stage `{name}`: `{param}`: {msg}"));
                e.hint = Some(files::HINT.into());
                self.errors.push(e);
                failed = true;
            }
        }
        // What the parameters say about the files they name, once all of them are read.
        if !failed {
            if let Err(pe) = r.check_files(&self.input_files) {
                let e = self.param_error(sp, key, pe);
                self.errors.push(e);
                failed = true;
            }
        }
        let all_known: Option<Vec<Vec<String>>> = input_cols.iter().cloned().collect();
        if let Some(inputs) = &all_known {
            for (path, col) in r.columns_read() {
                if inputs.iter().any(|cols| cols.contains(&col)) {
                    continue;
                }
                let e = self.column_error(sp, &path, &col, inputs);
                self.errors.push(e);
                failed = true;
            }
        }
        if failed {
            return None;
        }
        let columns = r.columns_out(input_cols);
        let files = r
            .files()
            .iter()
            .map(|(_, rel)| {
                file_hash
                    .entry(rel.to_path_buf())
                    .or_insert_with(|| {
                        self.input_files
                            .get(rel)
                            .map_or_else(String::new, |b| hex(&Sha256::digest(b)))
                    })
                    .clone()
            })
            .collect();
        Some(Built {
            params,
            files,
            sources: r.sources(),
            columns,
        })
    }

    /// A parameter (at `path` in `with:`) names `col`, which no input has: located at the
    /// parameter (in the file, the profile, or the `--set` argument), with the nearest column.
    fn column_error(
        &self,
        sp: &StageParams,
        path: &str,
        col: &str,
        inputs: &[Vec<String>],
    ) -> SpecError {
        let StageParams {
            name,
            kind,
            composed,
            ..
        } = *sp;
        let mut all: Vec<&str> = Vec::new();
        for c in inputs.iter().flatten() {
            if !all.contains(&c.as_str()) {
                all.push(c);
            }
        }
        let message = format!(
            "stage `{name}` ({}): `{path}`: {}",
            kind.name,
            no_column(col, &all)
        );
        let set = composed.from_set.iter().map(|(k, a)| (k.as_str(), *a));
        match given_at(
            name,
            path,
            self.ov.profile.as_deref(),
            &composed.from_profile,
            set,
        ) {
            Err(arg) => SpecError {
                file: self.spec.path.clone(),
                pos: None,
                message: format!("--set {}: {message}", brief_to(arg, 200)),
                hint: None,
            },
            Ok(at) => {
                let mut e = self.spec.err(&at, message);
                e.pos = Some(self.spec.locs.value(&at));
                e
            }
        }
    }

    /// A parameter that does not pass its kind's checks, located.
    fn param_error(
        &self,
        sp: &StageParams,
        key: &[(Arc<str>, AxisValue)],
        pe: ParamError,
    ) -> SpecError {
        let StageParams {
            name,
            kind,
            composed,
            refs,
            own,
        } = *sp;
        let spec = self.spec;
        let sub = pe.path.join(".");
        // The key the error is about: its path, or the unknown key named.
        let top = pe.path.first().cloned().or_else(|| {
            pe.message
                .strip_prefix("unknown key `")
                .and_then(|r| r.split('`').next())
                .map(str::to_string)
        });
        let path = match (&top, &self.ov.profile) {
            (Some(k), Some(pname)) if composed.from_profile.contains(k) => {
                format!("profiles.{pname}.with.{name}.{k}")
            }
            _ if sub.is_empty() => format!("stages.{name}.with"),
            _ => format!("stages.{name}.with.{sub}"),
        };
        let own_label = label(
            &key.iter()
                .filter(|(a, _)| own.contains(&**a))
                .cloned()
                .collect::<Vec<_>>(),
        );
        let at = if own_label.is_empty() {
            String::new()
        } else {
            format!(" (at {own_label})")
        };
        let set_arg = top
            .as_ref()
            .and_then(|k| composed.from_set.iter().rev().find(|(p, _)| p == k));
        let mut e = match set_arg {
            Some((_, arg)) => SpecError {
                file: spec.path.clone(),
                pos: None,
                message: format!(
                    "--set {}: stage `{name}` ({}){at}: {}",
                    brief_to(arg, 200),
                    kind.name,
                    pe.message
                ),
                hint: None,
            },
            None => spec.err(
                &path,
                format!("stage `{name}` ({}){at}: {}", kind.name, pe.message),
            ),
        };
        let about_value = !pe.message.starts_with("unknown key");
        if let Some(Ref { axis, field, .. }) = refs.iter().find(|r| r.path == sub && about_value) {
            // A record's field: at the field of the record of that name where the axis was
            // written (the file or the profile), or the `--set` argument that gave it.
            let record = match key.iter().find(|(a, _)| **a == **axis) {
                Some((_, AxisValue::Record(r))) if !field.is_empty() => Some(&**r),
                _ => None,
            };
            let what = match record {
                Some(r) => format!(
                    "field `{}` of record `{}` of axis `{axis}`",
                    field.join("."),
                    r.name
                ),
                None => format!("axis `{axis}`"),
            };
            let at = match self.axis_origin(axis) {
                AxisOrigin::Set(arg) => {
                    e.hint = Some(format!(
                        "the value comes from {what}, as `--set {}` gives it",
                        brief_to(arg, 80)
                    ));
                    return e;
                }
                AxisOrigin::File(base, items) => {
                    let item = record.and_then(|r| {
                        items.as_sequence()?.iter().position(|it| {
                            it.get("name").and_then(Value::as_str) == Some(r.name.as_str())
                        })
                    });
                    match item {
                        Some(i) => format!("{base}.{i}.{}", field.join(".")),
                        None => base,
                    }
                }
                AxisOrigin::Unknown => format!("axes.{axis}"),
            };
            let apos = spec.locs.find(&at);
            e.hint = Some(format!(
                "the value comes from {what} (line {}, column {})",
                apos.line, apos.col
            ));
        } else if kind
            .param_names()
            .iter()
            .any(|p| pe.message.contains(p.as_str()))
        {
            e.hint = Some(format!(
                "`dplab list {}` describes its parameters",
                kind.name
            ));
        }
        e
    }
}

/// Parses one `--set` argument: `seed=N`, `STAGE.PARAM[.KEY…]=VALUE` (any `with:` parameter,
/// a YAML value) or `AXIS=VALUES`. `axes` are the axes so far (an earlier `--set` may have
/// replaced one). The error is the message after `--set ARG: `.
fn parse_set(
    s: &str,
    raw: &RawPipeline,
    registry: &[KindInfo],
    axes: &IndexMap<String, Vec<AxisValue>>,
) -> Result<SetArg, String> {
    let Some((name, values)) = s.split_once('=') else {
        return Err("expected AXIS=VALUES (--set 'eps=[0.1, 1]'), STAGE.PARAM=VALUE (--set noisy.samples=500) or seed=N".into());
    };
    let name = name.trim();
    if let Some((stage, path)) = name.split_once('.') {
        let Some(st) = raw.stages.get(stage) else {
            let hint = if axes.contains_key(stage) || raw.axes.contains_key(stage) {
                format!("; `{stage}` is an axis: `--set '{stage}=[…]'` gives all its values (a record's fields with them)")
            } else {
                suggest(stage, raw.stages.keys().map(String::as_str))
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default()
            };
            return Err(format!("no stage `{stage}` in this pipeline{hint}"));
        };
        let path: Vec<String> = path.split('.').map(str::to_string).collect();
        // Each key is a level of nested mappings that planning walks recursively.
        const MAX_DEPTH: usize = 16;
        if path.len() > MAX_DEPTH {
            return Err(format!(
                "it nests {} keys deep: give at most {MAX_DEPTH} (STAGE.PARAM.KEY…)",
                path.len()
            ));
        }
        if path.iter().any(String::is_empty) {
            return Err(format!(
                "`{name}` has an empty key: give STAGE.PARAM or STAGE.PARAM.KEY"
            ));
        }
        if let Some(kind) = registry.iter().find(|k| k.name == st.kind) {
            let names = kind.param_names();
            if !names.contains(&path[0]) {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                let hint = match suggest(&path[0], names.iter().copied()) {
                    Some(s) => format!("; did you mean `{stage}.{s}`?"),
                    None => String::new(),
                };
                return Err(format!(
                    "stage `{stage}` ({}) has no parameter `{}`{hint} (its parameters: {}; `dplab list {}` describes them)",
                    kind.name,
                    path[0],
                    names.join(", "),
                    kind.name
                ));
            }
        }
        return match serde_yaml_ng::from_str::<Value>(values) {
            Ok(value) => Ok(SetArg::Param(ParamSet {
                arg: s.to_string(),
                stage: stage.to_string(),
                path,
                value,
            })),
            Err(e) => Err(format!("the value is not YAML: {e}")),
        };
    }
    if name == "seed" && !raw.axes.contains_key(name) {
        return match values.trim().parse::<u64>() {
            Ok(n) => Ok(SetArg::Seed(n)),
            Err(_) => Err(format!(
                "the seed `{}` is not a whole number from 0 to {}",
                values.trim(),
                u64::MAX
            )),
        };
    }
    if !axes.contains_key(name) && !raw.axes.contains_key(name) {
        let candidates = raw
            .axes
            .keys()
            .map(String::as_str)
            .chain(std::iter::once("seed"));
        let hint = suggest(name, candidates)
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        return Err(format!(
            "no axis `{name}` in this pipeline{hint} (for a stage's parameter give STAGE.PARAM=VALUE)"
        ));
    }
    serde_yaml_ng::from_str::<Value>(values)
        .map_err(|e| e.to_string())
        .and_then(|v| parse_axis(&v).map_err(|(_, msg)| msg))
        .map(|vals| SetArg::Axis(name.to_string(), vals))
}

/// The directory of the pipeline file: relative paths in parameters resolve against it.
fn base_dir(spec: &SpecFile) -> PathBuf {
    match spec.path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Lower-case hex digits of `bytes` (a formatted string per byte cost a tenth of a large
/// sweep's time: every instance has a key).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// Kahn's algorithm in file order (of the stages whose inputs are all done, the first in the
/// file goes next); on a cycle, returns one cycle's stages (first repeated last).
///
/// Linear up to the heap's logarithm: the stages ready to go are kept in a min-heap and each
/// stage counts its unfinished inputs. (A rescan from the first stage at every step was
/// quadratic: 150 000 stages, a 4 MiB file, took 6 s, and again for every profile.)
fn topo_order(inputs: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = inputs.len();
    let mut waiting: Vec<usize> = inputs.iter().map(Vec::len).collect();
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ins) in inputs.iter().enumerate() {
        for &j in ins {
            readers[j].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| waiting[i] == 0).map(Reverse).collect();
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        done[i] = true;
        order.push(i);
        for &r in &readers[i] {
            waiting[r] -= 1;
            if waiting[r] == 0 {
                ready.push(Reverse(r));
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Follow unfinished inputs from the first unfinished stage until a stage repeats: that
    // is a cycle.
    let mut on_path: Vec<Option<usize>> = vec![None; n];
    let mut path = vec![(0..n).find(|&i| !done[i]).expect("some stage is left")];
    on_path[path[0]] = Some(0);
    loop {
        let cur = *path.last().expect("non-empty");
        let nxt = inputs[cur]
            .iter()
            .copied()
            .find(|&j| !done[j])
            .expect("blocked stage has an unfinished input");
        if let Some(p) = on_path[nxt] {
            let mut cycle: Vec<usize> = path[p..].iter().rev().copied().collect();
            cycle.push(cycle[0]);
            return Err(cycle);
        }
        on_path[nxt] = Some(path.len());
        path.push(nxt);
    }
}

/// A reference's path longer than this keeps only its leading keys (an error about it then
/// points at that ancestor). Real paths inside `with:` are a few dozen bytes.
const MAX_REF_PATH: usize = 256;

/// `$name` and `$name.field…` strings inside `with`, with their dotted paths. `path` holds
/// the keys above `v`; a path is joined only for a reference, not for every node: joining at
/// every node copied each ancestor's key into every descendant (a 2 MiB key over 300 000
/// numbers: 29 s).
fn collect_refs(v: &Value, path: &mut Vec<String>, out: &mut Refs) {
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
fn ref_path(keys: &[String]) -> String {
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
fn axis_ref(s: &str) -> Option<(&str, std::str::Split<'_, char>)> {
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
fn unread_fields(plan: &Plan) -> Vec<String> {
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
fn check_field(axis: &str, field: &[String], values: &[AxisValue]) -> Result<(), String> {
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
                Some(AxisValue::Num(_)) => "number",
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

/// What the store key needs of a parameter set: its canonical text, the sha256 of each file
/// it names, and its sources (see [`crate::kind::Stage::sources`]).
struct Built {
    params: String,
    files: Vec<String>,
    sources: Vec<String>,
    /// The kind's output columns for these parameters (see [`PlannedStage::columns`]).
    columns: Option<Vec<String>>,
}

/// `--set STAGE.PARAM[.KEY…]=VALUE`.
#[derive(Debug)]
struct ParamSet {
    arg: String,
    stage: String,
    path: Vec<String>,
    value: Value,
}

impl ParamSet {
    /// Puts the value at its path in a stage's `with:`, making mappings on the way.
    fn apply(&self, with: &mut Mapping) -> Result<(), String> {
        let (last, parents) = self.path.split_last().expect("a path has a key");
        let mut at = with;
        for (i, k) in parents.iter().enumerate() {
            let slot = at
                .entry(Value::String(k.clone()))
                .or_insert_with(|| Value::Mapping(Mapping::new()));
            if slot.is_null() {
                *slot = Value::Mapping(Mapping::new());
            }
            at = match slot {
                Value::Mapping(m) => m,
                other => {
                    return Err(format!(
                        "`{}.{}` is {}, not a mapping: it has no key `{}`",
                        self.stage,
                        self.path[..=i].join("."),
                        describe(other),
                        self.path[i + 1]
                    ))
                }
            };
        }
        at.insert(Value::String(last.clone()), self.value.clone());
        Ok(())
    }
}

/// `text` cut to a length a log line can hold.
fn brief(text: &str) -> String {
    brief_to(text, 40)
}

use crate::text::brief as brief_to;

/// What kind of YAML value `v` is, for messages.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(_) => "a tagged value".into(),
    }
}

/// Upstream instances (indices) by their values on the axes a reader keeps.
type ByAxes = HashMap<Vec<String>, Vec<usize>>;

/// An instance's values on the axes `kept`, as text (`None` if it lacks one).
fn project(kept: &[&str], key: &[(Arc<str>, AxisValue)]) -> Option<Vec<String>> {
    kept.iter()
        .map(|a| {
            key.iter()
                .find(|(b, _)| &**b == *a)
                .map(|(_, v)| v.canonical())
        })
        .collect()
}

/// Everything an instance's output is a function of.
#[derive(Clone, Copy)]
pub struct KeyParts<'a> {
    pub kind: &'a str,
    pub version: u32,
    /// The stage's name and its inputs' names: a kind may use them in what it writes
    /// (messages, labels), so two stages share work only under the same names.
    pub stage: &'a str,
    pub inputs: &'a [&'a str],
    pub params: &'a str,
    pub seed: u128,
    /// The axis values, which become columns of its frame.
    pub axes: &'a [(Arc<str>, AxisValue)],
    /// The store keys of the upstream instances it reads, per input, in order.
    pub upstream: &'a [Vec<Key>],
    /// sha256 of each file its parameters name.
    pub files: &'a [String],
    /// See [`crate::kind::Stage::sources`].
    pub sources: &'a [String],
}

/// The store key of an instance: sha256 over a length-prefixed encoding of its [`KeyParts`]
/// (prefixes, so no two different part lists encode alike). The pipeline's name is not part
/// of it: identical work in two pipelines is one entry.
pub fn store_key(p: &KeyParts) -> Key {
    let mut h = Sha256::new();
    let mut put = |tag: &str, bytes: &[u8]| {
        h.update(tag.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    put("dplab-instance", b"1");
    put("kind", p.kind.as_bytes());
    put("version", &p.version.to_le_bytes());
    put("stage", p.stage.as_bytes());
    for i in p.inputs {
        put("input", i.as_bytes());
    }
    put("params", p.params.as_bytes());
    put("seed", &p.seed.to_le_bytes());
    for (a, v) in p.axes {
        put("axis", a.as_bytes());
        put("value", v.canonical().as_bytes());
    }
    for (k, keys) in p.upstream.iter().enumerate() {
        put("upstream", &(k as u64).to_le_bytes());
        for key in keys {
            // As hex digits: the encoding keys had when they were strings, so stores and
            // the golden lock stay valid.
            put("key", &key.hex_digits());
        }
    }
    for f in p.files {
        put("file", f.as_bytes());
    }
    for s in p.sources {
        put("source", s.as_bytes());
    }
    Key(h.finalize().into())
}

/// `v` as canonical text: mappings with keys sorted, integers as digits, other numbers in
/// shortest round-trip form, strings JSON-quoted. Equal parameters give equal text.
pub fn canonical(v: &Value) -> String {
    fn go(v: &Value, out: &mut String) {
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    out.push_str(&i.to_string());
                } else if let Some(u) = n.as_u64() {
                    out.push_str(&u.to_string());
                } else {
                    let x = n.as_f64().unwrap_or(f64::NAN);
                    if x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 {
                        out.push_str(&(x as i64).to_string());
                    } else {
                        out.push_str(&format!("{x:?}"));
                    }
                }
            }
            Value::String(s) => {
                out.push_str(&serde_json::to_string(s).unwrap_or_default());
            }
            Value::Sequence(items) => {
                out.push('[');
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    go(it, out);
                }
                out.push(']');
            }
            Value::Mapping(m) => {
                let mut entries: Vec<(String, String)> = m
                    .iter()
                    .map(|(k, v)| {
                        let (mut ks, mut vs) = (String::new(), String::new());
                        go(k, &mut ks);
                        go(v, &mut vs);
                        (ks, vs)
                    })
                    .collect();
                entries.sort();
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(k);
                    out.push(':');
                    out.push_str(v);
                }
                out.push('}');
            }
            Value::Tagged(t) => {
                out.push_str(&format!("!{}", t.tag));
                go(&t.value, out);
            }
        }
    }
    let mut out = String::new();
    go(v, &mut out);
    out
}

/// `with` with every `$axis` replaced by this instance's value, and every `$axis.field` by
/// that field of its record. A field this record lacks leaves its key out of a mapping (the
/// parameter's default applies) and is null in a list.
fn substitute(v: &Value, key: &[(Arc<str>, AxisValue)]) -> Value {
    resolve(v, key).unwrap_or(Value::Null)
}

/// [`substitute`]; `None` for a field the record lacks.
fn resolve(v: &Value, key: &[(Arc<str>, AxisValue)]) -> Option<Value> {
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

/// The cartesian product of the axes' values, first axis varying slowest.
fn product(names: &[String], values: &[Vec<AxisValue>]) -> Vec<AxisKey> {
    let mut out = vec![Vec::new()];
    for (i, (name, vals)) in names.iter().zip(values).enumerate() {
        let name: Arc<str> = name.as_str().into();
        let mut next = Vec::with_capacity(out.len() * vals.len());
        for prefix in &out {
            for v in vals {
                let mut k = Vec::with_capacity(names.len());
                k.extend(prefix.iter().cloned());
                let _ = i;
                k.push((name.clone(), v.clone()));
                next.push(k);
            }
        }
        out = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order as it was first written: rescan from the first stage at every step.
    fn topo_order_by_rescan(inputs: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
        let n = inputs.len();
        let mut done = vec![false; n];
        let mut order = Vec::with_capacity(n);
        while order.len() < n {
            match (0..n).find(|&i| !done[i] && inputs[i].iter().all(|&j| done[j])) {
                Some(i) => {
                    done[i] = true;
                    order.push(i);
                }
                None => {
                    let mut path = vec![(0..n).find(|&i| !done[i]).unwrap()];
                    loop {
                        let cur = *path.last().unwrap();
                        let nxt = inputs[cur].iter().copied().find(|&j| !done[j]).unwrap();
                        if let Some(p) = path.iter().position(|&x| x == nxt) {
                            let mut cycle: Vec<usize> = path[p..].iter().rev().copied().collect();
                            cycle.push(cycle[0]);
                            return Err(cycle);
                        }
                        path.push(nxt);
                    }
                }
            }
        }
        Ok(order)
    }

    #[test]
    fn topological_order_is_file_order_and_cycles_are_the_same() {
        // Random graphs, with repeated inputs, self-loops and cycles: the same answer as the
        // rescanning version.
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |m: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % m as u64) as usize
        };
        for _ in 0..2000 {
            let n = 1 + next(12);
            let back_edges = next(3) == 0;
            let inputs: Vec<Vec<usize>> = (0..n)
                .map(|i| {
                    (0..next(4))
                        .map(|_| {
                            if back_edges || i == 0 {
                                next(n)
                            } else {
                                next(i)
                            }
                        })
                        .collect()
                })
                .collect();
            assert_eq!(
                topo_order(&inputs),
                topo_order_by_rescan(&inputs),
                "{inputs:?}"
            );
        }
        assert_eq!(topo_order(&[vec![1], vec![]]), Ok(vec![1, 0]));
        assert_eq!(topo_order(&[vec![1], vec![0]]), Err(vec![1, 0, 1]));
        assert_eq!(topo_order(&[vec![0]]), Err(vec![0, 0]));
    }

    #[test]
    fn references_are_found_with_their_paths_in_linear_time() {
        let with: Value =
            serde_yaml_ng::from_str("{epsilon: $eps, hlines: [{y: 1}, {y: $c}], n: 3}").unwrap();
        let mut refs = Vec::new();
        collect_refs(&with, &mut Vec::new(), &mut refs);
        let r = |path: &str, axis: &str| Ref {
            path: path.into(),
            axis: axis.into(),
            field: Vec::new(),
        };
        assert_eq!(refs, [r("epsilon", "eps"), r("hlines.1.y", "c")]);
        // A 2 MiB key over 300 000 values, one of them a reference: the path is cut.
        let long = "k".repeat(2 << 20);
        let mut items = vec![Value::Number(0.into()); 300_000];
        items[7] = Value::String("$eps".into());
        let mut m = Mapping::new();
        m.insert(Value::String(long), Value::Sequence(items));
        let t0 = std::time::Instant::now();
        let mut refs = Vec::new();
        collect_refs(&Value::Mapping(m), &mut Vec::new(), &mut refs);
        assert_eq!(refs.len(), 1);
        assert_eq!((refs[0].path.as_str(), refs[0].axis.as_str()), ("…", "eps"));
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t0.elapsed()
        );
    }

    #[test]
    fn a_long_chain_is_ordered_in_linear_time() {
        // Each stage reads the next one: the last is first. 200 000 stages.
        let n = 200_000;
        let inputs: Vec<Vec<usize>> = (0..n)
            .map(|i| if i + 1 < n { vec![i + 1] } else { vec![] })
            .collect();
        let t0 = std::time::Instant::now();
        let order = topo_order(&inputs).unwrap();
        assert_eq!(order[0], n - 1);
        assert_eq!(order[n - 1], 0);
        // The same chain closed into a cycle.
        let mut cyclic = inputs;
        cyclic[n - 1] = vec![0];
        assert_eq!(topo_order(&cyclic).unwrap_err().len(), n + 1);
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t0.elapsed()
        );
    }

    // ---- The phases of planning, one by one, with two kinds of the tests' own (the engine
    // knows no real kind). ----

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Num {
        /// a number
        #[serde(default)]
        x: f64,
    }

    impl crate::kind::Stage for Num {
        fn validate(&self) -> Result<(), ParamError> {
            if self.x >= 0.0 {
                Ok(())
            } else {
                Err(ParamError::at("x", format!("x = {} is below 0", self.x)))
            }
        }
        fn run(&self, _: &mut crate::kind::Ctx) -> anyhow::Result<crate::kind::Output> {
            Ok(polars::prelude::DataFrame::empty().into())
        }
    }

    /// Names a file and a column it must have (its first line is a CSV header).
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Paper {
        /// a file
        paper: PathBuf,
        /// a column of it
        join: String,
    }

    impl crate::kind::Stage for Paper {
        fn files(&self) -> Vec<(&'static str, &std::path::Path)> {
            vec![("paper", &self.paper)]
        }
        fn check_files(&self, files: &dyn crate::kind::FileSource) -> Result<(), ParamError> {
            let text = String::from_utf8_lossy(files.file(&self.paper).unwrap_or_default());
            let header: Vec<&str> = text.lines().next().unwrap_or("").split(',').collect();
            if header.contains(&self.join.as_str()) {
                Ok(())
            } else {
                Err(ParamError::at(
                    "join",
                    format!("no column `{}` in {}", self.join, self.paper.display()),
                ))
            }
        }
        fn run(&self, _: &mut crate::kind::Ctx) -> anyhow::Result<crate::kind::Output> {
            Ok(polars::prelude::DataFrame::empty().into())
        }
    }

    static KINDS: &[KindInfo] = &[
        KindInfo {
            name: "t.paper",
            version: 1,
            random: false,
            summary: "reads a paper table",
            params: crate::kind::params::<Paper>,
            gather: Gather::All,
            build: crate::kind::build::<Paper>,
        },
        KindInfo {
            name: "t.each",
            version: 1,
            random: true,
            summary: "one instance per axis value",
            params: crate::kind::params::<Num>,
            gather: Gather::Nothing,
            build: crate::kind::build::<Num>,
        },
        KindInfo {
            name: "t.all",
            version: 1,
            random: false,
            summary: "gathers every axis",
            params: crate::kind::params::<Num>,
            gather: Gather::All,
            build: crate::kind::build::<Num>,
        },
    ];

    fn file(body: &str) -> SpecFile {
        let text = format!(
            "name: t\ntitle: T\nsource: {{paper: p, item: i}}\ndescription: d\nseed: 1\n{body}"
        );
        super::super::spec::parse(std::path::Path::new("t.yaml"), text).unwrap()
    }

    /// Runs `f` on a planner of `spec` under `ov`.
    fn with_planner<'a, R>(
        spec: &'a SpecFile,
        ov: &'a Overrides,
        f: impl FnOnce(&mut Planner<'a>) -> R,
    ) -> R {
        let mut p = Planner {
            spec,
            ov,
            registry: KINDS,
            max_instances: 1000,
            // A few bytes per test, so that what a phase returns may borrow the planner's 'a.
            spent: Box::leak(Box::new(0)),
            errors: Vec::new(),
            replaced: Vec::new(),
            set_axes: HashMap::new(),
            input_files: InputFiles::default(),
            total_instances: 0,
        };
        f(&mut p)
    }

    fn messages(errors: &[SpecError]) -> Vec<String> {
        errors.iter().map(|e| e.message.clone()).collect()
    }

    const SWEEP: &str = "axes: {eps: [0.5, 1], c: [1, 2, 3]}
stages:
  a: {kind: t.each, with: {x: $eps}, repeat: 2}
  b: {kind: t.each, input: a, with: {x: $c}}
  g: {kind: t.all, input: b, over: [rep]}
  h: {kind: t.all, input: g}
profiles:
  ci: {axes: {eps: [0.5]}, with: {a: {x: 2}}}
";

    fn yaml(s: &str) -> Value {
        serde_yaml_ng::from_str(s).unwrap()
    }

    const RECORDS: &str = "axes:
  m:
    - {name: a, x: 2, deep: {y: 3}}
    - {name: b, list: [1]}
  eps: [1, 2]
stages:
  s: {kind: t.each, with: {x: $m.x}}
  d: {kind: t.each, with: {x: $m.deep.y}}
  l: {kind: t.each, with: {x: $eps}}
";

    #[test]
    fn a_record_axis_gives_stages_its_fields_and_frames_its_name() {
        let plan = plan(&file(RECORDS), &Overrides::default(), KINDS).unwrap();
        let params = |stage: usize| -> Vec<Value> {
            let s = &plan.stages[stage];
            s.instances.iter().map(|i| s.params(i)).collect()
        };
        // A field the record lacks leaves the parameter out: its default applies.
        assert_eq!(params(0), [yaml("{x: 2}"), yaml("{}")]);
        assert_eq!(params(1), [yaml("{x: 3}"), yaml("{}")]);
        let s = &plan.stages[0];
        assert_eq!(s.instances[0].label(), "m=a");
        assert_eq!(s.axes, ["m"]);
        // The name is the value: seeds follow it, not the fields, so editing a record's
        // settings reruns the stages that read them (their parameters change), with the
        // same randomness.
        let edited = plan_of(&RECORDS.replace("x: 2", "x: 5"));
        assert_eq!(edited.stages[0].instances[0].seed, s.instances[0].seed);
        assert_ne!(
            edited.stages[0].canonical_params(&edited.stages[0].instances[0]),
            s.canonical_params(&s.instances[0])
        );
    }

    #[test]
    fn a_record_field_no_stage_reads_is_named_with_the_nearest_read_one() {
        let plan = plan_of(&RECORDS.replace("{name: b, list: [1]}", "{name: b, xx: 3, note: hi}"));
        assert_eq!(
            unread_fields(&plan),
            [
                "axis `m`: no stage reads the field `xx` of record `b` (as `$m.xx`); did you mean `x`?",
                "axis `m`: no stage reads the field `note` of record `b` (as `$m.note`)"
            ]
        );
        assert!(
            unread_fields(&plan_of(RECORDS)).len() == 1,
            "`list` is read by none"
        );
    }

    fn plan_of(body: &str) -> Plan {
        plan(&file(body), &Overrides::default(), KINDS).unwrap()
    }

    #[test]
    fn a_field_reference_is_checked_against_the_records_before_anything_runs() {
        let errors = |with: &str| -> Vec<SpecError> {
            let body = RECORDS.replace("{x: $m.x}", with);
            match plan(&file(&body), &Overrides::default(), KINDS) {
                Ok(_) => panic!("{with} planned"),
                Err(e) => e,
            }
        };
        let e = errors("{x: $m.xx}");
        assert_eq!(
            e[0].message,
            "stage `s`: `$m.xx`: no record of axis `m` has it; did you mean `$m.x`? (fields: deep, list, name, x)"
        );
        assert_eq!(
            e[0].pos.map(|p| p.line),
            Some(12),
            "located at the reference"
        );
        let e = errors("{x: $eps.x}");
        assert!(
            e[0].message.contains(
                "`$eps.x` reads a field, but axis `eps` holds number values, not records"
            ),
            "{e:?}"
        );
        // A field of the wrong type is the kind's error, with where the value came from.
        let e = errors("{x: $m.list}");
        assert!(e[0].message.contains("(at m=b)"), "{e:?}");
        assert!(
            e[0].hint
                .as_deref()
                .unwrap_or("")
                .starts_with("the value comes from field `list` of record `b` of axis `m` (line 9"),
            "{e:?}"
        );
    }

    #[test]
    fn a_record_error_points_where_the_reference_or_the_record_was_written() {
        let body = "axes:
  m:
    - {name: a, n: 5}
stages:
  s: {kind: t.each, with: {x: $m.n}}
profiles:
  typo: {with: {s: {x: $m.nn}}}
  neg: {axes: {m: [{name: a, n: -1}]}}
";
        let errors = |profile: Option<&str>, set: &[&str]| -> Vec<SpecError> {
            let ov = Overrides {
                profile: profile.map(str::to_string),
                set: set.iter().map(|s| s.to_string()).collect(),
                ..Overrides::default()
            };
            match plan(&file(body), &ov, KINDS) {
                Ok(_) => panic!("{profile:?} {set:?} planned"),
                Err(e) => e,
            }
        };
        // A reference the profile wrote: at the profile's line.
        let e = errors(Some("typo"), &[]);
        assert_eq!(e[0].pos.map(|p| p.line), Some(12), "{e:?}");
        // One a --set wrote: named, with no line of the file.
        let e = errors(None, &["s.x=$m.nn"]);
        assert!(
            e[0].message
                .starts_with("--set s.x=$m.nn: stage `s`: `$m.nn`"),
            "{e:?}"
        );
        assert_eq!(e[0].pos, None);
        // A bad value from the profile's record: the hint points at the profile's record.
        let e = errors(Some("neg"), &[]);
        assert!(
            e[0].hint
                .as_deref()
                .unwrap_or("")
                .contains("of axis `m` (line 13"),
            "{e:?}"
        );
        let e = errors(None, &["m=[{name: a, n: -1}]"]);
        assert!(
            e[0].hint
                .as_deref()
                .unwrap_or("")
                .ends_with("as `--set m=[{name: a, n: -1}]` gives it"),
            "{e:?}"
        );
        // An axis the --set made plain text: the reference's error says so.
        let e = errors(None, &["m=[a]"]);
        assert!(
            e[0].message
                .ends_with("(the axis as `--set m=[a]` gives it)"),
            "{e:?}"
        );
    }

    #[test]
    fn names_that_would_be_unsafe_paths_or_collide_are_all_reported() {
        let spec = file("axes: {\"a/b\": [1]}\nstages: {S: {kind: t.each}, s: {kind: t.each}}\n");
        let errors = with_planner(&spec, &Overrides::default(), |p| {
            p.check_names();
            p.errors.clone()
        });
        let m = messages(&errors);
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m[0].contains("`S` and `s` differ only in case"), "{m:?}");
        assert!(errors[1].pos.is_some(), "located: {errors:?}");
    }

    #[test]
    fn a_profile_replaces_axes_and_says_what_it_replaced() {
        let spec = file(SWEEP);
        let ov = Overrides {
            profile: Some("ci".into()),
            ..Overrides::default()
        };
        with_planner(&spec, &ov, |p| {
            let profile = p.profile().unwrap();
            let axes = p.axes(profile);
            assert_eq!(axes["eps"], [AxisValue::Num(0.5)]);
            assert_eq!(axes["c"].len(), 3);
            assert_eq!(p.replaced, ["axis `eps` ([0.5,1] → [0.5])"]);
            assert!(p.errors.is_empty());
        });
        let wrong = Overrides {
            profile: Some("cj".into()),
            ..Overrides::default()
        };
        let e = with_planner(&spec, &wrong, |p| p.profile().unwrap_err());
        assert_eq!(e.message, "no profile `cj` in this pipeline");
        assert!(e.hint.unwrap().starts_with("did you mean `ci`?"));
    }

    #[test]
    fn set_arguments_parse_into_seeds_parameters_and_axes() {
        let spec = file(SWEEP);
        let axes: IndexMap<String, Vec<AxisValue>> = IndexMap::new();
        let parse = |s: &str| parse_set(s, &spec.raw, KINDS, &axes);
        assert!(matches!(parse("seed=7"), Ok(SetArg::Seed(7))));
        assert!(
            matches!(parse("eps=[1, 2]"), Ok(SetArg::Axis(a, v)) if a == "eps" && v.len() == 2)
        );
        match parse("b.x=3") {
            Ok(SetArg::Param(p)) => {
                assert_eq!(
                    (p.stage.as_str(), p.path.as_slice()),
                    ("b", &["x".to_string()][..])
                );
                assert_eq!(p.value, Value::Number(3.into()));
            }
            other => panic!("{other:?}"),
        }
        let err = |s: &str| parse(s).unwrap_err();
        assert!(err("seed=-1").contains("not a whole number from 0 to"));
        assert!(err("bb.x=1").contains("no stage `bb` in this pipeline; did you mean `b`?"));
        assert!(err("b.xx=1").contains("has no parameter `xx`; did you mean `b.x`?"));
        assert!(err("b..x=1").contains("has an empty key"));
        assert!(err("epss=[1]").contains("no axis `epss` in this pipeline; did you mean `eps`?"));
        assert!(err("b.x=[1").contains("the value is not YAML"));
        assert!(err("eps").starts_with("expected AXIS=VALUES"));
    }

    #[test]
    fn the_graph_orders_stages_and_names_a_cycle() {
        let spec = file(SWEEP);
        let ov = Overrides::default();
        let g = with_planner(&spec, &ov, |p| p.graph().ok().unwrap());
        assert_eq!(g.names, ["a", "b", "g", "h"]);
        assert_eq!(g.order, [0, 1, 2, 3]);
        assert_eq!(g.inputs, [vec![], vec![0], vec![1], vec![2]]);
        let cyclic = file("stages: {a: {kind: t.each, input: b}, b: {kind: t.eachh, input: a}}\n");
        let errors = with_planner(&cyclic, &Overrides::default(), |p| p.graph().err().unwrap());
        let m = messages(&errors);
        assert!(m[0].contains("unknown kind `t.eachh`"), "{m:?}");
        assert_eq!(m[1], "the stages form a cycle: b → a → b");
    }

    #[test]
    fn shapes_inherit_axes_and_repetitions_and_gather_what_they_are_told() {
        let spec = file(SWEEP);
        let plan = plan_one(&spec, &Overrides::default(), KINDS, 1000, &mut 0)
            .unwrap_or_else(|e| panic!("{:?}", messages(&e)));
        let shape = |i: usize| {
            let s = &plan.stages[i];
            (s.axes.clone(), s.gathered.clone(), s.instances.len())
        };
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // a: its own axis and its repetitions; b: a's and its own; g gathers rep; h (a kind
        // that gathers by default) gathers everything left.
        assert_eq!(shape(0), (v(&["eps", "rep"]), v(&[]), 4));
        assert_eq!(shape(1), (v(&["eps", "c", "rep"]), v(&[]), 12));
        assert_eq!(shape(2), (v(&["eps", "c"]), v(&["rep"]), 6));
        assert_eq!(shape(3), (v(&[]), v(&["c", "eps"]), 1));
        // Each instance of g reads the two repetitions of its (eps, c).
        assert!(plan.stages[2]
            .instances
            .iter()
            .all(|i| i.inputs[0].len() == 2));
        // A kind that draws nothing gets seed 0; one that draws, seeds of its own.
        assert!(plan.stages[3].instances.iter().all(|i| i.seed == 0));
        let seeds: BTreeSet<u128> = plan.stages[0].instances.iter().map(|i| i.seed).collect();
        assert_eq!(seeds.len(), 4);
    }

    #[test]
    fn what_parameters_say_of_their_files_is_checked_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("paper.csv"), "sigma,value\n2,0.1\n").unwrap();
        let text = "name: t\ntitle: T\nsource: {paper: p, item: i}\ndescription: d\nseed: 1\nstages:\n  v: {kind: t.paper, with: {paper: paper.csv, join: sgima}}\n";
        let path = dir.path().join("t.yaml");
        let spec = super::super::spec::parse(&path, text.to_string()).unwrap();
        let errors = plan_one(&spec, &Overrides::default(), KINDS, 1000, &mut 0)
            .err()
            .expect("planning fails");
        assert_eq!(
            messages(&errors),
            ["stage `v` (t.paper): no column `sgima` in paper.csv"]
        );
        let pos = errors[0].pos.unwrap();
        assert_eq!((pos.line, pos.col), (7, 47), "at `join:`");
        let spec = super::super::spec::parse(&path, text.replace("sgima", "sigma")).unwrap();
        assert!(plan_one(&spec, &Overrides::default(), KINDS, 1000, &mut 0).is_ok());
    }

    #[test]
    fn a_stage_error_names_its_parameter_its_axis_and_stops_only_that_stage() {
        let spec = file(
            "axes: {eps: [1, -1]}\nstages:\n  a: {kind: t.each, with: {x: $eps}}\n  b: {kind: t.each, input: a, over: [eps, c]}\n  c: {kind: t.each, repeat: 0}\n",
        );
        let errors = plan_one(&spec, &Overrides::default(), KINDS, 1000, &mut 0)
            .err()
            .expect("planning fails");
        let m = messages(&errors);
        // a fails at eps=-1, with the axis as the hint; b is skipped (its input failed); c's
        // own error is still found.
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[0], "stage `a` (t.each) (at eps=-1): x = -1 is below 0");
        assert!(errors[0]
            .hint
            .as_deref()
            .unwrap()
            .starts_with("the value comes from axis `eps`"));
        assert_eq!(m[1], "stage `c`: repeat must be ≥ 1");
        // Over budget: the count is checked before any instance exists.
        let spec = file("axes: {a: {from: 1, to: 100, step: 1}, b: {from: 1, to: 100, step: 1}}\nstages: {s: {kind: t.each, with: {x: $a, y: $b}}}\n");
        let errors = plan_one(&spec, &Overrides::default(), KINDS, 1000, &mut 0)
            .err()
            .expect("planning fails");
        assert!(
            messages(&errors)[0].contains("--max-instances"),
            "{:?}",
            messages(&errors)
        );
    }
}
