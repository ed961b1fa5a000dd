//! The part of polars dplab uses, under the name `polars` (dplab's Cargo.toml renames this
//! package), so that code reads as it would with the polars facade: `polars::prelude::*`,
//! `polars::df!`, `polars::error`. See Cargo.toml for why the facade is not used.

pub use polars_core::{df, error};

pub mod prelude {
    // The facade's prelude is these two globs as well; both export a module `slice`, which
    // dplab does not use (an ambiguous name is an error only where it is used).
    #![allow(ambiguous_glob_reexports)]
    pub use polars_core::prelude::*;
    pub use polars_io::prelude::*;
}

/// polars-io's modules by path, for the names its prelude has twice (`BatchedWriter` is CSV's
/// and Parquet's).
pub mod io {
    pub use polars_io::*;
}
