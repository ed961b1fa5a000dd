//! One instance's steps, as functions that know no scheduler: what the store holds for it
//! ([`look_up`]: under its key, a shard's claim, the early cutoff), its computation
//! ([`compute`]: the kind run on its inputs, the axis columns put in front), and what its
//! failure says ([`failure_message`]). The scheduler (`run.rs`) calls them in that order.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use polars::prelude::*;

use crate::kind::{rng_from_seed, Ctx};
use crate::pipeline::claim::{Claim, Claimed};
use crate::pipeline::instance_store::{InstanceResult, InstanceStore};
use crate::pipeline::key::Key;
use crate::pipeline::plan::{Instance, Plan};
use crate::pipeline::spec::AxisValue;

/// What the store gave an instance about to run.
pub(super) enum Looked<'s> {
    /// Found under its key, or (`by_content`) under its key by content: an input was computed
    /// again and came out the same (early cutoff).
    Found {
        hit: InstanceResult,
        by_content: bool,
    },
    /// Not there: compute it, holding the claim when other shards need it too.
    Missing(Option<Claim<'s>>),
    /// Another shard is computing it: wait, then look again.
    Theirs,
}

/// An instance's look-up, as [`look_up`] needs it.
pub(super) struct Lookup<'a> {
    pub store: &'a InstanceStore,
    pub kind: &'a str,
    pub key: Key,
    /// Its key by what it reads ([`crate::pipeline::key::content_key`]), when it reads inputs.
    pub by_content: Option<Key>,
    /// Look in the store's files, not only in what it read when it opened: in a shard,
    /// another shard may have stored it meanwhile.
    pub fresh: bool,
    /// Other shards need it too: one of them computes it, the others wait (see
    /// [`crate::pipeline::claim`]).
    pub shared: bool,
}

/// What the store holds for an instance. Whatever it finds is filed under both keys (its key
/// and its key by content), so the next run, `--dry-run` and the next edit above it find it
/// at once; a failure to file it is handed to `not_stored` (a warning: the run goes on).
pub(super) fn look_up<'s>(l: Lookup<'s>, not_stored: &dyn Fn(anyhow::Error)) -> Looked<'s> {
    let store = l.store;
    let mut found = store
        .get(&l.key)
        .or_else(|| l.fresh.then(|| store.get_fresh(&l.key)).flatten());
    let mut claim = None;
    if found.is_none() {
        // What other shards need too is claimed in the store, for them to see; the rest
        // within this process, where another pipeline of the run may need it too.
        let claimed = if l.shared {
            store.claims().claim(&l.key)
        } else {
            store.claims().claim_here(&l.key)
        };
        match claimed {
            Claimed::Mine(c) => {
                claim = Some(c);
                // Its last holder may have stored it just before this claimed it.
                found = if l.shared {
                    store.get_fresh(&l.key)
                } else {
                    store.get(&l.key)
                };
            }
            Claimed::Theirs => return Looked::Theirs,
        }
    }
    if let Some(hit) = found {
        // Stored under its key but not under its key by content (a kill between the two
        // writes, or an older store): filed there too, so the next edit above it can cut off
        // here.
        if let Some(ck) = l.by_content.filter(|ck| !store.contains(ck)) {
            if let Err(e) = store.put(&ck, l.kind, &hit) {
                not_stored(e);
            }
        }
        return Looked::Found {
            hit,
            by_content: false,
        };
    }
    // Early cutoff: not stored under its key (an input's key changed), perhaps under its key
    // by content (the input came out the same).
    if let Some(hit) = l.by_content.and_then(|ck| store.get(&ck)) {
        if let Err(e) = store.put(&l.key, l.kind, &hit) {
            not_stored(e);
        }
        return Looked::Found {
            hit,
            by_content: true,
        };
    }
    Looked::Missing(claim)
}

/// What an instance's inputs are named and which axes the engine put on them: the same for
/// every instance of a stage, worked out once.
pub(super) struct Names<'a> {
    pub inputs: &'a [String],
    pub axes: &'a [String],
}

/// Computes instance `ii` of stage `si` on its `inputs` (`started`: when its inputs began to
/// be gathered, which its recorded time includes); `again` for `--verify`'s second
/// computation ([`Ctx::again`]). The frame has the instance's axis columns first.
pub(super) fn compute(
    plan: &Plan,
    si: usize,
    ii: usize,
    inputs: &[DataFrame],
    names: Names,
    again: bool,
    started: Instant,
) -> Result<InstanceResult> {
    let stage = &plan.stages[si];
    let inst = &stage.instances[ii];
    let key = inst.key();
    // The kind sees its axes by name, not in the order `axes:` lists them: its output
    // must not depend on that order, which its key leaves out (see `key::store_key`).
    let mut by_name = key.clone();
    by_name.sort_by(|a, b| a.0.cmp(&b.0));
    let label: Vec<String> = by_name.iter().map(|(a, v)| format!("{a}={v}")).collect();
    let mut ctx = Ctx {
        inputs,
        axis_names: names.axes,
        input_names: names.inputs,
        rng: rng_from_seed(inst.seed),
        seed: inst.seed,
        files: &plan.files,
        stage: &stage.name,
        label: &label.join(", "),
        axes: &by_name,
        again,
    };
    let out = stage.build(inst)?.run(&mut ctx)?;
    let frame = with_axis_columns(out.frame, &key)?;
    // Planning checked later stages against the columns the kind declares: an output that
    // does not bear them out is a bug in the kind, caught at its first run.
    if let Some(cols) = &stage.columns {
        let produced = frame.get_column_names();
        anyhow::ensure!(
            produced.iter().map(|c| c.as_str()).eq(cols.iter().map(String::as_str)),
            "kind `{}` declares the output columns [{}] but produced [{}] (a bug in the kind: please report it)",
            stage.kind.name,
            cols.join(", "),
            produced.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(InstanceResult {
        frame,
        artifacts: out.artifacts,
        seconds: started.elapsed().as_secs_f64(),
        digest: None,
        made: None,
    })
}

/// What a failed computation of `inst` (of stage `si`) says, and whether it failed because
/// an external input (a dataset file) is not on this machine: a missing column and a
/// parameter's error are located in the pipeline file.
pub(super) fn failure_message(
    plan: &Plan,
    si: usize,
    inst: &Instance,
    e: &anyhow::Error,
) -> (String, bool) {
    let message = if let Some(mc) = e.downcast_ref::<crate::kind::MissingColumn>() {
        plan.column_error(si, inst, mc)
    } else if let Some(pe) = e.downcast_ref::<crate::kind::ParamError>() {
        plan.located(si, &pe.path.join("."), &pe.message)
    } else {
        format!("{e:#}")
    };
    (
        message,
        e.downcast_ref::<crate::kind::Unavailable>().is_some(),
    )
}

/// Puts one constant column per axis value at the front of the frame (replacing any
/// column of the same name), so a gathered or stored frame says which instance each row
/// came from.
///
/// A column of the axis's name that the stage passed through from its inputs holds the
/// instance's value on the rows of inputs that vary over the axis, and is empty on the rows
/// of inputs that do not (a `frame.stack` told by `over:` to vary over an axis only one of
/// its inputs varies over): every row of the instance belongs to its axis values, so the
/// column is replaced by the value. Any other value in it is the stage's own data, which an
/// axis value must never overwrite.
fn with_axis_columns(frame: DataFrame, key: &[(Arc<str>, AxisValue)]) -> Result<DataFrame> {
    if key.is_empty() {
        return Ok(frame);
    }
    let height = frame.height();
    let mut cols: Vec<Column> = key
        .iter()
        .map(|(axis, v)| match (v, v.cell()) {
            (AxisValue::Int(i), _) => {
                Column::new_scalar((&**axis).into(), Scalar::from(*i), height)
            }
            (_, Ok(x)) => Column::new_scalar((&**axis).into(), Scalar::from(x), height),
            (_, Err(s)) => {
                Column::new_scalar((&**axis).into(), Scalar::from(PlSmallStr::from(s)), height)
            }
        })
        .collect();
    for c in frame.columns() {
        match key.iter().find(|(a, _)| &**a == c.name().as_str()) {
            None => cols.push(c.clone()),
            Some((axis, v)) => {
                if let Some(other) = other_value(c, v) {
                    anyhow::bail!(
                        "the stage's output has a column `{axis}` of its own (holding {other} where this instance's `{axis}` is {v}), and `{axis}` is also an axis the stage varies over: the axis value would overwrite it; rename the axis, or the column"
                    );
                }
            }
        }
    }
    Ok(DataFrame::new(height, cols)?)
}

/// A stored frame with its axis columns in the order of the stage's axes, which may differ
/// from the order they had when it was stored (the key leaves that order out, see
/// `key::store_key`). A frame without them all is left as it is.
pub(super) fn in_stage_order(frame: DataFrame, key: &[(Arc<str>, AxisValue)]) -> DataFrame {
    let names = frame.get_column_names();
    if key.is_empty() || names.iter().zip(key).all(|(c, (a, _))| c.as_str() == &**a) {
        return frame;
    }
    let mut order: Vec<PlSmallStr> = key.iter().map(|(a, _)| (&**a).into()).collect();
    order.extend(
        names
            .iter()
            .filter(|c| !key.iter().any(|(a, _)| &**a == c.as_str()))
            .map(|c| (*c).clone()),
    );
    frame.select(order).unwrap_or(frame)
}

/// A value of `c` other than the axis value `v` (nulls aside), as text, if any. A number and
/// its text are different values: an engine axis column of numbers is a number column.
fn other_value(c: &Column, v: &AxisValue) -> Option<String> {
    if c.null_count() == c.len() {
        return None;
    }
    let t = c.dtype();
    match v.cell() {
        Ok(x) if t.is_primitive_numeric() => {
            let c = c.cast(&DataType::Float64).ok()?;
            let ca = c.f64().ok()?;
            let other = ca
                .iter()
                .flatten()
                .find(|y| *y != x && !(y.is_nan() && x.is_nan()));
            other.map(|y| y.to_string())
        }
        Err(s) if t == &DataType::String => c
            .str()
            .ok()?
            .iter()
            .flatten()
            .find(|y| *y != s)
            .map(|y| format!("`{}`", crate::text::brief(y, 40))),
        _ => Some(format!("values of type {t}")),
    }
}
