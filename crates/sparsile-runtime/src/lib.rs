//! Sparsile's runtime.
//!
//! [`interp`] is the reference interpreter: it executes a stage-I program directly on
//! [`sparsile_formats::SparseTensor`] inputs, accumulating in f64, and is the oracle every
//! compiled backend is tested against. It is not meant to be fast.

pub mod interp;
pub mod jit;

pub use interp::{interpret, InterpError, InterpOptions, Outputs};
