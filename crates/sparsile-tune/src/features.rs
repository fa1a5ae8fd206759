//! Cheap features of an input, for the selector and the database key.
//!
//! Purpose: choosing a candidate must cost a small fraction of one kernel call, so the
//! features read the row pointers of a compressed-row pattern in full (`O(rows)`) and
//! the column indices only in a sample of rows: block fill and bandwidth come from at
//! most [`SAMPLE_ROWS`] rows (or block rows) spread evenly over the matrix.
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

/// Rows (or block rows) read for the sampled features.
pub const SAMPLE_ROWS: usize = 512;

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
            bandwidth(csr),
            row_block_fill(csr, 16),
            row_block_fill(csr, 32),
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

/// The rows to sample: all when there are few, else [`SAMPLE_ROWS`] evenly spread.
fn sampled(count: usize) -> impl Iterator<Item = usize> {
    let step = count.div_ceil(SAMPLE_ROWS).max(1);
    (0..count).step_by(step)
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
fn bandwidth(csr: &Csr) -> f64 {
    if csr.rows == 0 || csr.cols == 0 {
        return 0.0;
    }
    let scale = csr.cols as f64 / csr.rows as f64;
    let (mut sum, mut n) = (0.0, 0usize);
    for i in sampled(csr.rows) {
        let diag = i as f64 * scale;
        for &j in row(csr, i) {
            sum += (j as f64 - diag).abs();
            n += 1;
        }
    }
    if n == 0 {
        0.0
    } else {
        sum / n as f64 / csr.cols as f64
    }
}

/// The fill of `1 x c` blocks (one row, `c` aligned columns) holding a non-zero, in the
/// sampled rows: 1 when every touched block is full.
fn row_block_fill(csr: &Csr, c: i64) -> f64 {
    let (mut nz, mut blocks) = (0usize, 0usize);
    for i in sampled(csr.rows) {
        let mut last = -1i64;
        for &j in row(csr, i) {
            nz += 1;
            if j / c != last {
                blocks += 1;
                last = j / c;
            }
        }
    }
    if blocks == 0 {
        0.0
    } else {
        nz as f64 / (blocks as f64 * c as f64)
    }
}

/// The fill of aligned `r x r` blocks holding a non-zero, in the sampled block rows.
fn block_fill(csr: &Csr, r: usize) -> f64 {
    let block_rows = csr.rows.div_ceil(r);
    let (mut nz, mut blocks) = (0usize, 0usize);
    let mut seen: Vec<i64> = Vec::new();
    for b in sampled(block_rows) {
        seen.clear();
        for i in b * r..((b + 1) * r).min(csr.rows) {
            for &j in row(csr, i) {
                nz += 1;
                seen.push(j / r as i64);
            }
        }
        seen.sort_unstable();
        seen.dedup();
        blocks += seen.len();
    }
    if blocks == 0 {
        0.0
    } else {
        nz as f64 / (blocks as f64 * (r * r) as f64)
    }
}
