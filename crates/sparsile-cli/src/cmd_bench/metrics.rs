//! Work and traffic of a case, and its roofline floor.
//!
//! For A (m × n, nnz stored) in CSR with i32 indices and f32 values, and dense width K:
//!
//! | op | flops | minimum bytes |
//! |---|---|---|
//! | SpMM  | 2·nnz·K | structure + values + X (n·K·4) + Y (m·K·4) |
//! | SDDMM | 2·nnz·K | structure + values in + values out + X (m·K·4) + Y (n·K·4) |
//! | SpMV  | 2·nnz   | structure + values + x (n·4) + y (m·4) |
//!
//! where structure = (m+1)·4 + nnz·4 and values = nnz·4. The floor is
//! `max(bytes / bandwidth, flops / peak)`: no kernel that reads a CSR operand from
//! memory can beat it. A block format stores one index per block instead of one per
//! non-zero (SpMV over `bsr:8x8` of a full attention mask moves about half the bytes),
//! and an operand smaller than the last-level cache stays there between runs; either
//! puts a kernel above 100 % of this floor.

use crate::cmd_bench::cases::Op;

/// Floating-point operations and the bytes a kernel must move at least.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    pub flops: f64,
    pub bytes: f64,
}

/// The cost of `op` on an m × n matrix with `nnz` entries and dense width `k` (1 for SpMV).
pub fn cost(op: Op, m: usize, n: usize, nnz: usize, k: usize) -> Cost {
    let (m, n, nnz, k) = (m as f64, n as f64, nnz as f64, k as f64);
    let structure = (m + 1.0) * 4.0 + nnz * 4.0;
    let values = nnz * 4.0;
    match op {
        Op::Spmm => Cost {
            flops: 2.0 * nnz * k,
            bytes: structure + values + n * k * 4.0 + m * k * 4.0,
        },
        Op::Sddmm => Cost {
            flops: 2.0 * nnz * k,
            bytes: structure + 2.0 * values + m * k * 4.0 + n * k * 4.0,
        },
        Op::Spmv => Cost {
            flops: 2.0 * nnz,
            bytes: structure + values + n * 4.0 + m * 4.0,
        },
    }
}

/// The roofline floor in seconds, given bandwidth (GB/s) and peak (GFLOP/s).
pub fn floor_seconds(cost: Cost, bandwidth_gbs: f64, peak_gflops: f64) -> f64 {
    (cost.bytes / (bandwidth_gbs * 1e9)).max(cost.flops / (peak_gflops * 1e9))
}

/// The geometric mean of positive values (`None` for none).
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    let logs: Vec<f64> = values
        .iter()
        .filter(|v| **v > 0.0 && v.is_finite())
        .map(|v| v.ln())
        .collect();
    if logs.is_empty() {
        return None;
    }
    Some((logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// Median, minimum and maximum of a non-empty list of times.
pub fn summarize(times: &[f64]) -> (f64, f64, f64) {
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    let median = if t.len() % 2 == 1 {
        t[t.len() / 2]
    } else {
        (t[t.len() / 2 - 1] + t[t.len() / 2]) / 2.0
    };
    (median, t[0], t[t.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_follow_the_definitions() {
        // m = 10, n = 20, nnz = 50, K = 8
        let c = cost(Op::Spmm, 10, 20, 50, 8);
        assert_eq!(c.flops, 800.0);
        assert_eq!(c.bytes, 44.0 + 200.0 + 200.0 + 640.0 + 320.0);
        let c = cost(Op::Sddmm, 10, 20, 50, 8);
        assert_eq!(c.bytes, 44.0 + 200.0 + 400.0 + 320.0 + 640.0);
        let c = cost(Op::Spmv, 10, 20, 50, 1);
        assert_eq!(
            (c.flops, c.bytes),
            (100.0, 44.0 + 200.0 + 200.0 + 80.0 + 40.0)
        );
    }

    #[test]
    fn floor_is_the_slower_bound() {
        let c = Cost {
            flops: 1e9,
            bytes: 1e9,
        };
        assert_eq!(floor_seconds(c, 10.0, 1000.0), 0.1);
        assert_eq!(floor_seconds(c, 1000.0, 10.0), 0.1);
    }

    #[test]
    fn means_and_medians() {
        assert!((geometric_mean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(geometric_mean(&[]), None);
        assert_eq!(summarize(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(summarize(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
    }
}
