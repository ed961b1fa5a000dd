//! `audit.*`: kinds that audit a mechanism stage as a black box ([`crate::mech::audit`]).

mod claim;
pub mod epsilon;
mod neighbours;
