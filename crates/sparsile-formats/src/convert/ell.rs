//! Builder for ELLPACK (`ell` / `ell:K`).

use super::plan::AxisPlan;
use crate::{CooTensor, FormatError};

/// `K` slots per row (`k`, or the longest row when `None`); padding slots hold the
/// sentinel coordinate (the number of columns) and value 0. A row longer than `K` is
/// an error naming it.
pub(crate) fn ell(
    coo: &CooTensor,
    k: Option<usize>,
) -> Result<(Vec<AxisPlan>, Vec<f64>), FormatError> {
    let (m, n) = (coo.shape[0], coo.shape[1]);
    let mut lengths = super::filled(m, 0usize, "ell")?;
    for e in 0..coo.nnz() {
        lengths[coo.coord(e)[0]] += 1;
    }
    let longest = lengths.iter().copied().max().unwrap_or(0);
    let width = k.unwrap_or(longest);
    if let Some(row) = lengths.iter().position(|&l| l > width) {
        return Err(FormatError::EllRowTooLong {
            row,
            length: lengths[row],
            width,
        });
    }
    let slots = m
        .checked_mul(width)
        .ok_or_else(|| FormatError::ShapeOverflow {
            shape: coo.shape.clone(),
        })?;
    let mut cols = super::filled(slots, n, "ell")?;
    let mut values = super::filled(slots, 0.0, "ell")?;
    let mut filled = super::filled(m, 0usize, "ell")?;
    for e in 0..coo.nnz() {
        let x = coo.coord(e);
        let p = x[0] * width + filled[x[0]];
        filled[x[0]] += 1;
        cols[p] = x[1];
        values[p] = coo.values[e];
    }
    let axes = vec![
        AxisPlan::dense_fixed(m),
        AxisPlan::sparse_fixed(Some(0), n, width, cols, true),
    ];
    Ok((axes, values))
}
