//! Sparse tensors: shared structure plus values.

use std::sync::Arc;

use sparsile_ir::DType;

use crate::{CooTensor, Format, FormatError, Structure, Values};

/// A sparse (or dense) tensor in some [`Format`].
#[derive(Debug, Clone, PartialEq)]
pub struct SparseTensor<'a> {
    /// Shared between tensors with the same pattern.
    pub structure: Arc<Structure<'a>>,
    pub values: Values<'a>,
}

impl<'a> SparseTensor<'a> {
    pub fn format(&self) -> &Format {
        &self.structure.format
    }

    pub fn shape(&self) -> &[usize] {
        &self.structure.shape
    }

    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }

    /// Number of stored values, padding included.
    pub fn nnz_stored(&self) -> usize {
        self.values.len()
    }

    /// Builds a tensor in `format` from a canonical COO tensor, computing every
    /// structure array; values are stored as f64 (see [`SparseTensor::from_coo_with`]).
    pub fn from_coo(
        coo: &CooTensor,
        format: &Format,
    ) -> Result<SparseTensor<'static>, FormatError> {
        Self::from_coo_with(coo, format, DType::F64)
    }

    /// Builds a tensor in `format` with values of type `dtype`.
    pub fn from_coo_with(
        coo: &CooTensor,
        format: &Format,
        dtype: DType,
    ) -> Result<SparseTensor<'static>, FormatError> {
        crate::convert::from_coo(coo, format, dtype)
    }

    /// The canonical COO form (sorted, no duplicates, padding dropped).
    pub fn to_coo(&self) -> Result<CooTensor, FormatError> {
        crate::convert::to_coo(self)
    }

    /// Converts to another format (through the canonical COO form), keeping the dtype.
    pub fn convert(&self, format: &Format) -> Result<SparseTensor<'static>, FormatError> {
        Self::from_coo_with(&self.to_coo()?, format, self.dtype())
    }

    /// A borrowed view sharing nothing mutable.
    pub fn view(&self) -> SparseTensor<'_> {
        SparseTensor {
            structure: Arc::new(self.structure.view()),
            values: self.values.view(),
        }
    }

    /// An owned copy.
    pub fn into_owned(self) -> SparseTensor<'static> {
        SparseTensor {
            structure: Arc::new(Arc::unwrap_or_clone(self.structure).into_owned()),
            values: self.values.into_owned(),
        }
    }
}
