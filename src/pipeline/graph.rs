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

/// Node ids are `s0`, `s1`, … by stage position: stage names may hold `-`, which Mermaid ids
/// cannot, and a name mapped to an id by replacing characters would make `a-b` and `a_b` one
/// node (or a stage named `end`, a Mermaid keyword, break the chart). The name is the label.
pub fn mermaid(plan: &Plan) -> String {
    let mut s = String::from("flowchart LR\n");
    for (si, st) in plan.stages.iter().enumerate() {
        s += &format!(
            "  s{si}[\"{}<br/>{}<br/>{} instance(s)\"]\n",
            st.name,
            st.kind.name,
            st.instances.len()
        );
        for &i in &st.inputs {
            s += &format!("  s{i} --> s{si}\n");
        }
    }
    s
}
