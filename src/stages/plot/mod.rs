//! `plot.*`: the kinds that adapt a (gathered) frame to the figure types of [`crate::plot`],
//! written as SVG files beside the frame of what they drew.
//!
//! A figure's frame holds what the figure shows, point by point (panel, series, coordinates),
//! not the input it was drawn from: a plot's input may be a stage that is not stored, and a
//! figure may draw a part of it. Being a frame, it is stored, written beside the SVG and
//! compared with the goldens, so a figure that stops drawing a series changes a golden frame
//! and a test can hold the SVG against it.

pub mod heatmap;
pub mod histogram;
pub mod lines;

use crate::stages::{Artifact, Output};

/// A plot's output: the frame of what it drew, and the SVG figure.
fn figure_output(svg: String, drawn: polars::prelude::DataFrame) -> Output {
    Output {
        frame: drawn,
        artifacts: vec![Artifact {
            ext: "svg".into(),
            bytes: svg.into_bytes(),
        }],
    }
}
