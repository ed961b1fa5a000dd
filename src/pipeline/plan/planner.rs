//! The phases of planning one file, in the order [`super::plan_one`] runs them: names,
//! profile, axes, `--set` overrides, the graph of stages; then each stage in topological
//! order ([`super::stage`], the per-stage half).

use std::collections::{BTreeSet, HashMap};

use indexmap::IndexMap;
use serde_yaml_ng::Value;

use super::*;

/// Planning one file: what every phase reads, and what the phases found so far.
pub(super) struct Planner<'a> {
    pub(super) spec: &'a SpecFile,
    pub(super) ov: &'a Overrides,
    pub(super) registry: &'static [KindInfo],
    pub(super) max_instances: u64,
    /// Work done (see [`plan_one`]).
    pub(super) spent: &'a mut u64,
    pub(super) errors: Vec<SpecError>,
    /// What the profile replaces of the file: logged by [`plan`], since an edit to the
    /// file's `axes:` or a parameter is otherwise silently ignored under the profile.
    pub(super) replaced: Vec<String>,
    /// The files the parameters name, read once.
    pub(super) input_files: InputFiles,
    /// Instances of the stages planned so far.
    pub(super) total_instances: u64,
    /// The axes a `--set AXIS=…` replaced, with the argument (the last one, which won).
    pub(super) set_axes: HashMap<String, &'a str>,
}

/// The stages as a graph: names (file order), kinds, inputs and a topological order.
pub(super) struct Graph<'a> {
    pub(super) names: Vec<&'a str>,
    pub(super) kinds: Vec<&'static KindInfo>,
    pub(super) inputs: Vec<Vec<usize>>,
    pub(super) order: Vec<usize>,
}

/// What planning a stage reads besides the stages before it.
pub(super) struct StageEnv<'a, 'g> {
    pub(super) graph: &'g Graph<'a>,
    pub(super) profile: Option<&'a RawProfile>,
    pub(super) axes: &'g IndexMap<String, Vec<AxisValue>>,
    pub(super) param_sets: &'g [ParamSet],
    pub(super) seed: u64,
}

/// A stage's `with:` after the profile and `--set`, and which of its keys they set (an error
/// in one is located at the profile's line, or names the `--set` argument).
pub(super) struct ComposedWith<'s> {
    pub(super) with: Value,
    pub(super) from_profile: Vec<String>,
    pub(super) from_set: Vec<(String, &'s str)>,
}

/// What every parameter set of a stage is built and located from: the same for all its
/// instances.
#[derive(Clone, Copy)]
pub(super) struct StageParams<'c> {
    pub(super) name: &'c str,
    pub(super) kind: &'static KindInfo,
    pub(super) composed: &'c ComposedWith<'c>,
    /// The `$axis` references of its `with:`, and the axes they name (its own axes).
    pub(super) refs: &'c [Ref],
    pub(super) own: &'c BTreeSet<String>,
    /// Its `only:` conditions ([`super::only`]).
    pub(super) only: &'c [(String, super::only::Cond)],
}

/// The axes a stage varies over and how it gathers.
#[derive(Debug, PartialEq)]
pub(super) struct Shape {
    /// Its axes, in the pipeline's order, `rep` last.
    pub(super) axes: Vec<String>,
    pub(super) gathered: BTreeSet<String>,
    /// Its own `repeat:` (after the profile).
    pub(super) repeat: Option<u64>,
    /// How many repetitions `rep` counts when the stage varies over it.
    pub(super) rep_count: Option<u64>,
    /// The repetitions its readers inherit (none once `rep` is gathered).
    pub(super) reps_out: Option<u64>,
}

impl<'a> Planner<'a> {
    /// Whether as many errors as one run reports are found: later phases stop.
    pub(super) fn full(&self) -> bool {
        self.errors.len() >= MAX_ERRORS
    }

    pub(super) fn err(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(self.spec.err(path, message));
    }

    /// Stops planning when anything was found wrong.
    pub(super) fn stop(&mut self) -> Result<(), Vec<SpecError>> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(std::mem::take(&mut self.errors))
        }
    }

    /// Phase 1: names that become paths are checked first, so nothing after ever sees an
    /// unsafe one.
    pub(super) fn check_names(&mut self) {
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
    pub(super) fn profile(&self) -> Result<Option<&'a RawProfile>, SpecError> {
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
    pub(super) fn axes(
        &mut self,
        profile: Option<&RawProfile>,
    ) -> IndexMap<String, Vec<AxisValue>> {
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
    pub(super) fn check_profile(&mut self, profile: Option<&RawProfile>) {
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
    pub(super) fn overrides(
        &mut self,
        axes: &mut IndexMap<String, Vec<AxisValue>>,
    ) -> (u64, Vec<ParamSet>) {
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
                Ok(SetArg::Sweep(name, vals, p)) => {
                    self.set_axes.insert(name.clone(), s);
                    axes.insert(name, vals);
                    params.push(p);
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
    pub(super) fn graph(&mut self) -> Result<Graph<'a>, Vec<SpecError>> {
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
}

/// Kahn's algorithm in file order (of the stages whose inputs are all done, the first in the
/// file goes next); on a cycle, returns one cycle's stages (first repeated last).
///
/// Linear up to the heap's logarithm: the stages ready to go are kept in a min-heap and each
/// stage counts its unfinished inputs. (A rescan from the first stage at every step was
/// quadratic: 150 000 stages, a 4 MiB file, took 6 s, and again for every profile.)
pub(super) fn topo_order(inputs: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
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
