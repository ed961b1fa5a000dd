//! Planning one stage: its `with:` after the profile and `--set`, its `$axis` references,
//! the axes it varies over and gathers, its instances (each with its seed and store key),
//! and its parameters built and checked by its kind.

use super::*;
use std::collections::BTreeMap;

impl<'a> Planner<'a> {
    /// Phase 7: stage `si`, whose inputs are planned (or failed: then it is skipped). Returns
    /// the stage and the repetitions its readers inherit, or `None` when it has an error.
    pub(super) fn stage(
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
        let only = match only::parse(&st.only, &shape.axes, env.axes) {
            Ok(o) => o,
            Err((path, msg)) => {
                self.err(
                    &format!("stages.{name}.{path}"),
                    format!("stage `{name}`: {msg}"),
                );
                return None;
            }
        };
        let sp = StageParams {
            name,
            kind,
            composed: &composed,
            refs: &refs,
            own: &own,
            only: &only,
        };
        let Planned {
            instances,
            columns,
            programs,
            seeded,
            environment,
            files,
            sources,
        } = self.instances(&sp, env, &shape, &ups)?;
        // The caller decides consent from the kinds alone (`runs_programs`), before planning:
        // a kind that runs programs without declaring it would slip past that.
        if !kind.runs_programs && !programs.is_empty() {
            self.err(
                &format!("stages.{name}"),
                format!(
                    "stage `{name}`: kind `{}` names programs but does not declare `runs_programs` (a bug in the kind)",
                    kind.name
                ),
            );
            return None;
        }
        let stage = PlannedStage {
            name: name.to_string(),
            kind,
            inputs: Vec::new(),
            store: st.store,
            kept: false,
            axes: shape.axes,
            gathered: shape.gathered.into_iter().collect(),
            depth,
            with: composed.with,
            repeat: shape.repeat,
            only: st.only.clone(),
            from_profile: composed.from_profile,
            from_set: composed
                .from_set
                .into_iter()
                .map(|(k, a)| (k, a.to_string()))
                .collect(),
            columns,
            programs,
            seeded,
            environment,
            files,
            sources,
            instances,
        };
        Some((stage, shape.reps_out))
    }

    /// A stage's `with:` after the profile's parameters, then `--set`'s.
    pub(super) fn with<'s>(
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
    pub(super) fn axis_refs(
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
    pub(super) fn axis_origin(&self, axis: &str) -> AxisOrigin<'a> {
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
    pub(super) fn shape(
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
    pub(super) fn count(
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
    pub(super) fn instances(
        &mut self,
        sp: &StageParams,
        env: &StageEnv<'a, '_>,
        shape: &Shape,
        ups: &[(&PlannedStage, Option<u64>)],
    ) -> Option<Planned> {
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
                        .map(|r| AxisValue::Int(r as i64))
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
                    if let Some(k) = project(&kept, &u.key()) {
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
        let mut programs: BTreeSet<Vec<String>> = BTreeSet::new();
        let mut seeded = true;
        let mut environment: BTreeMap<String, String> = BTreeMap::new();
        // By their JSON text: distinct, in a fixed order.
        let mut sources: BTreeMap<String, serde_json::Value> = BTreeMap::new();
        let grid = Arc::new(AxisGrid::new(&shape.axes, value_lists));
        let mut instances = Vec::with_capacity(usize::try_from(grid.combinations()).unwrap_or(0));
        let mut last_inputs: Option<Arc<[Box<[usize]>]>> = None;
        for at in 0..grid.combinations() {
            let key = grid.key(at);
            if !only::admits(sp.only, &key) {
                continue;
            }
            // Above, a stage ran only at some values (`only:`): where it would read nothing at
            // all, this one has no instance either.
            if !wiring.is_empty()
                && wiring.iter().all(|(kept, by_key)| {
                    project(kept, &key).and_then(|k| by_key.get(&k)).is_none()
                })
            {
                continue;
            }
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
                    programs.extend(b.programs.iter().cloned());
                    seeded &= b.seeded;
                    environment.extend(b.environment.clone());
                    sources.extend(b.sources.iter().map(|v| (v.to_string(), v.clone())));
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
            let parts = KeyParts {
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
            };
            let own_key = (!upstream.is_empty()).then(|| {
                store_key(&KeyParts {
                    upstream: &[],
                    ..parts
                })
            });
            let store_key = store_key(&parts);
            let own_key = own_key.unwrap_or(store_key);
            instances.push(Instance {
                grid: grid.clone(),
                at,
                store_key,
                own_key,
                seed,
                inputs: reads,
            });
        }
        let columns = declared.flatten().map(|cols| {
            let mut all = shape.axes.clone();
            all.extend(cols.into_iter().filter(|c| !shape.axes.contains(c)));
            all
        });
        let files = file_hash
            .into_iter()
            .map(|(p, d)| (p.display().to_string(), d))
            .collect();
        Some(Planned {
            instances,
            columns,
            programs: programs.into_iter().collect(),
            seeded,
            environment,
            files,
            sources: sources.into_values().collect(),
        })
    }

    /// Builds (checks) the parameters of the instance at `key`, reads and hashes the files
    /// they name; an error is located at the parameter (or the profile's line, or the
    /// `--set` argument), with the axis its value came from.
    pub(super) fn build(
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
        // What a stage runs is listed for consent as it is written: an axis value in it would
        // run as code what the sweep says (`[sh, -c, $v]`). Values reach a program through
        // its files.
        for (param, _) in r.programs() {
            let inside = |path: &str| {
                path == param
                    || path
                        .strip_prefix(param.as_str())
                        .is_some_and(|rest| rest.starts_with('.'))
            };
            if let Some(rf) = sp.refs.iter().find(|rf| inside(&rf.path)) {
                let pe = ParamError::at(
                    &rf.path,
                    format!(
                        "`${}` in `{param}`: an axis value may not reach a command line, where it would run as code; pass it in `params:` (the program reads it from dplab.json)",
                        rf.axis
                    ),
                );
                let e = self.param_error(sp, key, pe);
                self.errors.push(e);
                return None;
            }
        }
        let mut failed = false;
        let named = r.files().into_iter().map(|(p, rel)| (p, rel, false));
        let trees = r.trees().into_iter().map(|(p, rel)| (p, rel, true));
        for (param, rel, tree) in named.chain(trees) {
            let read = if tree {
                self.input_files
                    .add_tree(&base_dir(spec), rel, &ov.allow_read)
            } else {
                self.input_files.add(&base_dir(spec), rel, &ov.allow_read)
            };
            if let Err(msg) = read {
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
        let mut files: Vec<String> = r
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
        // After the files, so a kind without trees keeps the keys it had.
        for (_, rel) in r.trees() {
            let digest = self.input_files.tree_digest(rel).unwrap_or_default();
            files.push(format!("tree {} {digest}", rel.display()));
            file_hash.insert(rel.to_path_buf(), digest.to_string());
            // Each file of a folder too, for the run record: `--dry-run` names the file in
            // `code: [folder]` that changed, not only the folder.
            if let Some(inside) = self.input_files.tree(rel) {
                for (f, bytes) in inside {
                    if f != rel {
                        file_hash
                            .entry(f)
                            .or_insert_with(|| hex(&Sha256::digest(bytes)));
                    }
                }
            }
        }
        // Then what the probes print (without consent they are not run, and their part of the
        // key says so: `--dry-run` then counts the stage's instances as changed). Each one's
        // output is recorded as text too; one the kind runs unasked only that way.
        let mut environment = BTreeMap::new();
        const NOT_RUN: &str = "not run (no consent to run programs)";
        for probe in r.probes() {
            let command = shlex::try_join(probe.argv.iter().map(String::as_str))
                .unwrap_or_else(|_| probe.argv.join(" "));
            let printed = match &ov.prober {
                None => Err(NOT_RUN.to_string()),
                Some(p) => p.0.probe(&probe),
            };
            environment.insert(
                command.clone(),
                match &printed {
                    Ok(out) => printed_text(out),
                    Err(msg) if ov.prober.is_none() => msg.clone(),
                    Err(msg) => format!("failed: {msg}"),
                },
            );
            if !probe.keyed {
                continue;
            }
            let digest = match printed {
                Err(_) if ov.prober.is_none() => NOT_RUN.to_string(),
                Ok(out) => hex(&Sha256::digest(&out)),
                Err(msg) => {
                    let mut e = spec.err(
                        &format!("stages.{name}.with.probe"),
                        format!("stage `{name}`: the probe `{command}` failed: {msg}"),
                    );
                    e.hint = Some(super::PROBE_FAILED.to_string());
                    self.errors.push(e);
                    return None;
                }
            };
            files.push(format!("probe {command} {digest}"));
            file_hash.insert(PathBuf::from(format!("probe: {command}")), digest);
        }
        environment.extend(r.recorded());
        Some(Built {
            params,
            environment,
            files,
            sources: r.sources(),
            programs: r.programs().into_iter().map(|(_, argv)| argv).collect(),
            seeded: r.seeded(),
            columns,
        })
    }
}

/// What a probe printed, as the manifest records it: valid UTF-8, trimmed, at most
/// [`PRINTED`] characters (a version, not a log).
fn printed_text(out: &[u8]) -> String {
    let text = String::from_utf8_lossy(out);
    let text = text.trim();
    match text.char_indices().nth(PRINTED) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

const PRINTED: usize = 400;

/// What planning a stage's instances finds besides them (see [`PlannedStage`]).
pub(super) struct Planned {
    pub(super) instances: Vec<Instance>,
    pub(super) columns: Option<Vec<String>>,
    pub(super) programs: Vec<Vec<String>>,
    pub(super) seeded: bool,
    pub(super) environment: BTreeMap<String, String>,
    pub(super) files: std::collections::BTreeMap<String, String>,
    pub(super) sources: Vec<serde_json::Value>,
}

/// What the store key needs of a parameter set: its canonical text, the sha256 of each file
/// it names, and its sources (see [`crate::kind::Stage::sources`]).
pub(super) struct Built {
    pub(super) params: String,
    /// What its probes printed and what the kind records ([`crate::kind::Stage::recorded`]).
    pub(super) environment: BTreeMap<String, String>,
    pub(super) files: Vec<String>,
    pub(super) sources: Vec<serde_json::Value>,
    /// The programs it runs ([`crate::kind::Stage::programs`]).
    pub(super) programs: Vec<Vec<String>>,
    /// Whether its seed decides its output ([`crate::kind::Stage::seeded`]).
    pub(super) seeded: bool,
    /// The kind's output columns for these parameters (see [`PlannedStage::columns`]).
    pub(super) columns: Option<Vec<String>>,
}

/// Upstream instances (indices) by their values on the axes a reader keeps.
pub(super) type ByAxes = HashMap<Vec<String>, Vec<usize>>;

/// An instance's values on the axes `kept`, as text (`None` if it lacks one).
pub(super) fn project(kept: &[&str], key: &[(Arc<str>, AxisValue)]) -> Option<Vec<String>> {
    kept.iter()
        .map(|a| {
            key.iter()
                .find(|(b, _)| &**b == *a)
                .map(|(_, v)| v.canonical())
        })
        .collect()
}
