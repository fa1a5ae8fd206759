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

    /// A view: the same (immutable, shared) structure and borrowed values. Sharing the
    /// structure's `Arc` keeps its identity, so a kernel that validated it once does not
    /// validate it again on the next call.
    pub fn view(&self) -> SparseTensor<'_> {
        SparseTensor {
            structure: Arc::clone(&self.structure),
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

impl SparseTensor<'_> {
    /// The tensor as a row-major dense array of f64 (padding reads as zero).
    ///
    /// Panics when the dense copy does not fit in memory (a tensor built or validated by
    /// this crate always fits its own storage, not necessarily a dense copy); for a tensor
    /// from user input, [`try_to_dense_f64`](Self::try_to_dense_f64) says so instead.
    pub fn to_dense_f64(&self) -> Vec<f64> {
        self.try_to_dense_f64()
            .unwrap_or_else(|e| panic!("to_dense_f64: {e}"))
    }

    /// Like [`to_dense_f64`](Self::to_dense_f64), with
    /// [`FormatError::MemoryTooLarge`] when the dense copy does not fit in the memory
    /// available.
    pub fn try_to_dense_f64(&self) -> Result<Vec<f64>, FormatError> {
        let s = &self.structure;
        let total = s
            .shape
            .iter()
            .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128))
            .unwrap_or(u128::MAX);
        crate::memory::check_fits("a dense copy", total, std::mem::size_of::<f64>())?;
        if s.format == Format::Dense {
            return Ok(self.values.to_f64_vec());
        }
        let total = crate::convert::dense_size(&s.shape)?;
        let mut dense = crate::memory::filled(total, 0.0, "a dense copy")?;
        let layout = s
            .format
            .layout(s.shape.len())
            .expect("a valid tensor's format supports its order");
        let mut logical = vec![0usize; s.shape.len()];
        crate::convert::walk_stored(s, |crds, offset| {
            for (d, expr) in layout.to_logical.iter().enumerate() {
                match expr.eval(crds, &[], &s.shape) {
                    Some(x) if x >= 0 && (x as u64) < s.shape[d] as u64 => logical[d] = x as usize,
                    _ => return,
                }
            }
            let off = logical
                .iter()
                .zip(&s.shape)
                .fold(0, |off, (&c, &d)| off * d + c);
            dense[off] = self.values.get_f64(offset);
        });
        Ok(dense)
    }

    /// A `dense` tensor of `shape` from row-major f64 values, stored as `dtype`.
    pub fn dense_from_f64(
        shape: &[usize],
        values: &[f64],
        dtype: DType,
    ) -> Result<SparseTensor<'static>, FormatError> {
        if !dtype.is_float() {
            return Err(FormatError::UnsupportedDType { dtype });
        }
        let expected = crate::convert::dense_size(shape)?;
        if values.len() != expected {
            return Err(FormatError::ValuesLength {
                found: values.len(),
                expected,
            });
        }
        Ok(SparseTensor {
            structure: Arc::new(Structure {
                format: Format::Dense,
                shape: shape.to_vec(),
                axes: shape
                    .iter()
                    .map(|&d| crate::AxisStorage::dense_fixed(d))
                    .collect(),
            }),
            values: Values::from_f64(values, dtype),
        })
    }

    /// Builds `format` from a COO tensor with the index type forced when given (see
    /// [`crate::convert::from_coo_with_index`]).
    pub fn from_coo_with_index(
        coo: &CooTensor,
        format: &Format,
        dtype: DType,
        index_type: Option<sparsile_ir::IndexType>,
    ) -> Result<SparseTensor<'static>, FormatError> {
        crate::convert::from_coo_with_index(coo, format, dtype, index_type)
    }
}
