//! `warp_reduce`: runs the iterations of a reduction loop on the lanes of a GPU warp and
//! adds the lanes' partial sums with a warp reduction (shuffles, no shared memory).
//!
//! Purpose: SDDMM's dot product `Σ_k X[i,k]·Y[j,k]` or SpMV's row sum over one warp —
//! the `lanes` threads along `threadIdx.x` each sum every `lanes`-th term, then
//! `warp_sum` combines them (Sputnik's and CSR-vector's reductions, DA-SpMM's parallel
//! reduction).
//!
//! Preconditions (each a [`ScheduleError`] naming the loop and its block):
//! - the loop exists ([`ScheduleError::UnknownLoop`]), is serial
//!   ([`ScheduleError::NotSerial`]), runs `0..lanes` with `lanes` a power of two from 2 to
//!   32, and can be bound to `threadIdx.x` (the rules of [`super::bind()`], iteration
//!   independence aside) ([`ScheduleError::NotBindable`]);
//! - every store in its body adds to one element `X[e]` of a buffer in memory (not a
//!   `local`): `X[e] = X[e] + v`, with `e` fixed across the loop (no variable declared in
//!   it, no buffer it writes) and `X` not read otherwise ([`ScheduleError::NotAReduction`]);
//!   no local declared outside the loop is assigned in it
//!   ([`ScheduleError::LoopCarriedLocal`]);
//! - after binding, the loop covers every thread along `threadIdx.x` of its launch (the
//!   whole group of lanes reaches the reduction) ([`ScheduleError::NotBindable`]).
//!
//! Conditions around the loop must be the same for all lanes of a warp (a row per warp);
//! the SIMT interpreter reports a warp reduction with inactive lanes otherwise.
//!
//! Postcondition:
//! ```text
//! for l in 0..32 {                      for l in 0..32 bind(threadIdx.x) {
//!   for ko in 0..2 {                      let C_part: f32 = 0.0
//!     C[p] = C[p] + X[.., ko*32+l] …  →    for ko in 0..2 { C_part = C_part + X[.., ko*32+l] … }
//!   }                                     let C_sum: f32 = warp_sum(C_part, 32)
//! }                                       if l == 0 { C[p] = C[p] + C_sum }
//!                                       }
//! ```
//! Floating-point sums are reassociated.

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::id::BufferId;
use sparsile_ir::loops::{
    update_addend, BufferKind, CmpOp, Expr, Func, GpuAxis, GpuDim, Stmt, Var, VarType, WarpOp,
};
use sparsile_ir::Span;

use super::cache_write::accesses;
use super::loop_ref::{fresh_name, parent_list_mut};
use super::parallel::find_loop;
use super::rfactor::collect_updates;
use super::{LoopRef, ScheduleError};

const PRIMITIVE: &str = "warp_reduce";
const LANES: GpuAxis = GpuAxis::Thread(GpuDim::X);

/// Runs `target` on the lanes of a warp with its sums combined by `warp_sum` (see the
/// module docs).
pub fn warp_reduce(func: &Func, target: &LoopRef) -> Result<Func, ScheduleError> {
    let f = find_loop(func, target, PRIMITIVE)?.for_;
    let refuse = |reason: String| ScheduleError::NotBindable {
        primitive: PRIMITIVE,
        block: target.block.clone(),
        var: target.var.clone(),
        axis: LANES,
        reason,
        span: f.span,
    };
    let lanes = match (&f.lo, &f.hi) {
        (Expr::Int(0), Expr::Int(n)) if (2..=32).contains(n) && (*n as u64).is_power_of_two() => *n,
        _ => {
            return Err(refuse(
                "a warp reduction runs `0..lanes` with lanes a power of two from 2 to 32"
                    .to_string(),
            ))
        }
    };
    let not_reduction = |what: String, span: Span| ScheduleError::NotAReduction {
        primitive: PRIMITIVE,
        block: target.block.clone(),
        var: target.var.clone(),
        what,
        span,
    };
    let mut updated: Vec<(BufferId, Vec<Expr>, Span)> = Vec::new();
    let mut outside = None;
    collect_updates(&f.body, true, f.var, &mut updated, &mut outside);
    let Some((x, e, span)) = updated.first().cloned() else {
        return Err(not_reduction(
            "no element as a sum: the loop has no update `X[e] = X[e] + v`".to_string(),
            f.span,
        ));
    };
    let buffer = &func.buffers[x];
    if let Some(span) = outside {
        return Err(not_reduction(
            format!(
                "`{}` but not as a sum: a store in the loop is not an update of it",
                buffer.name
            ),
            span,
        ));
    }
    if updated.iter().any(|(b, ix, _)| *b != x || *ix != e) {
        return Err(not_reduction(
            format!(
                "`{}` but not as a sum of one element: the updates add to different elements",
                buffer.name
            ),
            span,
        ));
    }
    if buffer.kind == BufferKind::Local || buffer.dtype.is_int() {
        return Err(not_reduction(
            format!(
                "`{}` but not as a float sum in memory (a local would hold the sum in one lane only)",
                buffer.name
            ),
            span,
        ));
    }
    if accesses(&f.body, x).len() != 2 * updated.len() {
        return Err(not_reduction(
            format!(
                "`{}` but not as a sum: the loop reads it outside its `+=` updates",
                buffer.name
            ),
            span,
        ));
    }
    let declared = Stmt::declared_vars(&f.body);
    let stored = Stmt::stored_buffers(&f.body);
    let mut fixed = true;
    for ix in &e {
        ix.visit(&mut |y| match y {
            Expr::Var(v) if *v == f.var || declared.contains(v) => fixed = false,
            Expr::Load { buffer, .. } | Expr::Search { buffer, .. } if stored.contains(buffer) => {
                fixed = false
            }
            _ => {}
        });
    }
    if !fixed {
        return Err(not_reduction(
            format!(
                "`{}` but not as a sum: the updated element depends on the loop or on what it declares or writes",
                buffer.name
            ),
            span,
        ));
    }
    let dtype = buffer.dtype;
    let name = buffer.name.clone();

    let mut out = func.clone();
    let part_name = fresh_name(&out, &format!("{name}_part"));
    let part = out.vars.push(Var {
        name: part_name,
        ty: VarType::Value(dtype),
    });
    let sum_name = fresh_name(&out, &format!("{name}_sum"));
    let sum = out.vars.push(Var {
        name: sum_name,
        ty: VarType::Value(dtype),
    });
    let body = Stmt::map_leaves(&f.body, &mut |s| match s {
        Stmt::Store {
            buffer,
            indices,
            value,
            span,
        } if *buffer == x => update_addend(x, indices, value).map(|v| Stmt::Assign {
            var: part,
            value: Expr::binary(BinaryOp::Add, Expr::Var(part), v.clone()),
            span: *span,
        }),
        _ => None,
    });
    let mut new_body = vec![Stmt::Let {
        var: part,
        value: Expr::Float(0.0),
        span: f.span,
    }];
    new_body.extend(body);
    new_body.push(Stmt::WarpReduce {
        var: sum,
        op: WarpOp::Sum,
        value: Expr::Var(part),
        key: None,
        lanes: lanes as u32,
        span: f.span,
    });
    new_body.push(Stmt::If {
        cond: Expr::cmp(CmpOp::Eq, Expr::Var(f.var), Expr::Int(0)),
        then_body: vec![Stmt::Store {
            buffer: x,
            indices: e.clone(),
            value: Expr::binary(BinaryOp::Add, Expr::load(x, e.clone()), Expr::Var(sum)),
            span,
        }],
        else_body: Vec::new(),
        span: f.span,
    });
    let (list, at) = parent_list_mut(&mut out.body, f.var).expect("the loop was found");
    let Stmt::For(l) = &mut list[at] else {
        unreachable!("parent_list_mut points at the loop")
    };
    l.body = new_body;
    // Binding checks the position, the thread count and the stores; the iterations are
    // independent but for the warp reduction, which combines them.
    let bound = super::bind::bind_unchecked(&out, target, LANES)?;
    let threads_x = super::bind::block_of(&bound, target).map_or(0, |b| b[0]);
    if threads_x != lanes {
        return Err(refuse(format!(
            "the launch has {threads_x} threads along threadIdx.x but the reduction runs on {lanes} lanes (all of threadIdx.x must take part)"
        )));
    }
    Ok(bound)
}
