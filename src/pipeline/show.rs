//! `dplab show`: a plan as the pipeline file that would plan to it with no profile and no
//! `--set` (like Hydra's `--cfg job`), and the list of its instances with their seeds.

use std::io::Write;

use serde_yaml_ng::{Mapping, Value};

use super::plan::Plan;

fn key(k: &str) -> Value {
    Value::String(k.to_string())
}

/// The composed pipeline, as YAML: profile and `--set` applied, `$axis` references kept.
/// Running it gives the same instances, seeds and results as running the original file
/// under the same profile and `--set`.
pub fn composed(plan: &Plan) -> String {
    let mut top = Mapping::new();
    top.insert(key("name"), key(&plan.name));
    top.insert(key("title"), key(&plan.title));
    // An experiment of one's own has none (as its manifest).
    if !plan.source.is_none() {
        let mut source = Mapping::new();
        source.insert(key("paper"), key(&plan.source.paper));
        source.insert(key("item"), key(&plan.source.item));
        top.insert(key("source"), Value::Mapping(source));
    }
    top.insert(key("description"), key(&plan.description));
    top.insert(key("seed"), Value::Number(plan.seed.into()));
    if !plan.axes.is_empty() {
        let axes: Mapping = plan
            .axes
            .iter()
            .map(|(name, values)| {
                (
                    key(name),
                    Value::Sequence(values.iter().map(|v| v.to_yaml()).collect()),
                )
            })
            .collect();
        top.insert(key("axes"), Value::Mapping(axes));
    }
    let mut stages = Mapping::new();
    for s in &plan.stages {
        let mut st = Mapping::new();
        st.insert(key("kind"), key(s.kind.name));
        match s.inputs.as_slice() {
            [] => {}
            [one] => {
                st.insert(key("input"), key(&plan.stages[*one].name));
            }
            many => {
                st.insert(
                    key("input"),
                    Value::Sequence(many.iter().map(|&i| key(&plan.stages[i].name)).collect()),
                );
            }
        }
        if !s.gathered.is_empty() {
            st.insert(
                key("over"),
                Value::Sequence(s.gathered.iter().map(|a| key(a)).collect()),
            );
        }
        if !s.only.is_empty() {
            let only: Mapping = s.only.iter().map(|(a, v)| (key(a), v.clone())).collect();
            st.insert(key("only"), Value::Mapping(only));
        }
        if let Some(n) = s.repeat {
            st.insert(key("repeat"), Value::Number(n.into()));
        }
        if !s.store {
            st.insert(key("store"), Value::Bool(false));
        }
        if s.with.as_mapping().is_some_and(|m| !m.is_empty()) {
            st.insert(key("with"), s.with.clone());
        }
        stages.insert(key(&s.name), Value::Mapping(st));
    }
    top.insert(key("stages"), Value::Mapping(stages));
    let mut out = format!(
        "# {} as it runs{}: profile and --set applied\n",
        plan.file.display(),
        plan.profile
            .as_deref()
            .map(|p| format!(" under profile `{p}`"))
            .unwrap_or_default()
    );
    out.push_str(&serde_yaml_ng::to_string(&Value::Mapping(top)).expect("a YAML value"));
    out
}

/// Every instance: per stage a header, then a line per instance with its axis values, its
/// seed (hex, as the manifest writes it) and its store key. Streamed: a plan can have 10⁶.
pub fn instances(plan: &Plan, out: &mut impl Write) -> std::io::Result<()> {
    for s in &plan.stages {
        writeln!(
            out,
            "{} ({}): {} instance{}",
            s.name,
            s.kind.name,
            s.instances.len(),
            if s.instances.len() == 1 { "" } else { "s" }
        )?;
        for inst in &s.instances {
            let label = inst.label();
            writeln!(
                out,
                "  {:<30} seed {:032x}  key {}",
                if label.is_empty() {
                    "(no axes)"
                } else {
                    &label
                },
                inst.seed,
                inst.store_key
            )?;
        }
    }
    Ok(())
}
