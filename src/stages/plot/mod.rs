//! `plot.*`: the kinds that adapt a (gathered) frame to the figure types of [`crate::plot`],
//! written as SVG files beside an empty frame.

pub mod heatmap;
pub mod histogram;
pub mod lines;

use crate::stages::{Artifact, Output};

/// A plot's output: no frame, one SVG figure.
fn svg_output(svg: String) -> Output {
    Output {
        frame: polars::prelude::DataFrame::empty(),
        artifacts: vec![Artifact {
            ext: "svg",
            bytes: svg.into_bytes(),
        }],
    }
}

/// A plot outputs no columns (only the axis columns the engine adds): its figure is a file.
fn no_columns() -> Option<Vec<String>> {
    Some(Vec::new())
}
