//! `dplab graph`: the stage DAG as Graphviz DOT or Mermaid.

use super::plan::Plan;

pub fn dot(plan: &Plan) -> String {
    let mut s = format!(
        "digraph \"{}\" {{\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n",
        plan.name
    );
    for st in &plan.stages {
        let axes = if st.axes.is_empty() {
            String::new()
        } else {
            format!("\\nover {}", st.axes.join(" × "))
        };
        s += &format!(
            "  \"{}\" [label=\"{}\\n{}\\n{} instance(s){}\"{}];\n",
            st.name,
            st.name,
            st.kind.name,
            st.instances.len(),
            axes,
            if st.store { "" } else { ", style=dashed" }
        );
        for &i in &st.inputs {
            s += &format!("  \"{}\" -> \"{}\";\n", plan.stages[i].name, st.name);
        }
    }
    s + "}\n"
}

pub fn mermaid(plan: &Plan) -> String {
    let mut s = String::from("flowchart LR\n");
    for st in &plan.stages {
        s += &format!(
            "  {}[\"{}<br/>{}<br/>{} instance(s)\"]\n",
            id(&st.name),
            st.name,
            st.kind.name,
            st.instances.len()
        );
        for &i in &st.inputs {
            s += &format!("  {} --> {}\n", id(&plan.stages[i].name), id(&st.name));
        }
    }
    s
}

fn id(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}
