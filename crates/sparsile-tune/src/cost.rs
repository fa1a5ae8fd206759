//! A roofline cost model of candidates, with coefficients fitted per family.
//!
//! Purpose: ranking, so that a pruned search measures only the most promising
//! candidates. The estimate of a candidate is `R = max(bytes / bandwidth, flops / peak)
//! × imbalance`: the bytes it must move (the structure, values including a format's
//! padding, the dense rows it gathers — once per non-zero unless the dense operand fits
//! in the last-level cache —, the output), the flops, and the load imbalance of its
//! partition, computed from the row lengths for the thread count (static chunks of rows,
//! chunks balanced by non-zeros, dynamic chunks). As in STile, the time of a family of
//! candidates (a recipe on a kind of format) is then `a·R + b`, with `a` and `b` fitted
//! by least squares on measured candidates of the same operator ([`CostModel::fit`]).
//!
//! ```
//! use sparsile_tune::cost::{CostModel, Machine, Shape};
//! use sparsile_tune::features::Csr;
//! use sparsile_tune::op::Operator;
//! use sparsile_tune::space::Candidate;
//! let csr = Csr { rows: 4, cols: 4, indptr: &[0, 1, 2, 3, 4], indices: &[0, 1, 2, 3] };
//! let shape = Shape::of(&csr, Operator::Spmm, 32, 4, 2);
//! let m = Machine { bandwidth_gbs: 20.0, peak_gflops: 100.0, cache_bytes: 32 << 20 };
//! let model = CostModel::default();
//! let t = model.estimate_ms(&Candidate::new("csr", "rowwise"), &shape, &m);
//! assert!(t > 0.0);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::features::Csr;
use crate::op::Operator;
use crate::space::Candidate;

/// What the machine can do, from the benchmark's roofline probe.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub bandwidth_gbs: f64,
    pub peak_gflops: f64,
    pub cache_bytes: u64,
}

/// The sizes and row-length facts the estimate needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    pub op: Operator,
    pub rows: f64,
    pub cols: f64,
    pub nnz: f64,
    pub width: f64,
    pub value_bytes: f64,
    pub threads: usize,
    /// The largest thread's share of non-zeros over the mean share, with static chunks
    /// of rows (8 per thread, taken in turn).
    pub imbalance_static: f64,
    /// The same with chunks balanced by non-zeros (a row is never divided).
    pub imbalance_balanced: f64,
    /// Fill of the candidate block formats' blocks, by format name (1 when unknown).
    pub block_fill: BTreeMap<String, f64>,
}

impl Shape {
    /// The shape of `csr` for `op` with dense width `width`.
    pub fn of(csr: &Csr, op: Operator, width: usize, value_bytes: usize, threads: usize) -> Shape {
        let rows = csr.rows;
        let nnz = csr.indptr.get(rows).copied().unwrap_or(0).max(0) as f64;
        let threads = threads.max(1);
        let chunks = (threads * 8).min(rows.max(1));
        let mut per_thread = vec![0.0; threads];
        for c in 0..chunks {
            let (a, b) = (rows * c / chunks, rows * (c + 1) / chunks);
            per_thread[c % threads] += (csr.indptr[b] - csr.indptr[a]) as f64;
        }
        let mean = nnz / threads as f64;
        let max_share = per_thread.iter().copied().fold(0.0, f64::max);
        let max_row = (0..rows)
            .map(|i| (csr.indptr[i + 1] - csr.indptr[i]) as f64)
            .fold(0.0, f64::max);
        let ratio = |x: f64| if mean > 0.0 { (x / mean).max(1.0) } else { 1.0 };
        Shape {
            op,
            rows: rows as f64,
            cols: csr.cols as f64,
            nnz,
            width: width.max(1) as f64,
            value_bytes: value_bytes as f64,
            threads,
            imbalance_static: ratio(max_share),
            imbalance_balanced: ratio(max_row.max(mean)),
            block_fill: BTreeMap::new(),
        }
    }
}

/// Fitted `a·R + b` per family (default `a = 1`, `b = 0`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    pub coefficients: BTreeMap<String, (f64, f64)>,
}

impl CostModel {
    /// The roofline time `R` of `c` in milliseconds, before the family's coefficients.
    pub fn roofline_ms(c: &Candidate, s: &Shape, m: &Machine) -> f64 {
        let vb = s.value_bytes;
        let fill = s
            .block_fill
            .get(&c.format)
            .copied()
            .unwrap_or(1.0)
            .clamp(0.01, 1.0);
        let padded = s.nnz / fill;
        let idx = 4.0;
        let structure = (s.rows + 1.0) * idx + padded * idx / block_area(&c.format);
        let (dense_once, gathered) = match s.op {
            Operator::Spmv => (s.cols * vb, s.nnz * vb),
            _ => (s.cols * s.width * vb, s.nnz * s.width * vb),
        };
        let gather = if dense_once <= m.cache_bytes as f64 {
            dense_once
        } else {
            gathered
        };
        let (bytes, flops) = match s.op {
            Operator::Spmv => (structure + padded * vb + gather + s.rows * vb, 2.0 * padded),
            Operator::Sddmm => (
                structure + 2.0 * padded * vb + s.rows * s.width * vb + gather,
                2.0 * padded * s.width,
            ),
            _ => (
                structure + padded * vb + gather + s.rows * s.width * vb,
                2.0 * padded * s.width,
            ),
        };
        let imbalance = if c.recipe.contains("partition=static") || c.recipe == "default" {
            s.imbalance_static
        } else if c.recipe.contains("partition=dynamic") {
            s.imbalance_balanced.clamp(1.0, 1.05)
        } else {
            s.imbalance_balanced
        };
        let t = (bytes / (m.bandwidth_gbs * 1e9)).max(flops / (m.peak_gflops * 1e9));
        t * imbalance * 1e3
    }

    /// The estimated time of `c` in milliseconds.
    pub fn estimate_ms(&self, c: &Candidate, s: &Shape, m: &Machine) -> f64 {
        let r = Self::roofline_ms(c, s, m);
        match self.coefficients.get(&family(s.op, c)) {
            Some((a, b)) => a * r + b,
            None => r,
        }
    }

    /// Fits `a` and `b` per family by least squares on `(candidate, roofline ms,
    /// measured ms)` samples; a family with fewer than 3 samples keeps `a·R` with `a`
    /// the mean ratio.
    pub fn fit(samples: &[(Operator, Candidate, f64, f64)]) -> CostModel {
        let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (op, c, r, t) in samples {
            if r.is_finite() && t.is_finite() && *r > 0.0 {
                by.entry(family(*op, c)).or_default().push((*r, *t));
            }
        }
        let coefficients = by
            .into_iter()
            .map(|(family, pts)| {
                let n = pts.len() as f64;
                let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
                let (mx, my) = (sx / n, sy / n);
                let sxx: f64 = pts.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
                let sxy: f64 = pts.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
                let fit = if pts.len() >= 3 && sxx > 0.0 && sxy > 0.0 {
                    let a = sxy / sxx;
                    (a, my - a * mx)
                } else {
                    (pts.iter().map(|(x, y)| y / x).sum::<f64>() / n, 0.0)
                };
                (family, fit)
            })
            .collect();
        CostModel { coefficients }
    }
}

/// The family of `c` running `op`: coefficients are fitted per operator, recipe and kind
/// of format.
pub fn family(op: Operator, c: &Candidate) -> String {
    format!("{op}/{}", c.family())
}

/// Elements per stored block of a block format (`bsr:RxC` → `R·C`), 1 otherwise.
fn block_area(format: &str) -> f64 {
    let Some(rest) = format
        .strip_prefix("bsr:")
        .or_else(|| format.strip_prefix("dbsr:"))
    else {
        return 1.0;
    };
    let Some((r, c)) = rest.split_once('x') else {
        return 1.0;
    };
    match (r.parse::<f64>(), c.parse::<f64>()) {
        (Ok(r), Ok(c)) if r > 0.0 && c > 0.0 => r * c,
        _ => 1.0,
    }
}

/// Spearman's rank correlation of `a` and `b` (`None` for fewer than 2 pairs or a
/// constant side).
pub fn rank_correlation(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let ranks = |v: &[f64]| {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
        let mut r = vec![0.0; v.len()];
        let mut k = 0;
        while k < idx.len() {
            let mut e = k;
            while e + 1 < idx.len() && v[idx[e + 1]] == v[idx[k]] {
                e += 1;
            }
            let avg = (k + e) as f64 / 2.0;
            for &i in &idx[k..=e] {
                r[i] = avg;
            }
            k = e + 1;
        }
        r
    };
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = ra.iter().map(|x| (x - ma) * (x - ma)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mb) * (y - mb)).sum();
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_correlation_of_monotone_and_reversed_orders() {
        assert_eq!(
            rank_correlation(&[1.0, 2.0, 3.0], &[10.0, 20.0, 40.0]),
            Some(1.0)
        );
        assert_eq!(
            rank_correlation(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]),
            Some(-1.0)
        );
        assert_eq!(rank_correlation(&[1.0, 1.0], &[1.0, 2.0]), None);
    }

    #[test]
    fn the_fit_recovers_a_line_per_family() {
        let c = Candidate::new("csr", "rowwise");
        let samples: Vec<_> = (1..6)
            .map(|x| (Operator::Spmm, c.clone(), x as f64, 2.0 * x as f64 + 0.5))
            .collect();
        let m = CostModel::fit(&samples);
        let (a, b) = m.coefficients[&family(Operator::Spmm, &c)];
        assert!((a - 2.0).abs() < 1e-9 && (b - 0.5).abs() < 1e-9, "{a} {b}");
    }

    #[test]
    fn imbalance_follows_the_rows() {
        // One row holds every non-zero.
        let csr = Csr {
            rows: 4,
            cols: 8,
            indptr: &[0, 8, 8, 8, 8],
            indices: &[0, 1, 2, 3, 4, 5, 6, 7],
        };
        let s = Shape::of(&csr, Operator::Spmv, 1, 4, 2);
        assert_eq!(s.imbalance_static, 2.0);
        assert_eq!(s.imbalance_balanced, 2.0);
    }
}
