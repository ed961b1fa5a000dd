//! How an instance's inputs reach it — a whole upstream stage, or the instances of it that it
//! reads — and a stage's frames gathered in plan order as its instances finish in any order.
//! Knows nothing of the scheduler, which holds the frames and hands them over (`run.rs`).

use std::collections::BTreeMap;

use anyhow::Result;
use polars::prelude::*;

use crate::frames::concat;
use crate::pipeline::plan::Plan;

/// How an instance reads one of its inputs.
pub(super) enum Source<'p> {
    /// Every instance of the upstream stage, in plan order: the stage's gathered frame, ready
    /// when the whole stage is.
    Whole(usize),
    /// These instances of the upstream stage (indices in it, and the stage's first global
    /// id), each kept until its last reader ran.
    Pieces(usize, &'p [usize]),
}

impl Source<'_> {
    /// The global ids of the instances read as pieces.
    pub(super) fn pieces(&self) -> impl Iterator<Item = usize> + '_ {
        let (base, js): (usize, &[usize]) = match self {
            Source::Whole(_) => (0, &[]),
            Source::Pieces(base, js) => (*base, js),
        };
        js.iter().map(move |j| base + j)
    }
}

/// Frames of one stage gathered in plan order as instances finish in any order. Finished
/// frames wait in `early` until those before them are in; every [`BLOCK`] frames are joined
/// into one block, so a stage of 10⁶ instances holds a few thousand blocks, not 10⁶ frames.
#[derive(Default)]
pub(super) struct InPlanOrder {
    next: usize,
    early: BTreeMap<usize, DataFrame>,
    part: Vec<DataFrame>,
    blocks: Vec<DataFrame>,
    any_columns: bool,
    /// Each instance's number of rows, in plan order: which rows of the stage's frame are
    /// whose (the Parquet file says it beside the instances' keys).
    pub(super) rows: Vec<usize>,
}

const BLOCK: usize = 256;

impl InPlanOrder {
    pub(super) fn push(&mut self, i: usize, frame: DataFrame) -> Result<()> {
        self.early.insert(i, frame);
        while let Some(f) = self.early.remove(&self.next) {
            self.any_columns |= f.width() > 0;
            self.rows.push(f.height());
            self.part.push(f);
            self.next += 1;
            if self.part.len() == BLOCK {
                let refs: Vec<&DataFrame> = self.part.iter().collect();
                let block = concat(&refs)?;
                self.part.clear();
                self.blocks.push(block);
            }
        }
        Ok(())
    }

    /// The concatenation of every frame pushed, in order (the same frame `concat` of all of
    /// them gives: one chunk per column, and the union of their columns when instances differ
    /// in them). The blocks are moved into the result before it is rechunked one column at a
    /// time, so the stage's frame is in memory about once, not twice.
    pub(super) fn finish(&mut self) -> Result<DataFrame> {
        let mut all = std::mem::take(&mut self.blocks);
        all.append(&mut self.part);
        let first_schema = match all.first() {
            None => return Ok(DataFrame::empty()),
            Some(f) => f.schema().clone(),
        };
        let union = (!all.iter().all(|f| *f.schema() == first_schema))
            .then(|| crate::frames::union_schema(&all));
        let mut rest = all.into_iter();
        let align = |f: DataFrame| match &union {
            Some(s) => crate::frames::aligned(&f, s),
            None => Ok(f),
        };
        let mut out = align(rest.next().expect("not empty"))?;
        for f in rest {
            out.vstack_mut_owned(align(f)?)?;
        }
        out.rechunk_mut();
        Ok(out)
    }
}

/// How instance `ii` of stage `si` reads each of its inputs: a whole stage when it reads
/// every instance of it (more than one), otherwise the instances it reads.
pub(super) fn sources<'p>(
    plan: &'p Plan,
    offset: &'p [usize],
    si: usize,
    ii: usize,
) -> impl Iterator<Item = Source<'p>> + 'p {
    let stage = &plan.stages[si];
    let inst = &stage.instances[ii];
    stage
        .inputs
        .iter()
        .zip(inst.inputs.iter())
        .map(move |(&up, js)| {
            if js.len() > 1 && js.len() == plan.stages[up].instances.len() {
                Source::Whole(up)
            } else {
                Source::Pieces(offset[up], js)
            }
        })
}
