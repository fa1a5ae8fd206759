//! The shape of a `register_tiled` loop: a loop over the blocks of a block row whose body
//! adds a dense tile product into output rows that stay the same across the loop.
//!
//! Purpose: a BSR SpMM block row is `for each block { for r { for c { for k { C[row(r),
//! k] += A[block, r, c] * B[col(c), k] } } } }`. Written as it stands, every
//! multiply-add loads and stores its element of `C`, which caps it at about one vector
//! multiply-add per cycle. A loop marked [`ForKind::RegisterTiled`] (text
//! `register_tiled`) lets the backend hold a tile of `C` (a few rows by a few vectors of
//! `k`) in registers across every block of the row: each step of `c` loads a vector of
//! `B` once for all the tile's rows and broadcasts each `A` value once for all its
//! vectors, the register-blocked micro-kernel of dense matrix products.
//!
//! [`register_tiled_shape`] checks the rules that make that reordering the same
//! computation. The loop `L`'s body is `pre ; N` where
//! - `pre` holds only `let`s, prefetches and `if`s (without `else`) around prefetches
//!   (or around such `if`s): it
//!   stores nothing, so the backend may run it again (once per tile of `C`);
//! - `N` is three nested loops with integer literal bounds, each the only statement of
//!   the one above: two of them, in either order, are the tile's rows `r` and columns `c`
//!   (at least one iteration each), the innermost is the dense width `k`; the innermost's
//!   body is one update `C[idx] = C[idx] + a * b` (either order of the sum and of the
//!   product), alone or under one `if G` without `else`. Or `N` is the row loop `r`
//!   holding the width loop directly, without a column loop (a block row's partial sums
//!   of element products, BSR SpMV after `rfactor`: `P[ii * 8 + ji] += A[jo_p, ii, ji] *
//!   x[jo * 8 + ji]`), where `a` may read `k` too. Or `N` is the width loop alone (a row
//!   of scalars, e.g. a CSR row of SpMM: one row, one column, no `r` or `c`);
//! - `idx` reads `r` (unless `r` runs once: a one-row block whose output row is cached)
//!   and `k` and none of `c`, `L`'s variable or `pre`'s `let`s, and gives distinct
//!   elements for distinct `(r, k)`: every index is `α·r + β·k + rest` (`rest` free of
//!   both); either one index has `β = 1`, `α = 0` and another `α ≠ 0`, `β = 0`, or a
//!   single index has `β = 1` and `|α|` at least `k`'s extent, or `r` runs once and one
//!   index has `β = 1`, the others `β = 0`;
//! - `b` reads `k` and not `r`; `a` does not read `k` (without a column loop it may, and
//!   `b` is then the factor that does not read `r`); `G` reads none of `k`, `c`,
//!   `L`'s variable and `pre`'s `let`s;
//! - `C` is read by nothing in `L` but the update's own load (not by `pre`, `a`, `b` or
//!   `G`), and no statement in `L` assigns a local.
//!
//! Every element `(r, k)` then receives the terms `a · b` of every `(L, c)` in the same
//! order as in the plain loop, whatever the order of the `r` and `c` loops, so holding a
//! tile in registers (loaded before the first iteration of `L`, stored after the last)
//! changes no result, provided `L` runs at least once and `G` holds for every row of the
//! tile (the backend checks both at run time and otherwise runs the plain loop). The
//! serial meaning of a `register_tiled` loop is that of a plain loop.
//!
//! ```
//! use sparsile_ir::loops::{register_tiled_shape, Func, Stmt};
//! let f: Func = "flat func f(n, m) {\n  buffer P: i32[2] input values\n  \
//!     buffer J: i32[n] input values\n  buffer A: f32[n * 4] input values\n  \
//!     buffer B: f32[m * 32] input values\n  buffer C: f32[64] output values\n  \
//!     for jp in P[0]..P[1] {\n    let j: idx = J[jp]\n    \
//!     for r in 0..2 {\n      for c in 0..2 {\n        for k in 0..32 vectorized {\n          \
//!     C[r * 32 + k] = C[r * 32 + k] + A[jp * 4 + r * 2 + c] * B[(j * 2 + c) * 32 + k]\n        \
//!     }\n      }\n    }\n  }\n}\n".parse().unwrap();
//! let Stmt::For(l) = &f.body[0] else { unreachable!() };
//! let shape = register_tiled_shape(&f, l).unwrap();
//! let tile = shape.tile.unwrap();
//! assert_eq!((tile.rows.1, tile.cols.unwrap().1, shape.width.1), (0..2, 0..2, 0..32));
//! ```
//!
//! A block row's partial sums of SpMV over `bsr:2x8` (rows × width, both factors read
//! the width):
//! ```
//! use sparsile_ir::loops::{register_tiled_shape, ExprDisplay, Func, Stmt};
//! let f: Func = "flat func f(n, m) {\n  buffer P: i32[2] input values\n  \
//!     buffer J: i32[n] input values\n  buffer A: f32[n * 16] input values\n  \
//!     buffer x: f32[m * 8] input values\n  buffer S: f32[16] temp local\n  \
//!     for jp in P[0]..P[1] {\n    let j: idx = J[jp]\n    \
//!     for r in 0..2 {\n      for k in 0..8 vectorized {\n        \
//!     S[r * 8 + k] = S[r * 8 + k] + A[jp * 16 + r * 8 + k] * x[j * 8 + k]\n      }\n    \
//!     }\n  }\n}\n".parse().unwrap();
//! let Stmt::For(l) = &f.body[0] else { unreachable!() };
//! let shape = register_tiled_shape(&f, l).unwrap();
//! let tile = shape.tile.unwrap();
//! assert_eq!((tile.rows.1, tile.cols, shape.width.1), (0..2, None, 0..8));
//! assert_eq!(ExprDisplay::new(&f, &shape.b).to_string(), "x[j * 8 + k]");
//! ```
//!
//! A CSR row of SpMM, its output row cached in `L`:
//! ```
//! use sparsile_ir::loops::{register_tiled_shape, Func, Stmt};
//! let f: Func = "flat func f(n, m) {\n  buffer P: i32[2] input values\n  \
//!     buffer J: i32[n] input values\n  buffer A: f32[n] input values\n  \
//!     buffer B: f32[m * 128] input values\n  buffer L: f32[128] temp local\n  \
//!     for jp in P[0]..P[1] {\n    let j: idx = J[jp]\n    \
//!     for k in 0..128 vectorized {\n      L[k] = L[k] + A[jp] * B[j * 128 + k]\n    }\n  \
//!     }\n}\n".parse().unwrap();
//! let Stmt::For(l) = &f.body[0] else { unreachable!() };
//! let shape = register_tiled_shape(&f, l).unwrap();
//! assert!(shape.tile.is_none());
//! assert_eq!(shape.width.1, 0..128);
//! ```

use std::collections::HashSet;
use std::ops::Range;

use super::expr::Expr;
use super::func::Func;
use super::local_reduction::{update_addend, ReductionError};
use super::stmt::{For, Stmt};
use super::vector_load::{coefficient, loads_any, reads_any as reads};
use crate::coord::BinaryOp;
use crate::id::{BufferId, VarId};

/// The parts of a `register_tiled` loop's body (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct RegisterTiledShape {
    /// The statements before the tile nest (`let`s and prefetches).
    pub pre: usize,
    /// The row and column loops' variables and ranges (`None`: a row of scalars, whose
    /// body is the width loop alone, as one row by one column).
    pub tile: Option<TileLoops>,
    /// The dense width loop's variable and range.
    pub width: (VarId, Range<i64>),
    /// The guard `G` (`None`: no `if`).
    pub guard: Option<Expr>,
    /// The accumulated buffer and its indices.
    pub c: BufferId,
    pub indices: Vec<Expr>,
    /// The factor that does not read `k` (`a`) and the one that does (`b`).
    pub a: Expr,
    pub b: Expr,
}

/// The row and column loops of a tile nest.
#[derive(Debug, Clone, PartialEq)]
pub struct TileLoops {
    /// The row loop's variable and range.
    pub rows: (VarId, Range<i64>),
    /// The column loop's variable and range (`None`: no column loop, the rows hold the
    /// width loop directly and both factors may read the width).
    pub cols: Option<(VarId, Range<i64>)>,
}

/// Whether `e` loads `buffer`.
fn loads(e: &Expr, buffer: BufferId) -> bool {
    loads_any(e, &HashSet::from([buffer]))
}

/// Whether `stmts` are prefetches and `if`s without `else` around such statements.
fn only_prefetches(stmts: &[Stmt]) -> bool {
    stmts.iter().all(|s| match s {
        Stmt::Prefetch { .. } => true,
        Stmt::If {
            then_body,
            else_body,
            ..
        } => else_body.is_empty() && only_prefetches(then_body),
        _ => false,
    })
}

fn literal_range(f: &For) -> Option<Range<i64>> {
    match (&f.lo, &f.hi) {
        (Expr::Int(lo), Expr::Int(hi)) => Some(*lo..*hi),
        _ => None,
    }
}

/// Checks the rules of the module docs for the body of `f` (its own kind is not looked
/// at) and returns its shape, or the first statement that breaks a rule.
pub fn register_tiled_shape(func: &Func, f: &For) -> Result<RegisterTiledShape, ReductionError> {
    let err = |span, message: &str| {
        Err(ReductionError {
            span,
            message: message.to_string(),
        })
    };
    let name = |b: BufferId| {
        func.buffers
            .get(b)
            .map_or_else(|| b.to_string(), |x| x.name.clone())
    };
    let Some((Stmt::For(outer), pre)) = f.body.split_last() else {
        return err(f.span, "the body does not end in the tile's loop nest");
    };
    // `pre`: lets, prefetches, ifs around prefetches.
    let mut inside: HashSet<VarId> = HashSet::from([f.var]);
    for s in pre {
        match s {
            Stmt::Let { var, .. } => {
                inside.insert(*var);
            }
            Stmt::Prefetch { .. } => {}
            Stmt::If { .. } if only_prefetches(std::slice::from_ref(s)) => {}
            other => {
                return err(
                    other.span(),
                    "before the tile's loop nest only `let`s and prefetches may stand",
                )
            }
        }
    }
    // Rows × columns × width (a block's tile), rows × width (a block row's partial sums
    // of element products, no column loop) or the width loop alone (a row of scalars:
    // one row, one column).
    let (loops, width) = match outer.body.as_slice() {
        [Stmt::For(mid)] => match mid.body.as_slice() {
            [Stmt::For(width)] => (Some((outer, Some(mid))), width),
            _ => (Some((outer, None)), mid),
        },
        _ => (None, outer),
    };
    let literal = |l: &For| {
        literal_range(l).ok_or(ReductionError {
            span: outer.span,
            message: "the tile's loops must have integer literal bounds".to_string(),
        })
    };
    let width_range = literal(width)?;
    let ranges = match loops {
        Some((o, m)) => Some((literal(o)?, m.map(literal).transpose()?)),
        None => None,
    };
    let empty = width_range.is_empty()
        || ranges
            .as_ref()
            .is_some_and(|(o, m)| o.is_empty() || m.as_ref().is_some_and(|m| m.is_empty()));
    if empty {
        return err(
            outer.span,
            "each of the tile's loops must run at least once",
        );
    }
    let (guard, update) = match width.body.as_slice() {
        [s @ Stmt::Store { .. }] => (None, s),
        [Stmt::If {
            cond,
            then_body,
            else_body,
            ..
        }] if else_body.is_empty() => match then_body.as_slice() {
            [s @ Stmt::Store { .. }] => (Some(cond.clone()), s),
            _ => {
                return err(
                    width.span,
                    "the `if` in the width loop must hold only the update",
                )
            }
        },
        _ => {
            return err(
                width.span,
                "the width loop must hold only the update (or one `if` around it)",
            )
        }
    };
    let Stmt::Store {
        buffer: c,
        indices,
        value,
        span,
    } = update
    else {
        unreachable!("matched a store above");
    };
    let not_update = || {
        err(
            *span,
            &format!(
                "the store to `{}` is not an update `C[e] = C[e] + a * b`",
                name(*c)
            ),
        )
    };
    let Some(addend) = update_addend(*c, indices, value) else {
        return not_update();
    };
    let Expr::Binary {
        op: BinaryOp::Mul,
        lhs,
        rhs,
    } = addend
    else {
        return not_update();
    };
    let k = width.var;
    // Without a column loop both factors may read the width (`A[jo_p, ii, ji] *
    // x[jo * 8 + ji]`): `b` is then the one that does not read the rows.
    let rows_only = matches!(loops, Some((_, None)));
    let (a, b) = match (lhs.reads_var(k), rhs.reads_var(k)) {
        (false, true) => ((**lhs).clone(), (**rhs).clone()),
        (true, false) => ((**rhs).clone(), (**lhs).clone()),
        (true, true) if rows_only => {
            if rhs.reads_var(outer.var) {
                ((**rhs).clone(), (**lhs).clone())
            } else {
                ((**lhs).clone(), (**rhs).clone())
            }
        }
        _ => {
            return err(
                *span,
                "exactly one factor of the product must read the width loop's variable",
            )
        }
    };
    // Which of the two outer loops is the row loop: the one the index reads.
    let idx_reads = |v: VarId| indices.iter().any(|e| e.reads_var(v));
    let tile = match (loops, ranges) {
        (Some((outer, None)), Some((outer_range, None))) => {
            if !idx_reads(outer.var) && outer_range.end - outer_range.start != 1 {
                return err(*span, "the accumulated element must read the tile's rows");
            }
            Some(TileLoops {
                rows: (outer.var, outer_range),
                cols: None,
            })
        }
        (Some((outer, Some(mid))), Some((outer_range, Some(mid_range)))) => {
            let (r, cl) = match (idx_reads(outer.var), idx_reads(mid.var)) {
                (true, false) => ((outer, outer_range), (mid, mid_range)),
                (false, true) => ((mid, mid_range), (outer, outer_range)),
                // A single row (a `bsr:1xC` block row whose output row is cached).
                (false, false) if outer_range.end - outer_range.start == 1 => {
                    ((outer, outer_range), (mid, mid_range))
                }
                (false, false) if mid_range.end - mid_range.start == 1 => {
                    ((mid, mid_range), (outer, outer_range))
                }
                _ => {
                    return err(
                        *span,
                        "the accumulated element must read exactly one of the tile's two outer loops (its rows)",
                    )
                }
            };
            Some(TileLoops {
                rows: (r.0.var, r.1),
                cols: Some((cl.0.var, cl.1)),
            })
        }
        _ => None,
    };
    let mut fixed = inside.clone();
    if let Some((cols, _)) = tile.as_ref().and_then(|t| t.cols.as_ref()) {
        fixed.insert(*cols);
    }
    if indices.iter().any(|e| reads(e, &fixed)) {
        return err(
            *span,
            "the accumulated element must not change across the blocks and the tile's columns",
        );
    }
    let extent = width_range.end - width_range.start;
    let is_distinct = match &tile {
        Some(t) => distinct(
            indices,
            (t.rows.0, t.rows.1.end - t.rows.1.start),
            k,
            extent,
        ),
        None => one_row_distinct(indices, k),
    };
    if !is_distinct {
        return err(
            *span,
            "the accumulated element must be distinct for distinct rows and widths (α·r + β·k with β = 1)",
        );
    }
    if let Some(t) = &tile {
        if b.reads_var(t.rows.0) {
            return err(
                *span,
                "the factor that reads the width must not read the tile's rows",
            );
        }
    }
    if let Some(g) = &guard {
        let mut moving = inside.clone();
        moving.insert(k);
        if let Some((cols, _)) = tile.as_ref().and_then(|t| t.cols.as_ref()) {
            moving.insert(*cols);
        }
        if reads(g, &moving) {
            return err(
                width.span,
                "the guard may read only the tile's rows and what is fixed across the blocks",
            );
        }
    }
    // `C` is read only by the update itself (`pre` stores nothing and assigns nothing:
    // it holds only lets and prefetches).
    if Stmt::loaded_buffers(pre).contains(c) || indices.iter().any(|e| loads(e, *c)) {
        return err(
            *span,
            &format!("nothing but the update may read `{}`", name(*c)),
        );
    }
    if loads(&a, *c) || loads(&b, *c) || guard.as_ref().is_some_and(|g| loads(g, *c)) {
        return err(
            *span,
            &format!("the factors and the guard must not read `{}`", name(*c)),
        );
    }
    Ok(RegisterTiledShape {
        pre: pre.len(),
        tile,
        width: (k, width_range),
        guard,
        c: *c,
        indices: indices.clone(),
        a,
        b,
    })
}

/// Whether `indices` name distinct elements for distinct `k` (a row of scalars): one
/// index moves with `k` at step 1, the others not at all.
fn one_row_distinct(indices: &[Expr], k: VarId) -> bool {
    let coefs: Option<Vec<i64>> = indices.iter().map(|e| coefficient(e, k)).collect();
    coefs.is_some_and(|c| c.iter().filter(|&&b| b != 0).count() == 1 && c.contains(&1))
}

/// Whether `indices` name distinct elements for distinct `(r, k)`, `r` over `rows`
/// values and `k` over `extent` consecutive values (see the module docs).
fn distinct(indices: &[Expr], (r, rows): (VarId, i64), k: VarId, extent: i64) -> bool {
    let coefs: Option<Vec<(i64, i64)>> = indices
        .iter()
        .map(|e| Some((coefficient(e, r)?, coefficient(e, k)?)))
        .collect();
    let Some(coefs) = coefs else {
        return false;
    };
    if rows == 1 {
        return coefs.iter().filter(|c| c.1 != 0).count() == 1 && coefs.iter().any(|c| c.1 == 1);
    }
    match coefs.as_slice() {
        [(alpha, 1)] => alpha.unsigned_abs() >= extent.unsigned_abs(),
        _ => {
            coefs.iter().filter(|c| c.1 != 0).count() == 1
                && coefs.contains(&(0, 1))
                && coefs.iter().any(|&(alpha, beta)| alpha != 0 && beta == 0)
        }
    }
}
