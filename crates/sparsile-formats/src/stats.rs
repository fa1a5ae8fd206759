//! Structural statistics of a sparse matrix (what `sparsile info` prints and what the
//! learned selector uses as input features).
//!
//! Precondition: a 2-D [`CooTensor`]. Non-canonical input (unsorted or with duplicate
//! coordinates) is canonicalised first, summing duplicates; explicit zeros count as
//! stored nonzeros.
//!
//! ```
//! use sparsile_formats::{CooTensor, MatrixStats};
//! // [[1, 2, 0], [0, 0, 0], [0, 3, 4]]
//! let coo = CooTensor::from_triplets(vec![3, 3], &[(0, 0, 1.0), (0, 1, 2.0), (2, 1, 3.0), (2, 2, 4.0)]).unwrap();
//! let s = MatrixStats::of(&coo).unwrap();
//! assert_eq!((s.nnz, s.empty_rows, s.empty_cols, s.bandwidth), (4, 1, 0, 1));
//! assert_eq!(s.row_length_max, 2);
//! assert_eq!(s.structurally_symmetric, Some(false));
//! ```

use std::fmt;

use serde::Serialize;

use crate::{CooTensor, FormatError};

/// The block sizes `r` for which [`BlockStats`] are computed.
pub const BLOCK_SIZES: [usize; 4] = [4, 8, 16, 32];

/// A bucket of the row-length histogram: rows with `lo..=hi` stored entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RowLengthBucket {
    pub lo: usize,
    pub hi: usize,
    pub rows: usize,
}

/// Aligned `r x r` blocks (block `(I, J)` covers rows `I*r..(I+1)*r` and columns
/// `J*r..(J+1)*r`; blocks at the lower and right edges may be cut by the matrix).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BlockStats {
    pub r: usize,
    /// Blocks holding at least one nonzero.
    pub nonempty_blocks: usize,
    /// `nnz / (nonempty_blocks * r * r)`: the fill of a BSR storage with `r x r` blocks
    /// (0 for an empty matrix).
    pub fill_ratio: f64,
    /// The fraction of nonzeros lying in blocks whose `r * r` elements are all stored
    /// (cut edge blocks are never complete; 0 for an empty matrix).
    pub dense_block_fraction: f64,
}

/// Statistics of a 2-D sparse matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixStats {
    pub rows: usize,
    pub cols: usize,
    pub nnz: usize,
    /// `nnz / (rows * cols)` (0 when the matrix has no elements).
    pub density: f64,
    pub row_length_mean: f64,
    /// Population standard deviation of the row lengths.
    pub row_length_std: f64,
    pub row_length_min: usize,
    pub row_length_max: usize,
    /// Buckets `0`, `1`, `2-3`, `4-7`, ... up to the one holding the longest row.
    pub row_length_histogram: Vec<RowLengthBucket>,
    pub empty_rows: usize,
    pub empty_cols: usize,
    /// Whether `(i, j)` stored implies `(j, i)` stored; `None` for non-square matrices.
    pub structurally_symmetric: Option<bool>,
    /// Whether `a[i][j] == a[j][i]` for every stored entry (and the pattern is
    /// symmetric); `None` for non-square matrices.
    pub numerically_symmetric: Option<bool>,
    /// `max |i - j|` over stored entries (0 for an empty matrix).
    pub bandwidth: usize,
    /// The envelope size: the sum over rows `i` of `i - min(i, first stored column)`
    /// (rows without entries contribute 0).
    pub profile: u64,
    /// One per size in [`BLOCK_SIZES`].
    pub blocks: Vec<BlockStats>,
}

impl MatrixStats {
    /// Computes the statistics of a 2-D matrix.
    pub fn of(coo: &CooTensor) -> Result<MatrixStats, FormatError> {
        if coo.ndim() != 2 {
            return Err(FormatError::UnsupportedOrder {
                format: "matrix statistics".into(),
                ndim: coo.ndim(),
            });
        }
        coo.check_ranges()?;
        let canonical = (1..coo.nnz()).all(|e| coo.coord(e - 1) < coo.coord(e));
        if canonical {
            Self::of_canonical(coo)
        } else {
            let mut c = coo.clone();
            c.sort_and_sum_duplicates();
            Self::of_canonical(&c)
        }
    }

    fn of_canonical(coo: &CooTensor) -> Result<MatrixStats, FormatError> {
        let (rows, cols) = (coo.shape[0], coo.shape[1]);
        let nnz = coo.nnz();
        // Per-row and per-column tables: as large as the shape the file declares.
        crate::memory::check_fits("the per-row tables of the statistics", rows as u128, 16)?;
        let mut row_len = crate::memory::filled(rows, 0usize, "the row lengths")?;
        // Columns with an entry, counted from the entries (a table per column would be as
        // large as the column count a header declares).
        let mut seen_cols: Vec<usize> = (0..nnz).map(|e| coo.coords[2 * e + 1]).collect();
        seen_cols.sort_unstable();
        seen_cols.dedup();
        let mut first_col = crate::memory::filled(rows, usize::MAX, "the row profile")?;
        let mut bandwidth = 0usize;
        for e in 0..nnz {
            let (i, j) = (coo.coords[2 * e], coo.coords[2 * e + 1]);
            row_len[i] += 1;
            first_col[i] = first_col[i].min(j);
            bandwidth = bandwidth.max(i.abs_diff(j));
        }
        let profile = first_col
            .iter()
            .enumerate()
            .filter(|&(_, &f)| f != usize::MAX)
            .map(|(i, &f)| (i - i.min(f)) as u64)
            .sum();
        let mean = if rows == 0 {
            0.0
        } else {
            nnz as f64 / rows as f64
        };
        let var = if rows == 0 {
            0.0
        } else {
            row_len
                .iter()
                .map(|&l| (l as f64 - mean) * (l as f64 - mean))
                .sum::<f64>()
                / rows as f64
        };
        let row_length_max = row_len.iter().copied().max().unwrap_or(0);
        let row_length_min = row_len.iter().copied().min().unwrap_or(0);
        let total = rows as f64 * cols as f64;
        let (structurally_symmetric, numerically_symmetric) = if rows == cols {
            let (s, n) = symmetry(coo);
            (Some(s), Some(n))
        } else {
            (None, None)
        };
        Ok(MatrixStats {
            rows,
            cols,
            nnz,
            density: if total == 0.0 {
                0.0
            } else {
                nnz as f64 / total
            },
            row_length_mean: mean,
            row_length_std: var.sqrt(),
            row_length_min,
            row_length_max,
            row_length_histogram: histogram(&row_len, row_length_max),
            empty_rows: row_len.iter().filter(|&&l| l == 0).count(),
            empty_cols: cols - seen_cols.len(),
            structurally_symmetric,
            numerically_symmetric,
            bandwidth,
            profile,
            blocks: BLOCK_SIZES.iter().map(|&r| blocks(coo, r)).collect(),
        })
    }
}

/// The power-of-two bucket of a row length: 0 -> 0, 1 -> 1, 2..=3 -> 2, 4..=7 -> 3, ...
fn bucket_of(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        usize::BITS as usize - len.leading_zeros() as usize
    }
}

fn histogram(row_len: &[usize], max: usize) -> Vec<RowLengthBucket> {
    let nb = bucket_of(max) + 1;
    let mut buckets: Vec<RowLengthBucket> = (0..nb)
        .map(|b| {
            let (lo, hi) = if b == 0 {
                (0, 0)
            } else {
                (1 << (b - 1), (1 << b) - 1)
            };
            RowLengthBucket { lo, hi, rows: 0 }
        })
        .collect();
    for &l in row_len {
        buckets[bucket_of(l)].rows += 1;
    }
    buckets
}

/// (structural, numerical) symmetry of a canonical square matrix: compares the entries
/// with the transposed entries sorted the same way.
fn symmetry(coo: &CooTensor) -> (bool, bool) {
    let nnz = coo.nnz();
    let mut t: Vec<(usize, usize, f64)> = (0..nnz)
        .map(|e| (coo.coords[2 * e + 1], coo.coords[2 * e], coo.values[e]))
        .collect();
    t.sort_unstable_by_key(|&(i, j, _)| (i, j));
    let mut numeric = true;
    for (e, &(i, j, v)) in t.iter().enumerate() {
        if (coo.coords[2 * e], coo.coords[2 * e + 1]) != (i, j) {
            return (false, false);
        }
        let w = coo.values[e];
        if !(w == v || (w.is_nan() && v.is_nan())) {
            numeric = false;
        }
    }
    (true, numeric)
}

fn blocks(coo: &CooTensor, r: usize) -> BlockStats {
    let nnz = coo.nnz();
    let mut nonempty = 0usize;
    let mut in_dense = 0usize;
    let mut block_cols: Vec<usize> = Vec::new();
    let mut e = 0;
    while e < nnz {
        let block_row = coo.coords[2 * e] / r;
        block_cols.clear();
        while e < nnz && coo.coords[2 * e] / r == block_row {
            block_cols.push(coo.coords[2 * e + 1] / r);
            e += 1;
        }
        block_cols.sort_unstable();
        let mut k = 0;
        while k < block_cols.len() {
            let mut end = k + 1;
            while end < block_cols.len() && block_cols[end] == block_cols[k] {
                end += 1;
            }
            nonempty += 1;
            if end - k == r * r {
                in_dense += r * r;
            }
            k = end;
        }
    }
    let (fill_ratio, dense_block_fraction) = if nnz == 0 {
        (0.0, 0.0)
    } else {
        (
            nnz as f64 / (nonempty * r * r) as f64,
            in_dense as f64 / nnz as f64,
        )
    };
    BlockStats {
        r,
        nonempty_blocks: nonempty,
        fill_ratio,
        dense_block_fraction,
    }
}

impl fmt::Display for MatrixStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let yes_no = |b: Option<bool>| match b {
            None => "n/a (not square)",
            Some(true) => "yes",
            Some(false) => "no",
        };
        writeln!(f, "shape            {} x {}", self.rows, self.cols)?;
        writeln!(
            f,
            "nonzeros         {} (density {:.3e})",
            self.nnz, self.density
        )?;
        writeln!(
            f,
            "row length       mean {:.2}, std {:.2}, min {}, max {}",
            self.row_length_mean, self.row_length_std, self.row_length_min, self.row_length_max
        )?;
        writeln!(
            f,
            "empty rows/cols  {} / {}",
            self.empty_rows, self.empty_cols
        )?;
        writeln!(
            f,
            "symmetric        structure {}, values {}",
            yes_no(self.structurally_symmetric),
            yes_no(self.numerically_symmetric)
        )?;
        writeln!(
            f,
            "bandwidth        {} (profile {})",
            self.bandwidth, self.profile
        )?;
        writeln!(f, "row lengths")?;
        for b in &self.row_length_histogram {
            let label = if b.lo == b.hi {
                format!("{}", b.lo)
            } else {
                format!("{}-{}", b.lo, b.hi)
            };
            writeln!(f, "  {label:>13}  {}", b.rows)?;
        }
        writeln!(f, "aligned blocks   r  non-empty  fill   in dense blocks")?;
        for b in &self.blocks {
            writeln!(
                f,
                "                {:>3}  {:>9}  {:.3}  {:.3}",
                b.r, b.nonempty_blocks, b.fill_ratio, b.dense_block_fraction
            )?;
        }
        Ok(())
    }
}
