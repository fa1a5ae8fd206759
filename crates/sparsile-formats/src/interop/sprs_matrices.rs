//! `sprs` matrices: `CsMat` (CSR and CSC) and `TriMat`.
//!
//! A CSR `CsMat` becomes a tensor in format `csr`, a CSC one in format `csc` (axes
//! `dense_fixed(cols)`, `sparse_variable(rows)`). Index arrays are copied into the
//! narrowest index type that holds them; values are copied.

use std::borrow::Cow;
use std::sync::Arc;

use sparsile_ir::{AxisKind, IndexType};
use sprs::{CompressedStorage, CsMatI, CsMatViewI, SpIndex, TriMat, TriMatI};

use crate::interop::{Element, InteropError};
use crate::{AxisStorage, CooTensor, Format, IndexArray, SparseTensor, Structure};

/// A compressed tensor from outer-major arrays (`indptr` starting at 0).
fn compressed_tensor<T: Element>(
    format: Format,
    shape: [usize; 2],
    indptr: &[usize],
    indices: &[usize],
    values: Vec<T>,
) -> SparseTensor<'static> {
    let (outer, inner) = match format {
        Format::Csc => (shape[1], shape[0]),
        _ => (shape[0], shape[1]),
    };
    let it = IndexType::for_max(indices.len().max(inner) as u64);
    let axis = AxisStorage {
        kind: AxisKind::SparseVariable,
        parent: Some(0),
        length: inner,
        npos: indices.len(),
        nnz_per_parent: None,
        indptr: Some(IndexArray::from_usizes(indptr, it)),
        indices: Some(IndexArray::from_usizes(indices, it)),
        unique: true,
    };
    SparseTensor {
        structure: Arc::new(Structure {
            format,
            shape: shape.to_vec(),
            axes: vec![AxisStorage::dense_fixed(outer), axis],
        }),
        values: T::wrap(Cow::Owned(values)),
    }
}

/// A `csr` (or `csc`) tensor from a `sprs` matrix view (`m.view()`).
pub fn from_csmat<T: Element, I: SpIndex, Iptr: SpIndex>(
    m: CsMatViewI<'_, T, I, Iptr>,
) -> Result<SparseTensor<'static>, InteropError> {
    let indptr_raw = m.proper_indptr();
    let base = m.indptr().index(0).index();
    let indptr: Vec<usize> = indptr_raw.iter().map(|p| p.index()).collect();
    let nnz = *indptr.last().unwrap_or(&0);
    let indices: Vec<usize> = m.indices()[base..base + nnz]
        .iter()
        .map(|i| i.index())
        .collect();
    let values = m.data()[base..base + nnz].to_vec();
    let format = match m.storage() {
        CompressedStorage::CSR => Format::Csr,
        CompressedStorage::CSC => Format::Csc,
    };
    Ok(compressed_tensor(
        format,
        [m.rows(), m.cols()],
        &indptr,
        &indices,
        values,
    ))
}

/// Outer-major arrays (indptr, inner indices, values) of a canonical COO matrix,
/// rows outer for CSR and columns outer for CSC.
fn compress(coo: &CooTensor, storage: CompressedStorage) -> (Vec<usize>, Vec<usize>, Vec<f64>) {
    let (outer_axis, outer_dim) = match storage {
        CompressedStorage::CSR => (0, coo.shape[0]),
        CompressedStorage::CSC => (1, coo.shape[1]),
    };
    let nnz = coo.nnz();
    let mut indptr = vec![0usize; outer_dim + 1];
    for e in 0..nnz {
        indptr[coo.coords[2 * e + outer_axis] + 1] += 1;
    }
    for o in 0..outer_dim {
        indptr[o + 1] += indptr[o];
    }
    let mut next = indptr.clone();
    let mut indices = vec![0usize; nnz];
    let mut values = vec![0.0; nnz];
    // Entries are sorted by (row, col), so each outer slot fills in increasing inner order.
    for e in 0..nnz {
        let o = coo.coords[2 * e + outer_axis];
        let p = next[o];
        next[o] += 1;
        indices[p] = coo.coords[2 * e + 1 - outer_axis];
        values[p] = coo.values[e];
    }
    (indptr, indices, values)
}

/// A `csc` tensor from a canonical 2-D COO tensor (f64 values).
pub fn csc_from_coo(coo: &CooTensor) -> Result<SparseTensor<'static>, InteropError> {
    if coo.ndim() != 2 {
        return Err(InteropError::NotMatrix { ndim: coo.ndim() });
    }
    Ok(SparseTensor::from_coo(coo, &Format::Csc)?)
}

/// A `sprs` matrix (CSR or CSC as asked) with the entries of any 2-D tensor; values are
/// rounded to `T`, padding is dropped.
pub fn to_csmat<T: Element>(
    t: &SparseTensor<'_>,
    storage: CompressedStorage,
) -> Result<CsMatI<T, usize>, InteropError> {
    if t.shape().len() != 2 {
        return Err(InteropError::NotMatrix {
            ndim: t.shape().len(),
        });
    }
    let shape = (t.shape()[0], t.shape()[1]);
    let direct = matches!(
        (t.format(), storage),
        (Format::Csr, CompressedStorage::CSR) | (Format::Csc, CompressedStorage::CSC)
    );
    let (indptr, indices, values): (Vec<usize>, Vec<usize>, Vec<T>) = if direct {
        let axis = &t.structure.axes[1];
        let indptr = axis.indptr.as_ref().expect("compressed axis has indptr");
        let indices = axis.indices.as_ref().expect("compressed axis has indices");
        let values = match T::slice(&t.values) {
            Some(v) => v.to_vec(),
            None => (0..t.values.len())
                .map(|i| T::from_f64(t.values.get_f64(i)))
                .collect(),
        };
        (indptr.to_usizes(), indices.to_usizes(), values)
    } else {
        let coo = t.to_coo()?;
        let (p, i, v) = compress(&coo, storage);
        (p, i, v.into_iter().map(T::from_f64).collect())
    };
    let built = match storage {
        CompressedStorage::CSR => CsMatI::try_new(shape, indptr, indices, values),
        CompressedStorage::CSC => CsMatI::try_new_csc(shape, indptr, indices, values),
    };
    built.map_err(|(_, _, _, e)| {
        InteropError::Format(crate::FormatError::Other(format!(
            "invalid compressed structure for sprs: {e}"
        )))
    })
}

/// A canonical COO tensor from triplets; duplicate triplets are summed (the meaning
/// `sprs` gives them).
pub fn from_trimat<T: Element, I: SpIndex>(m: &TriMatI<T, I>) -> CooTensor {
    let mut coo = CooTensor::empty(vec![m.rows(), m.cols()]);
    for ((&v, &i), &j) in m.data().iter().zip(m.row_inds()).zip(m.col_inds()) {
        coo.coords.push(i.index());
        coo.coords.push(j.index());
        coo.values.push(v.to_f64());
    }
    coo.sort_and_sum_duplicates();
    coo
}

/// Triplets of a 2-D COO tensor (f64 values).
pub fn to_trimat(coo: &CooTensor) -> Result<TriMat<f64>, InteropError> {
    if coo.ndim() != 2 {
        return Err(InteropError::NotMatrix { ndim: coo.ndim() });
    }
    let nnz = coo.nnz();
    let rows = (0..nnz).map(|e| coo.coords[2 * e]).collect();
    let cols = (0..nnz).map(|e| coo.coords[2 * e + 1]).collect();
    Ok(TriMat::from_triplets(
        (coo.shape[0], coo.shape[1]),
        rows,
        cols,
        coo.values.clone(),
    ))
}
