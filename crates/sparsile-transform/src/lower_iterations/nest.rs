//! Sparse iterations → blocks of position loops, with coordinate recovery.
//!
//! One loop per iteration axis, over the positions stored under the parent's current
//! position (decided by the axis kind and parent, never by a format name):
//! - `dense_fixed`: `0..length`; the coordinate is the position;
//! - `dense_variable` / `sparse_variable` under parent position `p`:
//!   `indptr[p]..indptr[p + 1]`;
//! - `sparse_fixed` with `k` per parent under `p`: `p * k..p * k + k`; parentless:
//!   `0..npos`.
//!
//! Sparse axes recover the coordinate with `let j = indices[j_p]`; `dense_variable` axes
//! with `let j = j_p - indptr[p]`.

use sparsile_ir::coord::{self, IterAxis, IterKind, SparseIteration};
use sparsile_ir::loops::{Expr, For, ForKind, Stmt, VarType};
use sparsile_ir::{AxisKind, Span};

use super::{BoundVar, Lowerer};
use crate::index_expr::{add, extent, mul, npos, sub};
use crate::LowerError;

/// A top-level statement that is not a loop (the lowering of a store outside any
/// iteration, or of an iteration without spatial axes) is wrapped in `if 1 { ... }`, so
/// that each top-level statement is self-contained (its locals do not leak into the next
/// one, and it runs as one serial phase).
pub fn phase_safe(stmt: Stmt) -> Stmt {
    match stmt {
        Stmt::Block { name, body, span } => {
            if body.len() == 1 && matches!(body[0], Stmt::For(_)) {
                Stmt::Block { name, body, span }
            } else {
                Stmt::Block {
                    name,
                    body: vec![once(body, span)],
                    span,
                }
            }
        }
        other => phase_unit(vec![other]),
    }
}

/// The statements as one self-contained top-level statement: a single loop or `if` as
/// it is, anything else inside `if 1 { ... }`.
pub fn phase_unit(mut stmts: Vec<Stmt>) -> Stmt {
    if stmts.len() == 1 && matches!(stmts[0], Stmt::For(_) | Stmt::If { .. }) {
        return stmts.pop().expect("one statement");
    }
    let span = stmts.first().map(Stmt::span).unwrap_or_default();
    once(stmts, span)
}

fn once(body: Vec<Stmt>, span: Span) -> Stmt {
    Stmt::If {
        cond: Expr::Int(1),
        then_body: body,
        else_body: Vec::new(),
        span,
    }
}

impl Lowerer<'_> {
    /// `block <name>.init` (when there are init statements) then `block <name>`.
    pub fn iteration(&mut self, it: &SparseIteration) -> Result<Vec<Stmt>, LowerError> {
        let mut out = Vec::new();
        if !it.init.is_empty() {
            let spatial: Vec<IterAxis> = it
                .axes
                .iter()
                .filter(|a| a.kind == IterKind::Spatial)
                .cloned()
                .collect();
            let body = self.nest(it, &spatial, &it.init, false)?;
            out.push(Stmt::Block {
                name: format!("{}.init", it.name),
                body,
                span: it.span,
            });
        }
        let body = self.nest(it, &it.axes, &it.body, true)?;
        out.push(Stmt::Block {
            name: it.name.clone(),
            body,
            span: it.span,
        });
        Ok(out)
    }

    /// The statements `stmts` at every point of `axes`. With `fusion`, `axes` is a
    /// suffix of the iteration's axes and its fused groups are lowered by
    /// [`Lowerer::fused_group`]; without, every axis gets its own loop (the `init` nest).
    pub(super) fn nest(
        &mut self,
        it: &SparseIteration,
        axes: &[IterAxis],
        stmts: &[coord::Stmt],
        fusion: bool,
    ) -> Result<Vec<Stmt>, LowerError> {
        let Some((ia, rest)) = axes.split_first() else {
            return self.stmts(stmts);
        };
        if fusion {
            let offset = it.axes.len() - axes.len();
            if let Some(&(start, end)) = it.fused.iter().find(|g| g.0 == offset) {
                return self.fused_group(it, &axes[..end - start], &axes[end - start..], stmts);
            }
        }
        let program = self.program;
        let decl = &program.axes[ia.axis];
        let parent_pos = match decl.parent {
            Some(p) => Some(
                self.axis_pos[p].ok_or_else(|| LowerError::ParentNotIterated {
                    iteration: it.name.clone(),
                    axis: decl.name.clone(),
                    parent: program.axes[p].name.clone(),
                    span: it.span,
                })?,
            ),
            None => None,
        };
        let aux = self.aux[ia.axis];
        let missing = (decl.kind.is_variable() && aux.indptr.is_none())
            || (decl.kind.is_sparse() && aux.indices.is_none());
        if missing {
            return Err(LowerError::AxisWithoutBuffer {
                iteration: it.name.clone(),
                axis: decl.name.clone(),
                span: it.span,
            });
        }
        let pp = parent_pos.map(Expr::Var);
        let indptr_at = |e: Expr| Expr::load(aux.indptr.expect("checked above"), vec![e]);
        let (lo, hi) = match (decl.kind, &pp) {
            (AxisKind::DenseFixed, _) => (Expr::Int(0), extent(decl.length)),
            (AxisKind::DenseVariable | AxisKind::SparseVariable, Some(p)) => (
                indptr_at(p.clone()),
                indptr_at(add(p.clone(), Expr::Int(1))),
            ),
            (AxisKind::SparseFixed, Some(p)) => {
                let k = extent(decl.nnz_per_parent.expect("verified"));
                let lo = mul(p.clone(), k.clone());
                (lo.clone(), add(lo, k))
            }
            (_, None) => (Expr::Int(0), npos(&program.axes, ia.axis)),
        };
        let var_name = program.vars[ia.var].name.clone();
        let mut body = Vec::new();
        let (pos, crd) = if decl.kind == AxisKind::DenseFixed {
            let pos = self.fresh_var(&var_name, VarType::Index);
            (pos, Expr::Var(pos))
        } else {
            let pos = self.fresh_var(&format!("{var_name}_p"), VarType::Index);
            let c = self.fresh_var(&var_name, VarType::Index);
            let value = match decl.kind {
                AxisKind::DenseVariable => sub(
                    Expr::Var(pos),
                    indptr_at(pp.clone().expect("verified: variable axes have a parent")),
                ),
                _ => Expr::load(aux.indices.expect("checked above"), vec![Expr::Var(pos)]),
            };
            body.push(Stmt::Let {
                var: c,
                value,
                span: it.span,
            });
            (pos, Expr::Var(c))
        };
        let saved_var = self.vars[ia.var].replace(BoundVar {
            axis: ia.axis,
            pos,
            parent_pos,
            crd,
        });
        let saved_pos = self.axis_pos[ia.axis].replace(pos);
        let inner = self.nest(it, rest, stmts, fusion);
        self.vars[ia.var] = saved_var;
        self.axis_pos[ia.axis] = saved_pos;
        body.extend(inner?);
        Ok(vec![Stmt::For(For {
            var: pos,
            lo,
            hi,
            kind: ForKind::Serial,
            body,
            span: it.span,
        })])
    }
}
