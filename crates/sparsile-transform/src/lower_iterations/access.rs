//! Buffer accesses: coordinates → positions, with the stage-I rules as explicit guards.
//!
//! For each axis of the accessed buffer, in storage order:
//! - the index is the iterator variable bound to this same axis, and the position used
//!   for the axis's parent in this access is the one the loop was entered with (or the
//!   axis has no parent): the position is the loop variable;
//! - `dense_fixed`: the position is the coordinate;
//! - `dense_variable` under parent position `p`: `indptr[p] + crd` when
//!   `crd < indptr[p + 1] - indptr[p]`, else not stored;
//! - sparse axes: `search(indices, lo, hi, crd)` over the parent's run (the loop bounds
//!   of [`super::nest`]); `-1` means not stored. On a non-unique axis this finds the
//!   first of a run of equal coordinates, which is only right on a leaf axis: a
//!   coordinate access into a non-unique axis with children is an error.
//!
//! Searched positions are computed by `let` statements placed before the statement, each
//! guarded by everything checked before it (`select(ok, search(..), -1)`), so no load is
//! ever out of bounds. The access is valid when every coordinate is in `0..length` (which
//! also skips padding, whose coordinate is the length) and every searched position is
//! `>= 0`. A read of an invalid access gives `0` (`select(valid, load, 0)`); a store is
//! wrapped in `if valid { ... }` (a store to an in-range element that is not stored,
//! which the interpreter reports as an error, is skipped too). Guards that always hold are left out (a coordinate is
//! never negative; a `dense_fixed` loop variable, or one over a sparse axis declared
//! without padding, is below the length of an axis of the same length).

use sparsile_ir::coord::{self, Extent, Store};
use sparsile_ir::loops::{Expr, LogicOp, Stmt, VarType};
use sparsile_ir::{AxisId, AxisKind, BufferId, Span};

use super::Lowerer;
use crate::index_expr::{add, all, extent, ge, lt, mul, npos, sub};
use crate::LowerError;

/// A translated access.
pub struct Access {
    /// One position per buffer axis.
    pub positions: Vec<Expr>,
    /// When the access reaches a stored element; `None` when always.
    pub valid: Option<Expr>,
}

impl Lowerer<'_> {
    /// Lowers `buffer[indices] = value`: `let`s for searched positions, then the store
    /// (guarded when it may be out of range or not stored).
    pub fn store(&mut self, s: &Store) -> Result<Vec<Stmt>, LowerError> {
        let mut pre = Vec::new();
        let mut value = self.expr(&s.value, &mut pre, s.span)?;
        let acc = self.access(s.buffer, &s.indices, &mut pre, s.span)?;
        if let Some(cond) = &acc.valid {
            // The value is only computed under the store's guard: reads guarded by a
            // part of it need no guard of their own.
            value = drop_implied_guards(value, &conjuncts(cond));
        }
        let store = Stmt::Store {
            buffer: s.buffer,
            indices: acc.positions,
            value,
            span: s.span,
        };
        pre.push(match acc.valid {
            Some(cond) => Stmt::If {
                cond,
                then_body: vec![store],
                else_body: Vec::new(),
                span: s.span,
            },
            None => store,
        });
        Ok(pre)
    }

    /// Lowers an expression; searched positions of its loads go to `pre`.
    pub fn expr(
        &mut self,
        e: &coord::Expr,
        pre: &mut Vec<Stmt>,
        span: Span,
    ) -> Result<Expr, LowerError> {
        Ok(match e {
            coord::Expr::Int(v) => Expr::Int(*v),
            coord::Expr::Float(v) => Expr::Float(*v),
            coord::Expr::Param(p) => Expr::Param(*p),
            coord::Expr::Var(v) => match &self.vars[*v] {
                Some(b) => b.crd.clone(),
                None => {
                    return Err(LowerError::UnboundVariable {
                        var: self.program.vars[*v].name.clone(),
                        span,
                    })
                }
            },
            coord::Expr::Load { buffer, indices } => {
                let acc = self.access(*buffer, indices, pre, span)?;
                let load = Expr::load(*buffer, acc.positions);
                match acc.valid {
                    Some(cond) => {
                        let zero = if self.program.buffers[*buffer].dtype.is_int() {
                            Expr::Int(0)
                        } else {
                            Expr::Float(0.0)
                        };
                        Expr::select(cond, load, zero)
                    }
                    None => load,
                }
            }
            coord::Expr::Unary { op, arg } => Expr::Unary {
                op: *op,
                arg: Box::new(self.expr(arg, pre, span)?),
            },
            coord::Expr::Binary { op, lhs, rhs } => {
                let l = self.expr(lhs, pre, span)?;
                let r = self.expr(rhs, pre, span)?;
                Expr::binary(*op, l, r)
            }
        })
    }

    /// Translates the coordinates `indices` of an access to `buffer` into positions.
    pub fn access(
        &mut self,
        buffer: BufferId,
        indices: &[coord::Expr],
        pre: &mut Vec<Stmt>,
        span: Span,
    ) -> Result<Access, LowerError> {
        let program = self.program;
        let decl = &program.buffers[buffer];
        if decl.axes.len() != indices.len() {
            return Err(LowerError::IndexCount {
                buffer: decl.name.clone(),
                expected: decl.axes.len(),
                found: indices.len(),
                span,
            });
        }
        let mut positions: Vec<Expr> = Vec::with_capacity(indices.len());
        let mut guards: Vec<Expr> = Vec::new();
        for (k, (&axis, index)) in decl.axes.iter().zip(indices).enumerate() {
            let a = &program.axes[axis];
            let crd = self.expr(index, pre, span)?;
            if !never_negative(index) {
                guards.push(ge(crd.clone(), Expr::Int(0)));
            }
            if !self.below_length(index, a.length) {
                guards.push(lt(crd.clone(), extent(a.length)));
            }
            // The parent's position in this access (the verifier and `lower_iterations`
            // checked that the parent comes earlier in the buffer's axes).
            let parent_pos = a.parent.map(|p| {
                let j = decl.axes[..k]
                    .iter()
                    .position(|&x| x == p)
                    .expect("checked: parents precede their children in a buffer");
                positions[j].clone()
            });
            if let Some(direct) = self.direct_position(index, axis, parent_pos.as_ref()) {
                positions.push(direct);
                continue;
            }
            if a.kind == AxisKind::DenseFixed {
                positions.push(crd);
                continue;
            }
            if !a.unique && k + 1 < decl.axes.len() {
                return Err(LowerError::RandomAccessNonUnique {
                    buffer: decl.name.clone(),
                    axis: a.name.clone(),
                    span,
                });
            }
            let found = self.locate(axis, parent_pos, crd);
            let value = match all(guards.clone()) {
                Some(ok) => Expr::select(ok, found, Expr::Int(-1)),
                None => found,
            };
            let q = self.fresh_var(&format!("{}_{}_p", decl.name, a.name), VarType::Index);
            pre.push(Stmt::Let {
                var: q,
                value,
                span,
            });
            guards.push(ge(Expr::Var(q), Expr::Int(0)));
            positions.push(Expr::Var(q));
        }
        Ok(Access {
            positions,
            valid: all(guards),
        })
    }

    /// The loop variable, when `index` is the iterator bound to `axis` and the parent
    /// position of the access is the one its loop was entered with.
    fn direct_position(
        &self,
        index: &coord::Expr,
        axis: AxisId,
        parent_pos: Option<&Expr>,
    ) -> Option<Expr> {
        let coord::Expr::Var(v) = index else {
            return None;
        };
        let b = self.vars[*v].as_ref()?;
        if b.axis != axis {
            return None;
        }
        match (parent_pos, b.parent_pos) {
            (None, _) => Some(Expr::Var(b.pos)),
            (Some(Expr::Var(p)), Some(q)) if *p == q => Some(Expr::Var(b.pos)),
            _ => None,
        }
    }

    /// The position of coordinate `crd` on `axis` (not `dense_fixed`) under `parent`,
    /// or `-1`.
    fn locate(&self, axis: AxisId, parent: Option<Expr>, crd: Expr) -> Expr {
        let a = &self.program.axes[axis];
        let aux = self.aux[axis];
        let indptr_at = |e: Expr| {
            Expr::load(
                aux.indptr
                    .expect("variable axes of a buffer have an indptr buffer"),
                vec![e],
            )
        };
        match (a.kind, parent) {
            (AxisKind::DenseVariable, Some(p)) => {
                let start = indptr_at(p.clone());
                let end = indptr_at(add(p, Expr::Int(1)));
                Expr::select(
                    lt(crd.clone(), sub(end, start.clone())),
                    add(start, crd),
                    Expr::Int(-1),
                )
            }
            (kind, parent) => {
                let (lo, hi) = match (kind, parent) {
                    (AxisKind::SparseVariable, Some(p)) => {
                        (indptr_at(p.clone()), indptr_at(add(p, Expr::Int(1))))
                    }
                    (AxisKind::SparseFixed, Some(p)) => {
                        let k = extent(a.nnz_per_parent.expect("verified"));
                        let lo = mul(p, k.clone());
                        (lo.clone(), add(lo, k))
                    }
                    _ => (Expr::Int(0), npos(&self.program.axes, axis)),
                };
                Expr::Search {
                    buffer: aux
                        .indices
                        .expect("sparse axes of a buffer have an indices buffer"),
                    lo: Box::new(lo),
                    hi: Box::new(hi),
                    value: Box::new(crd),
                }
            }
        }
    }

    /// Whether `index` is always below `length`: a loop variable over an axis of the
    /// same length that is `dense_fixed` or sparse without padding (its stored
    /// coordinates are below the length, which binding checks), or a constant below a
    /// constant length.
    fn below_length(&self, index: &coord::Expr, length: Extent) -> bool {
        match index {
            coord::Expr::Var(v) => self.vars[*v].as_ref().is_some_and(|b| {
                let a = &self.program.axes[b.axis];
                let bounded = a.kind == AxisKind::DenseFixed || (a.kind.is_sparse() && !a.padded);
                bounded && a.length == length
            }),
            coord::Expr::Int(c) => matches!(length, Extent::Const(l) if *c < l),
            _ => false,
        }
    }
}

/// The operands of a chain of `&&`.
fn conjuncts(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::Logic {
            op: LogicOp::And,
            lhs,
            rhs,
        } => {
            let mut v = conjuncts(lhs);
            v.extend(conjuncts(rhs));
            v
        }
        other => vec![other],
    }
}

/// In every guarded read `select(c, load, 0)`, drops the conjuncts of `c` that are
/// among `known` (conditions that hold wherever the expression is evaluated), and the
/// `select` itself when none remain.
fn drop_implied_guards(e: Expr, known: &[&Expr]) -> Expr {
    let rec = |x: Box<Expr>| Box::new(drop_implied_guards(*x, known));
    match e {
        Expr::Select {
            cond,
            then,
            otherwise,
        } if matches!(*then, Expr::Load { .. }) => {
            let rest: Vec<Expr> = conjuncts(&cond)
                .into_iter()
                .filter(|c| !known.contains(c))
                .cloned()
                .collect();
            let then = rec(then);
            match all(rest) {
                None => *then,
                Some(cond) => Expr::Select {
                    cond: Box::new(cond),
                    then,
                    otherwise,
                },
            }
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => Expr::Select {
            cond: rec(cond),
            then: rec(then),
            otherwise: rec(otherwise),
        },
        Expr::Unary { op, arg } => Expr::Unary { op, arg: rec(arg) },
        Expr::Binary { op, lhs, rhs } => Expr::Binary {
            op,
            lhs: rec(lhs),
            rhs: rec(rhs),
        },
        other => other,
    }
}

/// Whether `index` is never negative: a coordinate, a parameter, a non-negative
/// constant, or sums, products, maxima and minima of those.
fn never_negative(index: &coord::Expr) -> bool {
    match index {
        coord::Expr::Var(_) | coord::Expr::Param(_) => true,
        coord::Expr::Int(c) => *c >= 0,
        coord::Expr::Binary { op, lhs, rhs } => {
            matches!(
                op,
                coord::BinaryOp::Add
                    | coord::BinaryOp::Mul
                    | coord::BinaryOp::Max
                    | coord::BinaryOp::Min
            ) && never_negative(lhs)
                && never_negative(rhs)
        }
        _ => false,
    }
}
