//! A plain f64 reference for each operation, to check Sparsile's result, and the
//! comparison used for every system: `max|a - b| <= 1e-3 · (max|b| + 1)`, a tolerance
//! suited to f32 sums.
//!
//! ```text
//! spmm:  m × K row-major       sddmm: nnz values in CSR order       spmv: m values
//! ```

use crate::cmd_bench::cases::Op;
use crate::cmd_bench::operands::{Csr, Dense};

/// The relative tolerance of [`compare`].
pub const TOLERANCE: f64 = 1e-3;

/// The exact (f64) result of `op` on `a` and `dense`, laid out as the peers write it.
pub fn reference(op: Op, a: &Csr, dense: &Dense, k: usize) -> Vec<f64> {
    match op {
        Op::Spmm => {
            let mut y = vec![0.0f64; a.m * k];
            for i in 0..a.m {
                for p in a.indptr[i] as usize..a.indptr[i + 1] as usize {
                    let (j, v) = (a.indices[p] as usize, a.values[p] as f64);
                    for c in 0..k {
                        y[i * k + c] += v * dense.x[j * k + c] as f64;
                    }
                }
            }
            y
        }
        Op::Sddmm => {
            let yd = dense.y.as_deref().expect("SDDMM operands have Y");
            a.rows()
                .iter()
                .enumerate()
                .map(|(p, &i)| {
                    let j = a.indices[p] as usize;
                    let dot: f64 = (0..k)
                        .map(|c| dense.x[i * k + c] as f64 * yd[j * k + c] as f64)
                        .sum();
                    a.values[p] as f64 * dot
                })
                .collect()
        }
        Op::Spmv => (0..a.m)
            .map(|i| {
                (a.indptr[i] as usize..a.indptr[i + 1] as usize)
                    .map(|p| a.values[p] as f64 * dense.x[a.indices[p] as usize] as f64)
                    .sum()
            })
            .collect(),
    }
}

/// The outcome of comparing a result with the expected one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Check {
    pub correct: bool,
    /// The largest absolute difference (infinite when the lengths differ or a value is
    /// not finite).
    pub max_abs_err: f64,
}

/// Compares `got` with `expected` (same layout).
pub fn compare(got: &[f32], expected: &[f64]) -> Check {
    if got.len() != expected.len() {
        return Check {
            correct: false,
            max_abs_err: f64::INFINITY,
        };
    }
    let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut err = 0.0f64;
    for (g, e) in got.iter().zip(expected) {
        let d = (*g as f64 - e).abs();
        if !d.is_finite() {
            err = f64::INFINITY;
            break;
        }
        err = err.max(d);
    }
    Check {
        correct: err <= TOLERANCE * (scale + 1.0),
        max_abs_err: err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Csr {
        // [[1 0 2], [0 0 0], [0 3 0]]
        Csr {
            m: 3,
            n: 3,
            indptr: vec![0, 2, 2, 3],
            indices: vec![0, 2, 1],
            values: vec![1.0, 2.0, 3.0],
        }
    }

    #[test]
    fn references_by_hand() {
        let a = small();
        let spmv = Dense {
            x: vec![1.0, 2.0, 3.0],
            y: None,
        };
        assert_eq!(reference(Op::Spmv, &a, &spmv, 1), vec![7.0, 0.0, 6.0]);
        let spmm = Dense {
            x: vec![1.0, 0.0, 0.0, 1.0, 2.0, 2.0],
            y: None,
        };
        assert_eq!(
            reference(Op::Spmm, &a, &spmm, 2),
            vec![5.0, 4.0, 0.0, 0.0, 0.0, 3.0]
        );
        let sddmm = Dense {
            x: vec![1.0, 1.0, 0.0, 0.0, 2.0, 0.0],
            y: Some(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        };
        // O[0,0] = 1·(1+2), O[0,2] = 2·(5+6), O[2,1] = 3·(2·3)
        assert_eq!(reference(Op::Sddmm, &a, &sddmm, 2), vec![3.0, 22.0, 18.0]);
    }

    #[test]
    fn comparison_tolerates_rounding_only() {
        assert!(compare(&[1.0, 100.0], &[1.0, 100.05]).correct);
        assert!(!compare(&[1.0, 100.0], &[1.0, 100.2]).correct);
        assert!(!compare(&[1.0], &[1.0, 2.0]).correct);
        assert!(!compare(&[f32::NAN], &[1.0]).correct);
        assert_eq!(compare(&[2.0], &[1.5]).max_abs_err, 0.5);
    }
}
