//! Cheap features of an input, for the selector and the database key.
//!
//! Purpose: choosing a candidate must cost a small fraction of one kernel call, so the
//! features read the row pointers of a compressed-row pattern in full (`O(rows)`) and
//! the column indices only in a sample of rows: block fill and bandwidth come from at
//! most [`SAMPLE_ROWS`] rows (or block rows) spread evenly over the matrix, each standing
//! for an equal share of the rows that are not long, plus every *long* row (more than
//! [`LONG_ROW_FACTOR`] times the mean length) read in full and standing for itself. A
//! plain even sample let one huge row speak for thousands: on an arrow matrix (one dense
//! row, one dense column, the diagonal) it put the fill of `1 x 16` blocks at 0.76 where
//! it is 0.09, and so offered (and the selector chose) a block format 4.7x slower than
//! the plain loop. Long rows hold at most all the non-zeros, and there are at most
//! `rows / LONG_ROW_FACTOR` of them.
//!
//! Preconditions: `indptr` has `rows + 1` non-decreasing entries from 0, and each row's
//! column indices are below `cols` (a validated CSR pattern).
//!
//! ```
//! use sparsile_tune::features::{Csr, Features, FEATURE_NAMES};
//! use sparsile_tune::op::Operator;
//! // 3 x 4: rows of 2, 0 and 1 non-zeros
//! let csr = Csr { rows: 3, cols: 4, indptr: &[0, 2, 2, 3], indices: &[0, 1, 3] };
//! let f = Features::of(&csr, Operator::Spmm, 32, 2, 4);
//! assert_eq!(f.values.len(), FEATURE_NAMES.len());
//! assert_eq!(f.get("row_length_mean"), Some(1.0));
//! assert_eq!(f.get("empty_row_fraction"), Some(1.0 / 3.0));
//! ```

use serde::{Deserialize, Serialize};

use crate::op::Operator;

/// Rows (or block rows) read for the sampled features, besides the long ones.
pub const SAMPLE_ROWS: usize = 512;

/// A row (or block row) longer than this many times the mean is read in full for the
/// sampled features and stands for itself alone.
pub const LONG_ROW_FACTOR: f64 = 32.0;

/// A compressed-row pattern, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct Csr<'a> {
    pub rows: usize,
    pub cols: usize,
    pub indptr: &'a [i64],
    pub indices: &'a [i64],
}

/// The feature names, in the order of [`Features::values`].
pub const FEATURE_NAMES: &[&str] = &[
    "log2_rows",
    "log2_cols",
    "log2_nnz",
    "row_length_mean",
    "row_length_cv",
    "row_length_max_over_mean",
    "log2_row_length_max",
    "empty_row_fraction",
    "long_row_nnz_fraction",
    "short_row_fraction",
    "bandwidth",
    "fill_1x16",
    "fill_1x32",
    "fill_4x4",
    "fill_8x8",
    "fill_16x16",
    "log2_width",
    "log2_dense_bytes",
    "op_spmm",
    "op_sddmm",
    "op_spmv",
    "threads",
    "dtype_bytes",
    "log10_density",
];

/// The features of one input (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Features {
    pub values: Vec<f64>,
}

impl Features {
    /// The features of `csr` for `op` with dense width `width` (1 for SpMV), `threads`
    /// threads and `dtype_bytes`-byte values.
    pub fn of(
        csr: &Csr,
        op: Operator,
        width: usize,
        threads: usize,
        dtype_bytes: usize,
    ) -> Features {
        let rows = csr.rows;
        let nnz = csr.indptr.get(rows).copied().unwrap_or(0).max(0) as usize;
        let len = |i: usize| (csr.indptr[i + 1] - csr.indptr[i]).max(0) as f64;
        let mean = if rows == 0 {
            0.0
        } else {
            nnz as f64 / rows as f64
        };
        let (mut var, mut max, mut empty, mut short, mut tail) = (0.0, 0.0f64, 0usize, 0usize, 0.0);
        for i in 0..rows {
            let l = len(i);
            var += (l - mean) * (l - mean);
            max = max.max(l);
            empty += usize::from(l == 0.0);
            short += usize::from(l < 4.0);
            if l > 4.0 * mean {
                tail += l;
            }
        }
        let std = if rows == 0 {
            0.0
        } else {
            (var / rows as f64).sqrt()
        };
        let frac = |x: f64, of: f64| if of > 0.0 { x / of } else { 0.0 };
        let density = frac(nnz as f64, rows as f64 * csr.cols as f64);
        let dense_bytes = (csr.cols.max(1) * width.max(1) * dtype_bytes) as f64;
        let rows_read = sampled_rows(csr);
        let values = vec![
            ((rows + 1) as f64).log2(),
            ((csr.cols + 1) as f64).log2(),
            ((nnz + 1) as f64).log2(),
            mean,
            frac(std, mean),
            frac(max, mean),
            (max + 1.0).log2(),
            frac(empty as f64, rows as f64),
            frac(tail, nnz as f64),
            frac(short as f64, rows as f64),
            bandwidth(csr, &rows_read),
            row_block_fill(csr, &rows_read, 16),
            row_block_fill(csr, &rows_read, 32),
            block_fill(csr, 4),
            block_fill(csr, 8),
            block_fill(csr, 16),
            (width.max(1) as f64).log2(),
            dense_bytes.log2(),
            f64::from(u8::from(op == Operator::Spmm)),
            f64::from(u8::from(op == Operator::Sddmm)),
            f64::from(u8::from(op == Operator::Spmv)),
            threads as f64,
            dtype_bytes as f64,
            if density > 0.0 {
                density.log10()
            } else {
                -12.0
            },
        ];
        Features { values }
    }

    /// The value of feature `name`.
    pub fn get(&self, name: &str) -> Option<f64> {
        FEATURE_NAMES
            .iter()
            .position(|n| *n == name)
            .and_then(|k| self.values.get(k).copied())
    }
}

/// The units (rows or block rows) to read, each with the number of units it stands for:
/// every long unit (above [`LONG_ROW_FACTOR`] times the mean of `len`) with weight 1,
/// and of the others all when there are few, else those at every `count / SAMPLE_ROWS`-th
/// position (at most [`SAMPLE_ROWS`]), each standing for an equal share of them. Two
/// passes over `len`.
fn sampled(count: usize, len: impl Fn(usize) -> f64) -> Vec<(usize, f64)> {
    let total: f64 = (0..count).map(&len).sum();
    let limit = LONG_ROW_FACTOR * (total / count.max(1) as f64).max(1.0);
    // One pass: every long unit, and every step-th unit that is not long.
    let step = count.div_ceil(SAMPLE_ROWS).max(1);
    let (mut spread, mut long) = (Vec::new(), Vec::new());
    for u in 0..count {
        if len(u) > limit {
            long.push(u);
        } else if u % step == 0 {
            spread.push(u);
        }
    }
    let others = count - long.len();
    let weight = others as f64 / spread.len().max(1) as f64;
    let mut units: Vec<(usize, f64)> = spread.into_iter().map(|u| (u, weight)).collect();
    units.extend(long.into_iter().map(|u| (u, 1.0)));
    units
}

/// The rows of `csr` to read, with their weights (see [`sampled`]).
fn sampled_rows(csr: &Csr) -> Vec<(usize, f64)> {
    sampled(csr.rows, |i| {
        (csr.indptr[i + 1] - csr.indptr[i]).max(0) as f64
    })
}

fn row<'a>(csr: &Csr<'a>, i: usize) -> &'a [i64] {
    let (a, b) = (
        csr.indptr[i].max(0) as usize,
        csr.indptr[i + 1].max(0) as usize,
    );
    &csr.indices[a.min(b)..b]
}

/// The mean distance of a non-zero from the diagonal (scaled to a square), over the
/// columns, in the sampled rows.
fn bandwidth(csr: &Csr, rows_read: &[(usize, f64)]) -> f64 {
    if csr.rows == 0 || csr.cols == 0 {
        return 0.0;
    }
    let scale = csr.cols as f64 / csr.rows as f64;
    let (mut sum, mut n) = (0.0, 0.0);
    for &(i, w) in rows_read {
        let diag = i as f64 * scale;
        let r = row(csr, i);
        sum += w * r.iter().map(|&j| (j as f64 - diag).abs()).sum::<f64>();
        n += w * r.len() as f64;
    }
    if n == 0.0 {
        0.0
    } else {
        sum / n / csr.cols as f64
    }
}

/// The fill of `1 x c` blocks (one row, `c` aligned columns) holding a non-zero, in the
/// sampled rows: 1 when every touched block is full.
fn row_block_fill(csr: &Csr, rows_read: &[(usize, f64)], c: i64) -> f64 {
    let (mut nz, mut blocks) = (0.0, 0.0);
    for &(i, w) in rows_read {
        let (mut last, mut count) = (-1i64, 0usize);
        let r = row(csr, i);
        for &j in r {
            if j / c != last {
                count += 1;
                last = j / c;
            }
        }
        nz += w * r.len() as f64;
        blocks += w * count as f64;
    }
    if blocks == 0.0 {
        0.0
    } else {
        nz / (blocks * c as f64)
    }
}

/// The fill of aligned `r x r` blocks holding a non-zero, in the sampled block rows.
fn block_fill(csr: &Csr, r: usize) -> f64 {
    let block_rows = csr.rows.div_ceil(r);
    let (mut nz, mut blocks) = (0.0, 0.0);
    let mut seen: Vec<i64> = Vec::new();
    let span = |b: usize| (b * r, ((b + 1) * r).min(csr.rows));
    let len = |b: usize| {
        let (lo, hi) = span(b);
        (csr.indptr[hi] - csr.indptr[lo]).max(0) as f64
    };
    for (b, w) in sampled(block_rows, len) {
        seen.clear();
        let (lo, hi) = span(b);
        for i in lo..hi {
            seen.extend(row(csr, i).iter().map(|&j| j / r as i64));
        }
        nz += w * seen.len() as f64;
        seen.sort_unstable();
        seen.dedup();
        blocks += w * seen.len() as f64;
    }
    if blocks == 0.0 {
        0.0
    } else {
        nz / (blocks * (r * r) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `n x n` arrow: row 0 and column 0 dense, plus the diagonal.
    fn arrow(n: usize) -> (Vec<i64>, Vec<i64>) {
        let mut indptr = vec![0i64];
        let mut indices = Vec::new();
        for i in 0..n {
            if i == 0 {
                indices.extend(0..n as i64);
            } else {
                indices.extend([0, i as i64]);
            }
            indptr.push(indices.len() as i64);
        }
        (indptr, indices)
    }

    /// The fill of `1 x c` blocks over every row.
    fn exact_row_block_fill(csr: &Csr, c: i64) -> f64 {
        let (mut nz, mut blocks) = (0usize, 0usize);
        for i in 0..csr.rows {
            let mut cols: Vec<i64> = row(csr, i).iter().map(|&j| j / c).collect();
            nz += cols.len();
            cols.dedup();
            blocks += cols.len();
        }
        nz as f64 / (blocks as f64 * c as f64)
    }

    /// One huge row among thousands of short ones stands for itself, not for the rows
    /// around it: the sampled fill and bandwidth stay near the exact ones.
    #[test]
    fn a_huge_row_does_not_speak_for_the_short_ones() {
        let n = 20_000;
        let (indptr, indices) = arrow(n);
        let csr = Csr {
            rows: n,
            cols: n,
            indptr: &indptr,
            indices: &indices,
        };
        for c in [16, 32] {
            let (sampled, exact) = (
                row_block_fill(&csr, &sampled_rows(&csr), c),
                exact_row_block_fill(&csr, c),
            );
            assert!(
                (sampled - exact).abs() < 0.02,
                "1x{c}: sampled {sampled}, exact {exact}"
            );
        }
        // Square blocks: each block row but the first holds the diagonal block and the
        // column-0 block, 8 non-zeros in 2 blocks of 16.
        let f4 = block_fill(&csr, 4);
        assert!((f4 - 0.25).abs() < 0.02, "4x4 fill {f4}");
        // Mean distance from the diagonal: the dense row's and the dense column's
        // non-zeros (two thirds) average n/2 each, the diagonal's third 0.
        let b = bandwidth(&csr, &sampled_rows(&csr));
        assert!((b - 1.0 / 3.0).abs() < 0.03, "bandwidth {b}");
    }

    /// Without long rows every row is read when there are few, and the weights of an
    /// even sample add up to the row count.
    #[test]
    fn sample_weights_add_up_to_the_rows() {
        let lens = |i: usize| (i % 7) as f64;
        let few = sampled(100, lens);
        assert_eq!(few.len(), 100);
        assert!(few.iter().all(|&(_, w)| w == 1.0));
        let many = sampled(100_003, lens);
        assert!(many.len() <= SAMPLE_ROWS);
        let total: f64 = many.iter().map(|&(_, w)| w).sum();
        assert!((total - 100_003.0).abs() < 1e-6);
        // A long unit is read and weighted 1.
        let spiky = sampled(10_000, |i| if i == 17 { 1e6 } else { 1.0 });
        assert!(spiky.contains(&(17, 1.0)));
        let total: f64 = spiky.iter().map(|&(_, w)| w).sum();
        assert!((total - 10_000.0).abs() < 1e-6);
    }
}
