//! Matrix Market I/O.
//!
//! Reads `%%MatrixMarket matrix coordinate|array real|integer|pattern
//! general|symmetric|skew-symmetric` (case-insensitive), plain or gzip-compressed
//! (recognised by its magic bytes, whatever the file name). `complex` and `hermitian`
//! files are rejected as not supported.
//!
//! - `coordinate` files give a canonical [`CooTensor`] (sorted, 0-based). Symmetric
//!   storage is expanded to both triangles (skew-symmetric: the mirror is negated, and a
//!   diagonal entry is an error). `pattern` entries get the value 1.0. Two entries at the
//!   same coordinate are an error naming both lines, or are summed
//!   ([`MtxReadOptions::duplicates`]).
//! - `array` files (column-major in the file) give a dense matrix with row-major values.
//!
//! Every malformed input is an [`MtxError`] naming the 1-based line number and the
//! problem. Writing ([`write_coo`], [`write_dense`], [`write_path`]) produces files this
//! reader (and other Matrix Market readers) load back exactly: reals are written in the
//! shortest form that round-trips.
//!
//! ```
//! use sparsile_formats::mtx::{self, MtxData, MtxField, MtxReadOptions, MtxWriteOptions};
//! let text = "%%MatrixMarket matrix coordinate real symmetric\n% a comment\n3 3 2\n1 1 4.0\n3 1 -2\n";
//! let data = mtx::read(text.as_bytes(), &MtxReadOptions::default()).unwrap();
//! let MtxData::Sparse(coo) = &data else { panic!("a coordinate file") };
//! assert_eq!(coo.shape, vec![3, 3]);
//! assert_eq!(coo.coords, vec![0, 0, 0, 2, 2, 0]); // (1,1), (1,3), (3,1) 0-based
//! assert_eq!(coo.values, vec![4.0, -2.0, -2.0]);
//!
//! let mut out = Vec::new();
//! mtx::write_coo(&mut out, coo, &MtxWriteOptions::general(MtxField::Real)).unwrap();
//! assert_eq!(mtx::read(&out[..], &MtxReadOptions::default()).unwrap(), data);
//!
//! let err = mtx::read("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n".as_bytes(),
//!                     &MtxReadOptions::default()).unwrap_err();
//! assert_eq!(err.to_string(), "line 3: row index 3 is out of range 1..=2 (indices are 1-based)");
//! ```

mod error;
mod header;
mod read;
mod write;

use std::borrow::Cow;
use std::sync::Arc;

pub use error::MtxError;
pub use header::{MtxField, MtxFormat, MtxHeader, MtxSymmetry};
pub use read::{
    read, read_path, read_path_with_header, read_with_header, Duplicates, MtxReadOptions,
    MAX_LINE_BYTES,
};
pub use write::{write, write_coo, write_dense, write_path, MtxWriteOptions};

use crate::{AxisStorage, CooTensor, Format, FormatError, SparseTensor, Structure, Values};

/// The contents of a Matrix Market file.
#[derive(Debug, Clone, PartialEq)]
pub enum MtxData {
    /// A `coordinate` file: canonical COO (sorted, no duplicates, 0-based).
    Sparse(CooTensor),
    /// An `array` file: every element, row-major.
    Dense { shape: Vec<usize>, values: Vec<f64> },
}

impl MtxData {
    /// The matrix shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            MtxData::Sparse(coo) => &coo.shape,
            MtxData::Dense { shape, .. } => shape,
        }
    }

    /// The COO form; a dense matrix keeps its nonzero elements only.
    pub fn into_coo(self) -> CooTensor {
        match self {
            MtxData::Sparse(coo) => coo,
            MtxData::Dense { shape, values } => {
                let cols = shape[1];
                let mut coo = CooTensor::empty(shape);
                for (k, &v) in values.iter().enumerate() {
                    if v != 0.0 {
                        coo.coords.push(k / cols);
                        coo.coords.push(k % cols);
                        coo.values.push(v);
                    }
                }
                coo
            }
        }
    }

    /// A tensor in `format` (f64 values). A dense file asked for as `dense` keeps every
    /// element without going through COO.
    pub fn to_tensor(&self, format: &Format) -> Result<SparseTensor<'static>, FormatError> {
        match (self, format) {
            (MtxData::Dense { shape, values }, Format::Dense) => Ok(SparseTensor {
                structure: Arc::new(Structure {
                    format: Format::Dense,
                    shape: shape.clone(),
                    axes: shape.iter().map(|&d| AxisStorage::dense_fixed(d)).collect(),
                }),
                values: Values::F64(Cow::Owned(values.clone())),
            }),
            (MtxData::Sparse(coo), f) => SparseTensor::from_coo(coo, f),
            (dense, f) => SparseTensor::from_coo(&dense.clone().into_coo(), f),
        }
    }
}
