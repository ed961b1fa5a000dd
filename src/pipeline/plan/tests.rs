//! Planning's tests.

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
        runs_programs: false,
        summary: "reads a paper table",
        params: crate::kind::params::<Paper>,
        gather: Gather::All,
        build: crate::kind::build::<Paper>,
        verdict: None,
    },
    KindInfo {
        name: "t.each",
        version: 1,
        random: true,
        runs_programs: false,
        summary: "one instance per axis value",
        params: crate::kind::params::<Num>,
        gather: Gather::Nothing,
        build: crate::kind::build::<Num>,
        verdict: None,
    },
    KindInfo {
        name: "t.all",
        version: 1,
        random: false,
        runs_programs: false,
        summary: "gathers every axis",
        params: crate::kind::params::<Num>,
        gather: Gather::All,
        build: crate::kind::build::<Num>,
        verdict: None,
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
        e[0].message
            .contains("`$eps.x` reads a field, but axis `eps` holds number values, not records"),
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
    assert!(matches!(parse("eps=[1, 2]"), Ok(SetArg::Axis(a, v)) if a == "eps" && v.len() == 2));
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

/// A number the description or a finding quotes (`{{stage.column[row]}}`) names a stage the
/// pipeline has, and a frame it writes, where it is written.
#[test]
fn quoted_cells_name_a_stage_that_writes_a_frame() {
    let with = |quote: &str| {
        let body = format!(
            "findings:\n  - {{claim: c, found: \"{quote}\", verdict: agrees}}\n{}",
            SWEEP.replace(
                "h: {kind: t.all, input: g}",
                "h: {kind: t.all, input: g}\n  q: {kind: t.all, input: g, store: false}"
            )
        );
        plan(&file(&body), &Overrides::default(), KINDS)
    };
    with("{{h.x[0]}} at {{g.x[1]|%}}").unwrap();
    for (quote, says) in [
        (
            "{{hh.x[0]}}",
            "quotes a cell of stage `hh`, which the pipeline does not have; did you mean `h`?",
        ),
        (
            "{{q.x[0]}}",
            "stage `q`, which writes no frame (`store: false`)",
        ),
        ("{{h.x}}", "no [row]"),
    ] {
        let e = with(quote).map(|_| ()).unwrap_err();
        let m = messages(&e);
        assert!(m.iter().any(|m| m.contains(says)), "{quote}: {m:?}");
        assert_eq!(e[0].pos.map(|p| p.line), Some(7), "{quote}: at the finding");
    }
}
