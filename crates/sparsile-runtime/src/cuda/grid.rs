//! Grid extents computed on the host before a launch.
//!
//! An extent is an integer expression over the function's params, literals and elements
//! of its integer input buffers (`indptr[m]`), with the loop IR's semantics: 64-bit
//! integers, division and remainder rounding towards negative infinity. Arithmetic is
//! checked: an overflow, a division by zero or a read outside a buffer is an error
//! naming the kernel, never a wrapped value. A launch with an extent of zero or less
//! along any dimension runs nothing and is skipped; one above [`MAX_GRID_X`] blocks along
//! `x` or [`MAX_GRID_YZ`] along `y` or `z` is refused.

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::id::Id;
use sparsile_ir::loops::gpu::{MAX_GRID_X, MAX_GRID_YZ};
use sparsile_ir::loops::Expr;
use sparsile_ir::BufferId;

use super::{CudaError, KernelPlan};

/// The integer buffers a grid extent may read, by function buffer.
pub(super) trait IntArrays {
    /// Element `index` of function buffer `buffer`, or why it cannot be read.
    fn element(&self, buffer: BufferId, index: i64) -> Result<i64, String>;
}

/// The value of `e` (see the module docs).
pub(super) fn eval(e: &Expr, params: &[i64], arrays: &dyn IntArrays) -> Result<i64, String> {
    let overflow = |op: &str, a: i64, b: i64| format!("{a} {op} {b} overflows 64-bit integers");
    match e {
        Expr::Int(v) => Ok(*v),
        Expr::Param(p) => params
            .get(p.index())
            .copied()
            .ok_or_else(|| format!("it reads param #{}, which the function lacks", p.index())),
        Expr::Load { buffer, indices } => {
            let [index] = indices.as_slice() else {
                return Err(format!(
                    "it reads buffer #{} with {} indices (flat buffers take one)",
                    buffer.index(),
                    indices.len()
                ));
            };
            arrays.element(*buffer, eval(index, params, arrays)?)
        }
        Expr::Binary { op, lhs, rhs } => {
            let (a, b) = (eval(lhs, params, arrays)?, eval(rhs, params, arrays)?);
            match op {
                BinaryOp::Add => a.checked_add(b).ok_or_else(|| overflow("+", a, b)),
                BinaryOp::Sub => a.checked_sub(b).ok_or_else(|| overflow("-", a, b)),
                BinaryOp::Mul => a.checked_mul(b).ok_or_else(|| overflow("*", a, b)),
                BinaryOp::Div | BinaryOp::Rem if b == 0 => Err(format!("it divides {a} by zero")),
                BinaryOp::Div => {
                    let q = a.checked_div(b).ok_or_else(|| overflow("/", a, b))?;
                    let r = a % b;
                    Ok(if r != 0 && (r < 0) != (b < 0) {
                        q - 1
                    } else {
                        q
                    })
                }
                BinaryOp::Rem => {
                    let r = a.checked_rem(b).ok_or_else(|| overflow("%", a, b))?;
                    Ok(if r != 0 && (r < 0) != (b < 0) {
                        r + b
                    } else {
                        r
                    })
                }
                BinaryOp::Max => Ok(a.max(b)),
                BinaryOp::Min => Ok(a.min(b)),
            }
        }
        _ => Err(
            "it reads something other than params, literals and integer input buffers".to_string(),
        ),
    }
}

/// The grid of `kernel` (of launch `launch`), or `None` when an extent is zero or less
/// (nothing to launch).
pub(super) fn grid(
    kernel: &KernelPlan,
    launch: &str,
    params: &[i64],
    arrays: &dyn IntArrays,
) -> Result<Option<[u32; 3]>, CudaError> {
    const DIMS: [&str; 3] = ["x", "y", "z"];
    let mut extents = [0i64; 3];
    for (d, e) in kernel.grid.iter().enumerate() {
        extents[d] = eval(e, params, arrays).map_err(|reason| CudaError::Grid {
            launch: launch.to_string(),
            kernel: kernel.symbol.clone(),
            dim: DIMS[d],
            reason,
        })?;
    }
    if extents.iter().any(|&e| e <= 0) {
        return Ok(None);
    }
    let mut grid = [0u32; 3];
    for (d, &extent) in extents.iter().enumerate() {
        let max = if d == 0 { MAX_GRID_X } else { MAX_GRID_YZ };
        if extent > max {
            return Err(CudaError::GridTooLarge {
                launch: launch.to_string(),
                kernel: kernel.symbol.clone(),
                dim: DIMS[d],
                extent,
                max,
            });
        }
        grid[d] = u32::try_from(extent).expect("at most 2^31 - 1");
    }
    Ok(Some(grid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparsile_ir::ParamId;

    /// Buffer 0 is `[0, 3, 5, 9]`; nothing else can be read.
    struct Indptr;

    impl IntArrays for Indptr {
        fn element(&self, buffer: BufferId, index: i64) -> Result<i64, String> {
            const A: [i64; 4] = [0, 3, 5, 9];
            if buffer != BufferId(0) {
                return Err(format!("buffer #{} is no input", buffer.0));
            }
            usize::try_from(index)
                .ok()
                .and_then(|i| A.get(i).copied())
                .ok_or_else(|| format!("index {index} is outside [0, 4)"))
        }
    }

    fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::binary(op, a, b)
    }

    fn p(i: u32) -> Expr {
        Expr::Param(ParamId(i))
    }

    fn load(i: Expr) -> Expr {
        Expr::load(BufferId(0), vec![i])
    }

    fn kernel(grid: [Expr; 3]) -> KernelPlan {
        KernelPlan {
            symbol: "k".into(),
            grid,
            block: [32, 1, 1],
            shared_bytes: 0,
            args: vec![],
            alignments: vec![],
        }
    }

    #[test]
    fn extents_follow_the_ir_semantics() {
        let params = [10, -7];
        let e = |e: &Expr| eval(e, &params, &Indptr);
        // (m + 3) / 4 with m = 10
        assert_eq!(
            e(&bin(
                BinaryOp::Div,
                bin(BinaryOp::Add, p(0), Expr::Int(3)),
                Expr::Int(4)
            )),
            Ok(3)
        );
        // floor division and remainder of a negative number
        assert_eq!(e(&bin(BinaryOp::Div, p(1), Expr::Int(2))), Ok(-4));
        assert_eq!(e(&bin(BinaryOp::Rem, p(1), Expr::Int(2))), Ok(1));
        assert_eq!(e(&bin(BinaryOp::Max, p(1), Expr::Int(0))), Ok(0));
        assert_eq!(e(&bin(BinaryOp::Min, p(1), Expr::Int(0))), Ok(-7));
        // indptr[3] - indptr[1], the index an expression itself
        let diff = bin(
            BinaryOp::Sub,
            load(bin(BinaryOp::Sub, p(0), Expr::Int(7))),
            load(Expr::Int(1)),
        );
        assert_eq!(e(&diff), Ok(6));
    }

    #[test]
    fn overflow_division_by_zero_and_bad_reads_are_errors() {
        let params = [i64::MAX, 0];
        let e = |e: &Expr| eval(e, &params, &Indptr).unwrap_err();
        assert!(e(&bin(BinaryOp::Add, p(0), Expr::Int(1))).contains("overflows"));
        assert!(e(&bin(BinaryOp::Mul, p(0), Expr::Int(2))).contains("overflows"));
        assert!(e(&bin(BinaryOp::Div, Expr::Int(i64::MIN), Expr::Int(-1))).contains("overflows"));
        assert!(e(&bin(BinaryOp::Div, Expr::Int(5), p(1))).contains("by zero"));
        assert!(e(&bin(BinaryOp::Rem, Expr::Int(5), p(1))).contains("by zero"));
        assert!(e(&load(Expr::Int(4))).contains("outside"));
        assert!(e(&Expr::load(BufferId(1), vec![Expr::Int(0)])).contains("no input"));
        assert!(e(&Expr::Param(ParamId(5))).contains("param #5"));
        assert!(e(&Expr::Float(1.0)).contains("something other"));
    }

    #[test]
    fn empty_grids_are_skipped_and_huge_ones_refused() {
        let one = || Expr::Int(1);
        let g = |x: Expr, y: Expr| grid(&kernel([x, y, one()]), "main", &[0], &Indptr);
        assert_eq!(g(Expr::Int(7), one()).unwrap(), Some([7, 1, 1]));
        assert_eq!(g(p(0), one()).unwrap(), None);
        assert_eq!(g(Expr::Int(-3), one()).unwrap(), None);
        // A zero extent elsewhere skips even a grid too large along x.
        assert_eq!(g(Expr::Int(MAX_GRID_X + 1), Expr::Int(0)).unwrap(), None);
        assert_eq!(
            g(Expr::Int(MAX_GRID_X), Expr::Int(MAX_GRID_YZ)).unwrap(),
            Some([MAX_GRID_X as u32, 65535, 1])
        );
        let err = g(Expr::Int(MAX_GRID_X + 1), one()).unwrap_err();
        assert!(
            matches!(err, CudaError::GridTooLarge { dim: "x", .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains("launch `main` (kernel `k`)"),
            "{err}"
        );
        let err = g(one(), Expr::Int(MAX_GRID_YZ + 1)).unwrap_err();
        assert!(
            matches!(err, CudaError::GridTooLarge { dim: "y", .. }),
            "{err}"
        );
        let err = g(bin(BinaryOp::Div, one(), p(0)), one()).unwrap_err();
        assert!(matches!(err, CudaError::Grid { dim: "x", .. }), "{err}");
    }
}
