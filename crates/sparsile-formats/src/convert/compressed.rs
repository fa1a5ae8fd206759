//! Builders for the compressed formats: `csr`, `csc`, `dcsr` and `csf` (any order).

use super::plan::{prefix_sums, AxisPlan};
use crate::{CooTensor, FormatError};

/// Rows dense, columns compressed.
pub(crate) fn csr(coo: &CooTensor) -> Result<(Vec<AxisPlan>, Vec<f64>), FormatError> {
    csf(coo)
}

/// Columns dense, rows compressed (entries re-sorted column-major).
pub(crate) fn csc(coo: &CooTensor) -> Result<(Vec<AxisPlan>, Vec<f64>), FormatError> {
    let (m, n) = (coo.shape[0], coo.shape[1]);
    let mut order: Vec<usize> = (0..coo.nnz()).collect();
    order.sort_by_key(|&e| (coo.coord(e)[1], coo.coord(e)[0]));
    let mut counts = super::filled(n, 0usize, "a compressed format")?;
    for e in 0..coo.nnz() {
        counts[coo.coord(e)[1]] += 1;
    }
    let indices = order.iter().map(|&e| coo.coord(e)[0]).collect();
    let values = order.iter().map(|&e| coo.values[e]).collect();
    let axes = vec![
        AxisPlan::dense_fixed(n),
        AxisPlan::variable(0, m, prefix_sums(&counts), Some(indices)),
    ];
    Ok((axes, values))
}

/// Non-empty rows only (root `sparse_fixed`), columns compressed under them.
pub(crate) fn dcsr(coo: &CooTensor) -> (Vec<AxisPlan>, Vec<f64>) {
    let (m, n) = (coo.shape[0], coo.shape[1]);
    let mut rows = Vec::new();
    let mut indptr = vec![0usize];
    let mut cols = Vec::with_capacity(coo.nnz());
    for e in 0..coo.nnz() {
        let c = coo.coord(e);
        if rows.last() != Some(&c[0]) {
            if !rows.is_empty() {
                indptr.push(e);
            }
            rows.push(c[0]);
        }
        cols.push(c[1]);
    }
    if !rows.is_empty() {
        indptr.push(coo.nnz());
    }
    let nrows = rows.len();
    let axes = vec![
        AxisPlan::sparse_fixed(None, m, nrows, rows, true),
        AxisPlan::variable(0, n, indptr, Some(cols)),
    ];
    (axes, coo.values.clone())
}

/// First level dense, every further level compressed under the previous one; a
/// level-`d` position per distinct coordinate prefix of length `d + 1`.
pub(crate) fn csf(coo: &CooTensor) -> Result<(Vec<AxisPlan>, Vec<f64>), FormatError> {
    let nnz = coo.nnz();
    let mut axes = vec![AxisPlan::dense_fixed(coo.shape[0])];
    // Position of each entry's prefix on the previous level.
    let mut parent_pos: Vec<usize> = (0..nnz).map(|e| coo.coord(e)[0]).collect();
    let mut parent_npos = coo.shape[0];
    for d in 1..coo.ndim() {
        let mut counts = super::filled(parent_npos, 0usize, "csf")?;
        let mut indices = Vec::new();
        let mut pos_of = Vec::with_capacity(nnz);
        for e in 0..nnz {
            let new = e == 0
                || parent_pos[e] != parent_pos[e - 1]
                || coo.coord(e)[d] != coo.coord(e - 1)[d];
            if new {
                counts[parent_pos[e]] += 1;
                indices.push(coo.coord(e)[d]);
            }
            pos_of.push(indices.len() - 1);
        }
        parent_npos = indices.len();
        parent_pos = pos_of;
        axes.push(AxisPlan::variable(
            d - 1,
            coo.shape[d],
            prefix_sums(&counts),
            Some(indices),
        ));
    }
    Ok((axes, coo.values.clone()))
}
