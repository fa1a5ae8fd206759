//! The common case of [`super::validate`], in one tight pass per array.
//!
//! [`quick_valid`] answers `true` only when an axis certainly meets every rule of the
//! full check (no padding, sorted runs, a well-formed `indptr`); on `false` the full
//! check runs and names what is wrong. It exists because kernels validate their
//! arguments on every call: the full check's per-element error bookkeeping costs about
//! as much as an SpMM on a large graph, this pass a few percent of it.

use sparsile_formats::validate::{indices_within, runs_increasing};
use sparsile_formats::{AxisStorage, IndexArray};
use sparsile_ir::AxisKind;

/// Whether `axis` (with `parent_npos` parent positions) is certainly valid.
pub(crate) fn quick_valid(axis: &AxisStorage<'_>, parent_npos: Option<usize>) -> bool {
    let length = axis.length as i64;
    match (axis.kind, parent_npos, &axis.indptr, &axis.indices) {
        (AxisKind::DenseFixed, None, None, None) => axis.npos == axis.length,
        (AxisKind::SparseVariable, Some(pn), Some(indptr), Some(indices)) => {
            indptr.len() == pn + 1
                && indices.len() == axis.npos
                && match indptr {
                    IndexArray::I32(p) => runs_ok(p, indices, axis.npos, length, axis.unique),
                    IndexArray::I64(p) => runs_ok(p, indices, axis.npos, length, axis.unique),
                }
        }
        (AxisKind::SparseFixed, parent, None, Some(indices)) => {
            let per = match (parent, axis.nnz_per_parent) {
                (Some(_), Some(k)) => k,
                (None, None) => axis.npos.max(1),
                (None, Some(k)) => k,
                _ => return false,
            };
            let expected = parent.map_or(Some(axis.npos), |pn| pn.checked_mul(per));
            expected == Some(axis.npos)
                && indices.len() == axis.npos
                && per > 0
                && match indices {
                    IndexArray::I32(c) => chunks_ok(c, per, length, axis.unique),
                    IndexArray::I64(c) => chunks_ok(c, per, length, axis.unique),
                }
        }
        _ => false,
    }
}

/// `indptr` runs from 0 to `npos` without decreasing, and every run of `indices` is in
/// `0..length` and increasing (strictly when `unique`).
fn runs_ok<P: Copy + Into<i64>>(
    indptr: &[P],
    indices: &IndexArray<'_>,
    npos: usize,
    length: i64,
    unique: bool,
) -> bool {
    let Some(&first) = indptr.first() else {
        return false;
    };
    if first.into() != 0 || indptr[indptr.len() - 1].into() != npos as i64 {
        return false;
    }
    if !indptr
        .windows(2)
        .fold(true, |ok, w| ok & (w[0].into() <= w[1].into()))
    {
        return false;
    }
    match indices {
        IndexArray::I32(c) => sorted_runs(indptr, c, length, unique),
        IndexArray::I64(c) => sorted_runs(indptr, c, length, unique),
    }
}

fn sorted_runs<P: Copy + Into<i64>, C: Copy + Into<i64>>(
    indptr: &[P],
    indices: &[C],
    length: i64,
    unique: bool,
) -> bool {
    // Branch-free folds (they vectorise); the caller checked that `indptr` runs from 0
    // to `indices.len()` without decreasing.
    if !indices_within(indices, length as u64)
        || indptr.last().map(|&e| e.into()) != Some(indices.len() as i64)
    {
        return false;
    }
    runs_increasing(indptr, indices, unique)
}

fn chunks_ok<C: Copy + Into<i64>>(indices: &[C], per: usize, length: i64, unique: bool) -> bool {
    if !indices_within(indices, length as u64) {
        return false;
    }
    indices.chunks(per).all(|run| {
        if unique {
            run.windows(2).all(|x| x[0].into() < x[1].into())
        } else {
            run.windows(2).all(|x| x[0].into() <= x[1].into())
        }
    })
}
