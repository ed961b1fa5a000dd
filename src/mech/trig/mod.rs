//! The trigonometric mechanism for smooth queries (Huang 2014, master's thesis, chapter 2) and
//! the pieces it is built from.
//!
//! - [`mechanism::trigonometric`] — trigonometric mechanisms I and II (Algorithms 4 and 5);
//! - [`mechanism::improved_trigonometric`] — improved mechanisms I and II (Algorithms 9, 10);
//! - [`data`] — the database a synthesis reads, with what depends on it alone kept beside it;
//! - [`basis`] — the Chebyshev basis φ_r, its order, the grid A^d, the lattice 1/L, the
//!   parameter schedules of line 1;
//! - [`lp`] — min ‖Wu − b‖₁ over the probability simplex (Algorithm 4 line 20);
//! - [`psi`] — private subspace iteration (Algorithms 6 and 7, Lemma 2.7);
//! - [`ellipsoid`] — points in an ellipsoid (Algorithm 8);
//! - [`kernel`] — the Gaussian-kernel-mixture queries of chapter 3 (eq. 2.1) and their answers.

pub mod basis;
pub mod data;
pub mod ellipsoid;
pub mod kernel;
pub mod lp;
pub mod mechanism;
pub mod psi;
