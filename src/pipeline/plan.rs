//! Planning: from a parsed file (+ profile and `--set` overrides) to validated stage
//! instances. Everything a user typed is checked here, before anything runs.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_yaml_ng::{Mapping, Value};
use sha2::{Digest, Sha256};

use super::cache::Key;
use super::files::{self, InputFiles};
use super::seed::instance_seed;
use super::spec::{
    name_problem, parse_axis, suggest, AxisValue, NameKind, Source, SpecError, SpecFile,
};
use crate::kind::{Gather, KindInfo, StageRun};

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
    pub seed: u64,
    pub profile: Option<String>,
    pub axes: IndexMap<String, Vec<AxisValue>>,
    pub stages: Vec<PlannedStage>,
    /// What the profile in use replaces of the file's axes and parameters: `axis `eps`
    /// ([…] → […])`, ``noisy.samples` (1000 → 50)`.
    pub profile_replaces: Vec<String>,
    /// The files the stages' parameters name, read and checked once at planning.
    pub files: InputFiles,
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
fn plan_one(
    spec: &SpecFile,
    ov: &Overrides,
    registry: &'static [KindInfo],
    max_instances: u64,
    spent: &mut u64,
) -> Result<Plan, Vec<SpecError>> {
    let raw = &spec.raw;
    let mut errors = Vec::new();
    *spent += 1;

    // Names that become paths: checked first, so nothing below ever sees an unsafe one.
    if let Some(msg) = name_problem(&raw.name, NameKind::Pipeline) {
        errors.push(spec.err("name", msg));
    }
    // Stage names become file names: two that differ only in case would overwrite each
    // other on a case-insensitive file system (macOS, Windows), so they are refused here.
    let mut folded: HashMap<String, &str> = HashMap::new();
    for name in raw.stages.keys() {
        if errors.len() >= MAX_ERRORS {
            break;
        }
        if let Some(msg) = name_problem(name, NameKind::Stage) {
            errors.push(spec.err(&format!("stages.{name}"), msg));
        } else if let Some(first) = folded.insert(name.to_lowercase(), name) {
            errors.push(spec.err(
                &format!("stages.{name}"),
                format!("stage names `{first}` and `{name}` differ only in case: their result files would collide on case-insensitive file systems; rename one"),
            ));
        }
    }
    for name in raw.axes.keys() {
        if errors.len() >= MAX_ERRORS {
            break;
        }
        if let Some(msg) = name_problem(name, NameKind::Axis) {
            errors.push(spec.err(&format!("axes.{name}"), msg));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    // Profile.
    let profile = match &ov.profile {
        None => None,
        Some(p) => match raw.profiles.get(p) {
            Some(prof) => Some(prof),
            None => {
                let names: Vec<&str> = raw.profiles.keys().map(String::as_str).collect();
                let mut e = spec.err("profiles", format!("no profile `{p}` in this pipeline"));
                e.hint = Some(match suggest(p, names.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`? (profiles: {})", names.join(", ")),
                    None if names.is_empty() => "this pipeline defines no profiles".into(),
                    None => format!("profiles: {}", names.join(", ")),
                });
                return Err(vec![e]);
            }
        },
    };

    // Axes: file, then profile, then --set.
    let mut axes: IndexMap<String, Vec<AxisValue>> = IndexMap::new();
    // What the profile replaces of the file (logged: an edit to the file's `axes:` or a
    // parameter is otherwise silently ignored under the profile).
    let mut replaced: Vec<String> = Vec::new();
    for (name, v) in &raw.axes {
        if errors.len() >= MAX_ERRORS {
            break;
        }
        if name == REP {
            errors.push(spec.err(
                &format!("axes.{name}"),
                "`rep` is reserved for repetitions: use `repeat:` on a stage",
            ));
            continue;
        }
        if let Some(pv) = profile.and_then(|p| p.axes.get(name)).filter(|pv| *pv != v) {
            replaced.push(format!(
                "axis `{name}` ({} → {})",
                brief(&canonical(v)),
                brief(&canonical(pv))
            ));
        }
        let v = profile.and_then(|p| p.axes.get(name)).unwrap_or(v);
        let base = if profile.is_some_and(|p| p.axes.contains_key(name)) {
            format!(
                "profiles.{}.axes.{name}",
                ov.profile.as_deref().unwrap_or("")
            )
        } else {
            format!("axes.{name}")
        };
        match parse_axis(v) {
            Ok(vals) => {
                *spent = spent.saturating_add(vals.len() as u64);
                axes.insert(name.clone(), vals);
            }
            Err((sub, msg)) => {
                let path = if sub.is_empty() {
                    base
                } else {
                    format!("{base}.{sub}")
                };
                errors.push(spec.err(&path, format!("axis `{name}`: {msg}")));
            }
        }
    }
    if let (Some(p), Some(pname)) = (profile, &ov.profile) {
        for name in p.axes.keys() {
            if errors.len() >= MAX_ERRORS {
                break;
            }
            if !raw.axes.contains_key(name) {
                errors.push(spec.err(
                    &format!("profiles.{pname}.axes.{name}"),
                    format!(
                        "profile `{pname}` sets axis `{name}`, which the pipeline does not define"
                    ),
                ));
            }
        }
        for (name, w) in &p.with {
            if errors.len() >= MAX_ERRORS {
                break;
            }
            if !matches!(w, Value::Mapping(_) | Value::Null) {
                errors.push(spec.err(
                    &format!("profiles.{pname}.with.{name}"),
                    format!("profile `{pname}`: `with.{name}` must be a mapping of parameters"),
                ));
            }
        }
        for name in p.repeat.keys().chain(p.with.keys()) {
            if errors.len() >= MAX_ERRORS {
                break;
            }
            if !raw.stages.contains_key(name) {
                let hint = suggest(name, raw.stages.keys().map(String::as_str))
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                errors.push(spec.err(
                    &format!("profiles.{pname}"),
                    format!("profile `{pname}` names stage `{name}`, which does not exist{hint}"),
                ));
            }
        }
    }
    // `--set`: `seed=N`, `STAGE.PARAM[.KEY…]=VALUE` (any `with:` parameter, a YAML value),
    // or `AXIS=VALUES`. Applied after the profile, so the command line wins.
    let mut seed = raw.seed;
    let mut param_sets: Vec<ParamSet> = Vec::new();
    for s in &ov.set {
        if errors.len() >= MAX_ERRORS {
            break;
        }
        let shown = brief_to(s, 200);
        let cmdline = |msg: String| SpecError {
            file: spec.path.clone(),
            pos: None,
            message: format!("--set {shown}: {msg}"),
            hint: None,
        };
        let Some((name, values)) = s.split_once('=') else {
            errors.push(cmdline(
                "expected AXIS=VALUES (--set 'eps=[0.1, 1]'), STAGE.PARAM=VALUE (--set noisy.samples=500) or seed=N".into(),
            ));
            continue;
        };
        let name = name.trim();
        if let Some((stage, path)) = name.split_once('.') {
            let Some(st) = raw.stages.get(stage) else {
                let hint = suggest(stage, raw.stages.keys().map(String::as_str))
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                errors.push(cmdline(format!(
                    "no stage `{stage}` in this pipeline{hint}"
                )));
                continue;
            };
            let path: Vec<String> = path.split('.').map(str::to_string).collect();
            // Each key is a level of nested mappings that planning walks recursively.
            const MAX_DEPTH: usize = 16;
            if path.len() > MAX_DEPTH {
                errors.push(cmdline(format!(
                    "it nests {} keys deep: give at most {MAX_DEPTH} (STAGE.PARAM.KEY…)",
                    path.len()
                )));
                continue;
            }
            if path.iter().any(String::is_empty) {
                errors.push(cmdline(format!(
                    "`{name}` has an empty key: give STAGE.PARAM or STAGE.PARAM.KEY"
                )));
                continue;
            }
            if let Some(kind) = registry.iter().find(|k| k.name == st.kind) {
                if !kind.params.iter().any(|p| p.name == path[0]) {
                    let names: Vec<&str> = kind.params.iter().map(|p| p.name).collect();
                    let hint = match suggest(&path[0], names.iter().copied()) {
                        Some(s) => format!("; did you mean `{stage}.{s}`?"),
                        None => String::new(),
                    };
                    errors.push(cmdline(format!(
                        "stage `{stage}` ({}) has no parameter `{}`{hint} (its parameters: {}; `dplab list {}` describes them)",
                        kind.name,
                        path[0],
                        names.join(", "),
                        kind.name
                    )));
                    continue;
                }
            }
            match serde_yaml_ng::from_str::<Value>(values) {
                Ok(value) => param_sets.push(ParamSet {
                    arg: s.clone(),
                    stage: stage.to_string(),
                    path,
                    value,
                }),
                Err(e) => errors.push(cmdline(format!("the value is not YAML: {e}"))),
            }
            continue;
        }
        if name == "seed" && !raw.axes.contains_key(name) {
            match values.trim().parse::<u64>() {
                Ok(n) => seed = n,
                Err(_) => errors.push(cmdline(format!(
                    "the seed `{}` is not a whole number from 0 to {}",
                    values.trim(),
                    u64::MAX
                ))),
            }
            continue;
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
            errors.push(cmdline(format!(
                "no axis `{name}` in this pipeline{hint} (for a stage's parameter give STAGE.PARAM=VALUE)"
            )));
            continue;
        }
        match serde_yaml_ng::from_str::<Value>(values)
            .map_err(|e| (String::new(), e.to_string()))
            .and_then(|v| parse_axis(&v))
        {
            Ok(vals) => {
                axes.insert(name.to_string(), vals);
            }
            Err((_, msg)) => errors.push(cmdline(msg)),
        }
    }

    // Stages: kinds, inputs, topological order.
    let names: Vec<&str> = raw.stages.keys().map(String::as_str).collect();
    let index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut kinds: Vec<Option<&'static KindInfo>> = Vec::new();
    let mut inputs: Vec<Vec<usize>> = Vec::new();
    for (name, st) in &raw.stages {
        // Not `break`: `kinds` and `inputs` must have one entry per stage.
        if errors.len() >= MAX_ERRORS {
            return Err(errors);
        }
        let kind = registry.iter().find(|k| k.name == st.kind);
        if kind.is_none() {
            let all: Vec<&str> = registry.iter().map(|k| k.name).collect();
            let mut e = spec.err(
                &format!("stages.{name}.kind"),
                format!("stage `{name}`: unknown kind `{}`", st.kind),
            );
            e.hint = Some(match suggest(&st.kind, all.iter().copied()) {
                Some(s) => format!("did you mean `{s}`? (`dplab list` shows every kind)"),
                None => "`dplab list` shows every kind".into(),
            });
            errors.push(e);
        }
        kinds.push(kind);
        let mut ins = Vec::new();
        for input in st.input.names() {
            if errors.len() >= MAX_ERRORS {
                break;
            }
            match index.get(input.as_str()) {
                Some(&i) => ins.push(i),
                None => {
                    let mut e = spec.err(
                        &format!("stages.{name}.input"),
                        format!("stage `{name}` reads `{input}`, which is not a stage"),
                    );
                    e.hint = suggest(&input, names.iter().copied())
                        .map(|s| format!("did you mean `{s}`?"));
                    errors.push(e);
                }
            }
        }
        inputs.push(ins);
    }
    if raw.stages.is_empty() {
        errors.push(spec.err("stages", "the pipeline has no stages"));
    }
    let order = match topo_order(&inputs) {
        Ok(o) => o,
        Err(cycle) => {
            let path: Vec<&str> = cycle.iter().map(|&i| names[i]).collect();
            errors.push(spec.err(
                &format!("stages.{}.input", path[0]),
                format!("the stages form a cycle: {}", path.join(" → ")),
            ));
            return Err(errors);
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }

    // Per stage: axes, gathered axes, instances.
    let mut total_instances: u64 = 0;
    let mut input_files = InputFiles::default();
    let mut planned: Vec<Option<PlannedStage>> = (0..names.len()).map(|_| None).collect();
    let mut reps: Vec<Option<u64>> = vec![None; names.len()];
    for &si in &order {
        if errors.len() >= MAX_ERRORS {
            break;
        }
        let name = names[si];
        let st = &raw.stages[si];
        let kind = kinds[si].expect("checked above");
        let mut with = st.with.clone().unwrap_or(Value::Mapping(Mapping::new()));
        if with.is_null() {
            with = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(ref mut wmap) = with else {
            errors.push(spec.err(
                &format!("stages.{name}.with"),
                format!("stage `{name}`: `with` must be a mapping of parameters"),
            ));
            continue;
        };
        // Parameters the profile sets: an error in one is located at the profile's line.
        let mut from_profile: Vec<String> = Vec::new();
        if let Some(Value::Mapping(extra)) = profile.and_then(|p| p.with.get(name)) {
            for (k, v) in extra {
                if let Some(old) = wmap.insert(k.clone(), v.clone()).filter(|old| old != v) {
                    replaced.push(format!(
                        "`{name}.{}` ({} → {})",
                        k.as_str().unwrap_or("?"),
                        brief(&canonical(&old)),
                        brief(&canonical(v))
                    ));
                }
                from_profile.push(k.as_str().unwrap_or("?").to_string());
            }
        }
        // Parameters `--set` sets (after the profile): an error in one names the argument.
        let mut from_set: Vec<(String, &str)> = Vec::new();
        for ps in param_sets.iter().filter(|p| p.stage == name) {
            match ps.apply(wmap) {
                Ok(()) => from_set.push((ps.path[0].clone(), &ps.arg)),
                Err(msg) => errors.push(SpecError {
                    file: spec.path.clone(),
                    pos: None,
                    message: format!("--set {}: {msg}", brief_to(&ps.arg, 200)),
                    hint: None,
                }),
            }
        }
        // Axes referenced as `$name`.
        let mut refs = Vec::new();
        collect_refs(&with, &mut Vec::new(), &mut refs);
        let mut own = BTreeSet::new();
        let mut bad = false;
        for (path, axis) in &refs {
            if errors.len() >= MAX_ERRORS {
                break;
            }
            if axes.contains_key(axis) {
                own.insert(axis.clone());
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
                errors.push(spec.err(
                    &format!("stages.{name}.with.{path}"),
                    format!("stage `{name}` uses `${axis}`, which is not an axis{hint} ({avail})"),
                ));
                bad = true;
            }
        }
        if bad {
            continue;
        }
        let mut inherited = BTreeSet::new();
        let mut rep_in: Option<u64> = None;
        let mut missing_input = false;
        for &ii in &inputs[si] {
            match &planned[ii] {
                Some(up) => {
                    inherited.extend(up.axes.iter().cloned());
                    if let Some(r) = reps[ii] {
                        if rep_in.is_some_and(|x| x != r) {
                            errors.push(spec.err(&format!("stages.{name}.input"), format!("stage `{name}` joins inputs repeated a different number of times")));
                        }
                        rep_in = Some(r);
                    }
                }
                None => missing_input = true,
            }
        }
        if missing_input {
            continue; // an upstream stage already failed validation
        }
        let repeat = profile
            .and_then(|p| p.repeat.get(name).copied())
            .or(st.repeat);
        if let Some(n) = repeat {
            if let Err(msg) = crate::limits::check(
                &format!("stage `{name}`: repeat"),
                n,
                max_instances,
                "--max-instances",
            ) {
                errors.push(spec.err(&format!("stages.{name}.repeat"), msg));
                continue;
            }
            if n == 0 {
                errors.push(spec.err(
                    &format!("stages.{name}.repeat"),
                    format!("stage `{name}`: repeat must be ≥ 1"),
                ));
                continue;
            }
            if inherited.contains(REP) {
                errors.push(spec.err(
                    &format!("stages.{name}.repeat"),
                    format!("stage `{name}` repeats, but its input already varies over `rep`"),
                ));
                continue;
            }
        }
        let mut all_axes = own.clone();
        all_axes.extend(inherited.iter().cloned());
        if repeat.is_some() {
            all_axes.insert(REP.to_string());
        }
        let gathered: BTreeSet<String> = match &st.over {
            None => match kind.gather {
                Gather::All => inherited.difference(&own).cloned().collect(),
                Gather::Nothing => BTreeSet::new(),
            },
            Some(Value::String(s)) if s == "all" => inherited.difference(&own).cloned().collect(),
            Some(Value::Sequence(items)) => {
                let mut g = BTreeSet::new();
                for (i, it) in items.iter().enumerate() {
                    if errors.len() >= MAX_ERRORS {
                        break;
                    }
                    let a = it.as_str().unwrap_or("");
                    if !inherited.contains(a) {
                        let mut e = spec.err(
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
                        errors.push(e);
                    } else if own.contains(a) {
                        errors.push(spec.err(
                            &format!("stages.{name}.over.{i}"),
                            format!(
                                "stage `{name}` cannot gather `{a}`: its own parameters use `${a}`"
                            ),
                        ));
                    }
                    g.insert(a.to_string());
                }
                g
            }
            Some(_) => {
                errors.push(spec.err(
                    &format!("stages.{name}.over"),
                    "`over` is `all` or a list of axis names",
                ));
                continue;
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
        reps[si] = if gathered.contains(REP) {
            None
        } else {
            repeat.or(rep_in)
        };
        // The instance count, checked before any instance (or list of repetitions) exists.
        let count = stage_axes
            .iter()
            .map(|a| {
                if a == REP {
                    rep_count.unwrap_or(1)
                } else {
                    axes[a].len() as u64
                }
            })
            .try_fold(1u64, |acc, n| acc.checked_mul(n))
            .unwrap_or(u64::MAX);
        total_instances = total_instances.saturating_add(count);
        *spent = spent.saturating_add(count.min(max_instances.saturating_add(1)));
        if let Err(msg) = crate::limits::check(
            &format!(
                "stage `{name}`: instances ({})",
                if stage_axes.is_empty() {
                    "no axes".to_string()
                } else {
                    stage_axes.join(" × ")
                }
            ),
            count,
            max_instances,
            "--max-instances",
        ) {
            errors.push(spec.err(&format!("stages.{name}"), msg));
            continue;
        }
        if total_instances > max_instances {
            errors.push(spec.err(
                &format!("stages.{name}"),
                format!(
                    "the pipeline has more than {} instances up to stage `{name}` (raise the limit with --max-instances if you mean it)",
                    max_instances
                ),
            ));
            continue;
        }
        let value_lists: Vec<Vec<AxisValue>> = stage_axes
            .iter()
            .map(|a| {
                if a == REP {
                    (0..rep_count.unwrap_or(1))
                        .map(|r| AxisValue::Num(r as f64))
                        .collect()
                } else {
                    axes[a].clone()
                }
            })
            .collect();
        let depth = inputs[si]
            .iter()
            .map(|&i| planned[i].as_ref().map_or(0, |p| p.depth + 1))
            .max()
            .unwrap_or(0);
        // Wiring: each instance reads the upstream instances that agree with it on the axes
        // it keeps. Upstream instances are indexed once by their values on those axes, so
        // wiring is linear in the instance count (a scan per instance was quadratic: a
        // 10⁶-instance sweep never finished planning).
        let input_idx = inputs[si].clone();
        let wiring: Vec<(Vec<&str>, ByAxes)> = input_idx
            .iter()
            .map(|&ii| {
                let up = planned[ii].as_ref().expect("inputs planned first");
                let kept: Vec<&str> = up
                    .axes
                    .iter()
                    .filter(|a| !gathered.contains(*a))
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
        let input_names: Vec<&str> = input_idx
            .iter()
            .map(|&ii| planned[ii].as_ref().map_or("", |p| p.name.as_str()))
            .collect();
        // Each distinct parameter set is built (checked) once, and its files hashed once;
        // repetitions share it. When every axis of the stage is its own, every instance has a
        // parameter set of its own, and the map would only cost memory. Instances keep none
        // of it: their parameters are the stage's `with:` with their axis values put in
        // (`PlannedStage::params`), built again when they run (a built parameter set and its
        // canonical text per instance were a third of a 10⁶-instance plan).
        let shared = stage_axes.iter().any(|a| !own.contains(a));
        let mut built: HashMap<Vec<String>, Built> = HashMap::new();
        let mut file_hash: HashMap<PathBuf, String> = HashMap::new();
        let keys = product(&stage_axes, &value_lists);
        let mut instances = Vec::with_capacity(keys.len());
        let mut last_inputs: Option<Arc<[Box<[usize]>]>> = None;
        let mut failed = false;
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
                    let subst = substitute(&with, &key);
                    let params = canonical(&subst);
                    match (kind.build)(&subst) {
                        Ok(r) => {
                            for (param, rel) in r.files() {
                                if let Err(msg) =
                                    input_files.add(&base_dir(spec), rel, &ov.allow_read)
                                {
                                    let at = if from_profile.iter().any(|k| k == param) {
                                        format!(
                                            "profiles.{}.with.{name}.{param}",
                                            ov.profile.as_deref().unwrap_or("")
                                        )
                                    } else {
                                        format!("stages.{name}.with.{param}")
                                    };
                                    let mut e =
                                        spec.err(&at, format!("stage `{name}`: `{param}`: {msg}"));
                                    e.hint = Some(files::HINT.into());
                                    errors.push(e);
                                    failed = true;
                                }
                            }
                            if failed {
                                break;
                            }
                            let files = r
                                .files()
                                .iter()
                                .map(|(_, rel)| {
                                    file_hash
                                        .entry(rel.to_path_buf())
                                        .or_insert_with(|| {
                                            input_files.get(rel).map_or_else(String::new, |b| {
                                                hex(&Sha256::digest(b))
                                            })
                                        })
                                        .clone()
                                })
                                .collect();
                            let b = Built {
                                params,
                                files,
                                sources: r.sources(),
                            };
                            if shared {
                                built.entry(own_key).or_insert(b)
                            } else {
                                fresh = b;
                                &fresh
                            }
                        }
                        Err(pe) => {
                            let sub = pe.path.join(".");
                            // The key the error is about: its path, or the unknown key named.
                            let top = pe.path.first().cloned().or_else(|| {
                                pe.message
                                    .strip_prefix("unknown key `")
                                    .and_then(|r| r.split('`').next())
                                    .map(str::to_string)
                            });
                            let path = match (&top, &ov.profile) {
                                (Some(k), Some(pname)) if from_profile.contains(k) => {
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
                                .and_then(|k| from_set.iter().rev().find(|(p, _)| p == k));
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
                            if let Some((_, axis)) =
                                refs.iter().find(|(p, _)| *p == sub && about_value)
                            {
                                let apos = spec.locs.find(&format!("axes.{axis}"));
                                e.hint = Some(format!(
                                    "the value comes from axis `{axis}` (line {}, column {})",
                                    apos.line, apos.col
                                ));
                            } else if kind.params.iter().any(|p| pe.message.contains(p.name)) {
                                e.hint = Some(format!(
                                    "`dplab list {}` describes its parameters",
                                    kind.name
                                ));
                            }
                            errors.push(e);
                            failed = true;
                            break;
                        }
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
            let upstream: Vec<Vec<Key>> = input_idx
                .iter()
                .zip(reads.iter())
                .map(|(&ii, js)| {
                    let up = planned[ii].as_ref().expect("inputs planned first");
                    js.iter().map(|&j| up.instances[j].store_key).collect()
                })
                .collect();
            // A kind that draws no randomness gets seed 0 (see `KindInfo::random`).
            let seed = if kind.random {
                instance_seed(seed, name, &key)
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
        if failed {
            continue;
        }
        planned[si] = Some(PlannedStage {
            name: name.to_string(),
            kind,
            inputs: Vec::new(),
            store: st.store,
            axes: stage_axes,
            gathered: gathered.into_iter().collect(),
            depth,
            with,
            repeat,
            instances,
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // Re-index stages in topological order.
    let position: HashMap<usize, usize> = order.iter().enumerate().map(|(p, &i)| (i, p)).collect();
    let mut stages_out = Vec::new();
    for &si in &order {
        let mut st = planned[si].take().expect("planned");
        st.inputs = inputs[si].iter().map(|i| position[i]).collect();
        stages_out.push(st);
    }
    Ok(Plan {
        profile_replaces: replaced,
        file: spec.path.clone(),
        file_sha256: hex(&Sha256::digest(spec.text.as_bytes())),
        name: raw.name.clone(),
        title: raw.title.clone(),
        source: raw.source.clone(),
        description: raw.description.clone(),
        seed,
        profile: ov.profile.clone(),
        axes,
        stages: stages_out,
        files: input_files,
        base_dir: base_dir(spec),
    })
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

/// `$name` strings inside `with`, with their dotted paths. `path` holds the keys above `v`;
/// a path is joined only for a reference, not for every node: joining at every node copied
/// each ancestor's key into every descendant (a 2 MiB key over 300 000 numbers: 29 s).
fn collect_refs(v: &Value, path: &mut Vec<String>, out: &mut Vec<(String, String)>) {
    match v {
        Value::String(s) => {
            if let Some(axis) = axis_ref(s) {
                out.push((ref_path(path), axis.to_string()));
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

fn axis_ref(s: &str) -> Option<&str> {
    let name = s.strip_prefix('$')?;
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some(name)
}

/// What the store key needs of a parameter set: its canonical text, the sha256 of each file
/// it names, and its sources (see [`crate::kind::Stage::sources`]).
struct Built {
    params: String,
    files: Vec<String>,
    sources: Vec<String>,
}

/// `--set STAGE.PARAM[.KEY…]=VALUE`.
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

/// `text` cut to `max` characters, with `…` when cut.
fn brief_to(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

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

/// `with` with every `$axis` replaced by this instance's value.
fn substitute(v: &Value, key: &[(Arc<str>, AxisValue)]) -> Value {
    match v {
        Value::String(s) => match axis_ref(s).and_then(|a| key.iter().find(|(k, _)| &**k == a)) {
            Some((_, val)) => val.to_yaml(),
            None => v.clone(),
        },
        Value::Sequence(items) => {
            Value::Sequence(items.iter().map(|i| substitute(i, key)).collect())
        }
        Value::Mapping(m) => Value::Mapping(
            m.iter()
                .map(|(k, i)| (k.clone(), substitute(i, key)))
                .collect(),
        ),
        _ => v.clone(),
    }
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
        assert_eq!(
            refs,
            [
                ("epsilon".to_string(), "eps".to_string()),
                ("hlines.1.y".to_string(), "c".to_string())
            ]
        );
        // A 2 MiB key over 300 000 values, one of them a reference: the path is cut.
        let long = "k".repeat(2 << 20);
        let mut items = vec![Value::Number(0.into()); 300_000];
        items[7] = Value::String("$eps".into());
        let mut m = Mapping::new();
        m.insert(Value::String(long), Value::Sequence(items));
        let t0 = std::time::Instant::now();
        let mut refs = Vec::new();
        collect_refs(&Value::Mapping(m), &mut Vec::new(), &mut refs);
        assert_eq!(refs, [("…".to_string(), "eps".to_string())]);
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
}
