//! `instances.parquet`, the instances table of a results directory (see
//! [`outputs_instances`]): what the manifest's `seeds` say of each instance, plus where its rows
//! are in its stage's frame, as a frame a reader joins without reading JSON.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use polars::prelude::*;

use super::{axis_json, put_with, OutputNames, StageOutput};
use crate::pipeline::manifest::{OutputFile, StageEntry};
use crate::pipeline::plan::Plan;

/// `instances.parquet`: one row per instance of every stage — its label, axis values (a JSON
/// object), repetition, seed, store keys, its rows in its stage's frame (`first_row`, `rows`),
/// whether it came from the store, when and by which build it was computed, its compute time,
/// whether its outputs are an earlier run's (`kept`), and what its stage's probes printed —
/// so DuckDB or polars join any frame to its provenance without reading the manifest's JSON
/// (row `r` of `<stage>.parquet` is the instance with `first_row ≤ r < first_row + rows`).
/// Written in row groups of [`INSTANCE_ROWS`] instances: a sweep of 10⁶ never holds its table
/// whole.
pub(super) fn outputs_instances(
    plan: &Plan,
    results: &[StageOutput],
    carried: &[Option<&StageEntry>],
    dir: &Path,
    names: &mut OutputNames,
    outputs: &mut Vec<OutputFile>,
) -> Result<()> {
    let this_build = crate::pipeline::instance_store::Made::now(0.0).by;
    let name = names.claim(INSTANCES.into())?;
    let file = put_with(dir, &name, |w| {
        let schema = InstanceTable::default().frame()?.schema().as_ref().clone();
        let mut bw = ParquetWriter::new(w).batched(&schema)?;
        let mut t = InstanceTable::default();
        for (si, stage) in plan.stages.iter().enumerate() {
            let res = &results[si];
            let env = serde_json::to_string(&stage.environment).unwrap_or_default();
            if let Some(e) = carried[si] {
                for s in &e.seeds {
                    t.stage.push(stage.name.clone());
                    t.instance.push(s.instance.clone());
                    t.axes.push(None);
                    t.rep.push(None);
                    t.seed.push(s.seed.clone());
                    t.key.push(s.key.clone());
                    t.content_key.push(s.content_key.clone());
                    t.first_row.push(None);
                    t.rows.push(None);
                    t.from_store.push(s.computed.is_some());
                    t.computed_at
                        .push(s.computed.as_ref().map(|c| c.at.clone()));
                    t.build.push(
                        s.computed
                            .as_ref()
                            .map_or_else(String::new, |c| c.by.clone()),
                    );
                    t.seconds.push(s.computed.as_ref().map(|c| c.seconds));
                    t.kept.push(true);
                    t.environment.push(env.clone());
                    t.flush_full(&mut bw)?;
                }
                continue;
            }
            let framed = res.frame.is_some() && res.rows.len() == stage.instances.len();
            let mut first = 0i64;
            for (ii, inst) in stage.instances.iter().enumerate() {
                let key = inst.key();
                let axes: serde_json::Map<String, serde_json::Value> = key
                    .iter()
                    .map(|(a, v)| (a.to_string(), axis_json(v)))
                    .collect();
                let rep = key
                    .iter()
                    .find(|(a, _)| &**a == "rep")
                    .and_then(|(_, v)| v.canonical().parse::<i64>().ok());
                let (from_store, at, by, secs) =
                    res.made
                        .made_of(ii, &this_build, res.seconds.get(ii).copied());
                let rows = framed.then(|| res.rows[ii] as i64);
                t.stage.push(stage.name.clone());
                t.instance.push(inst.label());
                t.axes
                    .push(Some(serde_json::Value::Object(axes).to_string()));
                t.rep.push(rep);
                t.seed.push(format!("{:032x}", inst.seed));
                t.key.push(inst.store_key.to_string());
                t.content_key.push(
                    res.content_keys
                        .get(ii)
                        .copied()
                        .flatten()
                        .map(|k| k.to_string()),
                );
                t.first_row.push(rows.map(|_| first));
                t.rows.push(rows);
                t.from_store.push(from_store);
                t.computed_at.push(at);
                t.build.push(by);
                t.seconds.push(secs);
                t.kept.push(false);
                t.environment.push(env.clone());
                first += rows.unwrap_or(0);
                t.flush_full(&mut bw)?;
            }
        }
        std::mem::take(&mut t).write_to(&mut bw)?;
        bw.finish()?;
        Ok(())
    })?;
    outputs.push(file);
    Ok(())
}

/// The file of [`outputs_instances`].
pub(crate) const INSTANCES: &str = "instances.parquet";

/// Instances per row group of `instances.parquet`.
const INSTANCE_ROWS: usize = 1 << 16;

/// Columns of `instances.parquet` being filled (see [`outputs_instances`]).
#[derive(Default)]
struct InstanceTable {
    stage: Vec<String>,
    instance: Vec<String>,
    axes: Vec<Option<String>>,
    rep: Vec<Option<i64>>,
    seed: Vec<String>,
    key: Vec<String>,
    content_key: Vec<Option<String>>,
    first_row: Vec<Option<i64>>,
    rows: Vec<Option<i64>>,
    from_store: Vec<bool>,
    computed_at: Vec<Option<String>>,
    build: Vec<String>,
    seconds: Vec<Option<f64>>,
    kept: Vec<bool>,
    environment: Vec<String>,
}

impl InstanceTable {
    fn len(&self) -> usize {
        self.stage.len()
    }

    /// Writes the rows gathered so far as a row group once there are [`INSTANCE_ROWS`].
    fn flush_full<W: Write>(
        &mut self,
        bw: &mut polars::io::parquet::write::BatchedWriter<W>,
    ) -> Result<()> {
        if self.len() >= INSTANCE_ROWS {
            std::mem::take(self).write_to(bw)?;
        }
        Ok(())
    }

    fn write_to<W: Write>(
        self,
        bw: &mut polars::io::parquet::write::BatchedWriter<W>,
    ) -> Result<()> {
        bw.write_batch(&self.frame()?)?;
        Ok(())
    }

    fn frame(self) -> Result<DataFrame> {
        let n = self.len();
        let c = |name: &str, s: Series| Column::from(s.with_name(name.into()));
        Ok(DataFrame::new(
            n,
            vec![
                c("stage", Series::new("".into(), self.stage)),
                c("instance", Series::new("".into(), self.instance)),
                c("axes", Series::new("".into(), self.axes)),
                c("rep", Series::new("".into(), self.rep)),
                c("seed", Series::new("".into(), self.seed)),
                c("key", Series::new("".into(), self.key)),
                c("content_key", Series::new("".into(), self.content_key)),
                c("first_row", Series::new("".into(), self.first_row)),
                c("rows", Series::new("".into(), self.rows)),
                c("from_store", Series::new("".into(), self.from_store)),
                c("computed_at", Series::new("".into(), self.computed_at)),
                c("build", Series::new("".into(), self.build)),
                c("seconds", Series::new("".into(), self.seconds)),
                c("kept", Series::new("".into(), self.kept)),
                c("environment", Series::new("".into(), self.environment)),
            ],
        )?)
    }
}
