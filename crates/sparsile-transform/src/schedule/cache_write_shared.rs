//! `cache_write_shared`: accumulates the elements of an output buffer that one block of a
//! GPU launch updates in a `shared` buffer, zeroed and added back by all the threads of
//! the block together.
//!
//! Purpose: in an SpMM with a row per block whose non-zeros are split over the warps
//! (`threadIdx.y`) and the row's width over the lanes (`threadIdx.x`), every warp adds
//! its non-zeros' products into the same output row, with atomic adds in global memory
//! (`bind_atomic`). Staged, the block adds into its row in shared memory (atomics there
//! are cheap) and the row goes to global memory once, one element per thread.
//!
//! The loop `target` is bound to the grid (`blockIdx.*`) and is the innermost such loop:
//! one of its iterations is the work of one block, and its body holds the loops bound to
//! the threads of the block.
//!
//! Preconditions (each violation is its own [`ScheduleError`] naming loop and buffer):
//! - the loop exists, inside a launch, bound to the grid, with no loop bound to the grid
//!   in its body ([`ScheduleError::UnknownLoop`], [`ScheduleError::CacheBuffer`]);
//! - every thread of the block reaches the top of its body: no condition or loop bound
//!   from the launch down to it depends on the thread (`sync_threads` goes there)
//!   ([`ScheduleError::CacheBuffer`]);
//! - `buffer` is an output values buffer of floats laid out over axes (stage II) that
//!   the body updates ([`ScheduleError::UnknownBuffer`], [`ScheduleError::CacheBuffer`]);
//! - every access of `buffer` in the body is an update, `X[e] = X[e] + v` (or
//!   `v + X[e]`) or `atomic X[e] += v`, with no other read of `X` in `e` or `v`, and the
//!   updates are all plain or all atomic ([`ScheduleError::CacheBuffer`]);
//! - each index position of the updates is, as `cache_write` defines them (see
//!   [`super::cache_write`]), either *fixed* — the same expression in every access,
//!   computable at the top of the iteration (so it depends on no thread: the
//!   thread-bound loops are in the body) — or *staged* (`cache_write`'s cached
//!   positions): the variable of a loop in the body, thread-bound or serial, with
//!   constant bounds, over a parentless `dense_fixed` axis ([`ScheduleError::CacheAccess`]);
//! - with plain updates (no other thread updated the same element, so each element had
//!   one writer), the variable of the loop and of every grid loop around it is a fixed
//!   position by itself, and nothing else in the launch accesses `buffer`: the block
//!   adds back every staged element, updated or not, so no other block may write them
//!   ([`ScheduleError::CacheBuffer`]);
//! - the staged elements, with the launch's other shared buffers, fit in
//!   [`MAX_SHARED_BYTES`] ([`ScheduleError::CacheTooLarge`]).
//!
//! Postcondition: a `shared` buffer `<buffer>_shared` of the staged elements (flattened,
//! last position fastest). After the opening `let`s of the body, all threads of the
//! block zero it together (new loops bound to the block's thread axes with the block's
//! extents; thread `t` of `n` zeroes elements `t, t + n, …`); every update in the body
//! adds into the shared buffer instead (atomically in shared memory where it was
//! atomic); at the end the threads add the elements back into `buffer` the same way —
//! only the elements that exist (fixed and staged positions within their axes' lengths),
//! atomically in global memory if the updates were atomic (other blocks may add to the
//! same elements), plainly otherwise. `sync_threads` between zeroing, updates and adding
//! back come from [`insert_barriers`]. The buffer's elements end as before: adding the
//! block's sum at once is adding its terms one by one (in another order).
//!
//! Example (`tests/schedule/gpu_cache_write/spmm_rows.before` → `.after`; `k` at most 32):
//! ```text
//! for i_2 in 0..m bind(blockIdx.x) {           for i_2 in 0..m bind(blockIdx.x) {
//!   for j_p_i in 0..4 bind(threadIdx.y) {        for Y_zero_ty in 0..4 bind(threadIdx.y) { for Y_zero_tx in 0..32 bind(threadIdx.x) {
//!     for j_p_o in ... { if ... {                  if Y_zero_ty * 32 + Y_zero_tx < 32 { Y_shared[Y_zero_ty * 32 + Y_zero_tx] = 0.0 } } }
//!       for c_2 in 0..32 bind(threadIdx.x) {     sync_threads
//!         if c_2 < k {                     →     for j_p_i in 0..4 bind(threadIdx.y) { ... atomic Y_shared[c_2] += A[i_2, j_p] * X[j, c_2] ... }
//!           atomic Y[i_2, c_2] += A[i_2, j_p] * X[j, c_2]
//!                                                sync_threads
//!                                                for Y_back_ty .. { for Y_back_tx .. { if (slot) < 32 && (slot) < k {
//!                                                  atomic Y[i_2, (slot)] += Y_shared[(slot)] } } }
//! ```

use std::collections::HashSet;

use sparsile_ir::coord::{BinaryOp, BufferRole};
use sparsile_ir::id::BufferId;
use sparsile_ir::loops::{
    BarrierScope, Buffer, BufferKind, BufferLayout, Expr, For, ForKind, Func, GpuAxis, GpuDim,
    Stmt, MAX_SHARED_BYTES,
};
use sparsile_ir::Span;

use super::bind::block_of;
use super::cache_shared::launch_shared_bytes;
use super::cache_write::{accesses, Body, Dim, Plan};
use super::insert_barriers::insert_barriers;
use super::launch_path::{block_uniform, path_to, Around};
use super::loop_ref::{fresh_index_var, fresh_name, loop_mut};
use super::parallel::find_loop;
use super::{LoopRef, ScheduleError};
use crate::index_expr::{add, all, lt, mul};

const PRIMITIVE: &str = "cache_write_shared";

/// Stages the elements of `buffer` that one block's iteration of `target` updates in
/// shared memory (see the module docs). Returns the function and the name of the shared
/// buffer.
pub fn cache_write_shared(
    func: &Func,
    target: &LoopRef,
    buffer: &str,
) -> Result<(Func, String), ScheduleError> {
    let f = find_loop(func, target, PRIMITIVE)?.for_;
    let refuse = |reason: String| ScheduleError::CacheBuffer {
        primitive: PRIMITIVE,
        block: target.block.clone(),
        var: target.var.clone(),
        what: format!("`{buffer}`: {reason}"),
        span: f.span,
    };
    let id = func
        .buffer_by_name(buffer)
        .ok_or_else(|| ScheduleError::UnknownBuffer {
            primitive: PRIMITIVE,
            buffer: buffer.to_string(),
        })?;
    let path = path_to(&func.body, f.var)
        .ok_or_else(|| refuse("the loop is not inside a launch".to_string()))?;
    if !matches!(f.kind.gpu_axis(), Some(GpuAxis::Block(_))) {
        return Err(refuse(
            "the loop is not bound to the grid (blockIdx.*): one iteration must be the work of one block".to_string(),
        ));
    }
    if has_grid_loop(&f.body) {
        return Err(refuse(
            "a loop bound to the grid runs inside it (stage at the innermost one: one iteration must be the work of one block)".to_string(),
        ));
    }
    if !block_uniform(&path, f) {
        return Err(refuse(
            "a condition or loop bound around the loop depends on the thread (every thread of the block must reach the sync_threads at the top of its body)".to_string(),
        ));
    }
    let buf = &func.buffers[id];
    if buf.role != BufferRole::Output || buf.kind != BufferKind::Values {
        return Err(refuse(
            "only an output values buffer is staged (its updates are added back)".to_string(),
        ));
    }
    let body = Body::of(f);
    let rest = &f.body[body.leading_lets..];
    let atomic = match updates(rest, id) {
        Err(span) => {
            return Err(refuse(format!(
                "the statement at {span} accesses it other than by an update `{buffer}[e] = {buffer}[e] + v` or `atomic {buffer}[e] += v`"
            )))
        }
        Ok(Updates::None) => return Err(refuse("the loop does not update it".to_string())),
        Ok(Updates::Mixed) => {
            return Err(refuse(
                "the loop updates it both atomically and plainly".to_string(),
            ))
        }
        Ok(Updates::Plain) => false,
        Ok(Updates::Atomic) => true,
    };
    let elem = buf.dtype.size_bytes() as i64;
    let other_shared = launch_shared_bytes(func, path.launch);
    let max = (MAX_SHARED_BYTES as i64 - other_shared).max(0) / elem;
    let plan = Plan::new(func, target, f, id, &body, PRIMITIVE).map_err(|e| match e {
        ScheduleError::CacheTooLarge {
            primitive,
            block,
            var,
            buffer,
            size,
            ..
        } => ScheduleError::CacheTooLarge {
            primitive,
            block,
            var,
            buffer,
            size,
            max,
        },
        e => e,
    })?;
    if !atomic {
        // The block's elements are its own when every grid loop's variable, from the
        // launch down to this loop, is an index position by itself.
        let grid_vars = path
            .around
            .iter()
            .filter_map(|a| match a {
                Around::Loop(l) if matches!(l.kind.gpu_axis(), Some(GpuAxis::Block(_))) => {
                    Some(l.var)
                }
                _ => None,
            })
            .chain([f.var]);
        for g in grid_vars {
            let own = plan
                .dims
                .iter()
                .any(|d| matches!(d, Dim::Fixed(Expr::Var(v)) if *v == g));
            if !own {
                return Err(refuse(format!(
                    "its updates are plain, but no index position is the grid loop's variable `{}`: other blocks may write the elements this block adds back (bind the updates atomically)",
                    func.vars[g].name
                )));
            }
        }
        if accesses(path.launch, id).len() > accesses(&f.body, id).len() {
            return Err(refuse(
                "its updates are plain, but the launch accesses it outside the loop too (the block adds back every staged element)".to_string(),
            ));
        }
    }
    if plan.size > max {
        return Err(ScheduleError::CacheTooLarge {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            buffer: buffer.to_string(),
            size: plan.size,
            max,
        });
    }
    let threads = block_of(func, target)
        .ok_or_else(|| refuse("the launch has no block shape".to_string()))?;

    let mut out = func.clone();
    let name = fresh_name(&out, &format!("{buffer}_shared"));
    let shared = out.buffers.push(Buffer {
        name: name.clone(),
        dtype: buf.dtype,
        layout: BufferLayout::Flat(Expr::Int(plan.size)),
        role: BufferRole::Temp,
        kind: BufferKind::Shared,
        span: Span::default(),
    });
    let zero = spread(&mut out, &plan, threads, "zero", |_, slot| {
        let store = Stmt::Store {
            buffer: shared,
            indices: vec![slot.clone()],
            value: Expr::Float(0.0),
            span: Span::default(),
        };
        (Vec::new(), store)
    });
    let back = spread(&mut out, &plan, threads, "back", |func, slot| {
        let coords = coordinates(&plan, slot);
        let (indices, conds) = plan.element(func, &coords);
        let part = Expr::load(shared, vec![slot.clone()]);
        let add_back = if atomic {
            Stmt::AtomicAdd {
                buffer: id,
                indices,
                value: part,
                span: Span::default(),
            }
        } else {
            Stmt::Store {
                buffer: id,
                value: add(Expr::load(id, indices.clone()), part),
                indices,
                span: Span::default(),
            }
        };
        (conds, add_back)
    });
    let staged: HashSet<BufferId> = out
        .buffers
        .iter()
        .filter(|(_, b)| b.kind == BufferKind::Shared)
        .map(|(id, _)| id)
        .collect();
    let lets = body.leading_lets;
    let l = loop_mut(&mut out, target, PRIMITIVE)?;
    let mut list = vec![zero];
    list.extend(l.body[lets..].iter().map(|s| plan.rewrite_stmt(s, shared)));
    list.push(back);
    let mut new_body: Vec<Stmt> = l.body[..lets].to_vec();
    new_body.extend(insert_barriers(list, &staged, BarrierScope::Block, false));
    l.body = new_body;
    Ok((out, name))
}

/// Whether a loop bound to the grid is among `stmts` at any depth.
fn has_grid_loop(stmts: &[Stmt]) -> bool {
    let mut found = false;
    Stmt::visit_all(stmts, &mut |s| {
        found |= matches!(s, Stmt::For(l) if matches!(l.kind.gpu_axis(), Some(GpuAxis::Block(_))));
    });
    found
}

/// How a body updates the buffer.
enum Updates {
    None,
    Plain,
    Atomic,
    Mixed,
}

/// How `stmts` update `buffer`, or the span of a statement that accesses it otherwise.
fn updates(stmts: &[Stmt], buffer: BufferId) -> Result<Updates, Span> {
    let reads = |e: &Expr| {
        let mut r = false;
        e.visit(&mut |x| {
            r |= matches!(x, Expr::Load { buffer: b, .. } | Expr::Search { buffer: b, .. } if *b == buffer)
        });
        r
    };
    let (mut plain, mut atomic) = (false, false);
    fn walk(
        stmts: &[Stmt],
        buffer: BufferId,
        reads: &dyn Fn(&Expr) -> bool,
        plain: &mut bool,
        atomic: &mut bool,
    ) -> Result<(), Span> {
        for s in stmts {
            match s {
                Stmt::For(l) => {
                    if reads(&l.lo) || reads(&l.hi) {
                        return Err(l.span);
                    }
                    walk(&l.body, buffer, reads, plain, atomic)?;
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    span,
                } => {
                    if reads(cond) {
                        return Err(*span);
                    }
                    walk(then_body, buffer, reads, plain, atomic)?;
                    walk(else_body, buffer, reads, plain, atomic)?;
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                    walk(body, buffer, reads, plain, atomic)?
                }
                Stmt::Store {
                    buffer: b,
                    indices,
                    value,
                    span,
                } if *b == buffer => {
                    let own = |e: &Expr| matches!(e, Expr::Load { buffer: b2, indices: i2 } if *b2 == buffer && i2 == indices);
                    let term = match value {
                        Expr::Binary {
                            op: BinaryOp::Add,
                            lhs,
                            rhs,
                        } if own(lhs) => Some(&**rhs),
                        Expr::Binary {
                            op: BinaryOp::Add,
                            lhs,
                            rhs,
                        } if own(rhs) => Some(&**lhs),
                        _ => None,
                    };
                    match term {
                        Some(v) if !reads(v) && !indices.iter().any(reads) => *plain = true,
                        _ => return Err(*span),
                    }
                }
                Stmt::AtomicAdd {
                    buffer: b,
                    indices,
                    value,
                    span,
                } if *b == buffer => {
                    if reads(value) || indices.iter().any(reads) {
                        return Err(*span);
                    }
                    *atomic = true;
                }
                other => {
                    if !accesses(std::slice::from_ref(other), buffer).is_empty() {
                        return Err(other.span());
                    }
                }
            }
        }
        Ok(())
    }
    walk(stmts, buffer, &reads, &mut plain, &mut atomic)?;
    Ok(match (plain, atomic) {
        (false, false) => Updates::None,
        (true, false) => Updates::Plain,
        (false, true) => Updates::Atomic,
        (true, true) => Updates::Mixed,
    })
}

/// The staged positions' loop values of the element at `slot` of the shared buffer
/// (last position fastest).
fn coordinates(plan: &Plan, slot: &Expr) -> Vec<Expr> {
    let ranges = plan.cached_ranges();
    let mut coords = Vec::with_capacity(ranges.len());
    let mut stride = 1;
    for (i, &(lo, hi)) in ranges.iter().enumerate().rev() {
        let n = hi - lo;
        let q = if stride == 1 {
            slot.clone()
        } else {
            Expr::binary(BinaryOp::Div, slot.clone(), Expr::Int(stride))
        };
        // The first position needs no remainder: the slots stop at the buffer's size.
        let r = if i == 0 {
            q
        } else {
            Expr::binary(BinaryOp::Rem, q, Expr::Int(n))
        };
        coords.push(add(r, Expr::Int(lo)));
        stride *= n;
    }
    coords.reverse();
    coords
}

/// `s` under the conditions `conds` (none: `s` itself).
fn guarded(conds: Vec<Expr>, s: Stmt) -> Stmt {
    match all(conds) {
        None => s,
        Some(cond) => Stmt::If {
            cond,
            then_body: vec![s],
            else_body: Vec::new(),
            span: Span::default(),
        },
    }
}

/// Every element of the shared buffer, spread over the threads of the block: loops
/// bound to the block's thread axes (with its extents), thread `t` of `n` taking slots
/// `t, t + n, …` below the buffer's size; `make` gives the statement for one slot and
/// the conditions it needs besides.
fn spread(
    func: &mut Func,
    plan: &Plan,
    block: [i64; 3],
    tag: &str,
    make: impl FnOnce(&Func, &Expr) -> (Vec<Expr>, Stmt),
) -> Stmt {
    let base = func.buffers[plan.buffer].name.clone();
    let threads: i64 = block.iter().product();
    // Thread loops, outermost (z) first, and the thread's number `x + bx * (y + by * z)`.
    let mut loops = Vec::new();
    let mut tid = Expr::Int(0);
    for dim in [GpuDim::Z, GpuDim::Y, GpuDim::X] {
        let n = block[dim.index()];
        tid = mul(tid, Expr::Int(n));
        if n > 1 {
            let (v, _) = fresh_index_var(func, &format!("{base}_{tag}_t{}", dim.name()));
            loops.push((v, n, dim));
            tid = add(tid, Expr::Var(v));
        }
    }
    let passes = (plan.size + threads - 1) / threads;
    let pass = (passes > 1).then(|| fresh_index_var(func, &format!("{base}_{tag}_pass")).0);
    let slot = match pass {
        Some(p) => add(mul(Expr::Var(p), Expr::Int(threads)), tid),
        None => tid,
    };
    let (more, one) = make(func, &slot);
    let mut conds = Vec::new();
    if passes * threads != plan.size {
        conds.push(lt(slot, Expr::Int(plan.size)));
    }
    conds.extend(more);
    let mut stmt = guarded(conds, one);
    let wrap = |var, n, kind, body| {
        Stmt::For(For {
            var,
            lo: Expr::Int(0),
            hi: Expr::Int(n),
            kind,
            body: vec![body],
            span: Span::default(),
        })
    };
    if let Some(var) = pass {
        stmt = wrap(var, passes, ForKind::Serial, stmt);
    }
    for &(var, n, dim) in loops.iter().rev() {
        stmt = wrap(var, n, ForKind::Bound(GpuAxis::Thread(dim)), stmt);
    }
    stmt
}
