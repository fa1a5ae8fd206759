//! Refuses sums kept in f16/bf16 memory.
//!
//! Elements of f16 and bf16 buffers are computed in f32 and rounded when stored. A loop
//! over `v` that stores `B[e]` and also reads `B[e]` (`B[e] = B[e] + x`, or a local
//! loaded from `B[e]` and stored back), where the offset `e` does not follow `v`, adds
//! into the same element at every iteration: every partial sum would be rounded to 11
//! (f16) or 8 (bf16) significant bits, and a bf16 sum of ones stops growing at 256.
//! Such a function is refused ([`CodegenError::HalfPrecisionSum`]); a schedule sums in
//! a local instead (`cache_write`, `rfactor`: their locals are f32) over the whole
//! reduction, and only the final value is rounded.
//!
//! The offset follows `v` when it reads `v` through arithmetic and `let`s, or reads the
//! variable of a loop inside `v` whose bounds read `v` (positions `p` in
//! `indptr[i]..indptr[i + 1]`: the runs of different rows are disjoint). Reading `v`
//! only through a load (`C[rows[p]]`) does not count, since different positions may
//! hold the same row. Loops of at most one iteration sum nothing, and neither does a
//! loop over `v` whose store is under `if v == e` with `e` free of `v` (one iteration
//! stores: the first lane of a warp adding the warp's f32 sum). Loops bound to a GPU's
//! blocks or threads are not sequences: their iterations run side by side.

use std::collections::HashMap;

use sparsile_ir::loops::{CmpOp, Expr, For, ForKind, Func, LogicOp, Stmt};
use sparsile_ir::{BufferId, VarId};

use crate::CodegenError;

/// Checks that no f16/bf16 buffer of `func` is summed in place across a loop.
pub(crate) fn check(func: &Func) -> Result<(), CodegenError> {
    if !func.buffers.values().any(|b| b.dtype.is_half()) {
        return Ok(());
    }
    let mut defs: HashMap<VarId, Vec<&Expr>> = HashMap::new();
    Stmt::visit_all(&func.body, &mut |s| {
        if let Stmt::Let { var, value, .. } | Stmt::Assign { var, value, .. } = s {
            defs.entry(*var).or_default().push(value);
        }
    });
    let mut loops = Vec::new();
    walk(func, &func.body, &defs, &mut loops, &mut Vec::new())
}

/// The variables `v` that `cond` pins to one value (`v == e` or `e == v`, with `e` free
/// of `v`, alone or in a conjunction).
fn pinned_by(cond: &Expr, defs: &HashMap<VarId, Vec<&Expr>>, out: &mut Vec<VarId>) {
    match cond {
        Expr::Logic {
            op: LogicOp::And,
            lhs,
            rhs,
        } => {
            pinned_by(lhs, defs, out);
            pinned_by(rhs, defs, out);
        }
        Expr::Cmp {
            op: CmpOp::Eq,
            lhs,
            rhs,
        } => {
            for (var, other) in [(lhs, rhs), (rhs, lhs)] {
                if let Expr::Var(v) = var.as_ref() {
                    if !mentions(other, *v, defs) {
                        out.push(*v);
                    }
                }
            }
        }
        _ => {}
    }
}

fn walk<'f>(
    func: &Func,
    stmts: &'f [Stmt],
    defs: &HashMap<VarId, Vec<&Expr>>,
    loops: &mut Vec<&'f For>,
    pinned: &mut Vec<VarId>,
) -> Result<(), CodegenError> {
    for s in stmts {
        match s {
            Stmt::For(f) => {
                let once = matches!((&f.lo, &f.hi), (Expr::Int(lo), Expr::Int(hi)) if hi - lo <= 1);
                // A loop bound to the GPU's blocks or threads runs its iterations side by
                // side: stores of several of them to one element are a race (the verifier's
                // and the SIMT interpreter's business), not a sum in sequence.
                let side_by_side = matches!(f.kind, ForKind::Bound(_));
                if once || side_by_side {
                    walk(func, &f.body, defs, loops, pinned)?;
                    continue;
                }
                loops.push(f);
                let r = walk(func, &f.body, defs, loops, pinned);
                loops.pop();
                r?;
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } => {
                let before = pinned.len();
                pinned_by(cond, defs, pinned);
                let r = walk(func, then_body, defs, loops, pinned);
                pinned.truncate(before);
                r?;
                walk(func, else_body, defs, loops, pinned)?;
            }
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                walk(func, body, defs, loops, pinned)?
            }
            Stmt::Store {
                buffer,
                indices,
                span,
                ..
            } => {
                let b = &func.buffers[*buffer];
                if !b.dtype.is_half() {
                    continue;
                }
                let mut seen = Vec::new();
                let mut follows_loop =
                    |v: VarId| indices.iter().any(|i| follows(i, v, defs, &mut seen));
                let summed = (0..loops.len()).find(|&at| {
                    let v = loops[at].var;
                    !pinned.contains(&v)
                        && !follows_loop(v)
                        && !loops[at + 1..].iter().any(|w| {
                            [&w.lo, &w.hi].iter().any(|b| mentions(b, v, defs))
                                && follows_loop(w.var)
                        })
                        && body_reads(&loops[at].body, *buffer, indices)
                });
                if let Some(at) = summed {
                    let v = loops[at].var;
                    return Err(CodegenError::HalfPrecisionSum {
                        buffer: b.name.clone(),
                        dtype: b.dtype,
                        var: func
                            .vars
                            .get(v)
                            .map_or_else(|| v.to_string(), |x| x.name.clone()),
                        span: *span,
                    });
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether a statement of `stmts` (nested ones included) loads `buffer[indices]`.
fn body_reads(stmts: &[Stmt], buffer: BufferId, indices: &[Expr]) -> bool {
    let mut found = false;
    Stmt::visit_all(stmts, &mut |s| {
        found = found || s.own_exprs().iter().any(|e| reads(e, buffer, indices));
    });
    found
}

/// Whether `e` loads `buffer[indices]`.
fn reads(e: &Expr, buffer: BufferId, indices: &[Expr]) -> bool {
    match e {
        Expr::Load {
            buffer: b,
            indices: i,
        } => {
            (*b == buffer && i.as_slice() == indices) || i.iter().any(|x| reads(x, buffer, indices))
        }
        Expr::Int(_) | Expr::Float(_) | Expr::Var(_) | Expr::Param(_) => false,
        Expr::Unary { arg, .. } => reads(arg, buffer, indices),
        Expr::Binary { lhs, rhs, .. }
        | Expr::Cmp { lhs, rhs, .. }
        | Expr::Logic { lhs, rhs, .. } => {
            reads(lhs, buffer, indices) || reads(rhs, buffer, indices)
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            reads(cond, buffer, indices)
                || reads(then, buffer, indices)
                || reads(otherwise, buffer, indices)
        }
        Expr::Search { lo, hi, value, .. } => {
            reads(lo, buffer, indices)
                || reads(hi, buffer, indices)
                || reads(value, buffer, indices)
        }
    }
}

/// Whether `e` reads `v` through arithmetic and the definitions of locals (not through
/// loads).
fn follows(e: &Expr, v: VarId, defs: &HashMap<VarId, Vec<&Expr>>, seen: &mut Vec<VarId>) -> bool {
    reaches(e, v, defs, seen, false)
}

/// Whether `e` reads `v` in any way (loads included).
fn mentions(e: &Expr, v: VarId, defs: &HashMap<VarId, Vec<&Expr>>) -> bool {
    reaches(e, v, defs, &mut Vec::new(), true)
}

/// Whether `e` reads `v`: through arithmetic and the definitions of locals, and, with
/// `through_loads`, through the indices of loads and the bounds and value of searches.
/// `seen` guards against locals defined in terms of themselves.
fn reaches(
    e: &Expr,
    v: VarId,
    defs: &HashMap<VarId, Vec<&Expr>>,
    seen: &mut Vec<VarId>,
    through_loads: bool,
) -> bool {
    let go = |x: &Expr, seen: &mut Vec<VarId>| reaches(x, v, defs, seen, through_loads);
    match e {
        Expr::Var(x) if *x == v => true,
        Expr::Var(x) => {
            if seen.contains(x) {
                return false;
            }
            seen.push(*x);
            let r = defs.get(x).is_some_and(|ds| ds.iter().any(|d| go(d, seen)));
            seen.pop();
            r
        }
        Expr::Int(_) | Expr::Float(_) | Expr::Param(_) => false,
        Expr::Load { indices, .. } => through_loads && indices.iter().any(|i| go(i, seen)),
        Expr::Search { lo, hi, value, .. } => {
            through_loads && (go(lo, seen) || go(hi, seen) || go(value, seen))
        }
        Expr::Unary { arg, .. } => go(arg, seen),
        Expr::Binary { lhs, rhs, .. }
        | Expr::Cmp { lhs, rhs, .. }
        | Expr::Logic { lhs, rhs, .. } => go(lhs, seen) || go(rhs, seen),
        Expr::Select {
            cond,
            then,
            otherwise,
        } => go(cond, seen) || go(then, seen) || go(otherwise, seen),
    }
}
