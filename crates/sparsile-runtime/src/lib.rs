//! Sparsile's runtime.
//!
//! [`interp`] is the reference interpreter: it executes a stage-I program directly on
//! [`sparsile_formats::SparseTensor`] inputs, accumulating in f64, and is the oracle every
//! compiled backend is tested against. It is not meant to be fast.
//!
//! [`flat_interp`] executes a loop-level function (stage III, or stage II) lowered from a
//! stage-I program, bound to the same inputs the way compiled kernels are bound; it is
//! the oracle for the lowering passes.

pub mod flat_interp;
pub mod interp;

pub use flat_interp::{FlatInterpError, FlatOptions};
pub use interp::{interpret, InterpError, InterpOptions, Outputs};
