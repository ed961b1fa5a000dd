//! `dplab schema`: the JSON Schema (draft 7) of a whole pipeline file — the top-level keys,
//! axes, profiles, and each stage's `with:` chosen by its `kind:` — for editors (completion,
//! hover docs, red squiggles) and for checking files with any validator.
//!
//! Built from the spec's own types ([`RawPipeline`], their doc comments as descriptions) and
//! each kind's parameter schema ([`KindInfo::schema`]), so it says what `validate` reads, from
//! the same definitions. It checks the shape of a file and every parameter's type and range;
//! what needs the whole pipeline (inputs that exist, cycles, axes that exist, column names,
//! limits) only `dplab validate` checks.

use serde_json::{json, Value};

use super::spec::RawPipeline;
use crate::kind::KindInfo;

/// A value in `with:` may be an axis reference (`$eps`, or a record's field `$data.drop`)
/// wherever the kind expects a value: steps of [`crate::axis::is_word`] joined by dots.
const AXIS_REF: &str = r"^\$[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$";

/// The schema of a pipeline file, given the kinds it may use.
pub fn pipeline_schema(registry: &[KindInfo]) -> Value {
    let mut root = crate::kind::schema_settings()
        .into_generator()
        .into_root_schema_for::<RawPipeline>()
        .to_value();
    root["title"] = json!("dplab pipeline");
    root["description"] = json!(
        "A dplab pipeline file (`dplab schema` prints this schema; `dplab list KIND` describes a kind's parameters)."
    );
    let stage = &mut root["properties"]["stages"]["additionalProperties"];
    let names: Vec<&str> = registry.iter().map(|k| k.name).collect();
    stage["properties"]["kind"] = json!({
        "description": stage["properties"]["kind"]["description"],
        "enum": names,
    });
    let per_kind: Vec<Value> = registry
        .iter()
        .map(|k| {
            let mut with = k.schema().to_value();
            if let Some(m) = with.as_object_mut() {
                m.remove("$schema");
                m.remove("title");
            }
            allow_axis_refs(&mut with);
            with["description"] = json!(format!("{}: {}", k.name, k.summary));
            let required = with["required"].as_array().is_some_and(|r| !r.is_empty());
            let mut then = json!({"properties": {"with": with}});
            if required {
                then["required"] = json!(["with"]);
            }
            json!({
                "if": {"properties": {"kind": {"const": k.name}}, "required": ["kind"]},
                "then": then,
            })
        })
        .collect();
    stage["allOf"] = Value::Array(per_kind);
    // `$schema` first, where a reader looks for it.
    let mut ordered = serde_json::Map::new();
    if let Value::Object(mut m) = root {
        if let Some(meta) = m.remove("$schema") {
            ordered.insert("$schema".into(), meta);
        }
        ordered.extend(m);
    }
    Value::Object(ordered)
}

/// Lets every value inside a parameter schema also be an axis reference. Applied to each
/// property, list item and map value, so `$eps` may stand for a whole parameter or one item.
fn allow_axis_refs(schema: &mut Value) {
    let Some(m) = schema.as_object_mut() else {
        return;
    };
    for key in ["properties", "definitions"] {
        if let Some(Value::Object(props)) = m.get_mut(key) {
            for p in props.values_mut() {
                allow_axis_refs(p);
                or_axis_ref(p);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(p) = m.get_mut(key).filter(|p| p.is_object()) {
            allow_axis_refs(p);
            or_axis_ref(p);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(alts)) = m.get_mut(key) {
            alts.iter_mut().for_each(allow_axis_refs);
        }
    }
}

/// `schema` → `{anyOf: [schema, an axis reference]}`, keeping its description and default
/// at the top where editors look for them.
fn or_axis_ref(schema: &mut Value) {
    let mut inner = std::mem::take(schema);
    let mut outer = serde_json::Map::new();
    if let Some(m) = inner.as_object_mut() {
        for key in ["description", "default", "title"] {
            if let Some(v) = m.remove(key) {
                outer.insert(key.into(), v);
            }
        }
    }
    outer.insert(
        "anyOf".into(),
        json!([inner, {"type": "string", "pattern": AXIS_REF}]),
    );
    *schema = Value::Object(outer);
}
