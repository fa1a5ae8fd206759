//! Conversions between Sparsile tensors and the `ndarray` and `sprs` crates.
//!
//! - [`dense_arrays`]: a dense [`SparseTensor`](crate::SparseTensor) (format `dense`)
//!   and `ndarray` arrays of any dimension. Borrowed views both ways when the element
//!   type matches and the array is in standard (row-major, contiguous) layout; copies
//!   otherwise.
//! - [`sprs_matrices`]: `sprs` CSR/CSC matrices and `TriMat` triplets. Structure arrays
//!   are copied (Sparsile stores i32/i64 indices, `sprs` usually `usize`).
//!
//! Element types: f16, bf16, f32 and f64 ([`Element`]).
//!
//! ```
//! use ndarray::array;
//! use sparsile_formats::interop::{dense_arrays, sprs_matrices};
//! use sparsile_formats::Format;
//! let a = array![[1.0f32, 0.0], [0.0, 2.0]];
//! let t = dense_arrays::from_array_view(a.view()).unwrap(); // borrows `a`
//! assert_eq!(t.format(), &Format::Dense);
//! let back = dense_arrays::dense_view::<f32>(&t).unwrap();
//! assert_eq!(back, a.view().into_dyn());
//!
//! let m = sprs::CsMat::new((2, 3), vec![0, 1, 2], vec![2, 0], vec![5.0f64, 6.0]);
//! let s = sprs_matrices::from_csmat(m.view()).unwrap();
//! assert_eq!(s.format(), &Format::Csr);
//! assert_eq!(sprs_matrices::to_csmat::<f64>(&s, sprs::CompressedStorage::CSR).unwrap(), m);
//! ```

pub mod dense_arrays;
mod element;
pub mod sprs_matrices;

pub use element::Element;

use sparsile_ir::DType;
use thiserror::Error;

use crate::FormatError;

/// A conversion that cannot be done.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum InteropError {
    #[error("expected a tensor in format `dense`, found `{format}`")]
    NotDense { format: String },

    #[error("expected values of type {expected}, found {found}")]
    DTypeMismatch { expected: DType, found: DType },

    #[error("expected a matrix (order 2), found order {ndim}")]
    NotMatrix { ndim: usize },

    #[error("a dense tensor needs at least one dimension")]
    ZeroDimensional,

    #[error("{what}: shape {shape:?} does not match {len} values")]
    Shape {
        what: String,
        shape: Vec<usize>,
        len: usize,
    },

    #[error(transparent)]
    Format(#[from] FormatError),
}
