//! Axis plans: structure arrays as `usize` vectors, turned into [`AxisStorage`] once the
//! index type is chosen.

use std::sync::Arc;

use sparsile_ir::{AxisKind, DType, IndexType};

use crate::{AxisStorage, Format, FormatError, IndexArray, SparseTensor, Structure, Values};

/// One axis being built.
#[derive(Debug, Clone)]
pub(crate) struct AxisPlan {
    pub kind: AxisKind,
    pub parent: Option<usize>,
    pub length: usize,
    pub npos: usize,
    pub per: Option<usize>,
    pub indptr: Option<Vec<usize>>,
    pub indices: Option<Vec<usize>>,
    pub unique: bool,
}

impl AxisPlan {
    pub fn dense_fixed(length: usize) -> AxisPlan {
        AxisPlan {
            kind: AxisKind::DenseFixed,
            parent: None,
            length,
            npos: length,
            per: None,
            indptr: None,
            indices: None,
            unique: true,
        }
    }

    /// A `sparse_variable` (or `dense_variable` when `indices` is `None`) axis.
    pub fn variable(
        parent: usize,
        length: usize,
        indptr: Vec<usize>,
        indices: Option<Vec<usize>>,
    ) -> AxisPlan {
        let npos = indptr.last().copied().unwrap_or(0);
        AxisPlan {
            kind: if indices.is_some() {
                AxisKind::SparseVariable
            } else {
                AxisKind::DenseVariable
            },
            parent: Some(parent),
            length,
            npos,
            per: None,
            indptr: Some(indptr),
            indices,
            unique: true,
        }
    }

    /// A `sparse_fixed` axis with `per` positions per parent position (a root when
    /// `parent` is `None`, then `per` = all positions).
    pub fn sparse_fixed(
        parent: Option<usize>,
        length: usize,
        per: usize,
        indices: Vec<usize>,
        unique: bool,
    ) -> AxisPlan {
        AxisPlan {
            kind: AxisKind::SparseFixed,
            parent,
            length,
            npos: indices.len(),
            per: Some(per),
            indptr: None,
            indices: Some(indices),
            unique,
        }
    }
}

/// The index type needed by the shape and the axes, or an error when `forced` is too
/// small.
fn choose_index_type(
    shape: &[usize],
    axes: &[AxisPlan],
    forced: Option<IndexType>,
) -> Result<IndexType, FormatError> {
    let it = forced.unwrap_or(IndexType::I32);
    let max = it.max_value();
    let fits = |x: usize| (x as u64) <= max;
    for (dim, &size) in shape.iter().enumerate() {
        if !fits(size) {
            if forced.is_none() {
                return Ok(IndexType::I64);
            }
            return Err(FormatError::ShapeTooLarge {
                dim,
                size,
                index_type: it,
            });
        }
    }
    for (axis, a) in axes.iter().enumerate() {
        if !fits(a.npos) || !fits(a.length) {
            if forced.is_none() {
                return Ok(IndexType::I64);
            }
            return Err(FormatError::PositionsTooMany {
                axis,
                count: a.npos.max(a.length),
                index_type: it,
            });
        }
    }
    Ok(it)
}

/// Assembles the tensor.
pub(crate) fn finish(
    format: &Format,
    shape: &[usize],
    axes: Vec<AxisPlan>,
    values: &[f64],
    dtype: DType,
    forced: Option<IndexType>,
) -> Result<SparseTensor<'static>, FormatError> {
    let it = choose_index_type(shape, &axes, forced)?;
    let axes = axes
        .into_iter()
        .map(|a| AxisStorage {
            kind: a.kind,
            parent: a.parent,
            length: a.length,
            npos: a.npos,
            nnz_per_parent: a.per,
            indptr: a.indptr.map(|v| IndexArray::from_usizes(&v, it)),
            indices: a.indices.map(|v| IndexArray::from_usizes(&v, it)),
            unique: a.unique,
        })
        .collect();
    let structure = Structure {
        format: format.clone(),
        shape: shape.to_vec(),
        axes,
    };
    debug_assert_eq!(structure.nnz_stored(), values.len(), "{format}");
    Ok(SparseTensor {
        structure: Arc::new(structure),
        values: Values::from_f64(values, dtype),
    })
}

/// `indptr` from per-parent counts.
pub(crate) fn prefix_sums(counts: &[usize]) -> Vec<usize> {
    let mut indptr = Vec::with_capacity(counts.len() + 1);
    let mut total = 0;
    indptr.push(0);
    for &c in counts {
        total += c;
        indptr.push(total);
    }
    indptr
}
