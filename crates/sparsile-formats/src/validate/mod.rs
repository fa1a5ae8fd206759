//! Checked constructors: sparse tensors from user arrays, validated without panicking
//! and borrowed without copying when valid.
//!
//! - [`SparseTensor::from_csr`](crate::SparseTensor::from_csr), [`SparseTensor::from_csc`](crate::SparseTensor::from_csc), [`SparseTensor::from_bsr`](crate::SparseTensor::from_bsr):
//!   compressed arrays (SciPy's conventions);
//! - [`SparseTensor::from_coo_arrays`](crate::SparseTensor::from_coo_arrays): one coordinate array per dimension;
//! - [`SparseTensor::from_parts`](crate::SparseTensor::from_parts): any structure, checked against [`crate::Format::layout`].
//!
//! Every problem is a named [`crate::FormatError`] variant saying where it is (axis, parent
//! position, position, entry). Unsorted indices and duplicates are errors unless
//! [`CheckOptions`] asks to fix them, which copies the arrays (and, for duplicates,
//! sums values in f64 before rounding back to the value type).
//!
//! ```
//! use sparsile_formats::{validate::CheckOptions, FormatError, IndexArray, SparseTensor, Values};
//! use std::borrow::Cow;
//! let indptr = [0i32, 1, 3];
//! let bad = SparseTensor::from_csr([2, 2], IndexArray::I32(Cow::Borrowed(&indptr)),
//!     IndexArray::I32(Cow::Owned(vec![0, 1, 2])), Values::F64(Cow::Owned(vec![1.0; 3])),
//!     CheckOptions::default());
//! assert_eq!(bad.unwrap_err(),
//!     FormatError::IndexOutOfRange { axis: 1, parent: 1, position: 2, value: 2, dim: 2 });
//! ```

mod check;
mod compressed;
mod coo_arrays;
mod parts;
mod runs;

pub use runs::{indices_within, runs_increasing};

/// What the checked constructors may fix instead of reporting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// Sort indices under each parent position (COO: entries lexicographically).
    pub sort_indices: bool,
    /// Sum the values of duplicate indices.
    pub sum_duplicates: bool,
}
