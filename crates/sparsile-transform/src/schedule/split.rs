//! `split`: one loop becomes two nested loops (TACO's `split`/`divide`).
//!
//! `for v in lo..hi { body }` with `n = hi - lo` becomes, for factor `f`:
//! - [`SplitTail::InnerFixed`] (TACO's split up): the inner loop has `f` iterations,
//!   the outer one `ceil(n / f)`;
//!   ```text
//!   for v_o in 0..(n + (f - 1)) / f {
//!     for v_i in 0..f {
//!       if lo + v_o * f + v_i < hi {
//!         let v: idx = lo + v_o * f + v_i
//!         body
//!       }
//!     }
//!   }
//!   ```
//! - [`SplitTail::OuterFixed`] (TACO's split down / divide): the outer loop has `f`
//!   iterations, the inner one `c = ceil(n / f)`, and `v = lo + v_o * c + v_i`.
//!
//! The `if` (the tail guard) is left out when `lo` and `hi` are constants and `f` divides
//! `n`. The loop variable becomes a local of the same name, so `body` is unchanged.
//! The outer loop keeps the loop's kind (a parallel loop stays parallel over whole
//! tiles), the inner one is serial; the bounds `lo` and `hi` are evaluated where they were
//! (they cannot depend on `v`).
//!
//! Preconditions (each a [`ScheduleError`]): the loop exists (`UnknownBlock`,
//! `UnknownLoop`), `f >= 1` (`BadFactor`), the loop is serial or parallel (`NotSerial`: vectorized and unrolled loops are
//! refused); the body writes no buffer or local the bounds read
//! (`BoundsNotInvariant`: the guard re-evaluates `hi`).
//!
//! Returns the new function and the outer and inner loops (`LoopRef`s in the same block,
//! with fresh names `v_o` and `v_i`). Text-IR examples: `tests/schedule/split/`.

use serde::{Deserialize, Serialize};
use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{Expr, For, ForKind, Func, Stmt};

use super::loop_ref::{bounds_invariant, fresh_index_var, loop_stmt_mut, LoopRef};
use super::ScheduleError;
use crate::index_expr::{add, lt, mul, sub};

/// Which of the two loops of a split has the fixed trip count (the other one is the
/// ceiling quotient, and a guard skips the iterations past the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SplitTail {
    /// The inner loop runs `factor` times (TACO's split up).
    InnerFixed,
    /// The outer loop runs `factor` times (TACO's split down).
    OuterFixed,
}

const PRIMITIVE: &str = "split";

/// The largest split factor (and [`bound`](super::bound()) extent): the largest extent an
/// i32 index can have. Larger constants make the generated index arithmetic overflow
/// (`n + f - 1` with `f = 2^63 - 1` wrapped, and the kernel silently did nothing) or make
/// guarded loops spin through iterations that cannot exist.
pub const MAX_FACTOR: i64 = i32::MAX as i64;

/// Splits the loop `target` by `factor`; see the module docs.
pub fn split(
    func: &Func,
    target: &LoopRef,
    factor: i64,
    tail: SplitTail,
) -> Result<(Func, LoopRef, LoopRef), ScheduleError> {
    let mut out = func.clone();
    // Validate before declaring new variables.
    let (var, lo, hi, kind) = {
        let Stmt::For(f) = loop_stmt_mut(&mut out, target, PRIMITIVE)? else {
            unreachable!("a loop statement");
        };
        if !matches!(
            f.kind,
            ForKind::Serial | ForKind::Parallel | ForKind::ParallelDynamic
        ) {
            return Err(ScheduleError::NotSerial {
                primitive: PRIMITIVE,
                block: target.block.clone(),
                var: target.var.clone(),
                kind: f.kind.name(),
                span: f.span,
            });
        }
        if !bounds_invariant(f) {
            return Err(ScheduleError::BoundsNotInvariant {
                primitive: PRIMITIVE,
                block: target.block.clone(),
                var: target.var.clone(),
                span: f.span,
            });
        }
        (f.var, f.lo.clone(), f.hi.clone(), f.kind)
    };
    if factor < 1 {
        return Err(ScheduleError::BadFactor {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            factor,
        });
    }
    if factor > MAX_FACTOR {
        return Err(ScheduleError::FactorTooLarge {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            factor,
            max: MAX_FACTOR,
        });
    }
    let (outer, outer_name) = fresh_index_var(&mut out, &format!("{}_o", target.var));
    let (inner, inner_name) = fresh_index_var(&mut out, &format!("{}_i", target.var));
    let n = match (&lo, &hi) {
        (Expr::Int(a), Expr::Int(b)) => Expr::Int(b - a),
        _ => sub(hi.clone(), lo.clone()),
    };
    let ceil_div = |n: Expr, f: Expr| match (&n, &f) {
        (Expr::Int(a), Expr::Int(b)) => Expr::Int((a + b - 1).div_euclid(*b)),
        (_, Expr::Int(1)) => n,
        (_, Expr::Int(b)) => Expr::binary(BinaryOp::Div, add(n, Expr::Int(b - 1)), f),
        _ => unreachable!("split factors are constants"),
    };
    let f = Expr::Int(factor);
    let (outer_extent, inner_extent) = match tail {
        SplitTail::InnerFixed => (ceil_div(n.clone(), f.clone()), f.clone()),
        SplitTail::OuterFixed => (f.clone(), ceil_div(n.clone(), f.clone())),
    };
    let value = add(
        lo.clone(),
        add(
            mul(Expr::Var(outer), inner_extent.clone()),
            Expr::Var(inner),
        ),
    );
    let exact = match (&n, &outer_extent, &inner_extent) {
        (Expr::Int(n), Expr::Int(a), Expr::Int(b)) => a.checked_mul(*b) == Some(*n),
        _ => false,
    };
    let slot = loop_stmt_mut(&mut out, target, PRIMITIVE)?;
    let Stmt::For(old) = std::mem::replace(
        slot,
        Stmt::Block {
            name: String::new(),
            body: Vec::new(),
            span: Default::default(),
        },
    ) else {
        unreachable!("a loop statement");
    };
    let span = old.span;
    let mut body = vec![Stmt::Let {
        var,
        value: value.clone(),
        span,
    }];
    body.extend(old.body);
    if !exact {
        body = vec![Stmt::If {
            cond: lt(value, hi),
            then_body: body,
            else_body: Vec::new(),
            span,
        }];
    }
    *slot = Stmt::For(For {
        var: outer,
        lo: Expr::Int(0),
        hi: outer_extent,
        kind,
        body: vec![Stmt::For(For {
            var: inner,
            lo: Expr::Int(0),
            hi: inner_extent,
            kind: ForKind::Serial,
            body,
            span,
        })],
        span,
    });
    Ok((
        out,
        LoopRef::new(target.block.clone(), outer_name),
        LoopRef::new(target.block.clone(), inner_name),
    ))
}
