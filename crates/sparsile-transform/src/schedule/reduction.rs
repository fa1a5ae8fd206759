//! `parallel_reduce`: marks a loop parallel whose iterations add into the same elements,
//! with a strategy that makes the racing additions safe ([`ReductionStrategy`]).
//!
//! Purpose: element-balanced kernels (SpMM or SpMV parallel over the non-zeros after
//! `sparse_fuse`) have iterations that update the same output row. Plain `parallel`
//! requires owner-computes (each element written by one iteration) and refuses them.
//!
//! - [`ReductionStrategy::Atomic`]: every update `X[e] = X[e] + v` of a buffer whose
//!   elements are shared between iterations becomes an atomic add `atomic X[e] += v`
//!   (a compare-and-swap loop in C); other iterations' updates may interleave.
//! - [`ReductionStrategy::PerThread`] `{ copies }`: the loop is divided into `copies`
//!   contiguous ranges, each a work item of a new parallel loop that zeroes its own copy
//!   of every shared buffer (a scratch buffer of `copies` × its size) and adds into it; a
//!   second parallel loop over the buffer's elements then adds the copies into it, in
//!   copy order. Deterministic for a given `copies`, and free of atomics.
//!
//! Preconditions (each violation is its own [`ScheduleError`]):
//! - the loop is the outermost loop of a top-level block (not even inside a panel loop,
//!   which `parallel` accepts), serial or parallel, and what `parallel` requires of its
//!   locals;
//! - every buffer the iterations share is written only by updates `X[e] = X[e] + v`
//!   (either operand order) whose value `v` does not read `X`, and read nowhere else in
//!   the loop ([`ScheduleError::NotAReduction`], naming the access);
//! - for `PerThread`, `copies >= 1` ([`ScheduleError::BadFactor`]) and every shared
//!   buffer is laid out over parentless `dense_fixed` axes
//!   ([`ScheduleError::NotAReduction`]).
//!
//! Postcondition: the loop is parallel (static partition) and every race is resolved by
//! the strategy; buffers owned per iteration are left as they are.
//!
//! Example (`tests/schedule_reduction.rs`): SpMV over the non-zeros,
//! `for p in 0..nnz { let i = ...; y[i] = y[i] + A[p] * x[j] }` becomes
//! `for p in 0..nnz parallel { let i = ...; atomic y[i] += A[p] * x[j] }` with `Atomic`.

use serde::{Deserialize, Serialize};
use sparsile_ir::coord::{BinaryOp, BufferRole};
use sparsile_ir::id::BufferId;
use sparsile_ir::loops::{
    update_addend, Buffer, BufferKind, BufferLayout, Expr, For, ForKind, Func, Stmt,
};
use sparsile_ir::{AxisKind, Span};

use super::cache_write::accesses;
use super::loop_ref::{fresh_index_var, fresh_name, loop_stmt_mut};
use super::parallel::check_independent;
use super::partition::{check_partition, LoopPartition};
use super::{LoopRef, ScheduleError};
use crate::index_expr::{add, mul, sub};
use crate::lower_buffers::{value_count, value_offset};

const PRIMITIVE: &str = "parallel_reduce";

/// How racing `+=` updates of a parallel loop are made safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReductionStrategy {
    /// Atomic adds to the shared elements.
    Atomic,
    /// `copies` private copies of each shared buffer, merged after the loop.
    PerThread { copies: i64 },
}

/// Marks `target` parallel, resolving shared `+=` updates with `strategy` (see the module
/// docs).
pub fn parallel_reduce(
    func: &Func,
    target: &LoopRef,
    strategy: ReductionStrategy,
) -> Result<Func, ScheduleError> {
    // Not inside a panel loop (which `parallel` accepts): the merge loops of the
    // per-thread copies follow the loop at the top of its block.
    check_partition(func, target, &LoopPartition::Static, PRIMITIVE, false)?;
    if let ReductionStrategy::PerThread { copies } = strategy {
        if copies < 1 {
            return Err(ScheduleError::BadFactor {
                primitive: PRIMITIVE,
                block: target.block.clone(),
                var: target.var.clone(),
                factor: copies,
            });
        }
    }
    let (mut out, shared) = atomic_shared_updates(func.clone(), target, PRIMITIVE)?;
    match strategy {
        ReductionStrategy::Atomic => {
            let Stmt::For(g) = loop_stmt_mut(&mut out, target, PRIMITIVE)? else {
                unreachable!("a loop statement")
            };
            g.kind = ForKind::Parallel;
            Ok(out)
        }
        ReductionStrategy::PerThread { copies } => per_thread(out, target, &shared, copies),
    }
}

/// `func` with the updates `X[e] = X[e] + v` of every buffer whose elements iterations of
/// `target` share made atomic adds, and those buffers; an access of such a buffer that is
/// not an update, or an independence failure of another kind, is an error of `primitive`.
pub(crate) fn atomic_shared_updates(
    mut out: Func,
    target: &LoopRef,
    primitive: &'static str,
) -> Result<(Func, Vec<BufferId>), ScheduleError> {
    let mut shared: Vec<BufferId> = Vec::new();
    // Find the shared buffers one at a time: each failure of the independence check
    // names one; redirect its updates to atomic adds (which never race with each other)
    // and look again.
    loop {
        let Stmt::For(f) = loop_stmt_mut(&mut out, target, primitive)? else {
            unreachable!("a loop statement")
        };
        let f = f.clone();
        match check_independent(&out, &f, target, primitive, false) {
            Ok(()) => return Ok((out, shared)),
            Err(ScheduleError::LoopCarriedAccess(carried)) => {
                let id = out
                    .buffer_by_name(&carried.buffer)
                    .expect("the check names a buffer of the function");
                if shared.contains(&id) {
                    return Err(ScheduleError::LoopCarriedAccess(carried));
                }
                check_updates(&out, target, &f, id, primitive)?;
                let Stmt::For(g) = loop_stmt_mut(&mut out, target, primitive)? else {
                    unreachable!("a loop statement")
                };
                g.body = to_atomic(&g.body, id);
                shared.push(id);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Checks that every access of `id` in the loop is part of an update `X[e] = X[e] + v`.
fn check_updates(
    func: &Func,
    target: &LoopRef,
    f: &For,
    id: BufferId,
    primitive: &'static str,
) -> Result<(), ScheduleError> {
    let name = func.buffers[id].name.clone();
    let mut updates = 0usize;
    let mut bad: Option<Span> = None;
    fn walk(stmts: &[Stmt], id: BufferId, updates: &mut usize, bad: &mut Option<Span>) {
        for s in stmts {
            match s {
                Stmt::For(g) => walk(&g.body, id, updates, bad),
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(then_body, id, updates, bad);
                    walk(else_body, id, updates, bad);
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                    walk(body, id, updates, bad)
                }
                Stmt::Store {
                    buffer,
                    indices,
                    value,
                    span,
                } if *buffer == id => {
                    if increment(value, id, indices).is_some() {
                        *updates += 1;
                    } else if bad.is_none() {
                        *bad = Some(*span);
                    }
                }
                _ => {}
            }
        }
    }
    walk(&f.body, id, &mut updates, &mut bad);
    // Each update reads the buffer once; any other read (`reads` of them) is not a
    // reduction.
    let reads = accesses(&f.body, id).len() - updates - count_stores(&f.body, id);
    let problem = match bad {
        Some(span) => Some((
            span,
            "a store that is not `X[e] = X[e] + v` (with `v` not reading `X`)",
        )),
        None if reads > 0 => Some((f.span, "the loop reads it outside its `+=` updates")),
        None => None,
    };
    match problem {
        Some((span, reason)) => Err(ScheduleError::NotAReduction {
            primitive,
            block: target.block.clone(),
            var: target.var.clone(),
            what: format!("`{name}` but not as a sum: {reason}"),
            span,
        }),
        None => Ok(()),
    }
}

fn count_stores(stmts: &[Stmt], id: BufferId) -> usize {
    stmts
        .iter()
        .map(|s| match s {
            Stmt::Store { buffer, .. } | Stmt::AtomicAdd { buffer, .. } if *buffer == id => 1,
            Stmt::Mma(m) if m.c == id => 1,
            Stmt::For(g) => count_stores(&g.body, id),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => count_stores(then_body, id) + count_stores(else_body, id),
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => count_stores(body, id),
            _ => 0,
        })
        .sum()
}

/// `v` when `value` is `X[indices] + v` or `v + X[indices]` and `v` does not read `X`.
fn increment<'e>(value: &'e Expr, id: BufferId, indices: &[Expr]) -> Option<&'e Expr> {
    update_addend(id, indices, value).filter(|v| {
        let mut reads = false;
        v.visit(&mut |x| reads |= matches!(x, Expr::Load { buffer, .. } | Expr::Search { buffer, .. } if *buffer == id));
        !reads
    })
}

/// `stmts` with the updates of `id` turned into atomic adds.
fn to_atomic(stmts: &[Stmt], id: BufferId) -> Vec<Stmt> {
    Stmt::map_leaves(stmts, &mut |s| match s {
        Stmt::Store {
            buffer,
            indices,
            value,
            span,
        } if *buffer == id => increment(value, id, indices).map(|v| Stmt::AtomicAdd {
            buffer: id,
            indices: indices.clone(),
            value: v.clone(),
            span: *span,
        }),
        _ => None,
    })
}

/// The per-thread strategy on a loop whose shared updates are atomic adds (see the
/// module docs).
fn per_thread(
    mut func: Func,
    target: &LoopRef,
    shared: &[BufferId],
    copies: i64,
) -> Result<Func, ScheduleError> {
    let mut copies_of = Vec::new();
    for &id in shared {
        let buf = func.buffers[id].clone();
        let axes = match &buf.layout {
            BufferLayout::Axes(axes)
                if axes.iter().all(|&a| {
                    func.axes[a].kind == AxisKind::DenseFixed && func.axes[a].parent.is_none()
                }) =>
            {
                axes.clone()
            }
            _ => {
                return Err(ScheduleError::NotAReduction {
                    primitive: PRIMITIVE,
                    block: target.block.clone(),
                    var: target.var.clone(),
                    what: format!(
                    "`{}`, and per-thread copies need a buffer over parentless dense_fixed axes",
                    buf.name
                ),
                    span: buf.span,
                })
            }
        };
        let count = value_count(&func.axes, &axes);
        let name = fresh_name(&func, &format!("{}_copies", buf.name));
        let tmp = func.buffers.push(Buffer {
            name,
            dtype: buf.dtype.compute_type(),
            layout: BufferLayout::Flat(mul(Expr::Int(copies), count.clone())),
            role: BufferRole::Temp,
            kind: BufferKind::Scratch,
            span: Span::default(),
        });
        copies_of.push((id, axes, count, tmp));
    }
    let (t, _) = fresh_index_var(&mut func, &format!("{}_copy", target.var));
    let slot = loop_stmt_mut(&mut func, target, PRIMITIVE)?;
    let Stmt::For(old) = slot.clone() else {
        unreachable!("a loop statement")
    };
    let span = old.span;
    // Work item t: zero its copies, then run its range of iterations into them.
    let n = sub(old.hi.clone(), old.lo.clone());
    let bound = |k: Expr| {
        add(
            old.lo.clone(),
            Expr::binary(BinaryOp::Div, mul(n.clone(), k), Expr::Int(copies)),
        )
    };
    let t_next = add(Expr::Var(t), Expr::Int(1));
    let mut item = Vec::new();
    let mut merges = Vec::new();
    let mut new_vars = Vec::new();
    for (id, axes, count, tmp) in &copies_of {
        let base = mul(Expr::Var(t), count.clone());
        new_vars.push((*id, axes.clone(), count.clone(), *tmp, base));
    }
    let mut body = old.body.clone();
    for (id, axes, _, tmp, base) in &new_vars {
        let redirect = |s: &Stmt| {
            redirect_atomic(s, *id, *tmp, &|ix: &[Expr]| {
                add(base.clone(), value_offset(&func.axes, axes, ix.to_vec()))
            })
        };
        body = body.iter().map(redirect).collect();
    }
    let mut zero_loops = Vec::new();
    let mut merge_parts = Vec::new();
    for (id, axes, count, tmp, base) in new_vars {
        zero_loops.push((tmp, count.clone(), base));
        merge_parts.push((id, axes, count, tmp));
    }
    // Declare loop variables for the zeroing and the merge (needs `func` mutably).
    let mut zero_stmts = Vec::new();
    for (tmp, count, base) in zero_loops {
        let (e, _) = fresh_index_var(&mut func, "e");
        zero_stmts.push(Stmt::For(For {
            var: e,
            lo: Expr::Int(0),
            hi: count,
            kind: ForKind::Serial,
            body: vec![Stmt::Store {
                buffer: tmp,
                indices: vec![add(base, Expr::Var(e))],
                value: Expr::Float(0.0),
                span,
            }],
            span,
        }));
    }
    for (id, axes, count, tmp) in merge_parts {
        let mut pos_vars = Vec::new();
        for &a in &axes {
            let name = format!("{}_m", func.axes[a].name.to_lowercase());
            let (v, _) = fresh_index_var(&mut func, &name);
            pos_vars.push((v, a));
        }
        let (c, _) = fresh_index_var(&mut func, "copy");
        let positions: Vec<Expr> = pos_vars.iter().map(|(v, _)| Expr::Var(*v)).collect();
        let offset = add(
            mul(Expr::Var(c), count.clone()),
            value_offset(&func.axes, &axes, positions.clone()),
        );
        let mut nest = vec![Stmt::For(For {
            var: c,
            lo: Expr::Int(0),
            hi: Expr::Int(copies),
            kind: ForKind::Serial,
            body: vec![Stmt::Store {
                buffer: id,
                indices: positions.clone(),
                value: Expr::binary(
                    BinaryOp::Add,
                    Expr::load(id, positions.clone()),
                    Expr::load(tmp, vec![offset]),
                ),
                span,
            }],
            span,
        })];
        for (k, (v, a)) in pos_vars.iter().enumerate().rev() {
            nest = vec![Stmt::For(For {
                var: *v,
                lo: Expr::Int(0),
                hi: crate::index_expr::npos(&func.axes, *a),
                kind: if k == 0 {
                    ForKind::Parallel
                } else {
                    ForKind::Serial
                },
                body: nest,
                span,
            })];
        }
        merges.extend(nest);
    }
    item.extend(zero_stmts);
    item.push(Stmt::For(For {
        var: old.var,
        lo: bound(Expr::Var(t)),
        hi: bound(t_next),
        kind: ForKind::Serial,
        body,
        span,
    }));
    let work = Stmt::For(For {
        var: t,
        lo: Expr::Int(0),
        hi: Expr::Int(copies),
        kind: ForKind::Parallel,
        body: item,
        span,
    });
    let slot = loop_stmt_mut(&mut func, target, PRIMITIVE)?;
    *slot = work;
    // The merges follow the loop in its block.
    let block = super::loop_ref::block_body_mut(&mut func.body, &target.block)
        .expect("the block of the loop");
    let at = block
        .iter()
        .position(|s| matches!(s, Stmt::For(f) if f.var == t))
        .expect("the new loop is a top-level statement of its block");
    for (k, m) in merges.into_iter().enumerate() {
        block.insert(at + 1 + k, m);
    }
    Ok(func)
}

/// `s` with the atomic adds to `id` redirected to plain updates of `tmp` at `offset(ix)`.
fn redirect_atomic(
    s: &Stmt,
    id: BufferId,
    tmp: BufferId,
    offset: &dyn Fn(&[Expr]) -> Expr,
) -> Stmt {
    let mut out = Stmt::map_leaves(std::slice::from_ref(s), &mut |s| match s {
        Stmt::AtomicAdd {
            buffer,
            indices,
            value,
            span,
        } if *buffer == id => {
            let at = vec![offset(indices)];
            Some(Stmt::Store {
                buffer: tmp,
                indices: at.clone(),
                value: Expr::binary(BinaryOp::Add, Expr::load(tmp, at), value.clone()),
                span: *span,
            })
        }
        _ => None,
    });
    out.pop().expect("one statement in, one out")
}
