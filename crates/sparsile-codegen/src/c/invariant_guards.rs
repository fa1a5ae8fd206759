//! The guards of a vectorized loop that do not change across its iterations: the loop
//! is written twice, unswitched on them.
//!
//! Lowering reads a padding slot of a format that stores a sentinel coordinate (ELL,
//! the buckets of `hyb`) as zero: in ELL SpMM every operand of the update is a
//! `select` on the slot's column, `j < n`, which does not depend on the vectorized
//! loop's variable:
//! ```text
//! let j: idx = A_J[j_p]
//! for k in 0..128 vectorized {
//!   C_local[k] = C_local[k] + select(j < n, A[j_p], 0.0) * select(j < n, B[j * 128 + k], 0.0)
//! }
//! ```
//! Compiled as it stands, every load is a masked load and the loop runs at less than
//! half the speed of CSR's (the strided sparse-transformer mask, K = 128: 3.0 against
//! 1.4 ms). Here such a loop becomes
//! ```text
//! if (j < n) { for k … { C_local[k] = C_local[k] + A[j_p] * B[j * 128 + k]; } }
//! else       { the loop as it stands }
//! ```
//! Where the guards hold, each `select` on them is its first value, so the first branch
//! computes exactly what the loop does. Where they do not, a store that only adds zero
//! is left out: `X[e] = X[e] + a * b * …` whose factors are all `select(g, …, 0.0)` on
//! one guard `g` adds `0 · 0 · … = +0` when `g` fails (no factor can be infinite or NaN
//! then), which changes nothing but the sign of a zero `X[e]`. When every statement of
//! the body is such a store, as in ELL SpMM, the second branch is empty and a padding
//! slot costs one comparison: `if (j < n) { for k … }`.
//!
//! A guard qualifies when it reads neither the loop's variable nor anything the body
//! declares, assigns or stores, and holds no load, search, division or remainder (it is
//! evaluated once before the loop, even when the loop runs no iteration, so it must not
//! read memory or fault).
//!
//! A *range guard* ([`range_guards`]) reads the loop's variable, linearly, in ordering
//! comparisons (or their conjunction): a block on the matrix's right edge reads
//! `select(jo * 8 + ji < n, x[jo * 8 + ji], 0.0)` over `for ji in 0..8`. Such a
//! condition holds for every iteration of a range when it holds at its first and last,
//! so the loop is unswitched on that check: the `select`s stripped where it holds, the
//! loop as it stands elsewhere (some iterations may hold there, so no store is dropped).
//! A vectorized loop whose whole body is one `if` without `else` on a qualifying
//! condition (a padded block row's `io * 8 + ii < m`) tests it once, around the loop
//! ([`invariant_condition`]).

use std::collections::HashSet;

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{reduction_addend, CmpOp, Expr, For, LogicOp, Stmt};
use sparsile_ir::VarId;

/// The distinct conditions of `select`s in `f`'s body that qualify as loop-invariant
/// guards (see the module docs), in order of first appearance.
pub(crate) fn invariant_guards(f: &For) -> Vec<Expr> {
    let mut inner = body_vars(f);
    inner.insert(f.var);
    let mut guards: Vec<Expr> = Vec::new();
    let mut consider = |e: &Expr| {
        e.visit(&mut |x| {
            if let Expr::Select { cond, .. } = x {
                if qualifies(cond, &inner) && !guards.contains(cond) {
                    guards.push((**cond).clone());
                }
            }
        })
    };
    Stmt::visit_all(&f.body, &mut |s| {
        for e in s.own_exprs() {
            consider(e);
        }
    });
    guards
}

/// The distinct conditions of `select`s in `f`'s body that read `f`'s variable but hold
/// for every iteration where they hold for the first and the last (see the module docs),
/// each with that check: `(condition, check)`, in order of first appearance. Only for a
/// loop with constant bounds.
pub(crate) fn range_guards(f: &For) -> Vec<(Expr, Expr)> {
    let (Expr::Int(lo), Expr::Int(hi)) = (&f.lo, &f.hi) else {
        return Vec::new();
    };
    if hi <= lo {
        return Vec::new();
    }
    let inner = body_vars(f);
    let at = |cond: &Expr, value: i64| {
        cond.substitute(&mut |v| (v == f.var).then_some(Expr::Int(value)))
    };
    let mut guards: Vec<(Expr, Expr)> = Vec::new();
    let mut consider = |e: &Expr| {
        e.visit(&mut |x| {
            if let Expr::Select { cond, .. } = x {
                let fresh = !guards.iter().any(|(c, _)| *c == **cond);
                if fresh
                    && cond.reads_var(f.var)
                    && qualifies(cond, &inner)
                    && monotone(cond, f.var)
                {
                    let check = Expr::Logic {
                        op: LogicOp::And,
                        lhs: Box::new(at(cond, *lo)),
                        rhs: Box::new(at(cond, hi - 1)),
                    };
                    guards.push(((**cond).clone(), check));
                }
            }
        })
    };
    Stmt::visit_all(&f.body, &mut |s| {
        for e in s.own_exprs() {
            consider(e);
        }
    });
    guards
}

/// Whether `cond` is an ordering comparison of two sides linear in `var`, or a
/// conjunction of such: true over a range of `var` when true at both of its ends.
fn monotone(cond: &Expr, var: VarId) -> bool {
    match cond {
        Expr::Cmp { op, lhs, rhs } => {
            matches!(op, CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge)
                && linear(lhs, var)
                && linear(rhs, var)
        }
        Expr::Logic {
            op: LogicOp::And,
            lhs,
            rhs,
        } => monotone(lhs, var) && monotone(rhs, var),
        _ => false,
    }
}

/// Whether `e` is linear in `var` (sums, differences and products by factors free of
/// it; anything else must not read it).
fn linear(e: &Expr, var: VarId) -> bool {
    match e {
        Expr::Binary {
            op: BinaryOp::Add | BinaryOp::Sub,
            lhs,
            rhs,
        } => linear(lhs, var) && linear(rhs, var),
        Expr::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } => (!lhs.reads_var(var) && linear(rhs, var)) || (!rhs.reads_var(var) && linear(lhs, var)),
        Expr::Var(_) | Expr::Int(_) | Expr::Param(_) => true,
        other => !other.reads_var(var),
    }
}

/// The variables `f`'s body declares or assigns.
fn body_vars(f: &For) -> HashSet<VarId> {
    let mut vars: HashSet<VarId> = Stmt::declared_vars(&f.body).into_iter().collect();
    vars.extend(Stmt::assigned_vars(&f.body));
    vars
}

/// Whether `cond`, the condition of an `if` around the whole body of `f`, can be tested
/// once before the loop instead (it qualifies as a guard of `f`, see the module docs).
pub(crate) fn invariant_condition(f: &For, cond: &Expr) -> bool {
    let mut inner = body_vars(f);
    inner.insert(f.var);
    qualifies(cond, &inner)
}

/// `stmts` (the body of a loop with `guards`) where the guards do not all hold: without
/// the stores that then add zero (see the module docs); `None` when none is left.
pub(crate) fn where_guards_fail(stmts: &[Stmt], guards: &[Expr]) -> Option<Vec<Stmt>> {
    let kept: Vec<Stmt> = stmts
        .iter()
        .filter(|s| !adds_zero_unless_guarded(s, guards))
        .cloned()
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// Whether `s` is `X[e] = X[e] + a * b * …` (either order of the sum) with every factor
/// `select(g, …, 0.0)` on one guard `g` of `guards`.
fn adds_zero_unless_guarded(s: &Stmt, guards: &[Expr]) -> bool {
    let Some(addend) = reduction_addend(s) else {
        return false;
    };
    let mut guard: Option<&Expr> = None;
    addend.factors().iter().all(|f| match f {
        Expr::Select {
            cond, otherwise, ..
        } if guards.contains(cond) && matches!(**otherwise, Expr::Float(z) if z == 0.0) => {
            **guard.get_or_insert(cond) == **cond
        }
        _ => false,
    })
}

/// `stmts` with every `select` whose condition is one of `guards` replaced by its first
/// value.
pub(crate) fn without_guards(stmts: &[Stmt], guards: &[Expr]) -> Vec<Stmt> {
    Stmt::map_exprs(stmts, &mut |e| strip(e, guards))
}

/// `e` with every `select` on one of `guards` replaced by its first value (bottom-up: a
/// guard holds no `select`, so mapping the children leaves it as it is).
pub(crate) fn strip(e: &Expr, guards: &[Expr]) -> Expr {
    e.map(&mut |x| match x {
        Expr::Select { cond, then, .. } if guards.contains(cond) => Some((**then).clone()),
        _ => None,
    })
}

/// Whether `cond` reads none of `inner` and nothing but variables, parameters and
/// constants under comparisons, logic, `+`, `-`, `*`, `max` and `min`.
fn qualifies(cond: &Expr, inner: &HashSet<VarId>) -> bool {
    let mut ok = true;
    cond.visit(&mut |x| match x {
        Expr::Var(v) => ok &= !inner.contains(v),
        Expr::Int(_) | Expr::Param(_) | Expr::Cmp { .. } | Expr::Logic { .. } => {}
        Expr::Binary { op, .. } => ok &= !matches!(op, BinaryOp::Div | BinaryOp::Rem),
        Expr::Float(_)
        | Expr::Load { .. }
        | Expr::Search { .. }
        | Expr::Unary { .. }
        | Expr::Select { .. } => ok = false,
    });
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparsile_ir::loops::{ExprDisplay, Func};

    fn the_loop(f: &Func) -> &For {
        let mut found = None;
        Stmt::visit_all(&f.body, &mut |s| {
            if let Stmt::For(l) = s {
                if l.kind.is_vectorized() {
                    found = Some(l);
                }
            }
        });
        found.expect("a vectorized loop")
    }

    const ELL: &str = "flat func f(n, w) {
  buffer C: f32[128] output values
  buffer A: f32[w] input values
  buffer J: i32[w] input indices(A, 1)
  buffer B: f32[n * 128] input values
  for p in 0..w {
    let j: idx = J[p]
    for k in 0..128 vectorized {
      C[k] = C[k] + select(j < n, A[p], 0.0) * select(j < n, select(k < 64, B[j * 128 + k], 0.0), 0.0)
    }
  }
}
";

    #[test]
    fn an_invariant_condition_is_a_guard_and_a_varying_one_is_not() {
        let f: Func = ELL.parse().unwrap();
        let l = the_loop(&f);
        let guards = invariant_guards(l);
        assert_eq!(guards.len(), 1, "{guards:?}");
        let stripped = Func {
            body: without_guards(&l.body, &guards),
            ..f.clone()
        };
        let text = stripped.to_string();
        assert!(
            text.contains("C[k] + A[p] * select(k < 64, B[j * 128 + k], 0.0)"),
            "{text}"
        );
    }

    #[test]
    fn a_store_of_guarded_factors_adds_nothing_where_its_guard_fails() {
        let f: Func = ELL.parse().unwrap();
        let l = the_loop(&f);
        let guards = invariant_guards(l);
        assert!(where_guards_fail(&l.body, &guards).is_none());
        // A factor without the guard could be infinite: the store stays.
        let text = ELL.replace("select(j < n, A[p], 0.0)", "A[p]");
        let f: Func = text.parse().unwrap();
        let l = the_loop(&f);
        let guards = invariant_guards(l);
        assert_eq!(
            where_guards_fail(&l.body, &guards).map(|b| b.len()),
            Some(1)
        );
    }

    const EDGE: &str = "flat func f(n, m, w) {
  buffer S: f32[16] output values
  buffer A: f32[w * 16] input values
  buffer x: f32[n] input values
  for p in 0..w {
    for ii in 0..2 {
      for ji in 0..8 vectorized {
        if p * 2 + ii < m {
          S[ii * 8 + ji] = S[ii * 8 + ji] + A[p * 16 + ii * 8 + ji] * select(p * 8 + ji < n, x[p * 8 + ji], 0.0)
        }
      }
    }
  }
}
";

    #[test]
    fn a_condition_linear_in_the_loop_is_a_range_guard_checked_at_both_ends() {
        let f: Func = EDGE.parse().unwrap();
        let l = the_loop(&f);
        assert!(invariant_guards(l).is_empty());
        let ranges = range_guards(l);
        assert_eq!(ranges.len(), 1, "{ranges:?}");
        let (cond, check) = &ranges[0];
        let text = |e| ExprDisplay::new(&f, e).to_string();
        assert_eq!(text(cond), "p * 8 + ji < n");
        assert_eq!(text(check), "p * 8 + 0 < n && p * 8 + 7 < n");
        // The `if` around the whole body does not change across the loop.
        let [Stmt::If { cond, .. }] = l.body.as_slice() else {
            panic!("one if")
        };
        assert!(invariant_condition(l, cond));
    }

    #[test]
    fn a_condition_not_monotone_in_the_loop_is_no_range_guard() {
        for edited in ["p * 8 + ji * ji < n", "p * 8 + ji != n", "x[ji] < 1.0"] {
            let text = EDGE.replace("p * 8 + ji < n", edited);
            let f: Func = text.parse().unwrap();
            assert!(range_guards(the_loop(&f)).is_empty(), "{edited}");
        }
        // A loop whose bounds are not constants has no range guards.
        let text = EDGE.replace("for ji in 0..8 vectorized", "for ji in 0..w vectorized");
        let f: Func = text.parse().unwrap();
        assert!(range_guards(the_loop(&f)).is_empty());
        // An `if` that reads the loop's variable is not tested before it.
        let text = EDGE.replace("if p * 2 + ii < m", "if p * 2 + ji < m");
        let f: Func = text.parse().unwrap();
        let l = the_loop(&f);
        let [Stmt::If { cond, .. }] = l.body.as_slice() else {
            panic!("one if")
        };
        assert!(!invariant_condition(l, cond));
    }

    #[test]
    fn a_condition_that_loads_or_reads_the_body_is_not_a_guard() {
        let text = ELL.replace("select(j < n, A[p], 0.0)", "select(J[p] < n, A[p], 0.0)");
        let text = text.replace("select(j < n, select(k < 64", "select(k < n, select(k < 64");
        let f: Func = text.parse().unwrap();
        assert!(invariant_guards(the_loop(&f)).is_empty());
    }
}
