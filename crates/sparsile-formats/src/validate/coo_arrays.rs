//! Checked constructor for coordinate lists (COO of any order).

use std::sync::Arc;

use sparsile_ir::AxisKind;

use super::check::check_fits;
use super::CheckOptions;
use crate::{
    AxisStorage, CooTensor, Format, FormatError, IndexArray, SparseTensor, Structure, Values,
};

impl<'a> SparseTensor<'a> {
    /// A COO tensor from one coordinate array per dimension and one value per entry,
    /// borrowed without copying when the entries are valid and sorted
    /// lexicographically without duplicates (otherwise copied when `opts` allows the
    /// fix, an error when not).
    ///
    /// ```
    /// use sparsile_formats::{validate::CheckOptions, IndexArray, SparseTensor, Values};
    /// use std::borrow::Cow;
    /// let rows = IndexArray::I64(Cow::Owned(vec![1, 0, 1]));
    /// let cols = IndexArray::I64(Cow::Owned(vec![2, 0, 2]));
    /// let values = Values::F32(Cow::Owned(vec![1.0, 2.0, 3.0]));
    /// let opts = CheckOptions { sort_indices: true, sum_duplicates: true };
    /// let t = SparseTensor::from_coo_arrays(&[2, 3], vec![rows, cols], values, opts).unwrap();
    /// assert_eq!(t.to_dense_f64(), vec![2.0, 0.0, 0.0, 0.0, 0.0, 4.0]);
    /// ```
    pub fn from_coo_arrays(
        shape: &[usize],
        coords: Vec<IndexArray<'a>>,
        values: Values<'a>,
        opts: CheckOptions,
    ) -> Result<SparseTensor<'a>, FormatError> {
        let ndim = shape.len();
        if !Format::Coo.supports_ndim(ndim) {
            return Err(FormatError::UnsupportedOrder {
                format: Format::Coo.to_string(),
                ndim,
            });
        }
        if coords.len() != ndim {
            return Err(FormatError::CoordinateArrayCount {
                found: coords.len(),
                expected: ndim,
            });
        }
        let nnz = coords[0].len();
        for (d, c) in coords.iter().enumerate() {
            if c.len() != nnz {
                return Err(FormatError::LengthMismatch {
                    what: format!("coordinate array {d}"),
                    found: c.len(),
                    expected: nnz,
                });
            }
            check_fits(d, shape[d], c.index_type())?;
        }
        if values.len() != nnz {
            return Err(FormatError::ValuesLength {
                found: values.len(),
                expected: nnz,
            });
        }
        for (d, c) in coords.iter().enumerate() {
            for e in 0..nnz {
                let value = c.get_i64(e);
                if value < 0 {
                    return Err(FormatError::NegativeIndex {
                        axis: d,
                        position: e,
                        value,
                    });
                }
                if value as u64 >= shape[d] as u64 {
                    return Err(FormatError::CoordinateOutOfRange {
                        entry: e,
                        axis: d,
                        coordinate: value,
                        dim: shape[d],
                    });
                }
            }
        }
        let tuple = |e: usize| coords.iter().map(move |c| c.get_i64(e));
        let mut unsorted = None;
        let mut duplicate = None;
        for e in 1..nnz {
            match tuple(e - 1).cmp(tuple(e)) {
                std::cmp::Ordering::Greater => {
                    unsorted.get_or_insert(e);
                }
                std::cmp::Ordering::Equal => {
                    duplicate.get_or_insert(e);
                }
                std::cmp::Ordering::Less => {}
            }
        }
        let (coords, values) = match (unsorted, duplicate) {
            (None, None) => (coords, values),
            (Some(entry), _) if !opts.sort_indices => {
                return Err(FormatError::UnsortedEntries { entry })
            }
            (None, Some(e)) if !opts.sum_duplicates => {
                return Err(FormatError::DuplicateCoordinate {
                    coordinate: tuple(e).map(|x| x as usize).collect(),
                    first: e - 1,
                    second: e,
                })
            }
            _ => {
                let mut coo = CooTensor {
                    shape: shape.to_vec(),
                    coords: (0..nnz)
                        .flat_map(|e| tuple(e).map(|x| x as usize))
                        .collect(),
                    values: values.to_f64_vec(),
                };
                if opts.sum_duplicates {
                    coo.sort_and_sum_duplicates();
                } else {
                    coo.sort_and_reject_duplicates()?;
                }
                let n = coo.nnz();
                let fixed = (0..ndim)
                    .map(|d| {
                        let column: Vec<usize> = (0..n).map(|e| coo.coord(e)[d]).collect();
                        IndexArray::from_usizes(&column, coords[d].index_type())
                    })
                    .collect();
                (fixed, Values::from_f64(&coo.values, values.dtype()))
            }
        };
        let nnz = values.len();
        let axes = coords
            .into_iter()
            .enumerate()
            .map(|(d, indices)| AxisStorage {
                kind: AxisKind::SparseFixed,
                parent: d.checked_sub(1),
                length: shape[d],
                npos: nnz,
                nnz_per_parent: Some(if d == 0 { nnz } else { 1 }),
                indptr: None,
                indices: Some(indices),
                unique: d > 0 || ndim == 1,
            })
            .collect();
        Ok(SparseTensor {
            structure: Arc::new(Structure {
                format: Format::Coo,
                shape: shape.to_vec(),
                axes,
            }),
            values,
        })
    }
}
