//! `warp_reduce`: runs the iterations of a reduction loop on the lanes of a GPU warp (or
//! of a block) and adds the lanes' partial sums with a warp reduction (shuffles), through
//! shared memory between the warps of a block when there are more than 32 lanes.
//!
//! Purpose: SDDMM's dot product `Σ_k X[i,k]·Y[j,k]` or SpMV's row sum over one warp —
//! the `lanes` threads along `threadIdx.x` each sum every `lanes`-th term, then
//! `warp_sum` combines them (Sputnik's and CSR-vector's reductions, DA-SpMM's parallel
//! reduction).
//!
//! Preconditions (each a [`ScheduleError`] naming the loop and its block):
//! - the loop exists ([`ScheduleError::UnknownLoop`]), is serial
//!   ([`ScheduleError::NotSerial`]), runs `0..lanes` with `lanes` a power of two from 2 to
//!   1,024, and can be bound to `threadIdx.x` (the rules of [`super::bind()`], iteration
//!   independence aside) ([`ScheduleError::NotBindable`]);
//! - over more than 32 lanes, where the loop already sits in a launch, no condition or
//!   loop bound around it depends on the thread: the warps' sums meet behind
//!   `sync_threads`, which every thread of the block must reach
//!   ([`ScheduleError::NotBindable`]; the verifier checks it again once every loop is
//!   bound);
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
//! Over more than 32 lanes the sum takes two stages (a shared-memory tree of one level):
//! each warp sums its lanes with `warp_sum`, the first lane of each warp stores the
//! warp's sum in a `shared` array `<X>_tree` (one slot per warp, per value of the
//! `threadIdx.y`/`z` loops around), and after `sync_threads` the first warp sums the
//! slots and its first lane adds the total. The barriers come from the barrier pass
//! (`insert_barriers`), which also orders the next reduction's stores after these reads.
//!
//! Floating-point sums are reassociated.

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::coord::BufferRole;
use sparsile_ir::id::BufferId;
use sparsile_ir::id::VarId;
use sparsile_ir::loops::{
    update_addend, BarrierScope, Buffer, BufferKind, BufferLayout, CmpOp, Expr, Func, GpuAxis,
    GpuDim, Stmt, Var, VarType, WarpOp, WARP_SIZE,
};
use sparsile_ir::DType;
use sparsile_ir::Span;

use super::cache_write::accesses;
use super::insert_barriers::insert_barriers;
use super::launch_path::{block_uniform, path_to, Around, Path};
use super::loop_ref::{fresh_name, parent_list_mut};
use super::parallel::find_loop;
use super::rfactor::collect_updates;
use super::{LoopRef, ScheduleError};
use crate::index_expr::{add, mul, sub};

const PRIMITIVE: &str = "warp_reduce";
const WARP: i64 = WARP_SIZE as i64;
const MAX_THREADS: i64 = 1024;
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
    let lanes =
        match (&f.lo, &f.hi) {
            (Expr::Int(0), Expr::Int(n))
                if (2..=MAX_THREADS).contains(n) && (*n as u64).is_power_of_two() =>
            {
                *n
            }
            _ => return Err(refuse(
                "a reduction over lanes runs `0..lanes` with lanes a power of two from 2 to 1024"
                    .to_string(),
            )),
        };
    // Over more than a warp, the warps' sums meet in shared memory behind sync_threads,
    // which every thread of the block must reach.
    let path = path_to(&func.body, f.var);
    if lanes > WARP {
        if let Some(path) = &path {
            if !block_uniform(path, f) {
                return Err(refuse(format!(
                    "{lanes} lanes span several warps, whose sums meet behind sync_threads, but a condition or loop bound around the loop depends on the thread"
                )));
            }
        }
    }
    let groups = group_loops(path.as_ref());
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
    // f16/bf16 outputs are summed in f32 and rounded once, when stored.
    let dtype = buffer.dtype.compute_type();
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
    let add_sum = Stmt::If {
        cond: Expr::cmp(CmpOp::Eq, Expr::Var(f.var), Expr::Int(0)),
        then_body: vec![Stmt::Store {
            buffer: x,
            indices: e.clone(),
            value: Expr::binary(BinaryOp::Add, Expr::load(x, e.clone()), Expr::Var(sum)),
            span,
        }],
        else_body: Vec::new(),
        span: f.span,
    };
    if lanes <= WARP {
        new_body.push(Stmt::WarpReduce {
            var: sum,
            op: WarpOp::Sum,
            value: Expr::Var(part),
            key: None,
            lanes: lanes as u32,
            span: f.span,
        });
        new_body.push(add_sum);
    } else {
        new_body = shared_tree(
            &mut out,
            new_body,
            TreeSum {
                lane: f.var,
                lanes,
                part,
                sum,
                add_sum,
                groups: &groups,
                name: &name,
                dtype,
                span: f.span,
            },
        );
    }
    bind_on_lanes(out, f.var, target, new_body, lanes, refuse)
}

/// Puts `body` in place of the body of the loop over `var` (`target`) and binds the loop
/// to the lanes (`threadIdx.x`), which must be every thread along `x` of its launch: all
/// `lanes` take part in the reduction. Binding checks the position, the thread count and
/// the stores; the iterations are independent but for the reduction, which combines them.
pub(super) fn bind_on_lanes(
    mut out: Func,
    var: VarId,
    target: &LoopRef,
    body: Vec<Stmt>,
    lanes: i64,
    refuse: impl Fn(String) -> ScheduleError,
) -> Result<Func, ScheduleError> {
    let (list, at) = parent_list_mut(&mut out.body, var).expect("the loop was found");
    let Stmt::For(l) = &mut list[at] else {
        unreachable!("parent_list_mut points at the loop")
    };
    l.body = body;
    let bound = super::bind::bind_unchecked(&out, target, LANES)?;
    let threads_x = super::bind::block_of(&bound, target).map_or(0, |b| b[0]);
    if threads_x != lanes {
        return Err(refuse(format!(
            "the launch has {threads_x} threads along threadIdx.x but the reduction runs on {lanes} lanes (all of threadIdx.x must take part)"
        )));
    }
    Ok(bound)
}

/// The `threadIdx.y` / `threadIdx.z` loops around the reduction: (variable, lo, extent).
fn group_loops(path: Option<&Path<'_>>) -> Vec<(VarId, i64, i64)> {
    let Some(path) = path else {
        return Vec::new();
    };
    path.around
        .iter()
        .filter_map(|a| match a {
            Around::Loop(l) => match (l.kind.gpu_axis(), &l.lo, &l.hi) {
                (Some(GpuAxis::Thread(GpuDim::Y | GpuDim::Z)), Expr::Int(lo), Expr::Int(hi)) => {
                    Some((l.var, *lo, hi - lo))
                }
                _ => None,
            },
            Around::Cond(_) => None,
        })
        .collect()
}

/// What the shared-memory stage of a reduction over more than a warp needs.
struct TreeSum<'a> {
    lane: VarId,
    lanes: i64,
    part: VarId,
    sum: VarId,
    /// `if lane == 0 { X[e] = X[e] + sum }`.
    add_sum: Stmt,
    groups: &'a [(VarId, i64, i64)],
    name: &'a str,
    dtype: DType,
    span: Span,
}

/// `body` (which leaves each lane's partial sum in `part`) followed by the two-stage
/// reduction over `lanes > 32` lanes: each warp sums its lanes with `warp_sum`, its first
/// lane puts the warp's sum in a `shared` array (one slot per warp, per group of the
/// other thread axes), and after `sync_threads` the first warp sums the slots and adds
/// the total. Barriers by [`insert_barriers`] (one also orders a later reduction's
/// writes after this one's reads).
fn shared_tree(out: &mut Func, mut body: Vec<Stmt>, t: TreeSum<'_>) -> Vec<Stmt> {
    let warps = t.lanes / WARP;
    let groups: i64 = t.groups.iter().map(|g| g.2).product::<i64>().max(1);
    let tree = out.buffers.push(Buffer {
        name: fresh_name(out, &format!("{}_tree", t.name)),
        dtype: t.dtype,
        layout: BufferLayout::Flat(Expr::Int(groups * warps)),
        role: BufferRole::Temp,
        kind: BufferKind::Shared,
        span: Span::default(),
    });
    let mut group = Expr::Int(0);
    for &(v, lo, n) in t.groups {
        group = add(mul(group, Expr::Int(n)), sub(Expr::Var(v), Expr::Int(lo)));
    }
    let slot = |i: Expr| add(mul(group.clone(), Expr::Int(warps)), i);
    let lane = Expr::Var(t.lane);
    let var = |out: &mut Func, base: &str| {
        let name = fresh_name(out, &format!("{}_{base}", t.name));
        out.vars.push(Var {
            name,
            ty: VarType::Value(t.dtype),
        })
    };
    let warp_sum = var(out, "warp");
    let gathered = var(out, "warps");
    // Only float sums reach here (checked above).
    let zero = Expr::Float(0.0);
    body.push(Stmt::WarpReduce {
        var: warp_sum,
        op: WarpOp::Sum,
        value: Expr::Var(t.part),
        key: None,
        lanes: WARP as u32,
        span: t.span,
    });
    body.push(Stmt::If {
        cond: Expr::cmp(
            CmpOp::Eq,
            Expr::binary(BinaryOp::Rem, lane.clone(), Expr::Int(WARP)),
            Expr::Int(0),
        ),
        then_body: vec![Stmt::Store {
            buffer: tree,
            indices: vec![slot(Expr::binary(
                BinaryOp::Div,
                lane.clone(),
                Expr::Int(WARP),
            ))],
            value: Expr::Var(warp_sum),
            span: t.span,
        }],
        else_body: Vec::new(),
        span: t.span,
    });
    body.push(Stmt::If {
        cond: Expr::cmp(CmpOp::Lt, lane.clone(), Expr::Int(WARP)),
        then_body: vec![
            Stmt::Let {
                var: gathered,
                value: zero,
                span: t.span,
            },
            Stmt::If {
                cond: Expr::cmp(CmpOp::Lt, lane.clone(), Expr::Int(warps)),
                then_body: vec![Stmt::Assign {
                    var: gathered,
                    value: Expr::load(tree, vec![slot(lane.clone())]),
                    span: t.span,
                }],
                else_body: Vec::new(),
                span: t.span,
            },
            Stmt::WarpReduce {
                var: t.sum,
                op: WarpOp::Sum,
                value: Expr::Var(gathered),
                key: None,
                lanes: WARP as u32,
                span: t.span,
            },
            t.add_sum,
        ],
        else_body: Vec::new(),
        span: t.span,
    });
    insert_barriers(
        body,
        &[tree].into_iter().collect(),
        BarrierScope::Block,
        true,
    )
}
