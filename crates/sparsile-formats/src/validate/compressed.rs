//! Checked constructors for compressed user arrays: CSR, CSC and BSR.

use std::sync::Arc;

use sparsile_ir::AxisKind;

use super::check::{check_compressed_indices, check_fits, check_indptr, indptr_ranges};
use super::CheckOptions;
use crate::{AxisStorage, Format, FormatError, IndexArray, SparseTensor, Structure, Values};

/// The compressed axis (storage axis 1) of CSR / CSC / BSR, checked and, where the
/// options allow, sorted and summed (which copies).
struct Compressed<'a> {
    indptr: IndexArray<'a>,
    indices: IndexArray<'a>,
    values: Values<'a>,
}

/// Checks `indptr` over `outer` parents and `indices` in `0..inner`, with `chunk`
/// values per position; `dims` are the logical `(dimension, size)` pairs that must fit
/// the arrays' index type.
fn check_compressed<'a>(
    dims: &[(usize, usize)],
    outer: usize,
    inner: usize,
    chunk: usize,
    c: Compressed<'a>,
    opts: CheckOptions,
) -> Result<Compressed<'a>, FormatError> {
    const AXIS: usize = 1;
    if c.indptr.index_type() != c.indices.index_type() {
        return Err(FormatError::MixedIndexTypes {
            axis: AXIS,
            indptr: c.indptr.index_type(),
            indices: c.indices.index_type(),
        });
    }
    for &(dim, size) in dims {
        check_fits(dim, size, c.indices.index_type())?;
    }
    check_indptr(AXIS, &c.indptr, outer, c.indices.len())?;
    let order = check_compressed_indices(AXIS, &c.indices, inner, false, &c.indptr)?;
    let expected = c
        .indices
        .len()
        .checked_mul(chunk)
        .ok_or(FormatError::ValuesLength {
            found: c.values.len(),
            expected: usize::MAX,
        })?;
    if c.values.len() != expected {
        return Err(FormatError::ValuesLength {
            found: c.values.len(),
            expected,
        });
    }
    if order.unsorted.is_some() && !opts.sort_indices {
        return order.into_result(AXIS, true).map(|_| c);
    }
    if order.unsorted.is_none() && (order.duplicate.is_none() || !opts.sum_duplicates) {
        return order.into_result(AXIS, true).map(|_| c);
    }
    sort_and_sum(c, chunk, opts.sum_duplicates)
}

/// Sorts each parent's indices (stable) and sums duplicates (or reports the first one
/// when `sum` is false, at its position in the sorted arrays).
fn sort_and_sum(
    c: Compressed<'_>,
    chunk: usize,
    sum: bool,
) -> Result<Compressed<'static>, FormatError> {
    let it = c.indices.index_type();
    let old_values = c.values.to_f64_vec();
    let mut indptr = vec![0usize];
    let mut indices: Vec<usize> = Vec::with_capacity(c.indices.len());
    let mut values: Vec<f64> = Vec::with_capacity(old_values.len());
    for (parent, range) in indptr_ranges(&c.indptr) {
        let start = indices.len();
        let mut order: Vec<usize> = range.collect();
        order.sort_by_key(|&q| c.indices.get(q));
        for q in order {
            let idx = c.indices.get(q);
            let chunk_values = &old_values[q * chunk..(q + 1) * chunk];
            if indices.len() > start && indices.last() == Some(&idx) {
                if !sum {
                    return Err(FormatError::DuplicateIndex {
                        axis: 1,
                        parent,
                        position: indices.len(),
                        value: idx,
                    });
                }
                let base = values.len() - chunk;
                for (k, v) in chunk_values.iter().enumerate() {
                    values[base + k] += v;
                }
            } else {
                indices.push(idx);
                values.extend_from_slice(chunk_values);
            }
        }
        indptr.push(indices.len());
    }
    Ok(Compressed {
        indptr: IndexArray::from_usizes(&indptr, it),
        indices: IndexArray::from_usizes(&indices, it),
        values: Values::from_f64(&values, c.values.dtype()),
    })
}

fn sparse_variable<'a>(
    length: usize,
    c: &mut Option<(IndexArray<'a>, IndexArray<'a>)>,
) -> AxisStorage<'a> {
    let (indptr, indices) = c.take().expect("arrays given once");
    AxisStorage {
        kind: AxisKind::SparseVariable,
        parent: Some(0),
        length,
        npos: indices.len(),
        nnz_per_parent: None,
        indptr: Some(indptr),
        indices: Some(indices),
        unique: true,
    }
}

fn tensor<'a>(
    format: Format,
    shape: Vec<usize>,
    axes: Vec<AxisStorage<'a>>,
    values: Values<'a>,
) -> SparseTensor<'a> {
    SparseTensor {
        structure: Arc::new(Structure {
            format,
            shape,
            axes,
        }),
        values,
    }
}

impl<'a> SparseTensor<'a> {
    /// A CSR matrix from user arrays, borrowed without copying when they are valid (and
    /// copied when `opts` asks to sort or sum). `indptr` has `rows + 1` entries,
    /// `indices` the column of each stored value.
    ///
    /// ```
    /// use sparsile_formats::{validate::CheckOptions, FormatError, IndexArray, SparseTensor, Values};
    /// use std::borrow::Cow;
    /// let (indptr, indices, values) = ([0i32, 2, 2], [2i32, 0], [1.0f64, 2.0]);
    /// let csr = |opts| SparseTensor::from_csr([2, 3], IndexArray::I32(Cow::Borrowed(&indptr)),
    ///     IndexArray::I32(Cow::Borrowed(&indices)), Values::F64(Cow::Borrowed(&values)), opts);
    /// assert_eq!(csr(CheckOptions::default()).unwrap_err(),
    ///     FormatError::UnsortedIndices { axis: 1, parent: 0, position: 1 });
    /// let fixed = csr(CheckOptions { sort_indices: true, sum_duplicates: false }).unwrap();
    /// assert_eq!(fixed.to_dense_f64(), vec![2.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
    /// ```
    pub fn from_csr(
        shape: [usize; 2],
        indptr: IndexArray<'a>,
        indices: IndexArray<'a>,
        values: Values<'a>,
        opts: CheckOptions,
    ) -> Result<SparseTensor<'a>, FormatError> {
        let [m, n] = shape;
        let c = Compressed {
            indptr,
            indices,
            values,
        };
        let c = check_compressed(&[(0, m), (1, n)], m, n, 1, c, opts)?;
        let mut arrays = Some((c.indptr, c.indices));
        let axes = vec![AxisStorage::dense_fixed(m), sparse_variable(n, &mut arrays)];
        Ok(tensor(Format::Csr, shape.to_vec(), axes, c.values))
    }

    /// A CSC matrix from user arrays: `indptr` has `cols + 1` entries, `indices` the
    /// row of each stored value. See [`SparseTensor::from_csr`].
    pub fn from_csc(
        shape: [usize; 2],
        indptr: IndexArray<'a>,
        indices: IndexArray<'a>,
        values: Values<'a>,
        opts: CheckOptions,
    ) -> Result<SparseTensor<'a>, FormatError> {
        let [m, n] = shape;
        let c = Compressed {
            indptr,
            indices,
            values,
        };
        let c = check_compressed(&[(0, m), (1, n)], n, m, 1, c, opts)?;
        let mut arrays = Some((c.indptr, c.indices));
        let axes = vec![AxisStorage::dense_fixed(n), sparse_variable(m, &mut arrays)];
        Ok(tensor(Format::Csc, shape.to_vec(), axes, c.values))
    }

    /// A BSR matrix from user arrays with dense `r x c` blocks (SciPy's layout):
    /// `indptr` has `rows / r + 1` entries, `indices` the block column of each block,
    /// `values` `r * c` values per block, row-major within the block. Like SciPy, the
    /// block size must divide the shape.
    pub fn from_bsr(
        shape: [usize; 2],
        block: (usize, usize),
        indptr: IndexArray<'a>,
        indices: IndexArray<'a>,
        values: Values<'a>,
        opts: CheckOptions,
    ) -> Result<SparseTensor<'a>, FormatError> {
        let [m, n] = shape;
        let (r, c) = block;
        if r == 0 || c == 0 {
            return Err(FormatError::BlockSizeZero { r, c });
        }
        for (dim, size, b) in [(0, m, r), (1, n, c)] {
            if size % b != 0 {
                return Err(FormatError::BlockSizeNotDividing {
                    dim,
                    size,
                    block: b,
                });
            }
        }
        let chunk = r
            .checked_mul(c)
            .ok_or(FormatError::ShapeOverflow { shape: vec![r, c] })?;
        let arrays = Compressed {
            indptr,
            indices,
            values,
        };
        let checked = check_compressed(&[(0, m), (1, n)], m / r, n / c, chunk, arrays, opts)?;
        let mut arrays = Some((checked.indptr, checked.indices));
        let axes = vec![
            AxisStorage::dense_fixed(m / r),
            sparse_variable(n / c, &mut arrays),
            AxisStorage::dense_fixed(r),
            AxisStorage::dense_fixed(c),
        ];
        Ok(tensor(
            Format::Bsr { r, c },
            shape.to_vec(),
            axes,
            checked.values,
        ))
    }
}
