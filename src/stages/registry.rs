//! The registry of stage kinds: the one file that imports every kind, above them all. The
//! kinds import what they share from [`super`] (the contract re-exported from
//! [`crate::kind`], size limits, grids) and never this file, so the import graph of
//! `src/stages` has no circle; the CLI hands [`all`] to the engine.

use super::{
    aggregate, audit, evaluate, external, frame, load, mechanism, near_optimal, normalise, plot,
    query, report,
};
use crate::kind::KindInfo;

/// Every stage kind dplab knows, in the order `dplab list` prints them: one line per kind.
pub fn all() -> &'static [KindInfo] {
    static KINDS: &[KindInfo] = &[
        load::table::KIND,
        load::grid::KIND,
        load::distribution::KIND,
        load::dataset::KIND,
        normalise::KIND,
        frame::shape::KIND,
        mechanism::noise::KIND,
        query::revenue::KIND,
        query::argmax::KIND,
        mechanism::select::KIND,
        mechanism::rate_distortion::KIND,
        mechanism::symmetric_channel::KIND,
        mechanism::channel::KIND,
        near_optimal::rate::KIND,
        near_optimal::convergence::KIND,
        near_optimal::density::KIND,
        near_optimal::sample_mean::KIND,
        near_optimal::noise::KIND,
        near_optimal::privacy::KIND,
        near_optimal::best_delta::KIND,
        near_optimal::trend::KIND,
        mechanism::trigonometric::KIND,
        load::sample::KIND,
        query::smooth::KIND,
        evaluate::error::KIND,
        evaluate::smooth_queries::KIND,
        report::verdict::KIND,
        evaluate::selection::KIND,
        evaluate::utility_tail::KIND,
        evaluate::tv_distance::KIND,
        evaluate::privacy_loss::KIND,
        frame::stack::KIND,
        frame::derive::KIND,
        frame::group::KIND,
        frame::join::KIND,
        aggregate::improvement::KIND,
        aggregate::summary::KIND,
        aggregate::loglog_fit::KIND,
        plot::lines::KIND,
        plot::histogram::KIND,
        plot::heatmap::KIND,
        report::table::KIND,
        external::KIND,
        audit::epsilon::kind::<Registry>(),
    ];
    KINDS
}

/// The registry as the audit sees it: it builds the stage it audits by its kind's name.
struct Registry;

impl audit::epsilon::Kinds for Registry {
    fn find(name: &str) -> Option<&'static KindInfo> {
        find(name)
    }
}

/// Looks a kind up by name.
pub fn find(name: &str) -> Option<&'static KindInfo> {
    all().iter().find(|k| k.name == name)
}
