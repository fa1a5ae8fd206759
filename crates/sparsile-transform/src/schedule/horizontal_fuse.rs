//! `horizontal_fuse` (stage II): runs several blocks as one loop over a heterogeneous
//! task list.
//!
//! Each block is a top-level block made of one loop `for v_b in lo_b..hi_b { body_b }`.
//! The blocks are replaced by one block `{first}_hf` with one loop over the
//! concatenated task ranges, `for t in 0..n_0 + n_1 + …` (`n_b` the trip count of
//! block `b`'s loop), whose body dispatches on the task number to the body of the block
//! it belongs to, with `v_b = lo_b + (t - n_0 - … - n_{b-1})`. The decomposition parts
//! of `decompose_format` are the typical input: one launch for every part.
//!
//! Preconditions (each its own [`ScheduleError`]):
//! - at least two blocks, none named twice ([`ScheduleError::BadBlockList`]);
//! - each block exists at the top level of the function and its body is one serial or
//!   parallel loop ([`ScheduleError::UnknownBlock`], [`ScheduleError::NotASingleLoopBlock`]);
//! - the blocks are consecutive top-level statements, in the given order
//!   ([`ScheduleError::BlocksNotAdjacent`]);
//! - interleaving the blocks cannot change the result: a buffer one block writes is
//!   neither read nor written by another, except when every store to it in both is an
//!   accumulation `X[idx] = X[idx] + e` (`e` not reading `X`) and `X` is read nowhere
//!   else ([`ScheduleError::BlocksDependent`]). Loop bounds count as reads.
//!
//! Postcondition: the fused loop is serial (whether its tasks may run in parallel is
//! `parallel`'s question: mark it with [`super::parallel()`], which checks it). The
//! result is returned as a [`LoopRef`].
//!
//! Example (`tests/schedule/horizontal_fuse/spmm_hyb.before.pos` → `.after.pos`):
//! ```text
//! block C_p0 { for i in 0..r0 { B0 } }          block C_p0_hf {
//! block C_p1 { for i2 in 0..r1 { B1 } }   →       for hf_t in 0..r0 + r1 {
//!                                                   if hf_t < r0 { let i: idx = hf_t  B0 }
//!                                                   else { let i2: idx = hf_t - r0  B1 } } }
//! ```

use std::collections::HashSet;

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::id::BufferId;
use sparsile_ir::loops::{update_addend, CmpOp, Expr, For, ForKind, Func, Stmt};
use sparsile_ir::Span;

use super::loop_ref::fresh_index_var;
use super::{LoopRef, ScheduleError};

const PRIMITIVE: &str = "horizontal_fuse";

/// Fuses the top-level blocks `blocks` (see the module docs); returns the new loop.
pub fn horizontal_fuse(func: &Func, blocks: &[String]) -> Result<(Func, LoopRef), ScheduleError> {
    if blocks.len() < 2 {
        return Err(ScheduleError::BadBlockList {
            what: format!("needs at least two blocks, found {}", blocks.len()),
        });
    }
    for (k, b) in blocks.iter().enumerate() {
        if blocks[..k].contains(b) {
            return Err(ScheduleError::BadBlockList {
                what: format!("block `{b}` is named twice"),
            });
        }
    }
    let mut at: Vec<usize> = Vec::with_capacity(blocks.len());
    for name in blocks {
        let index = func
            .body
            .iter()
            .position(|s| matches!(s, Stmt::Block { name: n, .. } if n == name))
            .ok_or_else(|| ScheduleError::UnknownBlock {
                primitive: PRIMITIVE,
                block: name.clone(),
            })?;
        at.push(index);
    }
    let mut loops: Vec<&For> = Vec::with_capacity(blocks.len());
    let mut spans: Vec<Span> = Vec::with_capacity(blocks.len());
    for (&index, name) in at.iter().zip(blocks) {
        let Stmt::Block { body, span, .. } = &func.body[index] else {
            unreachable!("found as a block")
        };
        let not_single = |what: &str| ScheduleError::NotASingleLoopBlock {
            block: name.clone(),
            what: what.to_string(),
            span: *span,
        };
        let [Stmt::For(f)] = body.as_slice() else {
            return Err(not_single("is not made of exactly one loop"));
        };
        if !matches!(f.kind, ForKind::Serial | ForKind::Parallel) {
            return Err(not_single("has a loop that is neither serial nor parallel"));
        }
        loops.push(f);
        spans.push(*span);
    }
    for k in 1..at.len() {
        if at[k] != at[k - 1] + 1 {
            return Err(ScheduleError::BlocksNotAdjacent {
                previous: blocks[k - 1].clone(),
                block: blocks[k].clone(),
            });
        }
    }
    let uses: Vec<Uses> = loops.iter().map(|f| Uses::of(f)).collect();
    for (a, ua) in uses.iter().enumerate() {
        for (b, ub) in uses.iter().enumerate() {
            if a == b {
                continue;
            }
            for &x in &ua.written {
                let name = || func.buffers[x].name.clone();
                let dependent = |what| ScheduleError::BlocksDependent {
                    block: blocks[b].clone(),
                    other: blocks[a].clone(),
                    buffer: name(),
                    what,
                };
                if ub.read.contains(&x) {
                    return Err(dependent("reads"));
                }
                if ub.written.contains(&x)
                    && (!ua.accumulated_only.contains(&x) || !ub.accumulated_only.contains(&x))
                {
                    return Err(dependent("writes"));
                }
            }
        }
    }

    let mut out = func.clone();
    let (t, t_name) = fresh_index_var(&mut out, "hf_t");
    // Trip counts, and the first task of every block.
    let counts: Vec<Expr> = loops.iter().map(|f| trip_count(f)).collect();
    let mut starts: Vec<Expr> = vec![Expr::Int(0)];
    for c in &counts {
        let last = starts.last().expect("non-empty").clone();
        starts.push(add(last, c.clone()));
    }
    let mut dispatch: Vec<Stmt> = Vec::new();
    for k in (0..loops.len()).rev() {
        let f = loops[k];
        let offset = sub(Expr::Var(t), starts[k].clone());
        let mut body = vec![Stmt::Let {
            var: f.var,
            value: add(f.lo.clone(), offset),
            span: f.span,
        }];
        body.extend(f.body.iter().cloned());
        dispatch = if k + 1 == loops.len() {
            body
        } else {
            vec![Stmt::If {
                cond: Expr::cmp(CmpOp::Lt, Expr::Var(t), starts[k + 1].clone()),
                then_body: body,
                else_body: dispatch,
                span: f.span,
            }]
        };
    }
    let name = fresh_block_name(func, &format!("{}_hf", blocks[0]));
    let fused = Stmt::Block {
        name: name.clone(),
        body: vec![Stmt::For(For {
            var: t,
            lo: Expr::Int(0),
            hi: starts.last().expect("non-empty").clone(),
            kind: ForKind::Serial,
            body: dispatch,
            span: spans[0],
        })],
        span: spans[0],
    };
    let first = at[0];
    out.body.splice(first..first + at.len(), [fused]);
    Ok((
        out,
        LoopRef {
            block: name,
            var: t_name,
        },
    ))
}

/// `hi - lo`, or `max(hi - lo, 0)` when `lo` is not the constant 0 (a loop with
/// `hi <= lo` runs nothing).
fn trip_count(f: &For) -> Expr {
    if f.lo == Expr::Int(0) {
        f.hi.clone()
    } else {
        Expr::binary(
            BinaryOp::Max,
            Expr::binary(BinaryOp::Sub, f.hi.clone(), f.lo.clone()),
            Expr::Int(0),
        )
    }
}

fn add(a: Expr, b: Expr) -> Expr {
    match (&a, &b) {
        (Expr::Int(0), _) => b,
        (_, Expr::Int(0)) => a,
        _ => Expr::binary(BinaryOp::Add, a, b),
    }
}

fn sub(a: Expr, b: Expr) -> Expr {
    match &b {
        Expr::Int(0) => a,
        _ => Expr::binary(BinaryOp::Sub, a, b),
    }
}

fn fresh_block_name(func: &Func, base: &str) -> String {
    let mut names = HashSet::new();
    collect_block_names(&func.body, &mut names);
    let mut name = base.to_string();
    let mut k = 2;
    while names.contains(&name) {
        name = format!("{base}{k}");
        k += 1;
    }
    name
}

fn collect_block_names(stmts: &[Stmt], names: &mut HashSet<String>) {
    for s in stmts {
        match s {
            Stmt::Block { name, body, .. } => {
                names.insert(name.clone());
                collect_block_names(body, names);
            }
            Stmt::For(f) => collect_block_names(&f.body, names),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                collect_block_names(then_body, names);
                collect_block_names(else_body, names);
            }
            _ => {}
        }
    }
}

/// The buffers one block's loop reads and writes.
#[derive(Default)]
struct Uses {
    /// Read other than as the accumulator of an accumulating store (bounds included).
    read: HashSet<BufferId>,
    written: HashSet<BufferId>,
    /// Written only by accumulating stores.
    accumulated_only: HashSet<BufferId>,
}

impl Uses {
    fn of(f: &For) -> Uses {
        let mut u = Uses::default();
        let mut plain_writes = HashSet::new();
        u.expr(&f.lo);
        u.expr(&f.hi);
        u.stmts(&f.body, &mut plain_writes);
        u.accumulated_only = u.written.difference(&plain_writes).copied().collect();
        u
    }

    fn expr(&mut self, e: &Expr) {
        visit(e, &mut |x| {
            if let Expr::Load { buffer, .. } | Expr::Search { buffer, .. } = x {
                self.read.insert(*buffer);
            }
        });
    }

    fn stmts(&mut self, stmts: &[Stmt], plain_writes: &mut HashSet<BufferId>) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    self.expr(&f.lo);
                    self.expr(&f.hi);
                    self.stmts(&f.body, plain_writes);
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    ..
                } => {
                    self.expr(cond);
                    self.stmts(then_body, plain_writes);
                    self.stmts(else_body, plain_writes);
                }
                Stmt::Let { value, .. } | Stmt::Assign { value, .. } => self.expr(value),
                Stmt::WarpReduce { value, key, .. } => {
                    self.expr(value);
                    key.iter().for_each(|k| self.expr(k));
                }
                Stmt::Barrier { .. } => {}
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                    self.stmts(body, plain_writes)
                }
                Stmt::Store {
                    buffer,
                    indices,
                    value,
                    ..
                } => {
                    self.written.insert(*buffer);
                    indices.iter().for_each(|i| self.expr(i));
                    match update_addend(*buffer, indices, value) {
                        Some(rest) => self.expr(rest),
                        None => {
                            plain_writes.insert(*buffer);
                            self.expr(value);
                        }
                    }
                }
                // An atomic add accumulates by construction.
                Stmt::AtomicAdd {
                    buffer,
                    indices,
                    value,
                    ..
                } => {
                    self.written.insert(*buffer);
                    indices.iter().for_each(|i| self.expr(i));
                    self.expr(value);
                }
                Stmt::Prefetch { indices, .. } => indices.iter().for_each(|i| self.expr(i)),
                // The tile's update is not one `X[e] = X[e] + v` the fusion can see.
                Stmt::Mma(m) => {
                    self.written.insert(m.c);
                    plain_writes.insert(m.c);
                    m.exprs().into_iter().for_each(|e| self.expr(e));
                }
            }
        }
    }
}

/// Calls `f` on `e` and every sub-expression.
fn visit(e: &Expr, f: &mut impl FnMut(&Expr)) {
    f(e);
    match e {
        Expr::Int(_) | Expr::Float(_) | Expr::Var(_) | Expr::Param(_) => {}
        Expr::Load { indices, .. } => indices.iter().for_each(|i| visit(i, f)),
        Expr::Unary { arg, .. } => visit(arg, f),
        Expr::Binary { lhs, rhs, .. }
        | Expr::Cmp { lhs, rhs, .. }
        | Expr::Logic { lhs, rhs, .. } => {
            visit(lhs, f);
            visit(rhs, f);
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            visit(cond, f);
            visit(then, f);
            visit(otherwise, f);
        }
        Expr::Search { lo, hi, value, .. } => {
            visit(lo, f);
            visit(hi, f);
            visit(value, f);
        }
    }
}
