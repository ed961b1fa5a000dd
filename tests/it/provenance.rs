//! Provenance of a result: the manifest names the build of dplab that made it, every file the
//! pipeline named that the run read, each stage's parameters as they ran and what else its
//! keys depend on; each Parquet frame names its pipeline, stage, instance key and dplab version.

use crate::common::{dplab, text, write};

use sha2::{Digest, Sha256};

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn the_manifest_and_the_frames_say_what_made_them() {
    let d = tempfile::tempdir().unwrap();
    let table = "value,label\n3,a\n5,b\n";
    write(d.path(), "data/t.csv", table);
    let p = write(
        d.path(),
        "p.yaml",
        r#"name: prov
title: T
description: d
source: {paper: p, item: i}
seed: 3
axes:
  eps: [0.5, 1]
stages:
  t: {kind: load.table, with: {path: data/t.csv}}
  noisy:
    kind: mechanism.noise
    input: t
    with: {column: value, noise: laplace, epsilon: $eps}
"#,
    );
    let out = d.path().join("out");
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("prov/manifest.json")).unwrap()).unwrap();

    let build = &m["build"];
    assert_eq!(build["version"], env!("CARGO_PKG_VERSION"));
    let exe = std::fs::read(env!("CARGO_BIN_EXE_dplab")).unwrap();
    assert_eq!(
        build["binary_sha256"],
        sha(&exe),
        "the executable's own hash"
    );
    let head = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string());
    if let Some(head) = head {
        assert_eq!(build["commit"], head.as_str(), "built from this checkout");
    }

    let inputs = m["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    assert_eq!(inputs[0]["path"], "data/t.csv");
    let resolved = std::path::Path::new(inputs[0]["resolved"].as_str().unwrap());
    assert!(resolved.is_absolute());
    assert_eq!(std::fs::read(resolved).unwrap(), table.as_bytes());
    assert_eq!(inputs[0]["bytes"], table.len());
    assert_eq!(inputs[0]["sha256"], sha(table.as_bytes()));

    let stage = |name: &str| {
        m["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(stage("t")["files"]["data/t.csv"], sha(table.as_bytes()));
    assert_eq!(
        stage("noisy")["params"],
        serde_json::json!({"column": "value", "noise": "laplace", "epsilon": "$eps"})
    );

    use polars::prelude::*;
    let meta = |stage: &str| -> Vec<(String, String)> {
        let f = std::fs::File::open(out.join(format!("prov/{stage}.parquet"))).unwrap();
        let mut r = ParquetReader::new(f);
        let md = r.get_metadata().unwrap();
        md.key_value_metadata
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|kv| kv.key.starts_with("dplab."))
            .map(|kv| (kv.key, kv.value.unwrap_or_default()))
            .collect()
    };
    let keys = |stage: &str| stage_seeds(&m, stage);
    let t = meta("t");
    assert_eq!(
        t,
        [
            ("dplab.pipeline".to_string(), "prov".to_string()),
            ("dplab.stage".into(), "t".into()),
            ("dplab.version".into(), env!("CARGO_PKG_VERSION").into()),
            ("dplab.instance_key".into(), keys("t")[0].clone()),
        ]
    );
    let noisy = meta("noisy");
    let all: String = keys("noisy").iter().map(|k| format!("{k}\n")).collect();
    assert_eq!(
        noisy[3],
        (
            "dplab.instance_keys_sha256".to_string(),
            sha(all.as_bytes())
        )
    );
}

fn stage_seeds(m: &serde_json::Value, stage: &str) -> Vec<String> {
    m["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == stage)
        .unwrap()["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect()
}
