//! `prefetch`: fetch the data an iteration will gather `distance` iterations ahead.
//!
//! Purpose: SpMM, SDDMM and friends gather rows of a dense operand at coordinates read
//! from an index array (`B[indices[p], k]`). Such gathers are bound by memory latency,
//! not bandwidth, when the rows are scattered; issuing the load of the row needed
//! `distance` iterations later overlaps the latencies. On the real matrices of
//! `shared/data` this is the largest single CPU speed-up (4× on `ogbn_arxiv`, K = 32).
//!
//! The primitive finds the first load of `buffer` in the body of loop `target` (at any
//! depth), and puts at the start of the body a guarded `prefetch` of the element that
//! load reads in iteration `v + distance`:
//! - the loop variable `v` becomes `v + distance`, and the `let`s of the loop body that
//!   the indices use are inlined (so `j = indices[v]` becomes `indices[v + distance]`);
//! - an index that is the variable of an inner loop is replaced by that loop's start;
//!   when it is the last index and the inner loop has a constant trip count, one
//!   prefetch is issued per 64-byte line the inner loop reads (at most 16), each line
//!   after the first guarded by the axis's extent unless it is known to be inside;
//! - every load in the new indices is guarded by its buffer's length (`v + distance <
//!   nnz`), and the conditions under which the original load runs (an enclosing
//!   `if`, or the condition of a `select` around it) guard the prefetch too, and so
//!   does every moved index being inside its axis; each condition is its own `if`, so
//!   nothing is read before it is known to be in bounds.
//!
//! The prefetch changes no value: it is a hint, and the semantics of the function are
//! unchanged (the interpreters check that its element is in bounds).
//!
//! Preconditions (each its own [`ScheduleError`]):
//! - `distance >= 1` ([`ScheduleError::BadFactor`]);
//! - the buffer exists ([`ScheduleError::UnknownBuffer`]) and is loaded in the loop
//!   ([`ScheduleError::NoLoadInLoop`]);
//! - the buffer's axes are all `dense_fixed` (or it is flat): a position ahead on an
//!   axis with a parent may lie under another parent ([`ScheduleError::PrefetchIndex`]);
//! - the load's indices use only the loop variable, `let`s of its body that are never
//!   assigned, inner loop variables and values defined outside the loop, and load only
//!   flat buffers ([`ScheduleError::PrefetchIndex`]).
//!
//! Example (SpMM, CSR, K = 32, `distance = 8`):
//! ```text
//! for j_p in lo..hi {                    for j_p in lo..hi {
//!   let j: idx = A_J_indices[j_p]          if j_p + 8 < nnz_A {
//!   for k_2 in 0..32 { … B[j, k_2] … }  →    prefetch B[A_J_indices[j_p + 8], 0]
//!                                            prefetch B[A_J_indices[j_p + 8], 16]
//!                                          }
//!                                          let j: idx = A_J_indices[j_p]
//!                                          …
//! ```
//!
//! ```
//! use sparsile_transform::schedule::{prefetch::prefetch, LoopRef};
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor B: f32[n, 32]\ntensor C: f32[m, 32]\nC[i,k] = A[i,j] * B[j,k]\n",
//! )
//! .unwrap();
//! let func = sparsile_transform::lower_iterations(&program).unwrap();
//! let text = prefetch(&func, &LoopRef::new("C", "j_p"), "B", 8).unwrap().to_string();
//! assert!(text.contains("prefetch B[A_A_J_indices[j_p + 8], 16]"), "{text}");
//! ```

use std::collections::{HashMap, HashSet};

use sparsile_ir::loops::{BufferLayout, Expr, Func, Stmt};
use sparsile_ir::{AxisKind, BufferId, Span, VarId};

use super::parallel::{find_loop, with_loop};
use super::{LoopRef, ScheduleError};
use crate::index_expr::{add, extent, lt};

const PRIMITIVE: &str = "prefetch";
/// Bytes per cache line.
const LINE: i64 = 64;
/// At most this many prefetches per iteration.
const MAX_LINES: i64 = 16;

/// Adds the prefetch described in the module docs.
pub fn prefetch(
    func: &Func,
    target: &LoopRef,
    buffer: &str,
    distance: i64,
) -> Result<Func, ScheduleError> {
    if distance < 1 {
        return Err(ScheduleError::BadFactor {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            factor: distance,
        });
    }
    let buf = func
        .buffer_by_name(buffer)
        .ok_or_else(|| ScheduleError::UnknownBuffer {
            primitive: PRIMITIVE,
            buffer: buffer.to_string(),
        })?;
    let found = find_loop(func, target, PRIMITIVE)?;
    let l = found.for_;
    let unsupported = |reason: String| ScheduleError::PrefetchIndex {
        block: target.block.clone(),
        var: target.var.clone(),
        buffer: buffer.to_string(),
        reason,
        span: l.span,
    };
    // A position ahead on an axis with a parent may fall under another parent, which
    // stage II does not allow: only dense or flat buffers are prefetched.
    if let BufferLayout::Axes(axes) = &func.buffers[buf].layout {
        if let Some(a) = axes
            .iter()
            .find(|a| func.axes[**a].kind != AxisKind::DenseFixed)
        {
            return Err(unsupported(format!(
                "axis `{}` of the buffer is not dense_fixed (a position ahead may lie under another parent)",
                func.axes[*a].name
            )));
        }
    }
    // The lets of the loop body (by variable) and the locals it assigns.
    let mut lets: HashMap<VarId, Expr> = HashMap::new();
    let mut assigned: HashSet<VarId> = HashSet::new();
    for s in &l.body {
        if let Stmt::Let { var, value, .. } = s {
            lets.insert(*var, value.clone());
        }
    }
    assigned.extend(Stmt::assigned_vars(&l.body));
    let site = find_load(&l.body, buf, &mut Vec::new(), &mut Vec::new()).ok_or_else(|| {
        ScheduleError::NoLoadInLoop {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            buffer: buffer.to_string(),
        }
    })?;
    let inner: HashMap<VarId, (Expr, Expr)> = site
        .loops
        .iter()
        .map(|(v, lo, hi)| (*v, (lo.clone(), hi.clone())))
        .collect();
    // Index `k` that is an inner loop variable with a constant trip count, spread over
    // the cache lines it covers.
    let elt = func.buffers[buf].dtype.size_bytes() as i64;
    let per_line = (LINE / elt.max(1)).max(1);
    let last = site.indices.len().saturating_sub(1);
    let spread = match site.indices.last() {
        Some(Expr::Var(v)) => match inner.get(v) {
            Some((Expr::Int(lo), Expr::Int(hi))) if hi > lo => {
                Some(((hi - lo + per_line - 1) / per_line).min(MAX_LINES))
            }
            _ => None,
        },
        _ => None,
    };
    // Lets inlined and inner loop variables at their starts, then the loop variable
    // shifted by the distance.
    let ahead = add(Expr::Var(l.var), Expr::Int(distance));
    let shifted = |e: &Expr| {
        inline_fixpoint(e, &lets, &inner).substitute(&mut |v| (v == l.var).then(|| ahead.clone()))
    };
    let mut conds: Vec<Expr> = Vec::new();
    for c in &site.conds {
        conds.push(shifted(c));
    }
    let mut indices: Vec<Expr> = Vec::with_capacity(site.indices.len());
    for e in &site.indices {
        indices.push(shifted(e));
    }
    // Every remaining variable must be defined outside the loop (or be the loop's).
    let inside: HashSet<VarId> = Stmt::declared_vars(&l.body).into_iter().collect();
    for e in indices.iter().chain(&conds) {
        let mut bad: Option<String> = None;
        e.visit(&mut |x| {
            if let Expr::Var(v) = x {
                if assigned.contains(v) {
                    bad = Some(format!("`{}` is assigned in the loop", func.vars[*v].name));
                } else if inside.contains(v) && !lets.contains_key(v) {
                    bad = Some(format!(
                        "`{}` is declared inside the loop",
                        func.vars[*v].name
                    ));
                }
            }
        });
        if let Some(reason) = bad {
            return Err(unsupported(reason));
        }
    }
    // Guards: the loads inside the indices and conditions, innermost first, then the
    // conditions of the original load.
    let mut guards: Vec<Expr> = Vec::new();
    for e in conds.iter().chain(&indices) {
        load_guards(func, e, &mut guards).map_err(unsupported)?;
    }
    guards.extend(conds);
    // Indices that moved ahead must stay inside their axis (or the flat buffer).
    for (k, (new, old)) in indices.iter().zip(&site.indices).enumerate() {
        if new == old {
            continue;
        }
        let extent = match &func.buffers[buf].layout {
            BufferLayout::Axes(axes) => extent(func.axes[axes[k]].length),
            BufferLayout::Flat(len) => len.clone(),
        };
        // A constant inside a constant extent needs no guard.
        if !matches!((new, &extent), (Expr::Int(c), Expr::Int(e)) if *c < *e) {
            guards.push(lt(new.clone(), extent));
        }
    }
    dedup(&mut guards);
    let mut body: Vec<Stmt> = Vec::new();
    match spread {
        Some(lines) => {
            // The lines after the first are inside the axis only while the inner loop
            // runs that far (it may run past the axis: a loop `bound` extended).
            let last_extent = match &func.buffers[buf].layout {
                BufferLayout::Axes(axes) => extent(func.axes[axes[last]].length),
                BufferLayout::Flat(len) => len.clone(),
            };
            for t in 0..lines {
                let mut idx = indices.clone();
                idx[last] = add(idx[last].clone(), Expr::Int(t * per_line));
                let fetch = prefetch_stmt(buf, idx.clone(), l.span);
                let inside =
                    matches!((&idx[last], &last_extent), (Expr::Int(c), Expr::Int(e)) if *c < *e);
                body.push(if t == 0 || inside {
                    fetch
                } else {
                    Stmt::If {
                        cond: lt(idx[last].clone(), last_extent.clone()),
                        then_body: vec![fetch],
                        else_body: Vec::new(),
                        span: l.span,
                    }
                });
            }
        }
        None => body.push(prefetch_stmt(buf, indices, l.span)),
    }
    for g in guards.into_iter().rev() {
        body = vec![Stmt::If {
            cond: g,
            then_body: body,
            else_body: Vec::new(),
            span: l.span,
        }];
    }
    Ok(with_loop(func, target, |f| {
        let mut new_body = body;
        new_body.append(&mut f.body);
        f.body = new_body;
    }))
}

fn prefetch_stmt(buffer: BufferId, indices: Vec<Expr>, span: Span) -> Stmt {
    Stmt::Prefetch {
        buffer,
        indices,
        span,
    }
}

/// Inlines lets and replaces inner loop variables by their starts until neither is
/// left (the loop variable itself is left alone).
fn inline_fixpoint(
    e: &Expr,
    lets: &HashMap<VarId, Expr>,
    inner: &HashMap<VarId, (Expr, Expr)>,
) -> Expr {
    let mut e = e.clone();
    for _ in 0..=lets.len() + inner.len() {
        let mut changed = false;
        e = e.substitute(&mut |v| {
            let r = lets
                .get(&v)
                .cloned()
                .or_else(|| inner.get(&v).map(|(lo, _)| lo.clone()));
            changed |= r.is_some();
            r
        });
        if !changed {
            break;
        }
    }
    e
}

/// Where the first load of the buffer is: its indices, the conditions it runs under,
/// and the inner loops around it (variable, start, end).
struct Site {
    indices: Vec<Expr>,
    conds: Vec<Expr>,
    loops: Vec<(VarId, Expr, Expr)>,
}

fn find_load(
    stmts: &[Stmt],
    buf: BufferId,
    conds: &mut Vec<Expr>,
    loops: &mut Vec<(VarId, Expr, Expr)>,
) -> Option<Site> {
    for s in stmts {
        let hit = match s {
            Stmt::For(f) => {
                loops.push((f.var, f.lo.clone(), f.hi.clone()));
                let r = find_load(&f.body, buf, conds, loops);
                loops.pop();
                r
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } => {
                conds.push(cond.clone());
                let r = find_load(then_body, buf, conds, loops);
                conds.pop();
                r.or_else(|| find_load(else_body, buf, conds, loops))
            }
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                find_load(body, buf, conds, loops)
            }
            Stmt::WarpReduce { value, key, .. } => [value]
                .into_iter()
                .chain(key)
                .find_map(|e| in_expr(e, buf, conds, loops)),
            Stmt::Barrier { .. } | Stmt::Mma(_) => None,
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => {
                in_expr(value, buf, conds, loops)
            }
            Stmt::Store { indices, value, .. } | Stmt::AtomicAdd { indices, value, .. } => indices
                .iter()
                .chain(std::iter::once(value))
                .find_map(|e| in_expr(e, buf, conds, loops)),
            Stmt::Prefetch { .. } => None,
        };
        if hit.is_some() {
            return hit;
        }
    }
    None
}

/// The first load of `buf` in `e`, with the `select` conditions that guard it.
fn in_expr(
    e: &Expr,
    buf: BufferId,
    conds: &mut Vec<Expr>,
    loops: &[(VarId, Expr, Expr)],
) -> Option<Site> {
    match e {
        Expr::Load { buffer, indices } if *buffer == buf => Some(Site {
            indices: indices.clone(),
            conds: conds.clone(),
            loops: loops.to_vec(),
        }),
        Expr::Int(_) | Expr::Float(_) | Expr::Var(_) | Expr::Param(_) => None,
        Expr::Load { indices, .. } => indices.iter().find_map(|x| in_expr(x, buf, conds, loops)),
        Expr::Unary { arg, .. } => in_expr(arg, buf, conds, loops),
        Expr::Binary { lhs, rhs, .. }
        | Expr::Cmp { lhs, rhs, .. }
        | Expr::Logic { lhs, rhs, .. } => {
            in_expr(lhs, buf, conds, loops).or_else(|| in_expr(rhs, buf, conds, loops))
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => in_expr(cond, buf, conds, loops)
            .or_else(|| {
                conds.push((**cond).clone());
                let r = in_expr(then, buf, conds, loops);
                conds.pop();
                r
            })
            .or_else(|| in_expr(otherwise, buf, conds, loops)),
        Expr::Search { lo, hi, value, .. } => in_expr(lo, buf, conds, loops)
            .or_else(|| in_expr(hi, buf, conds, loops))
            .or_else(|| in_expr(value, buf, conds, loops)),
    }
}

/// `offset < length` for every load in `e`, innermost loads first.
fn load_guards(func: &Func, e: &Expr, out: &mut Vec<Expr>) -> Result<(), String> {
    match e {
        Expr::Int(_) | Expr::Float(_) | Expr::Var(_) | Expr::Param(_) => Ok(()),
        Expr::Load { buffer, indices } => {
            for x in indices {
                load_guards(func, x, out)?;
            }
            let b = &func.buffers[*buffer];
            match (&b.layout, indices.as_slice()) {
                (BufferLayout::Flat(len), [offset]) => {
                    out.push(lt(offset.clone(), len.clone()));
                    Ok(())
                }
                _ => Err(format!(
                    "the indices load `{}`, which is not a flat buffer",
                    b.name
                )),
            }
        }
        Expr::Unary { arg, .. } => load_guards(func, arg, out),
        Expr::Binary { lhs, rhs, .. }
        | Expr::Cmp { lhs, rhs, .. }
        | Expr::Logic { lhs, rhs, .. } => {
            load_guards(func, lhs, out)?;
            load_guards(func, rhs, out)
        }
        Expr::Select { .. } | Expr::Search { .. } => Err(
            "the indices contain a conditional or a search, which a prefetch does not repeat"
                .to_string(),
        ),
    }
}

fn dedup(guards: &mut Vec<Expr>) {
    let mut seen: Vec<Expr> = Vec::new();
    guards.retain(|g| {
        if seen.contains(g) {
            false
        } else {
            seen.push(g.clone());
            true
        }
    });
}
