//! `fuse`: two perfectly nested loops become one (TACO's `fuse`/`collapse`).
//!
//! ```text
//! for a in lo1..hi1 {            for a_b in 0..max(hi1 - lo1, 0) * max(hi2 - lo2, 0) {
//!   for b in lo2..hi2 {   ==>      let a: idx = lo1 + a_b / (hi2 - lo2)
//!     body                         let b: idx = lo2 + a_b % (hi2 - lo2)
//!   }                              body
//! }                              }
//! ```
//! The two variables become locals of the same names, so `body` is unchanged. When the
//! bounds are constants the arithmetic is folded.
//!
//! Preconditions (each a [`ScheduleError`]): both loops exist in the same block
//! (`UnknownBlock`, `UnknownLoop`, `BadLoopList`); the inner loop is the only statement of
//! the outer loop's body (`NotPerfectlyNested`); the inner loop's bounds do not read the
//! outer variable (`DependentBounds`: position loops over a sparse axis cannot be fused
//! with their parent); both loops are serial (`NotSerial`); neither body writes what the
//! bounds read (`BoundsNotInvariant`: the index recovery re-evaluates them).
//!
//! Returns the new function and the fused loop (fresh name `a_b`). Text-IR examples:
//! `tests/schedule/fuse/`.

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{Expr, For, ForKind, Func, Stmt};

use super::loop_ref::{bounds_invariant, fresh_index_var, loop_stmt_mut, LoopRef};
use super::ScheduleError;
use crate::index_expr::{add, mul, sub};

const PRIMITIVE: &str = "fuse";

/// Fuses loop `inner`, which must be the only statement of loop `outer`, into `outer`.
pub fn fuse(
    func: &Func,
    outer: &LoopRef,
    inner: &LoopRef,
) -> Result<(Func, LoopRef), ScheduleError> {
    if outer.block != inner.block || outer.var == inner.var {
        return Err(ScheduleError::BadLoopList {
            primitive: PRIMITIVE,
            what: format!("cannot fuse loop {outer} with loop {inner}: they must be two different loops of one block"),
        });
    }
    let mut out = func.clone();
    let (o, i) = {
        let Stmt::For(o) = loop_stmt_mut(&mut out, outer, PRIMITIVE)?.clone() else {
            unreachable!("a loop statement");
        };
        // The inner loop must exist in the block at all, for a precise error.
        loop_stmt_mut(&mut out, inner, PRIMITIVE)?;
        let i = match o.body.as_slice() {
            [Stmt::For(i)] if func.vars[i.var].name == inner.var => i.clone(),
            _ => {
                return Err(ScheduleError::NotPerfectlyNested {
                    primitive: PRIMITIVE,
                    block: outer.block.clone(),
                    outer: outer.var.clone(),
                    inner: inner.var.clone(),
                    span: o.span,
                })
            }
        };
        (o, i)
    };
    for (f, r) in [(&o, outer), (&i, inner)] {
        if f.kind != ForKind::Serial {
            return Err(ScheduleError::NotSerial {
                primitive: PRIMITIVE,
                block: r.block.clone(),
                var: r.var.clone(),
                kind: f.kind.name(),
                span: f.span,
            });
        }
    }
    for (f, r) in [(&o, outer), (&i, inner)] {
        if !bounds_invariant(f) {
            return Err(ScheduleError::BoundsNotInvariant {
                primitive: PRIMITIVE,
                block: r.block.clone(),
                var: r.var.clone(),
                span: f.span,
            });
        }
    }
    if i.lo.reads_var(o.var) || i.hi.reads_var(o.var) {
        return Err(ScheduleError::DependentBounds {
            primitive: PRIMITIVE,
            block: outer.block.clone(),
            outer: outer.var.clone(),
            inner: inner.var.clone(),
            span: i.span,
        });
    }
    let (fused, fused_name) = fresh_index_var(&mut out, &format!("{}_{}", outer.var, inner.var));
    let extent = |lo: &Expr, hi: &Expr| match (lo, hi) {
        (Expr::Int(a), Expr::Int(b)) => Expr::Int((b - a).max(0)),
        _ => Expr::binary(BinaryOp::Max, sub(hi.clone(), lo.clone()), Expr::Int(0)),
    };
    let n1 = extent(&o.lo, &o.hi);
    let n2 = extent(&i.lo, &i.hi);
    let v = Expr::Var(fused);
    let (a, b) = match &n2 {
        Expr::Int(1) => (v.clone(), Expr::Int(0)),
        _ => (
            Expr::binary(BinaryOp::Div, v.clone(), n2.clone()),
            Expr::binary(BinaryOp::Rem, v, n2.clone()),
        ),
    };
    let mut body = vec![
        Stmt::Let {
            var: o.var,
            value: add(o.lo.clone(), a),
            span: o.span,
        },
        Stmt::Let {
            var: i.var,
            value: add(i.lo.clone(), b),
            span: i.span,
        },
    ];
    body.extend(i.body);
    let slot = loop_stmt_mut(&mut out, outer, PRIMITIVE)?;
    *slot = Stmt::For(For {
        var: fused,
        lo: Expr::Int(0),
        hi: mul(n1, n2),
        kind: ForKind::Serial,
        body,
        span: o.span,
    });
    Ok((out, LoopRef::new(outer.block.clone(), fused_name)))
}
