//! Builder for diagonal storage (`dia`).

use super::plan::AxisPlan;
use crate::{CooTensor, FormatError};

/// One stored diagonal per offset `j - i` holding at least one entry; axis `D` stores
/// `offset + rows - 1` (sorted), axis `I` is the row. The value of row `i` on stored
/// diagonal `p` is at `p * rows + i`; slots outside the matrix hold zero.
pub(crate) fn dia(coo: &CooTensor) -> Result<(Vec<AxisPlan>, Vec<f64>), FormatError> {
    let (m, n) = (coo.shape[0], coo.shape[1]);
    // shifted offset = j - i + m - 1, in 0..m+n-1
    let shifted = |x: &[usize]| x[1] + m - 1 - x[0];
    let mut diags: Vec<usize> = (0..coo.nnz()).map(|e| shifted(coo.coord(e))).collect();
    diags.sort_unstable();
    diags.dedup();
    let total = diags
        .len()
        .checked_mul(m)
        .ok_or_else(|| FormatError::ShapeOverflow {
            shape: coo.shape.clone(),
        })?;
    let mut values = super::filled(total, 0.0, "dia")?;
    for e in 0..coo.nnz() {
        let x = coo.coord(e);
        let p = diags
            .binary_search(&shifted(x))
            .expect("every entry's diagonal was collected");
        values[p * m + x[0]] = coo.values[e];
    }
    let ndiag = diags.len();
    let axes = vec![
        AxisPlan::sparse_fixed(
            None,
            m.saturating_add(n).saturating_sub(1),
            ndiag,
            diags,
            true,
        ),
        AxisPlan::dense_fixed(m),
    ];
    Ok((axes, values))
}
