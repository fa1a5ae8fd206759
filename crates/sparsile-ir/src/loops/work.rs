//! An estimate of how much work a loop does: the number of leaf statements (stores,
//! atomic adds, assignments) it executes, as an integer expression evaluated at run time.
//!
//! Purpose: the runtime runs a parallel phase on the calling thread alone when it is too
//! small to pay for waking other threads, and wakes sleeping threads only when the phase
//! is large enough for them to arrive in time; both decisions need the phase's size
//! before it runs. Cost models can use the same count.
//!
//! Preconditions: `f` is a loop of a stage-II or stage-III function whose bounds do not
//! read variables declared inside it (true of every top-level loop).
//!
//! Rules, for the total number of iterations `T(g)` of each loop `g` nested in `f` (over
//! the whole of `f`, not per iteration):
//! - `T(f) = max(0, hi - lo)`;
//! - a loop whose bounds read no variable of `f`'s nest runs `T(parent) · max(0, hi - lo)`
//!   times;
//! - a loop over the positions of a compressed axis, `X[v + c]..X[v + c + 1]` with `v` the
//!   variable of the enclosing loop whose values over the whole nest form one contiguous
//!   range `[s, t)` (true of `f` itself, and of such a position loop directly under one
//!   with a contiguous range), runs `X[t + c] - X[s + c]` times in all, and its own values
//!   form the contiguous range `[X[s + c], X[t + c])`. With loops between (`for v`,
//!   `for k in 0..K`, then the position loop) the total scales by `T(parent) / T(v's loop)`.
//! - any other bounds (reading variables declared in the nest in another way) make the
//!   estimate unknown (`None`).
//!
//! A leaf statement counts `T` of its innermost enclosing loop (an `mma` counts `M·N·K`
//! times that, the multiply-adds of the loop nest it stands for); both branches of a
//! conditional count. The result is an upper estimate of executed leaves and ignores
//! vector widths: it ranks work, it does not time it. Evaluate it only when `f` runs at
//! least once: it reads structure arrays at `f`'s bounds.
//!
//! ```
//! use sparsile_ir::loops::{estimated_work, ExprDisplay, Func, Stmt};
//! let func: Func = "flat func spmv(m, nnz) {
//!   buffer y: f32[m] output values
//!   buffer A: f32[nnz] input values
//!   buffer P: i32[m + 1] input indptr(A, 1)
//!   for i in 0..m parallel {
//!     y[i] = 0.0
//!     for p in P[i]..P[i + 1] {
//!       y[i] = y[i] + A[p]
//!     }
//!   }
//! }
//! ".parse().unwrap();
//! let Stmt::For(f) = &func.body[0] else { unreachable!() };
//! let work = estimated_work(f).unwrap();
//! // m stores of the zero, then one store per non-zero of the rows 0..m.
//! assert_eq!(ExprDisplay::new(&func, &work).to_string(), "max(m, 0) + (P[m] - P[0])");
//! ```

use std::collections::{HashMap, HashSet};

use super::expr::Expr;
use super::stmt::{For, Stmt};
use crate::coord::BinaryOp;
use crate::id::{BufferId, VarId};

/// The estimated number of leaf statements `f` executes in all (see the module docs), or
/// `None` when a nested loop's bounds are not understood.
pub fn estimated_work(f: &For) -> Option<Expr> {
    let mut nest = HashSet::new();
    nest.insert(f.var);
    Stmt::visit_all(&f.body, &mut |s| match s {
        Stmt::For(g) => {
            nest.insert(g.var);
        }
        Stmt::Let { var, .. } => {
            nest.insert(*var);
        }
        _ => {}
    });
    let total = trip(&f.lo, &f.hi);
    let mut est = Estimator {
        nest,
        ranges: HashMap::from([(f.var, (f.lo.clone(), f.hi.clone(), total.clone()))]),
    };
    est.body(&f.body, &total, Some(f.var))
}

struct Estimator {
    /// Variables declared in the nest (loop variables and locals).
    nest: HashSet<VarId>,
    /// Loop variables whose values over the whole nest are one contiguous range
    /// `[start, end)`, with their loop's total iteration count.
    ranges: HashMap<VarId, (Expr, Expr, Expr)>,
}

impl Estimator {
    /// The leaves `stmts` execute in all, when their enclosing loop (variable `inner`)
    /// runs `total` iterations.
    fn body(&mut self, stmts: &[Stmt], total: &Expr, inner: Option<VarId>) -> Option<Expr> {
        let mut leaves = 0i64;
        let mut nested = Expr::Int(0);
        for s in stmts {
            match s {
                Stmt::Store { .. } | Stmt::AtomicAdd { .. } | Stmt::Assign { .. } => leaves += 1,
                // The tile's multiply-adds, as many as the loop nest it stands for.
                Stmt::Mma(m) => leaves += i64::from(m.shape.m() * m.shape.n() * m.shape.k()),
                Stmt::Let { .. }
                | Stmt::Prefetch { .. }
                | Stmt::Barrier { .. }
                | Stmt::WarpReduce { .. } => {}
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    nested = add(nested, self.body(then_body, total, inner)?);
                    nested = add(nested, self.body(else_body, total, inner)?);
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                    nested = add(nested, self.body(body, total, inner)?)
                }
                Stmt::For(g) => {
                    let g_total = self.loop_total(g, total, inner)?;
                    nested = add(nested, self.body(&g.body, &g_total, Some(g.var))?);
                }
            }
        }
        Some(add(mul(Expr::Int(leaves), total.clone()), nested))
    }

    /// The total iterations of `g` nested in a loop (variable `inner`) that runs `total`
    /// iterations; records `g`'s range when it is contiguous.
    fn loop_total(&mut self, g: &For, total: &Expr, inner: Option<VarId>) -> Option<Expr> {
        if !self.reads_nest(&g.lo) && !self.reads_nest(&g.hi) {
            return Some(mul(total.clone(), trip(&g.lo, &g.hi)));
        }
        let (buffer, v, c) = position_range(&g.lo, &g.hi)?;
        let (start, end, v_total) = self.ranges.get(&v)?.clone();
        let at = |x: &Expr| Expr::load(buffer, vec![add(x.clone(), Expr::Int(c))]);
        let span = sub(at(&end), at(&start));
        if Some(v) == inner {
            self.ranges
                .insert(g.var, (at(&start), at(&end), span.clone()));
            Some(span)
        } else {
            // Loops between v's and g's: each value of v is visited T(parent)/T(v) times.
            Some(Expr::binary(
                BinaryOp::Div,
                mul(total.clone(), span),
                Expr::binary(BinaryOp::Max, v_total, Expr::Int(1)),
            ))
        }
    }

    fn reads_nest(&self, e: &Expr) -> bool {
        let mut reads = false;
        e.visit(&mut |x| {
            if let Expr::Var(v) = x {
                reads |= self.nest.contains(v);
            }
        });
        reads
    }
}

/// `lo..hi` of the form `X[v + c]..X[v + c + 1]`: `(X, v, c)`.
fn position_range(lo: &Expr, hi: &Expr) -> Option<(BufferId, VarId, i64)> {
    let (
        Expr::Load {
            buffer: b1,
            indices: i1,
        },
        Expr::Load {
            buffer: b2,
            indices: i2,
        },
    ) = (lo, hi)
    else {
        return None;
    };
    if b1 != b2 || i1.len() != 1 || i2.len() != 1 {
        return None;
    }
    let (v1, c1) = var_plus_const(&i1[0])?;
    let (v2, c2) = var_plus_const(&i2[0])?;
    (v1 == v2 && c2 == c1 + 1).then_some((*b1, v1, c1))
}

/// `v`, `v + c` or `c + v`: `(v, c)`.
fn var_plus_const(e: &Expr) -> Option<(VarId, i64)> {
    match e {
        Expr::Var(v) => Some((*v, 0)),
        Expr::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
        } => match (&**lhs, &**rhs) {
            (Expr::Var(v), Expr::Int(c)) | (Expr::Int(c), Expr::Var(v)) => Some((*v, *c)),
            _ => None,
        },
        _ => None,
    }
}

fn trip(lo: &Expr, hi: &Expr) -> Expr {
    match (lo, hi) {
        (Expr::Int(a), Expr::Int(b)) => Expr::Int((b - a).max(0)),
        (Expr::Int(0), _) => Expr::binary(BinaryOp::Max, hi.clone(), Expr::Int(0)),
        _ => Expr::binary(BinaryOp::Max, sub(hi.clone(), lo.clone()), Expr::Int(0)),
    }
}

fn add(a: Expr, b: Expr) -> Expr {
    match (&a, &b) {
        (Expr::Int(0), _) => b,
        (_, Expr::Int(0)) => a,
        (Expr::Int(x), Expr::Int(y)) => Expr::Int(x.saturating_add(*y)),
        _ => Expr::binary(BinaryOp::Add, a, b),
    }
}

fn sub(a: Expr, b: Expr) -> Expr {
    match (&a, &b) {
        (_, Expr::Int(0)) => a,
        (Expr::Int(x), Expr::Int(y)) => Expr::Int(x.saturating_sub(*y)),
        _ => Expr::binary(BinaryOp::Sub, a, b),
    }
}

fn mul(a: Expr, b: Expr) -> Expr {
    match (&a, &b) {
        (Expr::Int(1), _) => b,
        (_, Expr::Int(1)) => a,
        (Expr::Int(0), _) | (_, Expr::Int(0)) => Expr::Int(0),
        (Expr::Int(x), Expr::Int(y)) => Expr::Int(x.saturating_mul(*y)),
        _ => Expr::binary(BinaryOp::Mul, a, b),
    }
}
