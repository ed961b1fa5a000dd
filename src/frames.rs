//! Frame helpers shared by the engine (gathering instance frames) and stage kinds (reading
//! gathered inputs), kept below both so neither imports the other.

use anyhow::Result;
use polars::prelude::*;

/// Row-wise concatenation of instance frames (in plan order).
pub fn concat(frames: &[&DataFrame]) -> Result<DataFrame> {
    let Some((first, rest)) = frames.split_first() else {
        return Ok(DataFrame::empty());
    };
    let mut out = (*first).clone();
    for f in rest {
        out.vstack_mut(f)
            .map_err(|e| anyhow::anyhow!("instance frames have different columns: {e}"))?;
    }
    out.rechunk_mut();
    Ok(out)
}
