//! Builders for `dense` (any order), `coo` (any order) and `ragged`.

use super::plan::{prefix_sums, AxisPlan};
use crate::{CooTensor, FormatError};

/// The row-major offset of every element, or an error when the shape overflows.
pub(crate) fn dense_size(shape: &[usize]) -> Result<usize, FormatError> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| FormatError::ShapeOverflow {
            shape: shape.to_vec(),
        })
}

/// Every element stored row-major; one `dense_fixed` axis per dimension.
pub(crate) fn dense(coo: &CooTensor) -> Result<(Vec<AxisPlan>, Vec<f64>), FormatError> {
    let total = dense_size(&coo.shape)?;
    let mut values = super::filled(total, 0.0, "dense")?;
    for e in 0..coo.nnz() {
        let off = coo
            .coord(e)
            .iter()
            .zip(&coo.shape)
            .fold(0, |off, (&c, &d)| off * d + c);
        values[off] = coo.values[e];
    }
    let axes = coo
        .shape
        .iter()
        .map(|&d| AxisPlan::dense_fixed(d))
        .collect();
    Ok((axes, values))
}

/// A non-unique root `sparse_fixed` axis of `nnz` positions, then one singleton
/// `sparse_fixed(per=1)` axis per further dimension.
pub(crate) fn coo(coo: &CooTensor) -> (Vec<AxisPlan>, Vec<f64>) {
    let nnz = coo.nnz();
    let ndim = coo.ndim();
    let column = |d: usize| (0..nnz).map(|e| coo.coord(e)[d]).collect::<Vec<_>>();
    let mut axes = vec![AxisPlan::sparse_fixed(
        None,
        coo.shape[0],
        nnz,
        column(0),
        ndim == 1,
    )];
    for d in 1..ndim {
        axes.push(AxisPlan::sparse_fixed(
            Some(d - 1),
            coo.shape[d],
            1,
            column(d),
            true,
        ));
    }
    (axes, coo.values.clone())
}

/// Row `i` stores columns `0..=last column of row i` densely (zeros included).
pub(crate) fn ragged(coo: &CooTensor) -> Result<(Vec<AxisPlan>, Vec<f64>), FormatError> {
    let (m, n) = (coo.shape[0], coo.shape[1]);
    let mut lengths = super::filled(m, 0usize, "ragged")?;
    for e in 0..coo.nnz() {
        let c = coo.coord(e);
        lengths[c[0]] = lengths[c[0]].max(c[1] + 1);
    }
    let indptr = prefix_sums(&lengths);
    let mut values = super::filled(indptr[m], 0.0, "ragged")?;
    for e in 0..coo.nnz() {
        let c = coo.coord(e);
        values[indptr[c[0]] + c[1]] = coo.values[e];
    }
    let axes = vec![
        AxisPlan::dense_fixed(m),
        AxisPlan::variable(0, n, indptr, None),
    ];
    Ok((axes, values))
}
