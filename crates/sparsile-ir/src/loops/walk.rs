//! Visiting and rebuilding every statement of a statement list, nested ones included.

use super::expr::Expr;
use super::stmt::Stmt;
use std::collections::HashSet;

use crate::id::{BufferId, VarId};

impl Stmt {
    /// Calls `f` on every statement of `stmts` and of the bodies nested in them (loops,
    /// both branches of conditionals, blocks), parents first, in program order.
    ///
    /// ```
    /// use sparsile_ir::loops::{Func, Stmt};
    /// let f: Func = "flat func f(n) {\n  buffer y: f64[n] output values\n  for i in 0..n {\n    y[i] = 1.0\n  }\n}\n"
    ///     .parse()
    ///     .unwrap();
    /// let mut stores = 0;
    /// Stmt::visit_all(&f.body, &mut |s| stores += matches!(s, Stmt::Store { .. }) as usize);
    /// assert_eq!(stores, 1);
    /// ```
    pub fn visit_all<'s>(stmts: &'s [Stmt], f: &mut impl FnMut(&'s Stmt)) {
        for s in stmts {
            f(s);
            match s {
                Stmt::For(l) => Stmt::visit_all(&l.body, f),
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    Stmt::visit_all(then_body, f);
                    Stmt::visit_all(else_body, f);
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => Stmt::visit_all(body, f),
                Stmt::Let { .. }
                | Stmt::Assign { .. }
                | Stmt::Store { .. }
                | Stmt::AtomicAdd { .. }
                | Stmt::Prefetch { .. }
                | Stmt::Barrier { .. }
                | Stmt::WarpReduce { .. }
                | Stmt::Mma(_) => {}
            }
        }
    }

    /// `stmts` rebuilt with every statement that holds no body (`let`, assignment,
    /// store, atomic add, prefetch, barrier, warp reduction, `mma`) — nested ones included —
    /// replaced by `f`'s answer, or kept when `f` answers `None`. Loops, conditionals,
    /// blocks and launches keep their shape.
    pub fn map_leaves(stmts: &[Stmt], f: &mut impl FnMut(&Stmt) -> Option<Stmt>) -> Vec<Stmt> {
        stmts
            .iter()
            .map(|s| match s {
                Stmt::For(l) => Stmt::For(super::For {
                    body: Stmt::map_leaves(&l.body, f),
                    ..l.clone()
                }),
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    span,
                } => Stmt::If {
                    cond: cond.clone(),
                    then_body: Stmt::map_leaves(then_body, f),
                    else_body: Stmt::map_leaves(else_body, f),
                    span: *span,
                },
                Stmt::Block { name, body, span } => Stmt::Block {
                    name: name.clone(),
                    body: Stmt::map_leaves(body, f),
                    span: *span,
                },
                Stmt::Launch { name, body, span } => Stmt::Launch {
                    name: name.clone(),
                    body: Stmt::map_leaves(body, f),
                    span: *span,
                },
                leaf => f(leaf).unwrap_or_else(|| leaf.clone()),
            })
            .collect()
    }

    /// `stmts` rebuilt with `f`'s answer for every expression they hold — loop bounds,
    /// conditions, values, the indices of stores, atomic adds and prefetches, and the
    /// accumulator's indices, operands and guard of an `mma` —
    /// nested statements included. The statements keep their shape, buffers and spans.
    ///
    /// ```
    /// use sparsile_ir::loops::{Expr, Func, Stmt};
    /// let f: Func = "flat func f(n) {\n  buffer y: f64[n] output values\n  for i in 0..n {\n    y[i] = 1.0\n  }\n}\n"
    ///     .parse()
    ///     .unwrap();
    /// let doubled = Stmt::map_exprs(&f.body, &mut |e| match e {
    ///     Expr::Float(x) => Expr::Float(2.0 * x),
    ///     other => other.clone(),
    /// });
    /// let g = Func { body: doubled, ..f };
    /// assert!(g.to_string().contains("y[i] = 2.0"));
    /// ```
    pub fn map_exprs(stmts: &[Stmt], f: &mut impl FnMut(&Expr) -> Expr) -> Vec<Stmt> {
        stmts
            .iter()
            .map(|s| match s {
                Stmt::For(l) => Stmt::For(super::For {
                    lo: f(&l.lo),
                    hi: f(&l.hi),
                    body: Stmt::map_exprs(&l.body, f),
                    ..l.clone()
                }),
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    span,
                } => Stmt::If {
                    cond: f(cond),
                    then_body: Stmt::map_exprs(then_body, f),
                    else_body: Stmt::map_exprs(else_body, f),
                    span: *span,
                },
                Stmt::Block { name, body, span } => Stmt::Block {
                    name: name.clone(),
                    body: Stmt::map_exprs(body, f),
                    span: *span,
                },
                Stmt::Launch { name, body, span } => Stmt::Launch {
                    name: name.clone(),
                    body: Stmt::map_exprs(body, f),
                    span: *span,
                },
                Stmt::Barrier { scope, span } => Stmt::Barrier {
                    scope: *scope,
                    span: *span,
                },
                Stmt::Mma(m) => Stmt::Mma(m.map_exprs(f)),
                Stmt::WarpReduce {
                    var,
                    op,
                    value,
                    key,
                    lanes,
                    span,
                } => Stmt::WarpReduce {
                    var: *var,
                    op: *op,
                    value: f(value),
                    key: key.as_ref().map(&mut *f),
                    lanes: *lanes,
                    span: *span,
                },
                Stmt::Let { var, value, span } => Stmt::Let {
                    var: *var,
                    value: f(value),
                    span: *span,
                },
                Stmt::Assign { var, value, span } => Stmt::Assign {
                    var: *var,
                    value: f(value),
                    span: *span,
                },
                Stmt::Store {
                    buffer,
                    indices,
                    value,
                    span,
                } => Stmt::Store {
                    buffer: *buffer,
                    indices: indices.iter().map(&mut *f).collect(),
                    value: f(value),
                    span: *span,
                },
                Stmt::AtomicAdd {
                    buffer,
                    indices,
                    value,
                    span,
                } => Stmt::AtomicAdd {
                    buffer: *buffer,
                    indices: indices.iter().map(&mut *f).collect(),
                    value: f(value),
                    span: *span,
                },
                Stmt::Prefetch {
                    buffer,
                    indices,
                    span,
                } => Stmt::Prefetch {
                    buffer: *buffer,
                    indices: indices.iter().map(&mut *f).collect(),
                    span: *span,
                },
            })
            .collect()
    }

    /// The expressions this statement holds itself (not those of the statements nested in
    /// it): a store's indices and value, a prefetch's indices, a `let`'s or assignment's
    /// value, a warp reduction's value and key, a conditional's condition, a loop's bounds,
    /// an `mma`'s accumulator indices, operands and guard.
    pub fn own_exprs(&self) -> Vec<&Expr> {
        match self {
            Stmt::Store { indices, value, .. } | Stmt::AtomicAdd { indices, value, .. } => {
                indices.iter().chain([value]).collect()
            }
            Stmt::Prefetch { indices, .. } => indices.iter().collect(),
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => vec![value],
            Stmt::If { cond, .. } => vec![cond],
            Stmt::For(l) => vec![&l.lo, &l.hi],
            Stmt::WarpReduce { value, key, .. } => [value].into_iter().chain(key).collect(),
            Stmt::Mma(m) => m.exprs(),
            Stmt::Block { .. } | Stmt::Launch { .. } | Stmt::Barrier { .. } => Vec::new(),
        }
    }

    /// The buffers loaded or searched anywhere in `stmts`, nested statements included
    /// (an `mma` reads its accumulator too).
    pub fn loaded_buffers(stmts: &[Stmt]) -> HashSet<BufferId> {
        let mut out = HashSet::new();
        Stmt::visit_all(stmts, &mut |s| {
            if let Stmt::Mma(m) = s {
                out.insert(m.c);
            }
            s.own_exprs()
                .into_iter()
                .for_each(|e| e.loaded_buffers(&mut out))
        });
        out
    }

    /// The buffers stored, atomically added to or accumulated into by an `mma` anywhere
    /// in `stmts`.
    pub fn stored_buffers(stmts: &[Stmt]) -> HashSet<BufferId> {
        let mut out = HashSet::new();
        Stmt::visit_all(stmts, &mut |s| match s {
            Stmt::Store { buffer, .. } | Stmt::AtomicAdd { buffer, .. } => {
                out.insert(*buffer);
            }
            Stmt::Mma(m) => {
                out.insert(m.c);
            }
            _ => {}
        });
        out
    }

    /// The variables declared anywhere in `stmts` (loop variables, `let`s, warp
    /// reductions and the tile variables of `mma`s), in order.
    pub fn declared_vars(stmts: &[Stmt]) -> Vec<VarId> {
        let mut out = Vec::new();
        Stmt::visit_all(stmts, &mut |s| match s {
            Stmt::For(l) => out.push(l.var),
            Stmt::Let { var, .. } | Stmt::WarpReduce { var, .. } => out.push(*var),
            Stmt::Mma(m) => out.extend(m.tile_vars()),
            _ => {}
        });
        out
    }

    /// The locals assigned anywhere in `stmts`, in order (with repeats).
    pub fn assigned_vars(stmts: &[Stmt]) -> Vec<VarId> {
        let mut out = Vec::new();
        Stmt::visit_all(stmts, &mut |s| {
            if let Stmt::Assign { var, .. } = s {
                out.push(*var);
            }
        });
        out
    }
}
