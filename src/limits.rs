//! Sizes a user controls, and the limits that keep a typo (`repeat: 1e12`, a step of 1e-9)
//! from exhausting memory. Every limit is checked before anything of that size is
//! allocated, in `validate` as in `run`, and exceeding one is a located input error (exit 2)
//! that names the value, the limit and the flag that raises it.
//!
//! The limits are read by the engine (instances) and by stage kinds (draws, cells) in their
//! parameter checks, so they live below both layers. The CLI sets them once at start-up.

use std::sync::RwLock;

/// The limits in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Stage instances in one pipeline (the product of the axes a stage varies over, summed
    /// over stages). Flag `--max-instances`.
    pub instances: u64,
    /// Random draws or Monte-Carlo trials one stage instance may make (`samples`,
    /// replicates, …). Flag `--max-draws`.
    pub draws: u64,
    /// Elements of one matrix, grid or table a stage instance may build (channel matrices,
    /// candidate sets, synthetic data). Flag `--max-cells`.
    pub cells: u64,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        instances: 2_000_000,
        draws: 10_000_000_000,
        cells: 200_000_000,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

static CURRENT: RwLock<Limits> = RwLock::new(Limits::DEFAULT);

/// The limits in force (the defaults unless the CLI set others).
pub fn get() -> Limits {
    *CURRENT.read().unwrap_or_else(|e| e.into_inner())
}

/// Sets the limits for this process (the CLI, once, from its flags).
pub fn set(limits: Limits) {
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = limits;
}

/// Checks one size against a limit: `Err` names the quantity, the value, the limit and the
/// flag that raises it.
pub fn check(what: &str, value: u64, limit: u64, flag: &str) -> Result<(), String> {
    if value <= limit {
        Ok(())
    } else {
        Err(format!(
            "{what} = {value} is more than the limit of {limit} (raise it with {flag} if you mean it)"
        ))
    }
}

/// `draws` against [`Limits::draws`].
pub(crate) fn check_draws(what: &str, value: u64) -> Result<(), String> {
    check(what, value, get().draws, "--max-draws")
}

/// `cells` against [`Limits::cells`].
pub(crate) fn check_cells(what: &str, value: u64) -> Result<(), String> {
    check(what, value, get().cells, "--max-cells")
}

/// The memory one cell of a table may take while it is parsed from text (a dataset file, a
/// CSV a parameter names): a column of undeclared type holds each value as text (16 bytes) until
/// the whole column is known to be numbers, which are then parsed into an `Option<f64>` (16
/// bytes) before the text is dropped; polars' CSV reader stays within this too.
pub(crate) const BYTES_PER_CELL_READ: u64 = 32;

/// What a column costs while a table is parsed from text, whatever its rows: its name, its
/// buffers and polars' bookkeeping (a header of 2·10⁷ names took a minute and aborted).
pub(crate) const BYTES_PER_COLUMN_READ: u64 = 1024;

/// What one column of a table costs, in cells, whatever its rows: its name, its buffers,
/// polars' bookkeeping and the metadata of its Parquet copy in the store. Counted so that
/// `--max-cells` bounds a wide table as it bounds a long one: a table of one row and 10⁶
/// columns (a 14 MB CSV file, 10⁶ cells) took two minutes and 5.8 GB and was stored as 365 MB
/// of Parquet; one of 10⁵ columns read by `load.table` and stored took 9 s and 690 MB, 6.9 KB
/// (some 870 cells of 8 bytes) a column.
pub(crate) const CELLS_PER_COLUMN: u64 = 1000;

/// The most columns a table read from a file may have: one for each [`CELLS_PER_COLUMN`]
/// cells [`Limits::cells`] allows (2·10⁵ by default).
pub(crate) fn max_columns() -> u64 {
    get().cells / CELLS_PER_COLUMN
}

/// Checks the columns of a table against [`max_columns`] before anything is allocated for
/// them: `what` names the file.
pub(crate) fn check_columns(what: &str, cols: u64) -> Result<(), String> {
    let max = max_columns();
    if cols <= max {
        return Ok(());
    }
    Err(format!(
        "{what}: {cols} columns, more than the limit of {max} (a column costs as much as {CELLS_PER_COLUMN} cells whatever its rows, and --max-cells allows {} cells; raise it with --max-cells if you mean it)",
        get().cells
    ))
}

/// The memory a table parsed from text may take: what the largest matrix [`Limits::cells`]
/// allows takes (8 bytes a cell, 1.6 GB by default), so that the one flag bounds both.
pub(crate) fn table_bytes() -> u64 {
    get().cells.saturating_mul(8)
}

/// Checks, before it is parsed, that a table of `rows` × `cols` from `bytes` of text has at
/// most [`max_columns`] and fits [`table_bytes`]: `what` names the file. Counting rows and
/// columns costs a pass over the text; parsing 10⁸ rows of `1` (a 190 KB gzip file) took
/// 3.2 GB and aborted.
pub(crate) fn check_table_read(what: &str, rows: u64, cols: u64, bytes: u64) -> Result<(), String> {
    check_columns(what, cols)?;
    let need = rows
        .saturating_mul(cols)
        .saturating_mul(BYTES_PER_CELL_READ)
        .saturating_add(cols.saturating_mul(BYTES_PER_COLUMN_READ))
        .saturating_add(bytes);
    let budget = table_bytes();
    if need <= budget {
        return Ok(());
    }
    Err(format!(
        "{what}: {rows} rows × {cols} columns: reading it takes up to {need} bytes ({BYTES_PER_CELL_READ} a cell and {BYTES_PER_COLUMN_READ} a column while its text is parsed, and {bytes} of text), more than the {budget} a table read from text may take (8 bytes for each of the {} cells --max-cells allows; raise it with --max-cells if you mean it)",
        get().cells
    ))
}
