//! Splitting a stage-III body into the phases of the kernel ABI, and what each phase
//! reads from its caller.
//!
//! Phases are the top-level statements of the body once top-level blocks are flattened,
//! in order. A `parallel` loop is a parallel phase (work item `t` runs the body with the
//! loop variable `lo + t`); other statements are serial phases with one work item, and
//! consecutive ones form a single serial phase (the runtime cannot tell the difference,
//! and their locals stay in one C scope). A later phase that uses a top-level `let` of an
//! earlier phase evaluates it again, which is only correct when nothing assigns the
//! local and its value reads no buffer the function writes (otherwise
//! [`CodegenError::SharedLocal`]).
//!
//! A top-level panel loop (serial, constant bounds, at most
//! [`ForKind::MAX_PANEL_ITERATIONS`](sparsile_ir::loops::ForKind::MAX_PANEL_ITERATIONS)
//! iterations) whose body is one `parallel` loop (a panel loop around the rows: `for ko
//! in 0..4 { parallel for i … }`) becomes one parallel phase per iteration, each with
//! the loop variable bound to its value (a top-level `let` the phase evaluates): the
//! iterations run in order, each one's rows in parallel. Any other loop holding a
//! parallel loop is a serial phase (the inner loop then runs serially).
//!
//! ```text
//! block spmv.init { parallel for i in 0..m { y[i] = 0 } }   -> phase 0 (parallel over i)
//! block spmv { parallel for i in 0..m { ... } }             -> phase 1 (parallel over i)
//! let s = 0.0; for i in 0..m { s = s + y[i] }; out[0] = s   -> phase 2 (serial)
//! for ko in 0..2 { parallel for i in 0..m { ... } }         -> phases 3, 4 (ko = 0, 1)
//! ```

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};

use sparsile_ir::loops::{Expr, For, Stmt};
use sparsile_ir::{BufferId, ParamId, VarId};

use super::stmt::assigned_vars;
use crate::CodegenError;

/// One phase of the kernel: a parallel loop, or a run of consecutive other top-level
/// statements (run serially as one work item; merging them keeps their locals shared).
#[derive(Debug)]
pub(crate) struct Phase<'f> {
    /// The statements, each with the innermost top-level block around it.
    pub(crate) stmts: Vec<(&'f Stmt, Option<&'f str>)>,
    /// How many top-level `let`s come before the phase.
    pub(crate) lets_before: usize,
}

impl<'f> Phase<'f> {
    /// The loop of a parallel phase.
    pub(crate) fn parallel_loop(&self) -> Option<&'f For> {
        match self.stmts.as_slice() {
            [(Stmt::For(f), _)] if f.kind.is_parallel() => Some(f),
            _ => None,
        }
    }

    /// The block of the phase's first statement.
    pub(crate) fn block(&self) -> Option<&'f str> {
        self.stmts.first().and_then(|(_, b)| *b)
    }
}

/// When `s` is a panel loop ([`For::is_panel_loop`]) whose whole body is one parallel
/// loop (blocks holding only it looked through): the panel loop, the parallel loop and
/// the innermost block around it.
fn panel_phases<'f>(
    s: &'f Stmt,
    block: Option<&'f str>,
) -> Option<(&'f For, &'f Stmt, Option<&'f str>)> {
    fn sole_parallel_loop<'f>(
        stmts: &'f [Stmt],
        block: Option<&'f str>,
    ) -> Option<(&'f Stmt, Option<&'f str>)> {
        match stmts {
            [s @ Stmt::For(f)] if f.kind.is_parallel() => Some((s, block)),
            [Stmt::Block { name, body, .. }] => sole_parallel_loop(body, Some(name)),
            _ => None,
        }
    }
    let Stmt::For(f) = s else { return None };
    if !f.is_panel_loop() {
        return None;
    }
    sole_parallel_loop(&f.body, block).map(|(inner, inner_block)| (f, inner, inner_block))
}

/// The phases of `body` and its top-level `let`s (each a `Stmt::Let`; the bindings of
/// unrolled loop variables are made here, the others borrowed).
pub(crate) fn split(body: &[Stmt]) -> (Vec<Phase<'_>>, Vec<Cow<'_, Stmt>>) {
    fn walk<'f>(
        stmts: &'f [Stmt],
        block: Option<&'f str>,
        phases: &mut Vec<Phase<'f>>,
        lets: &mut Vec<Cow<'f, Stmt>>,
    ) {
        for s in stmts {
            if let Some((f, inner, inner_block)) = panel_phases(s, block) {
                let Expr::Int(lo) = f.lo else {
                    unreachable!("a panel loop has constant bounds")
                };
                let Expr::Int(hi) = f.hi else {
                    unreachable!("a panel loop has constant bounds")
                };
                for c in lo..hi {
                    lets.push(Cow::Owned(Stmt::Let {
                        var: f.var,
                        value: Expr::Int(c),
                        span: f.span,
                    }));
                    phases.push(Phase {
                        stmts: vec![(inner, inner_block)],
                        lets_before: lets.len(),
                    });
                }
                continue;
            }
            match s {
                Stmt::Block { name, body, .. } => walk(body, Some(name), phases, lets),
                Stmt::For(f) if f.kind.is_parallel() => phases.push(Phase {
                    stmts: vec![(s, block)],
                    lets_before: lets.len(),
                }),
                _ => {
                    let serial_open = phases.last().is_some_and(|p| p.parallel_loop().is_none());
                    if !serial_open {
                        phases.push(Phase {
                            stmts: Vec::new(),
                            lets_before: lets.len(),
                        });
                    }
                    phases
                        .last_mut()
                        .expect("pushed above")
                        .stmts
                        .push((s, block));
                    if let Stmt::Let { .. } = s {
                        lets.push(Cow::Borrowed(s));
                    }
                }
            }
        }
    }
    let mut phases = Vec::new();
    let mut lets = Vec::new();
    walk(body, None, &mut phases, &mut lets);
    // A phase of `let`s alone does nothing: later phases evaluate what they need.
    phases.retain(|p| !p.stmts.iter().all(|(s, _)| matches!(s, Stmt::Let { .. })));
    (phases, lets)
}

/// The params, buffers and locals some code refers to.
#[derive(Debug, Default, Clone)]
pub(crate) struct Uses {
    pub(crate) params: BTreeSet<ParamId>,
    pub(crate) buffers: BTreeSet<BufferId>,
    pub(crate) vars: BTreeSet<VarId>,
    /// The locals read by an expression (a subset of `vars`).
    pub(crate) read_vars: HashSet<VarId>,
    /// When set, `let`s and assignments of locals outside it are dead and skipped.
    live: Option<HashSet<VarId>>,
}

/// What the live code of `stmts` and `exprs` uses: `let`s and assignments of locals that
/// nothing live reads are dead (expressions have no side effects) and do not count, so
/// that a dead `let j = A_indices[jp]` binds neither `j` nor `A_indices`.
pub(crate) fn live_uses(stmts: &[&Stmt], exprs: &[&Expr]) -> Uses {
    let mut live: Option<HashSet<VarId>> = None;
    loop {
        let mut uses = Uses {
            live: live.clone(),
            ..Uses::default()
        };
        exprs.iter().for_each(|e| uses.expr(e));
        stmts.iter().for_each(|s| uses.stmt(s));
        // Each round drops locals read only by dead code: the set shrinks to a fixpoint.
        if live.as_ref() == Some(&uses.read_vars) {
            uses.live = None;
            return uses;
        }
        live = Some(uses.read_vars.clone());
    }
}

impl Uses {
    pub(crate) fn expr(&mut self, e: &Expr) {
        e.visit(&mut |e| match e {
            Expr::Param(p) => {
                self.params.insert(*p);
            }
            Expr::Var(v) => {
                self.vars.insert(*v);
                self.read_vars.insert(*v);
            }
            Expr::Load { buffer, .. } | Expr::Search { buffer, .. } => {
                self.buffers.insert(*buffer);
            }
            _ => {}
        });
    }

    pub(crate) fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    pub(crate) fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::For(f) => {
                self.vars.insert(f.var);
                self.expr(&f.lo);
                self.expr(&f.hi);
                self.stmts(&f.body);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } => {
                self.expr(cond);
                self.stmts(then_body);
                self.stmts(else_body);
            }
            Stmt::Let { var, .. } | Stmt::Assign { var, .. }
                if self.live.as_ref().is_some_and(|l| !l.contains(var)) => {}
            Stmt::Let { var, value, .. } | Stmt::Assign { var, value, .. } => {
                self.vars.insert(*var);
                self.expr(value);
            }
            Stmt::Store {
                buffer,
                indices,
                value,
                ..
            }
            | Stmt::AtomicAdd {
                buffer,
                indices,
                value,
                ..
            } => {
                self.buffers.insert(*buffer);
                indices.iter().for_each(|i| self.expr(i));
                self.expr(value);
            }
            Stmt::Prefetch {
                buffer, indices, ..
            } => {
                self.buffers.insert(*buffer);
                indices.iter().for_each(|i| self.expr(i));
            }
            Stmt::WarpReduce { var, .. }
                if self.live.as_ref().is_some_and(|l| !l.contains(var)) => {}
            Stmt::WarpReduce {
                var, value, key, ..
            } => {
                self.vars.insert(*var);
                self.expr(value);
                key.iter().for_each(|k| self.expr(k));
            }
            Stmt::Mma(m) => {
                self.buffers.insert(m.c);
                self.vars.extend(m.tile_vars());
                m.exprs().into_iter().for_each(|e| self.expr(e));
            }
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => self.stmts(body),
            Stmt::Barrier { .. } => {}
        }
    }
}

/// The top-level `let`s among `lets` that `uses` needs (directly or through other
/// `let`s), in order; adds what their values use to `uses`.
pub(crate) fn needed_lets<'f>(
    body: &[Stmt],
    lets: &[&'f Stmt],
    uses: &mut Uses,
    var_name: impl Fn(VarId) -> String,
) -> Result<Vec<&'f Stmt>, CodegenError> {
    let assigned = assigned_vars(body);
    let stored = Stmt::stored_buffers(body);
    let mut needed = Vec::new();
    // The latest binding of a local is the one in force (an unrolled loop variable has
    // one per iteration before the phase).
    let mut bound: HashSet<VarId> = HashSet::new();
    for s in lets.iter().rev() {
        let Stmt::Let { var, value, span } = s else {
            continue;
        };
        if !uses.read_vars.contains(var) || !bound.insert(*var) {
            continue;
        }
        let mut value_uses = Uses::default();
        value_uses.expr(value);
        let reason = if assigned.contains(var) {
            Some("it is assigned")
        } else if value_uses.buffers.iter().any(|b| stored.contains(b)) {
            Some("its value reads a buffer the function writes")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(CodegenError::SharedLocal {
                var: var_name(*var),
                reason,
                span: *span,
            });
        }
        uses.expr(value);
        needed.push(*s);
    }
    needed.reverse();
    Ok(needed)
}
