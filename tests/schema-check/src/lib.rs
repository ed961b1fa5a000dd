//! `dplab schema` checked with an independent validator (boon, draft 7): every pipeline of
//! `pipelines/` passes it, files broken in each way the schema can see fail it, and every
//! kind's defaults lie inside the ranges its own schema states.
//!
//! Run by `make test` after the release build: `DPLAB` names the binary (default
//! `target/release/dplab` of this repository). A package of its own, so that the validator's
//! dependencies do not change the features of dplab's build (see the workspace's Cargo.toml).

#[cfg(test)]
// The test reads the repository's own pipeline files.
#[allow(clippy::disallowed_methods)]
mod tests {
    use std::fs;
    use std::path::{Path, PathBuf};

    use serde_json::Value;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn schema() -> Value {
        let bin = std::env::var_os("DPLAB")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join("target/release/dplab"));
        let o = std::process::Command::new(&bin)
            .arg("schema")
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (build it first: cargo build --release)",
                    bin.display()
                )
            });
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    }

    struct Validator {
        schemas: boon::Schemas,
        index: boon::SchemaIndex,
    }

    impl Validator {
        fn new(schema: Value) -> Self {
            let mut schemas = boon::Schemas::new();
            let mut compiler = boon::Compiler::new();
            compiler.set_default_draft(boon::Draft::V7);
            compiler
                .add_resource("file:///dplab.schema.json", schema)
                .unwrap();
            let index = compiler
                .compile("file:///dplab.schema.json", &mut schemas)
                .unwrap_or_else(|e| panic!("the schema does not compile: {e:#}"));
            Validator { schemas, index }
        }

        fn check(&self, yaml: &str) -> Result<(), String> {
            let v: Value = serde_yaml_ng::from_str(yaml).unwrap();
            self.schemas
                .validate(&v, self.index)
                .map_err(|e| format!("{e}"))
        }
    }

    fn pipelines() -> Vec<PathBuf> {
        let root = repo().join("pipelines");
        let mut files = Vec::new();
        for paper in fs::read_dir(root).unwrap().flatten() {
            for f in fs::read_dir(paper.path()).unwrap().flatten() {
                if f.path().extension().is_some_and(|e| e == "yaml") {
                    files.push(f.path());
                }
            }
        }
        files.sort();
        files
    }

    #[test]
    fn every_pipeline_passes_the_schema_and_broken_ones_fail_it() {
        let v = Validator::new(schema());
        let files = pipelines();
        assert!(files.len() >= 20, "{files:?}");
        for f in &files {
            let text = fs::read_to_string(f).unwrap();
            if let Err(e) = v.check(&text) {
                panic!("{}: {e}", f.display());
            }
        }

        // One pipeline, broken in each way a schema can see.
        let good = fs::read_to_string(repo().join("pipelines/dwork-roth/dr-pumpkin.yaml")).unwrap();
        let select = "with: {method: exponential, epsilon: $eps, sensitivity: 5.0, candidate: price, utility: revenue, samples: 100000}";
        assert!(good.contains(select));
        v.check(&good).unwrap();
        for (what, from, to) in [
            ("an unknown top-level key", "seed:", "sead: 1\nseed:"),
            (
                "an unknown kind",
                "kind: mechanism.select",
                "kind: mechanism.selekt",
            ),
            (
                "an unknown parameter",
                "utility: revenue, samples",
                "utility: revenue, samplez",
            ),
            (
                "a value out of range",
                "sensitivity: 5.0",
                "sensitivity: -5.0",
            ),
            (
                "a wrong type",
                "revenue, samples: 100000}",
                "revenue, samples: many}",
            ),
            (
                "a wrong choice",
                "method: exponential",
                "method: exponentail",
            ),
            ("a missing required parameter", "method: exponential, ", ""),
            ("a wrong type of a stage key", "store: false", "store: 3"),
            ("a bad axis grid", "num: 31}}", "num: 31, step: 2}}"),
            (
                "a misspelt profile key",
                "    axes:\n      eps: [0.1",
                "    axis:\n      eps: [0.1",
            ),
        ] {
            assert!(good.contains(from), "{what}: {from}");
            let bad = good.replacen(from, to, 1);
            assert!(v.check(&bad).is_err(), "{what} passed the schema:\n{bad}");
        }
    }

    #[test]
    fn every_default_lies_inside_its_own_range() {
        let schema = schema();
        let kinds = schema["properties"]["stages"]["additionalProperties"]["allOf"]
            .as_array()
            .expect("one if/then per kind");
        let mut checked = 0;
        for k in kinds {
            let kind = &k["if"]["properties"]["kind"]["const"];
            let props = k["then"]["properties"]["with"]["properties"].as_object();
            for (name, prop) in props.into_iter().flatten() {
                let Some(default) = prop.get("default").cloned() else {
                    continue;
                };
                let mut bare = prop.clone();
                bare.as_object_mut().unwrap().remove("default");
                let v = Validator::new(bare);
                assert!(
                    v.schemas.validate(&default, v.index).is_ok(),
                    "{kind}: the default {default} of `{name}` is outside its range {prop}"
                );
                checked += 1;
            }
        }
        assert!(checked >= 5, "only {checked} defaults checked");
    }
}
