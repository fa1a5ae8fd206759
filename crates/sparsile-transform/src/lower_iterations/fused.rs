//! Fused groups of axes (`fuse(I, J)`, made by
//! [`sparse_fuse`](crate::schedule::sparse_fuse())) → one position loop with position
//! recovery.
//!
//! For a group `A_0, ..., A_n` (each the parent of the next) the loop runs over the
//! positions of the leaf `A_n` stored under the position of `A_0`'s parent: the range of
//! `A_0` (as in [`super::nest`]) mapped down one level at a time by `start(p)`, the first
//! position under parent position `p` (`indptr[p]` for variable axes, `p * k` for
//! `sparse_fixed` axes with `k` per parent), so `lo_{k} = start(lo_{k-1})` and
//! `hi_{k} = start(hi_{k-1})`.
//!
//! Inside, the position of each `A_{k-1}` is recovered from that of `A_k`, from the leaf
//! up: `p / k` under a `sparse_fixed` axis (`p` itself when `k` is 1); under a variable
//! axis, the largest `r` in `lo_{k-1}..hi_{k-1}` with `indptr[r] <= p` (so empty rows are
//! skipped), found by a binary search written with the loop IR's own constructs: `let`
//! bounds, then `for t in 0..64 { if l < h { mid = (l + h + 1) / 2; if indptr[mid] <= p
//! { l = mid } else { h = mid - 1 } } }` (64 halvings cover every range an `i64`
//! position can span; finished searches skip the body). Nothing is precomputed outside
//! the kernel. Coordinates are then recovered as in [`super::nest`].
//!
//! The points are visited in the same order as by the unfused loops (positions are
//! increasing along each level), so the results are identical.
//!
//! Example (SDDMM over CSR, `tests/schedule/sparse_fuse/sddmm_csr.pos`):
//! ```text
//! for j_p_2 in A_J_indptr[0]..A_J_indptr[m] {
//!   let i_p: idx = 0
//!   let i_h: idx = m - 1
//!   for i_t in 0..64 { if i_p < i_h { ... } }
//!   let j_2: idx = A_J_indices[j_p_2]
//!   for k in 0..w { ... C[i_p, j_p_2] ... }
//! }
//! ```

use sparsile_ir::coord::{self, BinaryOp, IterAxis, SparseIteration};
use sparsile_ir::loops::{CmpOp, Expr, For, ForKind, Stmt, VarType};
use sparsile_ir::{AxisKind, VarId};

use super::{BoundVar, Lowerer};
use crate::index_expr::{add, extent, mul, npos, sub};
use crate::LowerError;

/// Halvings of the recovery search: enough for any range of `i64` positions.
const SEARCH_STEPS: i64 = 64;

impl Lowerer<'_> {
    /// One loop over the positions of the last axis of `group`, then `rest` inside.
    pub(super) fn fused_group(
        &mut self,
        it: &SparseIteration,
        group: &[IterAxis],
        rest: &[IterAxis],
        stmts: &[coord::Stmt],
    ) -> Result<Vec<Stmt>, LowerError> {
        let program = self.program;
        let span = it.span;
        let root = &program.axes[group[0].axis];
        let root_parent = match root.parent {
            Some(p) => Some(
                self.axis_pos[p].ok_or_else(|| LowerError::ParentNotIterated {
                    iteration: it.name.clone(),
                    axis: root.name.clone(),
                    parent: program.axes[p].name.clone(),
                    span,
                })?,
            ),
            None => None,
        };
        for ia in group {
            let decl = &program.axes[ia.axis];
            let aux = self.aux[ia.axis];
            if (decl.kind.is_variable() && aux.indptr.is_none())
                || (decl.kind.is_sparse() && aux.indices.is_none())
            {
                return Err(LowerError::AxisWithoutBuffer {
                    iteration: it.name.clone(),
                    axis: decl.name.clone(),
                    span,
                });
            }
        }
        // The position range of every level of the group.
        let mut ranges: Vec<(Expr, Expr)> = Vec::with_capacity(group.len());
        ranges.push(self.range(group[0].axis, root_parent.map(Expr::Var)));
        for ia in &group[1..] {
            let (lo, hi) = ranges.last().expect("the root's range").clone();
            ranges.push((self.start(ia.axis, lo), self.start(ia.axis, hi)));
        }
        let leaf = group.last().expect("a group has two axes or more");
        let leaf_name = program.vars[leaf.var].name.clone();
        let leaf_pos = self.fresh_var(&format!("{leaf_name}_p"), VarType::Index);
        let mut body = Vec::new();
        // Positions, from the leaf up.
        let mut positions: Vec<VarId> = vec![leaf_pos];
        for k in (1..group.len()).rev() {
            let child = group[k].axis;
            let child_pos = *positions.last().expect("the leaf position");
            let name = &program.vars[group[k - 1].var].name;
            let parent_pos = self.recover_parent(
                child,
                child_pos,
                ranges[k - 1].clone(),
                name,
                span,
                &mut body,
            );
            positions.push(parent_pos);
        }
        positions.reverse();
        // Coordinates, from the root down.
        let mut saved = Vec::with_capacity(group.len());
        for (k, ia) in group.iter().enumerate() {
            let decl = &program.axes[ia.axis];
            let pos = positions[k];
            let parent_pos = if k == 0 {
                root_parent
            } else {
                Some(positions[k - 1])
            };
            let crd = if decl.kind == AxisKind::DenseFixed {
                Expr::Var(pos)
            } else {
                let aux = self.aux[ia.axis];
                let value = match decl.kind {
                    AxisKind::DenseVariable => sub(
                        Expr::Var(pos),
                        Expr::load(
                            aux.indptr.expect("checked above"),
                            vec![Expr::Var(parent_pos.expect("variable axes have a parent"))],
                        ),
                    ),
                    _ => Expr::load(aux.indices.expect("checked above"), vec![Expr::Var(pos)]),
                };
                let c = self.fresh_var(&program.vars[ia.var].name, VarType::Index);
                body.push(Stmt::Let {
                    var: c,
                    value,
                    span,
                });
                Expr::Var(c)
            };
            let sv = self.vars[ia.var].replace(BoundVar {
                axis: ia.axis,
                pos,
                parent_pos,
                crd,
            });
            let sp = self.axis_pos[ia.axis].replace(pos);
            saved.push((ia.var, ia.axis, sv, sp));
        }
        let inner = self.nest(it, rest, stmts, true);
        for (var, axis, sv, sp) in saved.into_iter().rev() {
            self.vars[var] = sv;
            self.axis_pos[axis] = sp;
        }
        body.extend(inner?);
        let (lo, hi) = ranges.pop().expect("the leaf's range");
        Ok(vec![Stmt::For(For {
            var: leaf_pos,
            lo,
            hi,
            kind: ForKind::Serial,
            body,
            span,
        })])
    }

    /// The positions of `axis` under parent position `parent` (all of them without one).
    fn range(&self, axis: sparsile_ir::AxisId, parent: Option<Expr>) -> (Expr, Expr) {
        let decl = &self.program.axes[axis];
        match (decl.kind, parent) {
            (AxisKind::DenseFixed, _) => (Expr::Int(0), extent(decl.length)),
            (_, Some(p)) => (
                self.start(axis, p.clone()),
                self.start(axis, add(p, Expr::Int(1))),
            ),
            (_, None) => (Expr::Int(0), npos(&self.program.axes, axis)),
        }
    }

    /// The first position of `axis` under parent position `p`.
    fn start(&self, axis: sparsile_ir::AxisId, p: Expr) -> Expr {
        let decl = &self.program.axes[axis];
        match decl.kind {
            AxisKind::SparseFixed => mul(p, extent(decl.nnz_per_parent.expect("verified"))),
            _ => Expr::load(
                self.aux[axis].indptr.expect("variable axes have an indptr"),
                vec![p],
            ),
        }
    }

    /// Statements (appended to `out`) computing the parent position of position
    /// `child_pos` of `child`, the parent's positions being `range`; returns its variable.
    fn recover_parent(
        &mut self,
        child: sparsile_ir::AxisId,
        child_pos: VarId,
        range: (Expr, Expr),
        name: &str,
        span: sparsile_ir::Span,
        out: &mut Vec<Stmt>,
    ) -> VarId {
        let decl = &self.program.axes[child];
        if decl.kind == AxisKind::SparseFixed {
            let k = extent(decl.nnz_per_parent.expect("verified"));
            if k == Expr::Int(1) {
                // One position per parent position (COO): the same position.
                return child_pos;
            }
            let v = self.fresh_var(&format!("{name}_p"), VarType::Index);
            out.push(Stmt::Let {
                var: v,
                value: Expr::binary(BinaryOp::Div, Expr::Var(child_pos), k),
                span,
            });
            return v;
        }
        let indptr = self.aux[child]
            .indptr
            .expect("variable axes have an indptr");
        let (lo, hi) = range;
        let l = self.fresh_var(&format!("{name}_p"), VarType::Index);
        let h = self.fresh_var(&format!("{name}_h"), VarType::Index);
        let t = self.fresh_var(&format!("{name}_t"), VarType::Index);
        let mid = self.fresh_var(&format!("{name}_m"), VarType::Index);
        out.push(Stmt::Let {
            var: l,
            value: lo,
            span,
        });
        out.push(Stmt::Let {
            var: h,
            value: sub(hi, Expr::Int(1)),
            span,
        });
        let cmp = |op, a, b| Expr::Cmp {
            op,
            lhs: Box::new(a),
            rhs: Box::new(b),
        };
        let step = Stmt::If {
            cond: cmp(CmpOp::Lt, Expr::Var(l), Expr::Var(h)),
            then_body: vec![
                Stmt::Let {
                    var: mid,
                    value: Expr::binary(
                        BinaryOp::Div,
                        add(add(Expr::Var(l), Expr::Var(h)), Expr::Int(1)),
                        Expr::Int(2),
                    ),
                    span,
                },
                Stmt::If {
                    cond: cmp(
                        CmpOp::Le,
                        Expr::load(indptr, vec![Expr::Var(mid)]),
                        Expr::Var(child_pos),
                    ),
                    then_body: vec![Stmt::Assign {
                        var: l,
                        value: Expr::Var(mid),
                        span,
                    }],
                    else_body: vec![Stmt::Assign {
                        var: h,
                        value: sub(Expr::Var(mid), Expr::Int(1)),
                        span,
                    }],
                    span,
                },
            ],
            else_body: Vec::new(),
            span,
        };
        out.push(Stmt::For(For {
            var: t,
            lo: Expr::Int(0),
            hi: Expr::Int(SEARCH_STEPS),
            kind: ForKind::Serial,
            body: vec![step],
            span,
        }));
        l
    }
}
