//! Sparsile: a sparse tensor compiler.
//!
//! This facade crate holds the front ends. [`notation`] reads index notation (tensor
//! declarations with formats, then statements like `C[i,k] = A[i,j] * B[j,k]`),
//! type-checks it and lowers it to a stage-I program; [`evaluate`] runs such a program
//! with the reference interpreter. The lower crates are re-exported as [`formats`],
//! [`ir`] and [`runtime`].
//!
//! ```
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! assert_eq!(program.buffers.len(), 3);
//! ```

pub mod auto;
mod compile;
mod derived_inputs;
mod dims;
mod evaluate;
pub mod notation;
pub mod recipe;

pub use auto::AutoKernel;
pub use compile::{
    compile, compile_for, compile_program, compile_program_for, compile_program_with, compile_with,
    lower_notation_with, lower_program, lower_program_with, specialize_index_types, Code,
    CompileError, CompileOptions, Kernel, Lowered, RunOptions, Stage, Target,
};
pub use derived_inputs::interpret_program;
pub use dims::{bind_dims, DimError};
pub use evaluate::{dim_params, evaluate, EvaluateError};
pub use notation::{compile_notation, lower, NotationError};
pub use recipe::compile_recipe;
pub use sparsile_formats as formats;
pub use sparsile_ir as ir;
pub use sparsile_runtime as runtime;
pub use sparsile_runtime::jit::{set_num_threads, Parallelism};
pub use sparsile_transform as transform;
pub use sparsile_tune as tune;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
