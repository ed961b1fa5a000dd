//! `query.*`: the kinds that answer a query on a frame (revenue, arg-max, smooth queries).

pub mod argmax;
pub mod revenue;
pub mod smooth;
