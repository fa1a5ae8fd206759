//! The shape of a `batched` loop: iterations run in groups, their reductions reduced
//! across the group at once.
//!
//! Purpose: in SDDMM every non-zero ends in a dot product `acc[0] = acc[0] + X[i, k] *
//! Y[j, k]` over a short dense range, and summing the vector lanes of each dot product
//! on its own (a horizontal sum per non-zero) costs as much as the products at K = 32. A
//! loop marked [`ForKind::Batched`] (text `batched`) around it lets the backend run a
//! group of iterations' reductions side by side, each in its own vector of partial sums,
//! and add the lanes of all of them with one transposed tree of shuffles.
//!
//! [`batched_shape`] checks the rules that make that reordering the same computation.
//! The body of the loop is `pre ; R ; post` where
//! - `R` is the only loop of the body, a `vectorized(reassociate)` loop with exactly one
//!   reduced element `acc[c]` ([`local_reductions`]), `c` an integer literal;
//! - `pre` holds only `let`s, prefetches, `if`s around prefetches, and stores to `local`
//!   buffers whose index and value load no buffer the body stores to (so running `pre`
//!   again gives the same state) other than an *own-element* buffer, and does not read
//!   `acc`;
//! - `post` holds no loop, and stores to no buffer that `pre` or `R` loads (`acc` and
//!   own-element buffers aside);
//! - a buffer `B` is own-element when every write to it in the body is a plain store in
//!   `post` at one index list `idx`, every load of it in `pre` is at `idx` and `R` does
//!   not read it, and `idx` is affine in the loop's variable, with a non-zero
//!   coefficient in some index, and reads no variable the body declares and no buffer
//!   it stores to: distinct
//!   iterations then write distinct elements, and an iteration's element is written by
//!   its own `post` alone (a block's output loaded into a local before its dot product,
//!   `L[0] = C[e(l)] … C[e(l)] = L[0]`, as `cache_write` leaves BSR SDDMM);
//! - no statement assigns a local (`Assign`).
//!
//! The backend may then run `pre(l); R(l)` for every iteration `l` of a group (with
//! `R(l)` adding into a sum of its own), then, per iteration in order, `pre(l)` again
//! (prefetches left out), `acc[c] = acc[c] + sum(l)` and `post(l)`: every `post(l)`
//! sees what it saw in the plain loop (`pre(l)` run again reads an own-element buffer
//! at the element only `post(l)` writes, still holding its value from before the loop),
//! `R` differing only in the order of its additions (as `vectorized(reassociate)`
//! already allows). The serial meaning of a `batched` loop is that of a plain loop.
//!
//! ```
//! use sparsile_ir::loops::{batched_shape, Func, Stmt};
//! let f: Func = "flat func f(m, n) {\n  buffer x: f32[m * 8] input values\n  \
//!     buffer y: f32[m] output values\n  buffer acc: f32[1] temp local\n  \
//!     for i in 0..m {\n    acc[0] = 0.0\n    \
//!     for k in 0..8 vectorized(reassociate) {\n      acc[0] = acc[0] + x[i * 8 + k]\n    }\n    \
//!     y[i] = acc[0] * 2.0\n  }\n}\n".parse().unwrap();
//! let Stmt::For(l) = &f.body[0] else { unreachable!() };
//! let shape = batched_shape(&f, l).unwrap();
//! assert_eq!(shape.reduction, 1);
//! assert_eq!(f.buffers[shape.accumulator.buffer].name, "acc");
//! ```

use std::collections::HashSet;

use super::expr::Expr;
use super::func::{BufferKind, Func};
use super::local_reduction::{local_reductions, reduction_addend, LocalReduction, ReductionError};
use super::stmt::{For, ForKind, Stmt};
use super::vector_load::coefficient;
use crate::id::{BufferId, VarId};

/// Where the parts of a `batched` loop's body are.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchedShape {
    /// The position of the reassociated loop `R` in the body: `pre` is the body before
    /// it, `post` the body after it.
    pub reduction: usize,
    /// The element `R` reduces into.
    pub accumulator: LocalReduction,
}

/// Checks the rules of the module docs for the body of `f` (its own kind is not looked
/// at) and returns its shape, or the first statement that breaks a rule.
pub fn batched_shape(func: &Func, f: &For) -> Result<BatchedShape, ReductionError> {
    let err = |span, message: String| Err(ReductionError { span, message });
    let name = |b: BufferId| {
        func.buffers
            .get(b)
            .map_or_else(|| b.to_string(), |x| x.name.clone())
    };
    let loops: Vec<usize> = f
        .body
        .iter()
        .enumerate()
        .filter(|(_, s)| holds_loop(std::slice::from_ref(*s)))
        .map(|(k, _)| k)
        .collect();
    let r = match loops.as_slice() {
        [r] => *r,
        [] => return err(f.span, "the body holds no `vectorized(reassociate)` loop".into()),
        [_, second, ..] => {
            return err(
                f.body[*second].span(),
                "the body holds more than one loop (it must hold exactly one, a `vectorized(reassociate)` loop)".into(),
            )
        }
    };
    let Stmt::For(inner) = &f.body[r] else {
        return err(
            f.body[r].span(),
            "the loop of the body sits inside another statement; it must be a statement of the body itself".into(),
        );
    };
    if !matches!(inner.kind, ForKind::VectorizedReduction { .. }) {
        return err(
            inner.span,
            "the loop of the body is not `vectorized(reassociate)` (vectorize_reduction makes it so)".into(),
        );
    }
    if holds_loop(&inner.body) {
        return err(inner.span, "the reassociated loop is not innermost".into());
    }
    let found = local_reductions(func, inner)?;
    let acc = match found.as_slice() {
        [one] => one.clone(),
        _ => {
            return err(
                inner.span,
                format!(
                "the reassociated loop reduces into {} elements; a batched loop needs exactly one",
                found.len()
            ),
            )
        }
    };
    if !matches!(acc.index, Expr::Int(_)) {
        return err(
            acc.spans[0],
            format!(
                "the reduced element of `{}` must have an integer literal index",
                name(acc.buffer)
            ),
        );
    }
    let (pre, post) = (&f.body[..r], &f.body[r + 1..]);
    let mut assigned = None;
    Stmt::visit_all(&f.body, &mut |s| {
        if let (Stmt::Assign { span, .. }, None) = (s, &assigned) {
            assigned = Some(*span);
        }
    });
    if let Some(span) = assigned {
        return err(
            span,
            "an assignment to a local (a batched loop runs parts of its body again)".into(),
        );
    }
    let own = own_element_buffers(f, r);
    let body_stored: HashSet<BufferId> = Stmt::stored_buffers(&f.body)
        .into_iter()
        .filter(|b| !own.contains(b))
        .collect();
    let post_stored = Stmt::stored_buffers(post);
    for s in pre {
        check_pre(func, s, &body_stored, acc.buffer)?;
    }
    // What `pre` and `R` read must not be written by `post`.
    let mut reads = Stmt::loaded_buffers(pre);
    for s in &inner.body {
        match reduction_addend(s) {
            Some(addend) if is_acc_store(s, acc.buffer) => addend.loaded_buffers(&mut reads),
            _ => reads.extend(Stmt::loaded_buffers(std::slice::from_ref(s))),
        }
    }
    if let Some(b) = post_stored
        .iter()
        .find(|b| **b != acc.buffer && !own.contains(b) && reads.contains(b))
    {
        let span = first_store_span(post, *b).unwrap_or(f.span);
        return err(
            span,
            format!(
                "`{}` is stored after the reduction and read before it or in it (a group runs every iteration's reduction first)",
                name(*b)
            ),
        );
    }
    Ok(BatchedShape {
        reduction: r,
        accumulator: acc,
    })
}

/// Checks one statement of `pre` (see the module docs).
fn check_pre(
    func: &Func,
    s: &Stmt,
    body_stored: &HashSet<BufferId>,
    acc: BufferId,
) -> Result<(), ReductionError> {
    let err = |message: String| {
        Err(ReductionError {
            span: s.span(),
            message,
        })
    };
    let reads = Stmt::loaded_buffers(std::slice::from_ref(s));
    if reads.contains(&acc) {
        return err(format!(
            "`{}` is read before the reduction into it",
            func.buffers[acc].name
        ));
    }
    match s {
        Stmt::Let { .. } | Stmt::Prefetch { .. } => Ok(()),
        Stmt::If {
            then_body,
            else_body,
            ..
        } => {
            for t in then_body.iter().chain(else_body) {
                if !matches!(
                    t,
                    Stmt::Prefetch { .. } | Stmt::If { .. } | Stmt::Let { .. }
                ) {
                    return Err(ReductionError {
                        span: t.span(),
                        message: "before the reduction, an `if` may only guard prefetches".into(),
                    });
                }
                check_pre(func, t, body_stored, acc)?;
            }
            Ok(())
        }
        Stmt::Store { buffer, .. } => {
            let local = func
                .buffers
                .get(*buffer)
                .is_some_and(|b| b.kind == BufferKind::Local);
            if !local {
                return err(format!(
                    "the store to `{}` before the reduction is not to a local buffer",
                    func.buffers[*buffer].name
                ));
            }
            if let Some(b) = reads.iter().find(|b| body_stored.contains(b)) {
                return err(format!(
                    "the store before the reduction reads `{}`, which the loop writes (it must give the same value when run again)",
                    func.buffers[*b].name
                ));
            }
            Ok(())
        }
        _ => err(
            "before the reduction, only `let`s, prefetches and stores to local buffers may stand"
                .into(),
        ),
    }
}

/// The own-element buffers of the body of `f` whose reassociated loop is statement `r`
/// (see the module docs).
fn own_element_buffers(f: &For, r: usize) -> HashSet<BufferId> {
    let (pre, reduction, post) = (&f.body[..r], &f.body[r..=r], &f.body[r + 1..]);
    let declared: HashSet<VarId> = Stmt::declared_vars(&f.body).into_iter().collect();
    let read_in_reduction = Stmt::loaded_buffers(reduction);
    let stored_before = Stmt::stored_buffers(pre)
        .into_iter()
        .chain(Stmt::stored_buffers(reduction))
        .collect::<HashSet<_>>();
    let body_stored = Stmt::stored_buffers(&f.body);
    let mut own = HashSet::new();
    for b in Stmt::stored_buffers(post) {
        if stored_before.contains(&b) || read_in_reduction.contains(&b) {
            continue;
        }
        // Every write: a plain store at one index list.
        let mut idx: Option<&Vec<Expr>> = None;
        let mut other_write = false;
        Stmt::visit_all(post, &mut |s| match s {
            Stmt::Store {
                buffer, indices, ..
            } if *buffer == b => match idx {
                None => idx = Some(indices),
                Some(i) if i == indices => {}
                Some(_) => other_write = true,
            },
            Stmt::AtomicAdd { buffer, .. } if *buffer == b => other_write = true,
            Stmt::Mma(m) if m.c == b => other_write = true,
            _ => {}
        });
        let Some(idx) = idx else { continue };
        if other_write {
            continue;
        }
        // Affine in the loop's variable, moving with it, and nothing else the body sets
        // (neither a variable it declares nor memory it stores to).
        let affine = idx.iter().all(|e| {
            let mut loaded = HashSet::new();
            e.loaded_buffers(&mut loaded);
            coefficient(e, f.var).is_some()
                && !declared.iter().any(|v| e.reads_var(*v))
                && loaded.is_disjoint(&body_stored)
        });
        if !affine || idx.iter().all(|e| coefficient(e, f.var) == Some(0)) {
            continue;
        }
        // `pre` loads it at that element only.
        let mut loads_ok = true;
        Stmt::visit_all(pre, &mut |s| {
            for e in s.own_exprs() {
                e.visit(&mut |x| match x {
                    Expr::Load { buffer, indices } if *buffer == b => {
                        loads_ok &= indices == idx;
                    }
                    Expr::Search { buffer, .. } if *buffer == b => loads_ok = false,
                    _ => {}
                });
            }
        });
        if loads_ok {
            own.insert(b);
        }
    }
    own
}

fn is_acc_store(s: &Stmt, acc: BufferId) -> bool {
    matches!(s, Stmt::Store { buffer, .. } if *buffer == acc)
}

fn holds_loop(stmts: &[Stmt]) -> bool {
    let mut found = false;
    Stmt::visit_all(stmts, &mut |s| found |= matches!(s, Stmt::For(_)));
    found
}

fn first_store_span(stmts: &[Stmt], b: BufferId) -> Option<crate::Span> {
    let mut out = None;
    Stmt::visit_all(stmts, &mut |s| {
        if let Stmt::Store { buffer, span, .. } | Stmt::AtomicAdd { buffer, span, .. } = s {
            if *buffer == b && out.is_none() {
                out = Some(*span);
            }
        }
    });
    out
}
