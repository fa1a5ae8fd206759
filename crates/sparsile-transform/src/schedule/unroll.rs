//! `unroll`: marks a loop with a small constant trip count [`ForKind::Unrolled`].
//!
//! Purpose: an unroll hint (the C backend emits `#pragma GCC unroll`); the loop keeps
//! serial semantics, so no dependence check is needed. Unrolling pays off, and is
//! allowed, only for loops whose trip count is known: loops over a parameter extent get
//! a constant one from [`bound()`](super::bound()) first.
//!
//! Preconditions (each its own [`ScheduleError`], naming the loop and its block):
//! - the loop is serial ([`ScheduleError::NotSerial`]);
//! - its trip count is a constant: `lo..hi` with both integer literals, or
//!   `lo..lo + c` ([`ScheduleError::TripCountNotConstant`]);
//! - the trip count is at most [`MAX_UNROLL`] ([`ScheduleError::TripCountTooLarge`]).
//!
//! Postcondition: the same function with the loop marked `unrolled`.
//!
//! Example (`tests/schedule/unroll/spmm_bsr.before` → `.after`):
//! ```text
//! for ii in 0..4 {          →   for ii in 0..4 unrolled {
//! ```
//!
//! ```
//! use sparsile_transform::schedule::{bound::bound, unroll::unroll, LoopRef};
//! let program = sparsile::compile_notation(
//!     "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n",
//! )
//! .unwrap();
//! let func = sparsile_transform::lower_iterations(&program).unwrap();
//! let cols = LoopRef { block: "C".into(), var: "k2_2".into() };
//! // `0..k` has no constant trip count until it is bounded.
//! assert!(unroll(&func, &cols).is_err());
//! let bounded = bound(&func, &cols, 4).unwrap();
//! let scheduled = unroll(&bounded, &cols).unwrap();
//! assert!(scheduled.to_string().contains("for k2_2 in 0..4 unrolled {"));
//! ```

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{Expr, ExprDisplay, ForKind, Func};

use super::parallel::{find_loop, not_serial, with_loop};
use super::{LoopRef, ScheduleError};

/// The largest trip count `unroll` accepts.
pub const MAX_UNROLL: i64 = 64;

/// Marks `target` unrolled after checking the preconditions in the module docs.
pub fn unroll(func: &Func, target: &LoopRef) -> Result<Func, ScheduleError> {
    let found = find_loop(func, target, "unroll")?;
    let f = found.for_;
    if f.kind != ForKind::Serial {
        return Err(not_serial("unroll", target, f));
    }
    let Some(count) = constant_trip_count(&f.lo, &f.hi) else {
        return Err(ScheduleError::TripCountNotConstant {
            block: target.block.clone(),
            var: target.var.clone(),
            lo: ExprDisplay::new(func, &f.lo).to_string(),
            hi: ExprDisplay::new(func, &f.hi).to_string(),
            span: f.span,
        });
    };
    if count > MAX_UNROLL {
        return Err(ScheduleError::TripCountTooLarge {
            block: target.block.clone(),
            var: target.var.clone(),
            count,
            max: MAX_UNROLL,
            span: f.span,
        });
    }
    Ok(with_loop(func, target, |f| f.kind = ForKind::Unrolled))
}

/// `hi - lo` when it is a constant (never negative: a loop with `hi <= lo` runs 0 times).
pub(crate) fn constant_trip_count(lo: &Expr, hi: &Expr) -> Option<i64> {
    match (lo, hi) {
        (Expr::Int(a), Expr::Int(b)) => Some((b - a).max(0)),
        (
            lo,
            Expr::Binary {
                op: BinaryOp::Add,
                lhs,
                rhs,
            },
        ) if **lhs == *lo => match &**rhs {
            Expr::Int(c) => Some((*c).max(0)),
            _ => None,
        },
        _ => None,
    }
}
