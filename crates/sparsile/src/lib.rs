//! Sparsile: a sparse tensor compiler.
//!
//! This facade crate holds the front ends. [`notation`] reads index notation (tensor
//! declarations with formats, then statements like `C[i,k] = A[i,j] * B[j,k]`),
//! type-checks it and lowers it to a stage-I program.
//!
//! ```
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! assert_eq!(program.buffers.len(), 3);
//! ```

pub mod notation;

pub use notation::{compile_notation, lower, NotationError};
