//! Shards: one of N processes (an array job's tasks) runs a deterministic share of a plan's
//! instances into a shared instance store; a later plain run takes them from the store and
//! runs only the stages that gather. No process talks to another: the store is the only
//! thing they share, so a shard that dies loses nothing another one finished.
//!
//! How the work is shared out (see [`owners`]):
//! - Stages that gather (`over:`) and everything downstream of them run in the merge, not in
//!   a shard: they need every shard's instances.
//! - The other instances are assigned by whole sub-trees. An instance read by no other
//!   shardable instance (the top of a chain, such as one repetition's evaluation) is a unit;
//!   units are dealt round-robin in plan order, continuing across stages and pipelines, so
//!   each shard gets about 1/N of every stage's instances and so about 1/N of its work
//!   whatever the stage costs (instances of one stage cost about the same). An instance
//!   goes with its readers when they are all in one shard: a repetition's mechanism runs in
//!   the shard that evaluates it, and its frame never crosses the store between them.
//! - An instance whose readers are in several shards (a dataset every repetition reads) is
//!   shared: each shard that needs it takes it from the store; when it is not there yet, the
//!   first shard to need it claims it ([`super::claim`]) and computes it, and the others do
//!   their other work first and then wait for it. Should two compute it all the same (a claim
//!   broken as stale while its holder still ran), the copies are byte-identical and the store
//!   keeps one.

use std::fmt;

use super::plan::Plan;

/// Which share of the work this process runs: `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// More shards than this is a typo, not a cluster (an array job of 10⁵ tasks is beyond most
/// sites' `MaxArraySize` too).
pub const MAX_SHARDS: usize = 100_000;

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Parses `--shard`: `I/N` (0-based index I of N shards); `auto` (the index and count
    /// of a Slurm array task: `SLURM_ARRAY_TASK_ID`, `SLURM_ARRAY_TASK_COUNT`); or `auto/N`
    /// (the index from `SLURM_ARRAY_TASK_ID` or Kubernetes' `JOB_COMPLETION_INDEX`, the
    /// count given). `env` reads a variable (the process environment, or a test's).
    pub fn parse(s: &str, env: impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
        const FORMS: &str = "give `I/N` (shard I of N, counting from 0), `auto` (a Slurm array task's index and count) or `auto/N` (the index from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX, N shards)";
        let number = |what: &str, text: &str, from: &str| -> Result<usize, String> {
            text.trim().parse::<usize>().map_err(|_| {
                format!("--shard {s}: {what} `{text}`{from} is not a whole number ≥ 0; {FORMS}")
            })
        };
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let (index, count) = match s.split_once('/') {
            Some(("auto", n)) => {
                let count = number("the count", n, "")?;
                let (name, value) = ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"]
                    .iter()
                    .find_map(|v| var(v).map(|x| (*v, x)))
                    .ok_or_else(|| {
                        format!("--shard {s}: neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set (is this an array task?); {FORMS}")
                    })?;
                (
                    number("the index", &value, &format!(" (from {name})"))?,
                    count,
                )
            }
            Some((i, n)) => (number("the index", i, "")?, number("the count", n, "")?),
            None if s == "auto" => {
                let get = |name: &str| {
                    var(name).ok_or_else(|| {
                        format!("--shard auto: {name} is not set (is this a Slurm array task? elsewhere give `auto/N` or `I/N`)")
                    })
                };
                let (i, n) = (get("SLURM_ARRAY_TASK_ID")?, get("SLURM_ARRAY_TASK_COUNT")?);
                (
                    number("the index", &i, " (from SLURM_ARRAY_TASK_ID)")?,
                    number("the count", &n, " (from SLURM_ARRAY_TASK_COUNT)")?,
                )
            }
            None => return Err(format!("--shard {s}: {FORMS}")),
        };
        if !(1..=MAX_SHARDS).contains(&count) {
            return Err(format!(
                "--shard {s}: {count} shards is out of range: give 1 to {MAX_SHARDS}"
            ));
        }
        if index >= count {
            return Err(format!(
                "--shard {s}: shard index {index} is out of range for {count} shards: give 0 to {} (indices count from 0)",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }
}

/// The owner of an instance that several shards read (each computes it if it is missing).
pub(crate) const SHARED: u32 = u32::MAX;
/// The owner of an instance that only the merge runs (it gathers, or reads a gather).
pub(crate) const MERGE: u32 = u32::MAX - 1;
const UNSET: u32 = u32::MAX - 2;

/// Per instance (global id: instances of stage 0, then of stage 1, …, in plan order), the
/// shard that owns it, [`SHARED`] or [`MERGE`]; and the number of units dealt, so the next
/// pipeline of the same run continues the round-robin where this one stopped (`start` is
/// that count over the pipelines before).
pub fn owners(plan: &Plan, count: usize, start: usize) -> (Vec<u32>, usize) {
    let mut offset = Vec::with_capacity(plan.stages.len());
    let mut n = 0;
    for s in &plan.stages {
        offset.push(n);
        n += s.instances.len();
    }
    // Stages are in topological order, so a stage's inputs are decided before it.
    let mut merge = vec![false; plan.stages.len()];
    for (si, s) in plan.stages.iter().enumerate() {
        merge[si] = !s.gathered.is_empty() || s.inputs.iter().any(|&u| merge[u]);
    }
    // A unit is a shardable instance no other shardable instance reads.
    let mut read = vec![false; n];
    for (si, s) in plan.stages.iter().enumerate() {
        if merge[si] {
            continue;
        }
        for inst in &s.instances {
            for (&up, js) in s.inputs.iter().zip(inst.inputs.iter()) {
                for &j in js.iter() {
                    read[offset[up] + j] = true;
                }
            }
        }
    }
    let mut owner = vec![UNSET; n];
    let mut units = 0;
    for (si, s) in plan.stages.iter().enumerate() {
        for g in offset[si]..offset[si] + s.instances.len() {
            owner[g] = if merge[si] {
                MERGE
            } else if !read[g] {
                units += 1;
                ((start + units - 1) % count) as u32
            } else {
                UNSET
            };
        }
    }
    // Readers come after what they read, so walking backwards settles every reader of an
    // instance before the instance itself.
    for si in (0..plan.stages.len()).rev() {
        if merge[si] {
            continue;
        }
        let s = &plan.stages[si];
        for (ii, inst) in s.instances.iter().enumerate() {
            let o = owner[offset[si] + ii];
            for (&up, js) in s.inputs.iter().zip(inst.inputs.iter()) {
                for &j in js.iter() {
                    let u = &mut owner[offset[up] + j];
                    *u = if *u == UNSET || *u == o { o } else { SHARED };
                }
            }
        }
    }
    (owner, start + units)
}
