//! Axes, the format library and sparse tensor storage.
//!
//! A sparse tensor is a [`Structure`] (its [`Format`], logical shape and the storage of
//! each axis: `indptr` and `indices` arrays) plus [`Values`]. Structure is reference
//! counted, so tensors with the same pattern share it. Storage is either owned or
//! borrowed from the caller (`'a`), never copied without need.
//!
//! Lowering and the interpreter never ask which named format a tensor is in: they use
//! the axis capabilities of [`AxisStorage`] (position range under a parent position,
//! coordinate at a position, position of a coordinate).
//!
//! ```
//! use sparsile_formats::{CooTensor, Format, SparseTensor};
//! // 2 x 3 matrix [[1, 0, 2], [0, 0, 3]]
//! let coo = CooTensor::from_triplets(vec![2, 3], &[(0, 0, 1.0), (0, 2, 2.0), (1, 2, 3.0)]).unwrap();
//! let csr = SparseTensor::from_coo(&coo, &Format::Csr).unwrap();
//! assert_eq!(csr.nnz_stored(), 3);
//! assert_eq!(csr.to_coo().unwrap(), coo);
//! ```

pub mod axis;
pub mod container;
pub mod convert;
pub mod coo;
pub mod decompose;
pub mod error;
pub mod format;
pub mod index_array;
pub mod interop;
pub mod layout;
pub mod memory;
pub mod mtx;
pub mod stats;
pub mod structure;
pub mod tensor;
pub mod validate;
pub mod values;

pub use axis::{AxisStorage, Crd, Pos};
pub use coo::CooTensor;
pub use error::FormatError;
pub use format::Format;
pub use index_array::IndexArray;
pub use layout::{AxisSpec, Layout, MapExpr, SizeSpec};
pub use mtx::{MtxData, MtxError, MtxReadOptions};
pub use stats::MatrixStats;
pub use structure::Structure;
pub use tensor::SparseTensor;
pub use validate::CheckOptions;
pub use values::Values;
