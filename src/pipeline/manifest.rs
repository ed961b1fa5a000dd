//! `manifest.json`: what a results directory holds and how its run was made. One type for the
//! file's writer ([`super::results`]) and all its readers — the writer's own check before it
//! replaces a directory, `dplab compare` (the profile and axes), the instance store's
//! collection (the store keys still referenced) and the HTML report — so that a field is
//! named, typed and documented once.
//!
//! Every field has a default: a reader takes what it needs from a manifest of an older dplab,
//! or from the short one `make golden` keeps beside the golden frames. The per-instance list
//! of each stage (`seeds`) is a type parameter: the writer streams it from the plan (a sweep
//! of 10⁶ instances holds no tree of them), a reader that does not need it skips it while
//! reading ([`WithoutSeeds`]).

use indexmap::IndexMap;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::spec::Source;
use crate::verdict::Finding;

/// What `dplab run` wrote, in the order it writes it.
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(default, bound(deserialize = "Seeds: Deserialize<'de> + Default"))]
pub struct Manifest<Seeds = Vec<Seed>> {
    pub dplab_version: String,
    /// The dplab that wrote it: version, the commit it was built from, its binary's sha256.
    pub build: Build,
    /// `git rev-parse HEAD` of the pipeline file's directory, `-dirty` when it has changes.
    pub git_commit: Option<String>,
    pub pipeline: PipelineInfo,
    /// `--profile`; `None` for the pipeline's full settings.
    pub profile: Option<String>,
    /// The `--set` arguments.
    pub set: Vec<String>,
    pub seed: Option<u64>,
    /// The axes as resolved, by name: each value's canonical text, a record as written.
    pub axes: IndexMap<String, Vec<serde_json::Value>>,
    /// Worker threads.
    pub jobs: Option<u64>,
    pub wall_seconds: Option<f64>,
    /// Every file the pipeline's parameters named that the run read (tables, code), with
    /// where it was and what it held.
    pub inputs: Vec<InputFile>,
    /// Every file of the results directory but this one, with its size and hash.
    pub outputs: Vec<OutputFile>,
    pub warning: String,
    /// The stages `--stages` asked for; absent for a run of the whole pipeline. Every stage is
    /// listed in `stages` either way: those this run did not make say so ([`StageEntry::kept`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages_asked: Vec<String>,
    /// Present when the results are not the whole pipeline's as it stands: stages that failed,
    /// that neither ran nor had earlier outputs to keep, or whose kept outputs are stale. What
    /// is here is right or marked; what is missing is listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<Incomplete>,
    pub stages: Vec<StageEntry<Seeds>>,
}

/// What a results directory lacks (see [`Manifest::incomplete`]).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Incomplete {
    /// Stages `--stages` did not ask for whose outputs are neither in the store nor in the
    /// results directory's earlier run: not here.
    #[serde(default)]
    pub left_out: Vec<String>,
    /// Stages with no new frame because instances of theirs failed or read a failure, each
    /// with why (one line).
    #[serde(default)]
    pub failed: Vec<String>,
    /// Stages whose outputs are kept from an earlier run although their instances are not
    /// those any more (an input, a parameter or the seed changed), each with why (one line):
    /// here, marked, never passed off as current.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<String>,
}

/// A manifest read without the per-instance lists of its stages.
pub(crate) type WithoutSeeds = Manifest<IgnoredAny>;

impl<Seeds> Manifest<Seeds> {
    /// Whether it is a manifest dplab wrote: it names its version and its pipeline.
    pub(crate) fn is_dplab(&self) -> bool {
        !self.dplab_version.is_empty() && !self.pipeline.name.is_empty()
    }

    /// The profile as a person reads it.
    pub fn profile_name(&self) -> String {
        match &self.profile {
            Some(p) => format!("profile `{p}`"),
            None => "no profile (full settings)".into(),
        }
    }
}

/// The pipeline file the run read.
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(default)]
pub struct PipelineInfo {
    pub name: String,
    pub title: String,
    /// The file, as the run was given it.
    pub file: String,
    pub sha256: String,
    /// What it reproduces; absent for an experiment of one's own (no `source:`).
    #[serde(default, skip_serializing_if = "Source::is_none")]
    pub source: Source,
    pub description: String,
    /// The file's `findings:`, passed through for the report.
    pub findings: Vec<Finding>,
}

/// The build of dplab that wrote a manifest.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct Build {
    pub version: String,
    /// `git rev-parse HEAD` when it was built (uncommitted changes are not seen: the binary's
    /// hash tells builds apart).
    pub commit: String,
    /// sha256 of the dplab executable that ran.
    pub binary_sha256: String,
}

/// A file a run read because its pipeline named it.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct InputFile {
    /// As written in the pipeline (relative to the pipeline file).
    pub path: String,
    /// Where it was read from.
    pub resolved: String,
    pub bytes: u64,
    pub sha256: String,
}

/// One file of a results directory.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct OutputFile {
    pub file: String,
    pub bytes: u64,
    pub sha256: String,
    /// The stage it is an output of; absent for the run's own files (`rerun/`) and in
    /// manifests before it was recorded (see [`OutputFile::of_stage`]).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stage: String,
}

impl OutputFile {
    /// Whether it is an output of stage `name`: as recorded, or, in a manifest that does not
    /// record it, by its name (`<stage>.<ext>`, `<stage>__<instance>.<ext>`).
    pub fn of_stage(&self, name: &str) -> bool {
        if !self.stage.is_empty() {
            return self.stage == name;
        }
        self.file.strip_prefix(name).is_some_and(|rest| {
            (rest.starts_with('.') && !rest[1..].contains('.')) || rest.starts_with("__")
        })
    }
}

/// One stage of the run.
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(default, bound(deserialize = "Seeds: Deserialize<'de> + Default"))]
pub struct StageEntry<Seeds = Vec<Seed>> {
    pub name: String,
    pub kind: String,
    pub kind_version: u32,
    /// Instances computed by this run.
    pub instances_run: u64,
    /// Instances taken from the instance store.
    pub instances_cached: u64,
    /// The axes it varies over.
    pub axes: Vec<String>,
    /// The axes it gathers into one instance.
    pub gathered: Vec<String>,
    /// Whether its frame is written (`store: false` in the pipeline file: no). An older
    /// manifest without it wrote every frame.
    #[serde(default = "written")]
    pub stored: bool,
    /// Whether its frame is the same bits on every run: false for a stage whose program dplab
    /// cannot seed (`seeded: false`), and for every stage that reads one's output. `dplab
    /// compare` does not compare such frames. An older manifest: true.
    #[serde(default = "written")]
    pub reproducible: bool,
    pub instances: u64,
    /// Compute time of its instances, summed and the longest.
    pub seconds_total: f64,
    pub seconds_max: f64,
    /// The programs its instances ran, each an argv (an external program's output is what its
    /// program made of its seed: `dplab run --verify` is the way to check it is reproducible).
    /// Left out when none, as in every manifest before external stages.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<Vec<String>>,
    /// Its parameters as they ran (after `--profile` and `--set`), with its `$axis`
    /// references: each instance's set is this with its axis values put in.
    pub params: serde_json::Value,
    /// What else its keys are a function of: the files and folders its parameters name and
    /// its probes (each with its sha256), and the external data it reads (a dataset file's
    /// registered name and sha256). Left out when none.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub files: std::collections::BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<serde_json::Value>,
    /// What its instances ran on: what each probe printed, by its command (the interpreter's
    /// `--version`, asked unasked for Python, R and Julia programs), and the helper dplab
    /// hands programs. Left out when none.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub environment: std::collections::BTreeMap<String, String>,
    /// When its instances taken from the store were computed; absent when none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_store: Option<FromStore>,
    /// Present when this run did not make its outputs: they, and this entry, are those of the
    /// results directory's earlier run, carried over (see [`Kept`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<Kept>,
    /// Its instances in plan order.
    pub seeds: Seeds,
}

fn written() -> bool {
    true
}

/// Why a stage's outputs are an earlier run's, and whether they still are what it would give.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct Kept {
    /// Why this run did not make them: `not asked for (--stages), and not all in the store`,
    /// or `failed in this run` (an entry with no earlier outputs at all says so too).
    pub why: String,
    /// Whether its instances are still those that made them (the same store keys: the same
    /// kind, parameters, seeds and inputs). `false`: stale, listed in
    /// [`Incomplete::stale`].
    pub current: bool,
}

/// One instance of a stage.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct Seed {
    /// Its axis values, as `dplab show` labels it.
    pub instance: String,
    /// Its generator's seed, 32 hex digits.
    pub seed: String,
    /// Its key in the instance store.
    pub key: String,
    /// Its key by what it read (early cutoff), under which the store files it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_key: Option<String>,
    /// For an instance taken from the store: when, by which build and in how long it was
    /// computed, as its store entry says. Absent for one this run computed (the manifest's
    /// `build` did, during `wall_seconds`) and for entries of a dplab that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computed: Option<Computed>,
}

/// When, by which build and in how long a stored instance was computed.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct Computed {
    /// RFC 3339, UTC.
    pub at: String,
    /// The build: version, commit and executable sha256 (12 hex digits each).
    pub by: String,
    pub seconds: f64,
}

/// What a stage's instances taken from the store say of their computation, summed up
/// (each instance's is in its [`Seed::computed`]).
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct FromStore {
    /// The earliest and the latest time one was computed (RFC 3339, UTC).
    pub earliest: String,
    pub latest: String,
    /// The builds that computed them, earliest first.
    pub builds: Vec<String>,
    /// Their compute time, summed.
    pub seconds: f64,
    /// How many have no record of it (stored by a dplab that did not record it).
    #[serde(skip_serializing_if = "is_zero")]
    pub unrecorded: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest as `dplab run` writes it (a record axis, `--set`, a finding, one stage of
    /// two instances), field for field and byte for byte.
    const WRITTEN: &str = r#"{
  "dplab_version": "0.1.0",
  "build": {
    "version": "0.1.0",
    "commit": "50fc2fa",
    "binary_sha256": "e1c0"
  },
  "git_commit": "61f1541-dirty",
  "pipeline": {
    "name": "p",
    "title": "A title",
    "file": "pipelines/p.yaml",
    "sha256": "00ff",
    "source": {
      "paper": "paper-one",
      "item": "Table 1"
    },
    "description": "d\n",
    "findings": [
      {
        "claim": "Figure 1 rises",
        "found": "it rises from 1 to 2",
        "verdict": "agrees"
      }
    ]
  },
  "profile": null,
  "set": [
    "eps=[0.5]"
  ],
  "seed": 7,
  "axes": {
    "dataset": [
      {
        "name": "CRM",
        "drop_sparse": 0.5
      }
    ],
    "eps": [
      "0.5",
      "1e-8"
    ]
  },
  "jobs": 2,
  "wall_seconds": 0.0123456789,
  "inputs": [
    {
      "path": "data/table.csv",
      "resolved": "/home/r/pipelines/data/table.csv",
      "bytes": 120,
      "sha256": "a1b2"
    }
  ],
  "outputs": [
    {
      "file": "noisy.csv",
      "bytes": 36,
      "sha256": "7b3f"
    }
  ],
  "warning": "seeded runs reproduce research; never use them to release real private data",
  "stages": [
    {
      "name": "noisy",
      "kind": "mechanism.noise",
      "kind_version": 1,
      "instances_run": 1,
      "instances_cached": 1,
      "axes": [
        "eps"
      ],
      "gathered": [],
      "stored": true,
      "reproducible": true,
      "instances": 2,
      "seconds_total": 0.5,
      "seconds_max": 0.25,
      "params": {
        "column": "value",
        "noise": "laplace",
        "epsilon": "$eps"
      },
      "files": {
        "data/table.csv": "a1b2"
      },
      "sources": [
        {
          "dataset": "adult",
          "files": [
            {
              "file": "adult.data",
              "sha256": "5b00"
            }
          ],
          "tables": {}
        }
      ],
      "seeds": [
        {
          "instance": "eps=0.5",
          "seed": "0000000000000000000000000000002a",
          "key": "ab"
        },
        {
          "instance": "eps=1e-8",
          "seed": "0000000000000000000000000000002b",
          "key": "cd"
        }
      ]
    }
  ]
}"#;

    #[test]
    fn a_manifest_is_read_back_as_written() {
        let m: Manifest = serde_json::from_str(WRITTEN).unwrap();
        assert_eq!(serde_json::to_string_pretty(&m).unwrap(), WRITTEN);
        assert!(m.is_dplab());
        assert_eq!(m.stages[0].seeds[1].key, "cd");
        // Read without the seeds: the rest is all there.
        let head: WithoutSeeds = serde_json::from_str(WRITTEN).unwrap();
        assert_eq!(
            (head.seed, head.jobs, head.outputs[0].bytes),
            (Some(7), Some(2), 36)
        );
        assert_eq!(head.profile_name(), "no profile (full settings)");
    }

    /// The short manifest `make golden` keeps, and one of an older dplab, are read with
    /// defaults; a JSON file that names no dplab version or pipeline is no dplab manifest.
    #[test]
    fn short_and_older_manifests_are_read_with_defaults() {
        let golden: WithoutSeeds = serde_json::from_str(
            r#"{"written_by": "make golden", "pipeline": {"name": "p"}, "profile": "ci",
                "axes": {"eps": ["0.1", "1"]}}"#,
        )
        .unwrap();
        assert_eq!(golden.profile_name(), "profile `ci`");
        assert_eq!(golden.axes["eps"].len(), 2);
        assert!(!golden.is_dplab());
        let older: Manifest = serde_json::from_str(
            r#"{"dplab_version": "0.0.9", "pipeline": {"name": "p"},
                "stages": [{"name": "s", "seeds": [{"key": "ab"}]}]}"#,
        )
        .unwrap();
        assert!(older.is_dplab() && older.stages[0].stored);
        assert_eq!(older.stages[0].seeds[0].key, "ab");
    }
}
