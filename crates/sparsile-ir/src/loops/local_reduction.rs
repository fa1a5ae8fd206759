//! The local `+` reductions of a loop, for `vectorized(reassociate)` loops.
//!
//! [`local_reductions`] finds, in the body of a loop, the stores whose element does not
//! depend on the loop variable, and checks that each is a reduction the loop may
//! reassociate: `L[e] = L[e] + expr` (or `L[e] = expr + L[e]`) where
//! - `L` is a `local` buffer;
//! - `e` is loop-invariant: it uses no variable declared in the loop (the loop variable,
//!   `let`s and loops of the body) and loads no buffer the loop stores to;
//! - nothing else in the loop reads or writes `L` (`expr` included): the running sum of
//!   an element exists only after the loop;
//! - two reduced elements of the same `L` have the same index or two different integer
//!   literals as index (so they are the same or different elements whatever the inputs).
//!
//! It also refuses an assignment to a local declared outside the loop (a dependence
//! between iterations through a register that the reassociation would break) and an
//! atomic add whose element does not depend on the loop variable.
//!
//! A store whose element depends on the loop variable (`y[jp] = …`) is not a reduction
//! and is not checked here (beyond not touching a reduced `L`): that the loop carries no
//! dependence through memory is the `vectorize_reduction` schedule's precondition.
//!
//! ```
//! use sparsile_ir::loops::{local_reductions, Func, Stmt};
//! let f: Func = "flat func f(n) {\n  buffer x: f32[n] input values\n  \
//!     buffer acc: f32[1] temp local\n  \
//!     for i in 0..n {\n    acc[0] = acc[0] + x[i] * 2.0\n  }\n}\n".parse().unwrap();
//! let Stmt::For(l) = &f.body[0] else { unreachable!() };
//! let found = local_reductions(&f, l).unwrap();
//! assert_eq!(found.len(), 1);
//! assert_eq!(f.buffers[found[0].buffer].name, "acc");
//! ```

use std::collections::HashSet;

use super::expr::Expr;
use super::func::{BufferKind, Func};
use super::stmt::{For, Stmt};
use super::ExprDisplay;
use crate::coord::BinaryOp;
use crate::id::{BufferId, VarId};
use crate::Span;

/// One element reduced by a loop: `buffer[index]`, with the reduction statements that
/// add to it, in program order.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalReduction {
    pub buffer: BufferId,
    pub index: Expr,
    /// The spans of the statements `buffer[index] = buffer[index] + …`.
    pub spans: Vec<Span>,
}

/// Why a loop's reductions cannot be reassociated: the statement and the rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ReductionError {
    /// The offending statement.
    pub span: Span,
    pub message: String,
}

/// The reduced elements of `f` (in order of first appearance), or the first statement
/// that breaks a rule of the module docs.
pub fn local_reductions(func: &Func, f: &For) -> Result<Vec<LocalReduction>, ReductionError> {
    let mut inside: HashSet<VarId> = Stmt::declared_vars(&f.body).into_iter().collect();
    inside.insert(f.var);
    let mut stored: HashSet<BufferId> = HashSet::new();
    Stmt::visit_all(&f.body, &mut |s| {
        if let Stmt::Store { buffer, .. } | Stmt::AtomicAdd { buffer, .. } = s {
            stored.insert(*buffer);
        }
    });
    let c = Checker {
        func,
        inside,
        stored,
    };
    let mut found: Vec<LocalReduction> = Vec::new();
    let mut first_error: Option<ReductionError> = None;
    Stmt::visit_all(&f.body, &mut |s| {
        if first_error.is_some() {
            return;
        }
        match c.classify(s) {
            Ok(Some((buffer, index))) => {
                let span = s.span();
                match found
                    .iter_mut()
                    .find(|r| r.buffer == buffer && r.index == index)
                {
                    Some(r) => r.spans.push(span),
                    None => found.push(LocalReduction {
                        buffer,
                        index,
                        spans: vec![span],
                    }),
                }
            }
            Ok(None) => {}
            Err(e) => first_error = Some(e),
        }
    });
    if let Some(e) = first_error {
        return Err(e);
    }
    // Two elements of one buffer must be provably the same or provably different.
    for (k, r) in found.iter().enumerate() {
        for other in &found[..k] {
            if other.buffer == r.buffer
                && !(matches!(r.index, Expr::Int(_)) && matches!(other.index, Expr::Int(_)))
            {
                return Err(ReductionError {
                    span: r.spans[0],
                    message: format!(
                        "the reductions into `{}` at `{}` and at `{}` may add to the same element (use one index, or integer literals)",
                        c.buffer_name(r.buffer),
                        ExprDisplay::new(func, &other.index),
                        ExprDisplay::new(func, &r.index)
                    ),
                });
            }
        }
    }
    // No other access to a reduced buffer.
    let reduced: HashSet<BufferId> = found.iter().map(|r| r.buffer).collect();
    let mut misuse: Option<ReductionError> = None;
    Stmt::visit_all(&f.body, &mut |s| {
        if misuse.is_some() {
            return;
        }
        let is_reduction = matches!(c.classify(s), Ok(Some(_)));
        // The buffer the statement writes or prefetches, and the operands it reads.
        let (target, operands): (Option<BufferId>, Vec<&Expr>) = match s {
            Stmt::Store {
                buffer,
                indices,
                value,
                ..
            } => {
                if is_reduction {
                    // Only the addend: the index and the read of `L[e]` are the pattern.
                    (
                        None,
                        update_addend(*buffer, indices, value).into_iter().collect(),
                    )
                } else {
                    (Some(*buffer), indices.iter().chain([value]).collect())
                }
            }
            Stmt::AtomicAdd {
                buffer,
                indices,
                value,
                ..
            } => (Some(*buffer), indices.iter().chain([value]).collect()),
            Stmt::Prefetch {
                buffer, indices, ..
            } => (Some(*buffer), indices.iter().collect()),
            other => (None, other.own_exprs()),
        };
        let mut touched = target.filter(|b| reduced.contains(b));
        for e in operands {
            e.visit(&mut |x| {
                if let Expr::Load { buffer, .. } | Expr::Search { buffer, .. } = x {
                    if reduced.contains(buffer) && touched.is_none() {
                        touched = Some(*buffer);
                    }
                }
            });
        }
        if let Some(b) = touched {
            misuse = Some(ReductionError {
                span: s.span(),
                message: format!(
                    "`{}` is reduced in the loop (`{0}[..] = {0}[..] + …`) and also accessed by another statement or operand",
                    c.buffer_name(b)
                ),
            });
        }
    });
    match misuse {
        Some(e) => Err(e),
        None => Ok(found),
    }
}

/// `rest` when `value` is `B[ix] + rest` or `rest + B[ix]`: the addend of an update
/// `B[ix] = value` (the shape every reduction in the IR takes, local or not).
pub fn update_addend<'e>(buffer: BufferId, indices: &[Expr], value: &'e Expr) -> Option<&'e Expr> {
    let Expr::Binary {
        op: BinaryOp::Add,
        lhs,
        rhs,
    } = value
    else {
        return None;
    };
    let is_self = |e: &Expr| matches!(e, Expr::Load { buffer: b, indices: ix } if *b == buffer && ix.as_slice() == indices);
    if is_self(lhs) {
        Some(rhs)
    } else if is_self(rhs) {
        Some(lhs)
    } else {
        None
    }
}

/// The addend of the reduction statement `s` (`expr` in `L[e] = L[e] + expr`), when
/// `s` has that shape.
pub fn reduction_addend(s: &Stmt) -> Option<&Expr> {
    match s {
        Stmt::Store {
            buffer,
            indices,
            value,
            ..
        } => update_addend(*buffer, indices, value),
        _ => None,
    }
}

struct Checker<'f> {
    func: &'f Func,
    /// Variables declared in the loop, its own included.
    inside: HashSet<VarId>,
    /// Buffers the loop stores or adds to.
    stored: HashSet<BufferId>,
}

impl Checker<'_> {
    fn buffer_name(&self, b: BufferId) -> String {
        self.func
            .buffers
            .get(b)
            .map_or_else(|| b.to_string(), |x| x.name.clone())
    }

    fn var_name(&self, v: VarId) -> String {
        self.func
            .vars
            .get(v)
            .map_or_else(|| v.to_string(), |x| x.name.clone())
    }

    /// Whether `e` uses a variable declared in the loop.
    fn depends(&self, e: &Expr) -> bool {
        let mut dep = false;
        e.visit(&mut |x| {
            if let Expr::Var(v) = x {
                dep |= self.inside.contains(v);
            }
        });
        dep
    }

    /// Whether `e` loads or searches a buffer the loop writes.
    fn reads_stored(&self, e: &Expr) -> bool {
        let mut reads = false;
        e.visit(&mut |x| {
            if let Expr::Load { buffer, .. } | Expr::Search { buffer, .. } = x {
                reads |= self.stored.contains(buffer);
            }
        });
        reads
    }

    fn access_text(&self, buffer: BufferId, indices: &[Expr]) -> String {
        let parts: Vec<String> = indices
            .iter()
            .map(|e| ExprDisplay::new(self.func, e).to_string())
            .collect();
        format!("{}[{}]", self.buffer_name(buffer), parts.join(", "))
    }

    /// `Some((L, e))` for a reduction statement, `None` for a statement the rules leave
    /// alone, or the broken rule.
    fn classify(&self, s: &Stmt) -> Result<Option<(BufferId, Expr)>, ReductionError> {
        match s {
            Stmt::Assign { var, span, .. } if !self.inside.contains(var) => Err(ReductionError {
                span: *span,
                message: format!(
                    "assignment to `{}`, a local declared outside the loop (only `L[e] = L[e] + …` into local buffers may carry a value between iterations)",
                    self.var_name(*var)
                ),
            }),
            Stmt::AtomicAdd {
                buffer,
                indices,
                span,
                ..
            } if !indices.iter().any(|e| self.depends(e)) => Err(ReductionError {
                span: *span,
                message: format!(
                    "the atomic add to `{}` does not depend on the loop variable (only `L[e] = L[e] + …` into local buffers may)",
                    self.access_text(*buffer, indices)
                ),
            }),
            Stmt::Store {
                buffer,
                indices,
                value,
                span,
            } if !indices.iter().any(|e| self.depends(e)) => {
                let access = self.access_text(*buffer, indices);
                let local = self
                    .func
                    .buffers
                    .get(*buffer)
                    .is_some_and(|b| b.kind == BufferKind::Local);
                if !local {
                    return Err(ReductionError {
                        span: *span,
                        message: format!(
                            "the store to `{access}` does not depend on the loop variable and `{}` is not a local buffer (only `L[e] = L[e] + …` into local buffers may)",
                            self.buffer_name(*buffer)
                        ),
                    });
                }
                if update_addend(*buffer, indices, value).is_none() {
                    return Err(ReductionError {
                        span: *span,
                        message: format!(
                            "the store to `{access}` does not depend on the loop variable and is not `{access} = {access} + …`"
                        ),
                    });
                }
                if indices.iter().any(|e| self.reads_stored(e)) {
                    return Err(ReductionError {
                        span: *span,
                        message: format!(
                            "the index of the reduction into `{access}` reads a buffer the loop writes (it must be loop-invariant)"
                        ),
                    });
                }
                let index = match indices.as_slice() {
                    [e] => e.clone(),
                    _ => {
                        return Err(ReductionError {
                            span: *span,
                            message: format!(
                                "the reduction into `{access}` has {} indices (a local buffer is flat: one)",
                                indices.len()
                            ),
                        })
                    }
                };
                Ok(Some((*buffer, index)))
            }
            _ => Ok(None),
        }
    }
}
