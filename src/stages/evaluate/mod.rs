//! `evaluate.*`: the errors of estimates against true values (ℓ1, ℓ∞, RMSE, relative), and
//! evaluation of selection mechanisms: expected utility, utility tails
//! (Thm 3.11), total-variation distance between two mechanisms (Thm 3.13) and measured privacy
//! loss on neighbouring utility vectors (Thm 3.10). Exact values come from the mechanisms'
//! output distributions; Monte-Carlo values come with confidence intervals.

pub mod error;
pub mod privacy_loss;
pub mod selection;
pub mod smooth_queries;
pub mod tv_distance;
pub mod utility_tail;

pub(crate) use crate::stages::mechanism::select::Dist;
