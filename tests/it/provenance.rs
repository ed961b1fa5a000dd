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
    // Whose rows are whose: each instance's key and its rows (two each), in row order.
    let listed: serde_json::Value = serde_json::from_str(&noisy[4].1).unwrap();
    assert_eq!(noisy[4].0, "dplab.instances");
    let want: Vec<serde_json::Value> = keys("noisy")
        .iter()
        .map(|k| serde_json::json!([k, 2]))
        .collect();
    assert_eq!(listed, serde_json::Value::Array(want));
}

/// An instance taken from the store says when, by which build and in how long it was
/// computed: per instance and per stage in the manifest, and in the report's provenance
/// beside this run's wall time.
#[test]
fn a_result_from_the_store_says_when_it_was_computed() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "data/t.csv", "value\n3\n5\n");
    let p = write(
        d.path(),
        "p.yaml",
        "name: when\ntitle: T\ndescription: d\nseed: 3\naxes:\n  eps: [0.5, 1]\nstages:\n  t: {kind: load.table, with: {path: data/t.csv}}\n  noisy: {kind: mechanism.noise, input: t, with: {column: value, noise: laplace, epsilon: $eps}}\n",
    );
    let store = d.path().join("store");
    let run = |out: &str| {
        let o = dplab()
            .args(["run", "-q", "--store"])
            .arg(&store)
            .arg("--out")
            .arg(d.path().join(out))
            .arg(&p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let m: serde_json::Value = serde_json::from_slice(
            &std::fs::read(d.path().join(out).join("when/manifest.json")).unwrap(),
        )
        .unwrap();
        m
    };
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let first = run("a");
    for st in first["stages"].as_array().unwrap() {
        assert!(st.get("from_store").is_none(), "computed by this run: {st}");
        for s in st["seeds"].as_array().unwrap() {
            assert!(s.get("computed").is_none(), "{s}");
        }
    }
    let second = run("b");
    let b = &first["build"];
    let by = format!(
        "{} {} {}",
        b["version"].as_str().unwrap(),
        &b["commit"]
            .as_str()
            .unwrap()
            .chars()
            .take(12)
            .collect::<String>(),
        &b["binary_sha256"].as_str().unwrap()[..12]
    );
    let noisy = second["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "noisy")
        .unwrap();
    assert_eq!(noisy["instances_cached"], 2);
    let seeds = noisy["seeds"].as_array().unwrap();
    for s in seeds {
        let c = &s["computed"];
        assert_eq!(c["by"], by.as_str(), "{s}");
        let at = humantime::parse_rfc3339(c["at"].as_str().unwrap()).unwrap();
        let at = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        assert!(at >= before && at <= before + 600, "{s}");
        assert!(c["seconds"].as_f64().unwrap() >= 0.0);
    }
    let from = &noisy["from_store"];
    assert_eq!(from["builds"], serde_json::json!([by]));
    let times: Vec<&str> = seeds
        .iter()
        .map(|s| s["computed"]["at"].as_str().unwrap())
        .collect();
    assert_eq!(from["earliest"], *times.iter().min().unwrap());
    assert_eq!(from["latest"], *times.iter().max().unwrap());
    let o = dplab()
        .arg("report")
        .arg(d.path().join("b"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // An experiment of one's own: nothing printed to compare, so nothing said of it.
    assert!(
        text(&o).contains("1 experiment (1 with results") && !text(&o).contains("printed"),
        "{}",
        text(&o)
    );
    let html = std::fs::read_to_string(d.path().join("b/index.html")).unwrap();
    assert!(html.contains("wall time of this run"), "{html}");
    assert!(
        html.contains("computed earlier") && html.contains(&format!("by {by}")),
        "the report names when and by which build: {html}"
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

/// An external program run by an interpreter records its version without being asked, and
/// the Python helper dplab hands it; neither is in the keys (a pipeline's own `probe:` is).
#[test]
fn an_interpreter_s_version_is_recorded_unasked() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "code/p.py",
        "open('output/out.csv', 'w').write('v\\n1\\n')\n",
    );
    let pipeline = |probe: &str| {
        write(
            d.path(),
            "p.yaml",
            &format!(
                "name: interp\ntitle: T\ndescription: d\nseed: 3\nstages:\n  py:\n    kind: external\n    with: {{command: [python3, code/p.py], code: [code], columns: [v]{probe}}}\n"
            ),
        )
    };
    let out = d.path().join("out");
    let run = |p: &std::path::Path| {
        let o = dplab()
            .args(["run", "-q", "--allow-exec", "--out"])
            .arg(&out)
            .arg(p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("interp/manifest.json")).unwrap())
                .unwrap();
        m["stages"][0].clone()
    };
    let version = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string()
        + String::from_utf8_lossy(&version.stderr).trim();
    let st = run(&pipeline(""));
    assert_eq!(
        st["environment"]["python3 --version"],
        version.as_str(),
        "{st}"
    );
    assert!(
        st["environment"]["dplab_external.py"]
            .as_str()
            .unwrap()
            .starts_with("protocol 1, sha256 "),
        "{st}"
    );
    assert!(
        st["files"].get("probe: python3 --version").is_none(),
        "recorded, not keyed: {st}"
    );
    let key = st["seeds"][0]["key"].clone();
    // Asked for, the same probe is keyed too, and the key changes.
    let st = run(&pipeline(", probe: [python3, --version]"));
    assert_eq!(
        st["environment"]["python3 --version"],
        version.as_str(),
        "{st}"
    );
    assert!(
        st["files"].get("probe: python3 --version").is_some(),
        "{st}"
    );
    assert_ne!(st["seeds"][0]["key"], key);
}
