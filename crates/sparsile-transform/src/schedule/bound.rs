//! `bound`: declares a constant extent for a loop.
//!
//! Purpose: `for v in lo..hi` becomes `for v in lo..lo + extent { if v < hi { body } }`,
//! a loop with a constant trip count that [`unroll()`](super::unroll()) accepts and that the C
//! compiler can vectorise without a remainder loop. The declared extent is a promise
//! by the user that the loop never runs more than `extent` iterations (as TACO's
//! `bound`); fewer are fine, the guard skips the rest. When `lo` and `hi` depend on sizes
//! only (parameters), the compiled kernel and the flat interpreter check the promise
//! before running and refuse inputs that break it (`BoundExceeded`, see
//! `sparsile_runtime::bound_promises`), so a trace replayed on larger inputs is an error,
//! not a loop that loses iterations; over data-dependent trip counts (a row's length) it
//! stays the schedule author's promise.
//!
//! When the trip count is already a constant, it is checked instead: an extent below it
//! is an error, an equal one changes only the form of `hi` and adds no guard.
//!
//! Preconditions (each its own [`ScheduleError`], naming the loop and its block):
//! - `extent > 0` ([`ScheduleError::BoundExtentNotPositive`]);
//! - a constant trip count is at most `extent` ([`ScheduleError::BoundBelowTripCount`]);
//! - the guard re-evaluates `hi` in every iteration, so `hi` must not read a buffer the
//!   loop stores to nor a local it assigns ([`ScheduleError::BoundNotInvariant`]).
//!
//! Example (`tests/schedule/bound/spmm_csr.before` → `.after`):
//! ```text
//! for k2_2 in 0..k {               for k2_2 in 0..8 {
//!   C[i_2, k2_2] = …         →       if k2_2 < k {
//!                                      C[i_2, k2_2] = …
//! ```
//!
//! ```
//! use sparsile_transform::schedule::{bound::bound, LoopRef};
//! let program = sparsile::compile_notation(
//!     "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n",
//! )
//! .unwrap();
//! let func = sparsile_transform::lower_iterations(&program).unwrap();
//! let cols = LoopRef { block: "C".into(), var: "k2_2".into() };
//! let text = bound(&func, &cols, 8).unwrap().to_string();
//! assert!(text.contains("for k2_2 in 0..8 {"));
//! assert!(text.contains("if k2_2 < k {"));
//! ```

use std::collections::HashSet;

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::id::{BufferId, VarId};
use sparsile_ir::loops::{CmpOp, Expr, ExprDisplay, For, Func, Stmt};

use super::parallel::{find_loop, with_loop};
use super::unroll::constant_trip_count;
use super::{LoopRef, ScheduleError};

/// Gives `target` the constant extent `extent` (see the module docs).
pub fn bound(func: &Func, target: &LoopRef, extent: i64) -> Result<Func, ScheduleError> {
    let found = find_loop(func, target, "bound")?;
    let f = found.for_;
    if extent <= 0 {
        return Err(ScheduleError::BoundExtentNotPositive {
            block: target.block.clone(),
            var: target.var.clone(),
            extent,
            span: f.span,
        });
    }
    if let sparsile_ir::loops::ForKind::ParallelBalanced { .. } = f.kind {
        // Its chunks are weighed with `indptr[v + 1] - indptr[v]`, which exists only for
        // the iterations the loop had.
        return Err(ScheduleError::NotSerial {
            primitive: "bound",
            block: target.block.clone(),
            var: target.var.clone(),
            kind: f.kind.name(),
            span: f.span,
        });
    }
    if extent > super::split::MAX_FACTOR {
        return Err(ScheduleError::FactorTooLarge {
            primitive: "bound",
            block: target.block.clone(),
            var: target.var.clone(),
            factor: extent,
            max: super::split::MAX_FACTOR,
        });
    }
    let new_hi = match &f.lo {
        Expr::Int(lo) => match lo.checked_add(extent) {
            Some(hi) => Expr::Int(hi),
            None => {
                return Err(ScheduleError::FactorTooLarge {
                    primitive: "bound",
                    block: target.block.clone(),
                    var: target.var.clone(),
                    factor: extent,
                    max: i64::MAX - lo,
                })
            }
        },
        lo => Expr::binary(BinaryOp::Add, lo.clone(), Expr::Int(extent)),
    };
    if let Some(trip) = constant_trip_count(&f.lo, &f.hi) {
        if trip > extent {
            return Err(ScheduleError::BoundBelowTripCount {
                block: target.block.clone(),
                var: target.var.clone(),
                extent,
                trip,
                span: f.span,
            });
        }
        if trip == extent {
            return Ok(with_loop(func, target, |f| f.hi = new_hi));
        }
    }
    if let Some(what) = modified_read(func, f) {
        return Err(ScheduleError::BoundNotInvariant {
            block: target.block.clone(),
            var: target.var.clone(),
            hi: ExprDisplay::new(func, &f.hi).to_string(),
            what,
            span: f.span,
        });
    }
    Ok(with_loop(func, target, |f| {
        let guard = Expr::cmp(CmpOp::Lt, Expr::Var(f.var), f.hi.clone());
        let body = std::mem::take(&mut f.body);
        f.body = vec![Stmt::If {
            cond: guard,
            then_body: body,
            else_body: Vec::new(),
            span: f.span,
        }];
        f.hi = new_hi;
    }))
}

/// The name of a buffer or local that `f.hi` reads and the loop body modifies.
fn modified_read(func: &Func, f: &For) -> Option<String> {
    let mut stores = HashSet::new();
    let mut assigns = HashSet::new();
    modified(&f.body, &mut stores, &mut assigns);
    let mut hit = None;
    f.hi.visit(&mut |e| match e {
        Expr::Var(v) if assigns.contains(v) => hit = Some(func.vars[*v].name.clone()),
        Expr::Load { buffer, .. } | Expr::Search { buffer, .. } if stores.contains(buffer) => {
            hit = Some(func.buffers[*buffer].name.clone())
        }
        _ => {}
    });
    hit
}

fn modified(stmts: &[Stmt], stores: &mut HashSet<BufferId>, assigns: &mut HashSet<VarId>) {
    for s in stmts {
        match s {
            Stmt::For(f) => modified(&f.body, stores, assigns),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                modified(then_body, stores, assigns);
                modified(else_body, stores, assigns);
            }
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => modified(body, stores, assigns),
            Stmt::Assign { var, .. } => {
                assigns.insert(*var);
            }
            Stmt::Store { buffer, .. } | Stmt::AtomicAdd { buffer, .. } => {
                stores.insert(*buffer);
            }
            Stmt::Mma(m) => {
                stores.insert(m.c);
            }
            Stmt::Let { .. }
            | Stmt::Prefetch { .. }
            | Stmt::Barrier { .. }
            | Stmt::WarpReduce { .. } => {}
        }
    }
}
