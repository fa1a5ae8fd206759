//! Builders for the block formats: `bsr:RxC`, `dbsr:RxC` and `srbcrs:TxG`.
//!
//! Blocks are dense with explicit zero padding; when a dimension does not divide by
//! the block size, the last blocks reach past the edge (those slots hold zero).

use super::plan::{prefix_sums, AxisPlan};
use crate::{CooTensor, FormatError};

fn overflow(coo: &CooTensor) -> FormatError {
    FormatError::ShapeOverflow {
        shape: coo.shape.clone(),
    }
}

/// The sorted distinct `(outer row, column key)` pairs of the entries.
fn distinct_tiles(
    coo: &CooTensor,
    key: impl Fn(&[usize]) -> (usize, usize),
) -> Vec<(usize, usize)> {
    let mut tiles: Vec<(usize, usize)> = (0..coo.nnz()).map(|e| key(coo.coord(e))).collect();
    tiles.sort_unstable();
    tiles.dedup();
    tiles
}

/// BSR (`doubly = false`: every block row) or DBSR (`doubly = true`: non-empty block
/// rows only) with dense `r x c` blocks.
pub(crate) fn bsr(
    coo: &CooTensor,
    r: usize,
    c: usize,
    doubly: bool,
) -> Result<(Vec<AxisPlan>, Vec<f64>), FormatError> {
    if r == 0 || c == 0 {
        return Err(FormatError::BlockSizeZero { r, c });
    }
    let (m, n) = (coo.shape[0], coo.shape[1]);
    let (bm, bn) = (m.div_ceil(r), n.div_ceil(c));
    let blocks = distinct_tiles(coo, |x| (x[0] / r, x[1] / c));
    let block_size = r.checked_mul(c).ok_or_else(|| overflow(coo))?;
    let total = blocks
        .len()
        .checked_mul(block_size)
        .ok_or_else(|| overflow(coo))?;
    let mut values = super::filled(total, 0.0, "a block format")?;
    for e in 0..coo.nnz() {
        let x = coo.coord(e);
        let b = blocks
            .binary_search(&(x[0] / r, x[1] / c))
            .expect("every entry's block was collected");
        values[b * block_size + (x[0] % r) * c + x[1] % c] = coo.values[e];
    }
    let block_cols: Vec<usize> = blocks.iter().map(|b| b.1).collect();
    let outer = if doubly {
        let mut rows: Vec<usize> = blocks.iter().map(|b| b.0).collect();
        rows.dedup();
        let mut counts = super::filled(rows.len(), 0usize, "dbsr")?;
        let mut k = 0;
        for b in &blocks {
            while rows[k] != b.0 {
                k += 1;
            }
            counts[k] += 1;
        }
        let nrows = rows.len();
        (
            AxisPlan::sparse_fixed(None, bm, nrows, rows, true),
            prefix_sums(&counts),
        )
    } else {
        let mut counts = super::filled(bm, 0usize, "bsr")?;
        for b in &blocks {
            counts[b.0] += 1;
        }
        (AxisPlan::dense_fixed(bm), prefix_sums(&counts))
    };
    let axes = vec![
        outer.0,
        AxisPlan::variable(0, bn, outer.1, Some(block_cols)),
        AxisPlan::dense_fixed(r),
        AxisPlan::dense_fixed(c),
    ];
    Ok((axes, values))
}

/// SR-BCRS(t, g): rows in strips of `t`; a strip's non-empty `t x 1` column tiles, in
/// column order, grouped `g` per group, the last group padded with sentinel tiles
/// (column = number of columns). Value of tile position `p`, row `ii` of the strip:
/// `p * t + ii`.
pub(crate) fn srbcrs(
    coo: &CooTensor,
    t: usize,
    g: usize,
) -> Result<(Vec<AxisPlan>, Vec<f64>), FormatError> {
    if t == 0 || g == 0 {
        return Err(FormatError::BlockSizeZero { r: t, c: g });
    }
    let (m, n) = (coo.shape[0], coo.shape[1]);
    let strips = m.div_ceil(t);
    let tiles = distinct_tiles(coo, |x| (x[0] / t, x[1]));
    let mut tiles_per_strip = super::filled(strips, 0usize, "srbcrs")?;
    for tile in &tiles {
        tiles_per_strip[tile.0] += 1;
    }
    let groups: Vec<usize> = tiles_per_strip.iter().map(|k| k.div_ceil(g)).collect();
    let indptr = prefix_sums(&groups);
    let slots = indptr[strips].checked_mul(g).ok_or_else(|| overflow(coo))?;
    let total = slots.checked_mul(t).ok_or_else(|| overflow(coo))?;
    let mut cols = super::filled(slots, n, "srbcrs")?;
    // Position of every tile, in the order of `tiles`.
    let mut tile_pos = Vec::with_capacity(tiles.len());
    let mut k = 0;
    for s in 0..strips {
        for local in 0..tiles_per_strip[s] {
            let p = indptr[s] * g + local;
            cols[p] = tiles[k].1;
            tile_pos.push(p);
            k += 1;
        }
    }
    let mut values = super::filled(total, 0.0, "a block format")?;
    for e in 0..coo.nnz() {
        let x = coo.coord(e);
        let idx = tiles
            .binary_search(&(x[0] / t, x[1]))
            .expect("every entry's tile was collected");
        values[tile_pos[idx] * t + x[0] % t] = coo.values[e];
    }
    let axes = vec![
        AxisPlan::dense_fixed(strips),
        AxisPlan::variable(0, n.div_ceil(g), indptr, None),
        AxisPlan::sparse_fixed(Some(1), n, g, cols, true),
        AxisPlan::dense_fixed(t),
    ];
    Ok((axes, values))
}
