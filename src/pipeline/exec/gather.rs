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
/// into one block, and blocks into one chunk of about [`CHUNK_ROWS`] rows, so a stage of 10⁶
/// instances holds a few dozen chunks, not 10⁶ frames.
///
/// The stage's frame is those chunks, not one chunk: copying 3·10⁶ rows into one column per
/// column held the frame twice (the allocator keeps the small blocks' pages), 260 MB of the
/// engine benchmark's peak. Every reader takes a column chunk by chunk, and the results' Parquet
/// writer slices chunks of this size into its row groups without a copy.
#[derive(Default)]
pub(super) struct InPlanOrder {
    next: usize,
    early: BTreeMap<usize, DataFrame>,
    part: Vec<DataFrame>,
    blocks: Vec<DataFrame>,
    /// How many of `blocks`, the last ones, are not joined into a chunk yet, and their rows.
    loose: usize,
    loose_rows: usize,
    any_columns: bool,
    /// Each instance's number of rows, in plan order: which rows of the stage's frame are
    /// whose (the Parquet file says it beside the instances' keys).
    pub(super) rows: Vec<usize>,
}

const BLOCK: usize = 256;
/// Polars' Parquet row group (512²): a frame of smaller chunks is copied whole into chunks of
/// that size when it is written (`chunk_df_for_writing`), one of such chunks is sliced.
const CHUNK_ROWS: usize = 512 * 512;

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
                self.loose_rows += block.height();
                self.blocks.push(block);
                self.loose += 1;
                if self.loose_rows >= CHUNK_ROWS {
                    let tail = self.blocks.split_off(self.blocks.len() - self.loose);
                    let refs: Vec<&DataFrame> = tail.iter().collect();
                    let chunk = concat(&refs)?;
                    drop(tail);
                    self.blocks.push(chunk);
                    (self.loose, self.loose_rows) = (0, 0);
                }
            }
        }
        Ok(())
    }

    /// The concatenation of every frame pushed, in order (the same rows and columns `concat`
    /// of all of them gives: the union of their columns when instances differ in them), in
    /// chunks of about [`CHUNK_ROWS`] rows.
    pub(super) fn finish(&mut self) -> Result<DataFrame> {
        let mut all = std::mem::take(&mut self.blocks);
        // The frames after the last chunk (loose blocks, then those of no full block) joined
        // into one last chunk: 52 frames left over were 52 chunks of 300 rows.
        let mut tail = all.split_off(all.len() - self.loose);
        tail.append(&mut self.part);
        if !tail.is_empty() {
            all.push(concat(&tail.iter().collect::<Vec<_>>())?);
        }
        (self.loose, self.loose_rows) = (0, 0);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames come out in plan order whatever order they finished in, with the rows and
    /// columns `concat` gives (a column some instances lack is missing there), in chunks of at
    /// least [`CHUNK_ROWS`] rows but the last.
    #[test]
    fn frames_gather_in_plan_order_in_large_chunks() {
        let (n, rows) = (2100, 300);
        let frame = |i: usize| {
            let x: Vec<f64> = (0..rows).map(|r| (i * rows + r) as f64).collect();
            let mut f = df!("i" => vec![i as i64; rows], "x" => x).unwrap();
            if i == 7 {
                f.with_column(Column::new("late".into(), vec!["t"; rows]))
                    .unwrap();
            }
            f
        };
        let mut g = InPlanOrder::default();
        for i in (0..n).map(|i| i ^ 1) {
            g.push(i, frame(i)).unwrap();
        }
        let all = g.finish().unwrap();
        let each: Vec<DataFrame> = (0..n).map(frame).collect();
        let want = concat(&each.iter().collect::<Vec<_>>()).unwrap();
        assert!(all.equals_missing(&want));
        assert_eq!(all.column("late").unwrap().null_count(), (n - 1) * rows);
        let lens: Vec<usize> = all
            .column("x")
            .unwrap()
            .as_materialized_series()
            .chunk_lengths()
            .collect();
        assert!(lens.len() > 1, "{lens:?}");
        assert!(
            lens[..lens.len() - 1].iter().all(|&l| l >= CHUNK_ROWS),
            "{lens:?}"
        );
        assert_eq!(g.rows, vec![rows; n]);
    }
}
