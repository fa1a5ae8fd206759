//! Run-time check of the promises `bound` makes.
//!
//! `bound(loop, extent)` turns `for v in lo..hi` into `for v in lo..lo + extent { if v < hi
//! { body } }`: a constant trip count, on the promise that the loop never runs more than
//! `extent` iterations. A trace recorded on inputs where the promise held and replayed on
//! larger ones (K = 32 bounded to 32, then run with K = 64) would skip the iterations past
//! the extent. [`bound_promises`] finds the loops of that form in a function whose `lo`
//! and `hi` depend on sizes only (parameters and constants); the compiled kernel and the
//! flat interpreter check each against the parameters before running and refuse inputs
//! that break it ([`KernelError::BoundExceeded`](crate::KernelError::BoundExceeded),
//! [`FlatInterpError::BoundExceeded`](crate::FlatInterpError::BoundExceeded)) instead of
//! dropping iterations. Loops whose `hi` reads data (a row's length) are not checked: the
//! promise is the schedule author's.
//!
//! ```
//! use sparsile_runtime::bound_promises::{bound_promises, broken_promise};
//! let func: sparsile_ir::loops::Func = "pos func main(k) {\n  axis I_k = dense_fixed(k)\n  buffer y: f64[I_k] output values\n  block s {\n    for c in 0..8 {\n      if c < k {\n        y[c] = 1.0\n      }\n    }\n  }\n}\n"
//!     .parse()
//!     .unwrap();
//! let promises = bound_promises(&func);
//! assert_eq!(promises.len(), 1);
//! assert!(broken_promise(&promises, &[8]).is_none());
//! let (broken, trip) = broken_promise(&promises, &[9]).unwrap();
//! assert_eq!((broken.var.as_str(), broken.extent, trip), ("c", 8, 9));
//! ```

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{CmpOp, Expr, Func, Stmt};

/// A loop `for var in lo..lo + extent { if var < hi { … } }` with `lo` and `hi` computed
/// from parameters and constants: it runs all its iterations only when `hi - lo <= extent`.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundPromise {
    /// The loop variable's name.
    pub var: String,
    pub lo: Expr,
    pub hi: Expr,
    pub extent: i64,
}

/// Every loop of `func` of the form a `bound` with size-only bounds produces.
pub fn bound_promises(func: &Func) -> Vec<BoundPromise> {
    fn walk(func: &Func, stmts: &[Stmt], out: &mut Vec<BoundPromise>) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    if let Some(p) = promise(func, f) {
                        out.push(p);
                    }
                    walk(func, &f.body, out);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(func, then_body, out);
                    walk(func, else_body, out);
                }
                Stmt::Block { body, .. } => walk(func, body, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(func, &func.body, &mut out);
    out
}

fn promise(func: &Func, f: &sparsile_ir::loops::For) -> Option<BoundPromise> {
    let extent = match (&f.lo, &f.hi) {
        (Expr::Int(a), Expr::Int(b)) => b.checked_sub(*a)?,
        (
            lo,
            Expr::Binary {
                op: BinaryOp::Add,
                lhs,
                rhs,
            },
        ) if **lhs == *lo => match **rhs {
            Expr::Int(c) => c,
            _ => return None,
        },
        _ => return None,
    };
    let [Stmt::If {
        cond: Expr::Cmp {
            op: CmpOp::Lt,
            lhs,
            rhs,
        },
        else_body,
        ..
    }] = f.body.as_slice()
    else {
        return None;
    };
    if !else_body.is_empty() || **lhs != Expr::Var(f.var) {
        return None;
    }
    (sizes_only(&f.lo) && sizes_only(rhs)).then(|| BoundPromise {
        var: func.vars[f.var].name.clone(),
        lo: f.lo.clone(),
        hi: (**rhs).clone(),
        extent,
    })
}

/// Whether `e` is computed from parameters and constants only.
fn sizes_only(e: &Expr) -> bool {
    match e {
        Expr::Int(_) | Expr::Param(_) => true,
        Expr::Binary { lhs, rhs, .. } => sizes_only(lhs) && sizes_only(rhs),
        _ => false,
    }
}

/// The value of a sizes-only expression under `params` (in `Func::params` order);
/// `None` on overflow or division by zero.
fn eval(e: &Expr, params: &[i64]) -> Option<i64> {
    match e {
        Expr::Int(v) => Some(*v),
        Expr::Param(p) => params.get(sparsile_ir::id::Id::index(*p)).copied(),
        Expr::Binary { op, lhs, rhs } => {
            let (a, b) = (eval(lhs, params)?, eval(rhs, params)?);
            match op {
                BinaryOp::Add => a.checked_add(b),
                BinaryOp::Sub => a.checked_sub(b),
                BinaryOp::Mul => a.checked_mul(b),
                BinaryOp::Div => a.checked_div_euclid(b),
                BinaryOp::Rem => a.checked_rem_euclid(b),
                BinaryOp::Max => Some(a.max(b)),
                BinaryOp::Min => Some(a.min(b)),
            }
        }
        _ => None,
    }
}

/// The first promise `params` break, with the trip count they give its loop
/// (`i64::MAX` when it overflows).
pub fn broken_promise<'p>(
    promises: &'p [BoundPromise],
    params: &[i64],
) -> Option<(&'p BoundPromise, i64)> {
    promises.iter().find_map(|p| {
        let trip = match (eval(&p.lo, params), eval(&p.hi, params)) {
            (Some(lo), Some(hi)) => hi.checked_sub(lo).unwrap_or(i64::MAX),
            _ => i64::MAX,
        };
        (trip > p.extent).then_some((p, trip))
    })
}
