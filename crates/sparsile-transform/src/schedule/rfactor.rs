//! `rfactor`: splits the sum a reduction loop accumulates into partial sums, one per
//! iteration of an inner loop with constant bounds, combined after the loop.
//!
//! Purpose: a long row reduction `for jp { y[i] = y[i] + A[jp] * x[j] }` is a chain of
//! dependent additions. After `split(jp, F)`, `rfactor(jp_o, jp_i)` accumulates into a
//! local array `partial[0..F]` indexed by `jp_i`, so the `F` chains are independent and
//! the inner loop can be vectorised; the partial sums are added into `y[i]` after the
//! reduction loop.
//!
//! Preconditions (each violation is its own [`ScheduleError`]):
//! - `target` (the reduction loop) and `inner` (a loop inside it, same block, with
//!   constant bounds) exist ([`ScheduleError::UnknownLoop`],
//!   [`ScheduleError::RfactorInner`]);
//! - the loop body updates exactly one element of one buffer through `X[e] = X[e] + v`
//!   (any number of such statements, all inside `inner`), `e` computable before the loop
//!   (it reads no variable declared inside it and no buffer it writes), `v` not reading
//!   `X`, and the loop touches `X` nowhere else ([`ScheduleError::NotAReduction`]).
//!
//! A *row* of partial sums is supported too: when one index of the updated element is
//! the variable of a loop inside `target` that runs over the whole of a parentless
//! `dense_fixed` axis of constant length `W` (SpMM's `k` after `specialize`), the partial
//! buffer holds `W` sums per iteration of `inner` (`partial[(w - lo) * W + k]`) and the
//! combine adds each row back (DA-SpMM's row-major parallel reduction).
//!
//! A *block row* of partial sums likewise: when one index of the updated element is
//! `base + v`, `v` the variable of a loop `0..R` inside `target` (R ≥ 2) and `base` free
//! of it (`y[io * 8 + ii]` of SpMV over `bsr:8x8`), the partial buffer holds `R` rows of
//! `inner`'s trip count, each row's sums side by side when the row loop encloses
//! `inner` (`partial[ii * 8 + ji]`, so a vectorised `inner` updates consecutive slots);
//! the combine adds each row back into `X[base + c]`, under the conditions around the
//! updates that read `v` (a padded block row's `io * 8 + ii < m`) with `v` replaced by
//! `c`. `register_tile` then holds those rows in vector registers across the row's
//! blocks.
//!
//! The variable of a loop inside `target` that runs exactly once (`c..c + 1`: the block
//! row of a `bsr:1xC` block) stands for the constant `c` in the updated element, so
//! `y[io * 1 + ii]` over `for ii in 0..1` is the element `y[io * 1 + 0]`, computable
//! before the loop.
//!
//! Postcondition: a local buffer `<X>_partial` of `inner`'s trip count (times `W`); before `target`
//! it is zeroed, inside every update becomes `partial[w - lo] = partial[w - lo] + v`
//! (`w` the inner variable), and after `target` every partial sum is added to `X[e]` in
//! order. Floating-point sums are reassociated. Conditions around the updates that the
//! loop does not change (a padded block row's `io * 2 + ii < m`) guard the combine too,
//! so it never touches an element the updates could not; an update in the `else` branch
//! of such a condition is refused.
//!
//! Example (`tests/schedule_rfactor.rs`):
//! ```text
//! for jp_o in 0..(n + 3) / 4 {            for r in 0..4 { y_partial[r] = 0.0 }
//!   for jp_i in 0..4 {            →       for jp_o in ... { for jp_i in 0..4 { ...
//!     ... y[i] = y[i] + v                     y_partial[jp_i] = y_partial[jp_i] + v } }
//!                                         for r in 0..4 { y[i] = y[i] + y_partial[r] }
//! ```

use sparsile_ir::coord::Extent;
use sparsile_ir::coord::{BinaryOp, BufferRole};
use sparsile_ir::id::{BufferId, VarId};
use sparsile_ir::loops::{
    Buffer, BufferKind, BufferLayout, Expr, For, ForKind, Func, LogicOp, Mma, Stmt,
};
use sparsile_ir::{AxisKind, Span};

use super::cache_write::{accesses, Body};
use super::loop_ref::{contains_loop, fresh_index_var, fresh_name, parent_list_mut};
use super::parallel::find_loop;
use super::single_iteration::{fold, single_iterations};
use super::{LoopRef, ScheduleError};
use crate::index_expr::{add, mul, sub};

const PRIMITIVE: &str = "rfactor";

/// Splits the reduction of `target` over the iterations of `inner` (see the module docs).
/// Returns the function and the name of the partial-sum buffer.
pub fn rfactor(
    func: &Func,
    target: &LoopRef,
    inner: &LoopRef,
) -> Result<(Func, String), ScheduleError> {
    let f = find_loop(func, target, PRIMITIVE)?.for_;
    let g = find_loop(func, inner, PRIMITIVE)?.for_;
    let inner_err = |reason: &'static str| ScheduleError::RfactorInner {
        block: target.block.clone(),
        var: target.var.clone(),
        inner: inner.var.clone(),
        reason,
        span: g.span,
    };
    if inner.block != target.block || !contains_loop(&f.body, g.var) {
        return Err(inner_err("it is not inside the loop"));
    }
    let (Expr::Int(lo), Expr::Int(hi)) = (&g.lo, &g.hi) else {
        return Err(inner_err("its bounds are not constants (use bound first)"));
    };
    let (lo, hi) = (*lo, (*hi).max(*lo + 1));
    if hi - lo > super::cache_write::MAX_LOCAL_ELEMENTS {
        return Err(inner_err("it runs too many iterations for a local array"));
    }
    let not_reduction =
        |buffer: &str, reason: &'static str, span: Span| ScheduleError::NotAReduction {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            what: format!("`{buffer}` but not as a sum: {reason}"),
            span,
        };
    // The one buffer the loop updates.
    let mut updated: Vec<(BufferId, Vec<Expr>, Span)> = Vec::new();
    collect_updates(&f.body, false, g.var, &mut updated, &mut None);
    let body = Body::of(f);
    let stored: Vec<BufferId> = body.stores.iter().copied().collect();
    let Some(&(x, ref e, span)) = updated.first() else {
        return Err(ScheduleError::NotAReduction {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            what: "no element as a sum: the loop has no update `X[e] = X[e] + v`".into(),
            span: f.span,
        });
    };
    let name = func.buffers[x].name.clone();
    if stored
        .iter()
        .any(|b| *b != x && func.buffers[*b].kind != BufferKind::Local)
    {
        return Err(not_reduction(
            &name,
            "the loop stores to other buffers too",
            f.span,
        ));
    }
    let mut outside = None;
    collect_updates(&f.body, false, g.var, &mut Vec::new(), &mut outside);
    if let Some(span) = outside {
        return Err(not_reduction(
            &name,
            "a store to it is not an update inside the inner loop",
            span,
        ));
    }
    if updated.iter().any(|(b, ix, _)| *b != x || ix != e) {
        return Err(not_reduction(
            &name,
            "the updates do not all add to one element",
            span,
        ));
    }
    let all = accesses(&f.body, x).len();
    if all != 2 * updated.len() {
        return Err(not_reduction(
            &name,
            "the loop reads it outside its `+=` updates",
            span,
        ));
    }
    let declared_inside = Stmt::declared_vars(&f.body);
    // A *row* position: an index that is exactly the variable of a loop inside `target`
    // running over the whole of a parentless dense_fixed axis of constant length.
    let row = row_position(func, f, x, e, g.var);
    // The variable of a loop inside `target` that runs once (`c..c + 1`, the block row
    // of a 1xC block format) is the constant `c` wherever the update happens.
    let once = single_iterations(&f.body);
    let e: &Vec<Expr> = &e.iter().map(|ix| fold(ix, &once)).collect();
    let mut computable = true;
    for (k, ix) in e.iter().enumerate() {
        // The row position reads the row variable; the rest of it (a block row's
        // `io * 8` in `io * 8 + ii`) must be computable before the loop like any index.
        let ix = &match &row {
            Some(r) if r.position == k => at_column(ix, r.var, &Expr::Int(0)),
            _ => ix.clone(),
        };
        ix.visit(&mut |y| match y {
            Expr::Var(v) if *v == f.var || declared_inside.contains(v) => computable = false,
            Expr::Load { buffer, .. } | Expr::Search { buffer, .. } if stored.contains(buffer) => {
                computable = false
            }
            _ => {}
        });
    }
    if !computable {
        return Err(not_reduction(
            &name,
            "the updated element depends on the loop or on what it declares or writes",
            span,
        ));
    }
    // Conditions around the updates that hold for the whole loop (a padded block row's
    // `io * 2 + ii < m`) also guard the combine: where they fail no update ran, and the
    // element may not exist.
    let computable_before = |c: &Expr| {
        let mut ok = true;
        c.visit(&mut |y| match y {
            Expr::Var(v) if *v == f.var || declared_inside.contains(v) => ok = false,
            Expr::Load { buffer, .. } | Expr::Search { buffer, .. } if stored.contains(buffer) => {
                ok = false
            }
            _ => {}
        });
        ok
    };
    let mut out = func.clone();
    let mut guards = Vec::new();
    update_guards(&f.body, x, &mut Vec::new(), &mut guards);
    // A condition that reads the row variable and is otherwise computable before the
    // loop (a padded block row's `io * 8 + ii < m`) guards each column of the combine,
    // the variable replaced by the column (`row_guards`).
    let (column, _) = fresh_index_var(&mut out, "c");
    let mut common: Option<Vec<(Expr, bool)>> = None;
    for conds in &guards {
        let mut mine = Vec::new();
        for (cond, negated) in conds {
            let cond = fold(cond, &once);
            let (cond, reads_row) = match &row {
                Some(r) if cond.reads_var(r.var) => {
                    (at_column(&cond, r.var, &Expr::Var(column)), true)
                }
                _ => (cond, false),
            };
            if !computable_before(&cond) {
                continue;
            }
            if *negated {
                return Err(not_reduction(
                    &name,
                    "an update sits in the `else` branch of a condition the combine would need",
                    span,
                ));
            }
            mine.push((cond, reads_row));
        }
        common = Some(match common {
            None => mine,
            Some(c) => c.into_iter().filter(|x| mine.contains(x)).collect(),
        });
    }
    let (row_guards, common): (Vec<_>, Vec<_>) = common
        .unwrap_or_default()
        .into_iter()
        .partition(|(_, r)| *r);
    let common: Vec<Expr> = common.into_iter().map(|(c, _)| c).collect();
    let row_guards = conjunction(row_guards.into_iter().map(|(c, _)| c));
    let width = row.as_ref().map_or(1, |r| r.width);
    if (hi - lo) * width > super::cache_write::MAX_LOCAL_ELEMENTS {
        return Err(inner_err(
            "the partial rows are too large for a local array",
        ));
    }
    let pname = fresh_name(&out, &format!("{name}_partial"));
    let partial = out.buffers.push(Buffer {
        name: pname.clone(),
        dtype: func.buffers[x].dtype.compute_type(),
        layout: BufferLayout::Flat(Expr::Int((hi - lo) * width)),
        role: BufferRole::Temp,
        kind: BufferKind::Local,
        span: Span::default(),
    });
    let (r0, _) = fresh_index_var(&mut out, "r");
    let (r1, _) = fresh_index_var(&mut out, "r");
    let zero = Stmt::For(For {
        var: r0,
        lo: Expr::Int(0),
        hi: Expr::Int((hi - lo) * width),
        kind: ForKind::Serial,
        body: vec![Stmt::Store {
            buffer: partial,
            indices: vec![Expr::Var(r0)],
            value: Expr::Float(0.0),
            span: f.span,
        }],
        span: f.span,
    });
    // The combine: X[e] += partial[r] (one element), or for every column c of the row,
    // X[e with the row variable := c] += partial[r * width + c].
    let add_into = |indices: Vec<Expr>, slot: Expr| Stmt::Store {
        buffer: x,
        indices: indices.clone(),
        value: Expr::binary(
            BinaryOp::Add,
            Expr::load(x, indices),
            Expr::load(partial, vec![slot]),
        ),
        span: f.span,
    };
    let combine_body = match &row {
        None => add_into(e.clone(), Expr::Var(r1)),
        Some(r) => {
            let c = column;
            let mut at = e.clone();
            at[r.position] = at_column(&e[r.position], r.var, &Expr::Var(c));
            let slot = if r.row_outer {
                add(mul(Expr::Var(c), Expr::Int(hi - lo)), Expr::Var(r1))
            } else {
                add(mul(Expr::Var(r1), Expr::Int(width)), Expr::Var(c))
            };
            let mut update = add_into(at, slot);
            if let Some(cond) = row_guards {
                update = Stmt::If {
                    cond,
                    then_body: vec![update],
                    else_body: Vec::new(),
                    span: f.span,
                };
            }
            Stmt::For(For {
                var: c,
                lo: Expr::Int(0),
                hi: Expr::Int(width),
                kind: ForKind::Serial,
                body: vec![update],
                span: f.span,
            })
        }
    };
    let mut combine = Stmt::For(For {
        var: r1,
        lo: Expr::Int(0),
        hi: Expr::Int(hi - lo),
        kind: ForKind::Serial,
        body: vec![combine_body],
        span: f.span,
    });
    if let Some(cond) = conjunction(common) {
        combine = Stmt::If {
            cond,
            then_body: vec![combine],
            else_body: Vec::new(),
            span: f.span,
        };
    }
    let slot_index = match &row {
        None => sub(Expr::Var(g.var), Expr::Int(lo)),
        // The row loop encloses `inner`: `inner`'s partial sums of one row side by side,
        // so that a vectorised `inner` updates consecutive slots.
        Some(r) if r.row_outer => add(
            mul(Expr::Var(r.var), Expr::Int(hi - lo)),
            sub(Expr::Var(g.var), Expr::Int(lo)),
        ),
        Some(r) => add(
            mul(sub(Expr::Var(g.var), Expr::Int(lo)), Expr::Int(width)),
            Expr::Var(r.var),
        ),
    };
    let new_loop = Stmt::For(For {
        body: redirect(&f.body, x, partial, &slot_index),
        ..f.clone()
    });
    let (list, at) = parent_list_mut(&mut out.body, f.var).expect("the loop was found");
    list[at] = new_loop;
    list.insert(at + 1, combine);
    list.insert(at, zero);
    Ok((out, pname))
}

/// The conditions around every update `X[e] = X[e] + v` of `x` in `stmts` (outermost
/// first; `true` marks an `else` branch), one list per update, into `out`.
fn update_guards(
    stmts: &[Stmt],
    x: BufferId,
    stack: &mut Vec<(Expr, bool)>,
    out: &mut Vec<Vec<(Expr, bool)>>,
) {
    for s in stmts {
        match s {
            Stmt::For(g) => update_guards(&g.body, x, stack, out),
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                update_guards(body, x, stack, out)
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } => {
                stack.push((cond.clone(), false));
                update_guards(then_body, x, stack, out);
                stack.last_mut().expect("just pushed").1 = true;
                update_guards(else_body, x, stack, out);
                stack.pop();
            }
            Stmt::Store { buffer, .. } if *buffer == x => out.push(stack.clone()),
            _ => {}
        }
    }
}

/// Updates `X[e] = X[e] + v` (inside the loop over `inner` when `in_inner`) into
/// `found`; the span of the first store that is not one, or not inside `inner`, into
/// `outside`.
pub(crate) fn collect_updates(
    stmts: &[Stmt],
    in_inner: bool,
    inner: VarId,
    found: &mut Vec<(BufferId, Vec<Expr>, Span)>,
    outside: &mut Option<Span>,
) {
    for s in stmts {
        match s {
            Stmt::For(g) => {
                collect_updates(&g.body, in_inner || g.var == inner, inner, found, outside)
            }
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                collect_updates(then_body, in_inner, inner, found, outside);
                collect_updates(else_body, in_inner, inner, found, outside);
            }
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                collect_updates(body, in_inner, inner, found, outside)
            }
            Stmt::Store {
                buffer,
                indices,
                value,
                span,
            } => {
                let is_update = matches!(value, Expr::Binary { op: BinaryOp::Add, lhs, .. }
                    if matches!(&**lhs, Expr::Load { buffer: b, indices: ix } if b == buffer && ix == indices));
                if is_update && in_inner {
                    found.push((*buffer, indices.clone(), *span));
                } else if outside.is_none() {
                    *outside = Some(*span);
                }
            }
            Stmt::AtomicAdd { span, .. } | Stmt::Mma(Mma { span, .. }) => {
                if outside.is_none() {
                    *outside = Some(*span);
                }
            }
            Stmt::Let { .. }
            | Stmt::Assign { .. }
            | Stmt::Prefetch { .. }
            | Stmt::Barrier { .. }
            | Stmt::WarpReduce { .. } => {}
        }
    }
}

/// `stmts` with every update `X[e] = X[e] + v` of `x` accumulating into `partial[slot]`.
fn redirect(stmts: &[Stmt], x: BufferId, partial: BufferId, slot: &Expr) -> Vec<Stmt> {
    Stmt::map_leaves(stmts, &mut |s| match s {
        Stmt::Store {
            buffer,
            value:
                Expr::Binary {
                    op: BinaryOp::Add,
                    rhs,
                    ..
                },
            span,
            ..
        } if *buffer == x => {
            let at = vec![slot.clone()];
            Some(Stmt::Store {
                buffer: partial,
                indices: at.clone(),
                value: Expr::binary(BinaryOp::Add, Expr::load(partial, at), (**rhs).clone()),
                span: *span,
            })
        }
        _ => None,
    })
}

/// A row position of the updated element: index `position` is the variable `var` of a
/// loop inside the reduction loop over `0..width`, and either the buffer's axis there is
/// a parentless `dense_fixed` axis of constant length `width` (SpMM's `k`), or the index
/// is `base + var` with `base` free of `var` (a BSR block row's `io * 8 + ii`: the
/// elements `base..base + width` are those the row loop updates in every iteration).
struct RowPosition {
    position: usize,
    var: VarId,
    width: i64,
    /// Whether the row loop encloses the `inner` loop of the partial sums.
    row_outer: bool,
}

fn row_position(
    func: &Func,
    f: &For,
    x: BufferId,
    e: &[Expr],
    inner: VarId,
) -> Option<RowPosition> {
    let loops = inner_loops(&f.body);
    e.iter().enumerate().find_map(|(position, ix)| {
        let (v, whole_axis) = match ix {
            Expr::Var(v) => (*v, true),
            Expr::Binary {
                op: BinaryOp::Add,
                lhs,
                rhs,
            } => match (&**lhs, &**rhs) {
                (Expr::Var(v), other) | (other, Expr::Var(v)) if !other.reads_var(*v) => {
                    (*v, false)
                }
                _ => return None,
            },
            _ => return None,
        };
        let l = loops.iter().find(|l| l.var == v)?;
        let (Expr::Int(0), Expr::Int(width)) = (&l.lo, &l.hi) else {
            return None;
        };
        // A row loop that runs once is the constant it takes (`single_iterations`).
        if !whole_axis && *width < 2 {
            return None;
        }
        if whole_axis {
            let BufferLayout::Axes(axes) = &func.buffers[x].layout else {
                return None;
            };
            let axis = &func.axes[*axes.get(position)?];
            let whole = axis.kind == AxisKind::DenseFixed
                && axis.parent.is_none()
                && axis.length == Extent::Const(*width);
            if !whole {
                return None;
            }
        }
        Some(RowPosition {
            position,
            var: v,
            width: *width,
            row_outer: contains_loop(&l.body, inner),
        })
    })
}

/// `ix` with the row variable `var` replaced by `column`.
fn at_column(ix: &Expr, var: VarId, column: &Expr) -> Expr {
    ix.substitute(&mut |v| (v == var).then(|| column.clone()))
}

/// The conditions joined by `&&` (`None` when there are none).
fn conjunction(conds: impl IntoIterator<Item = Expr>) -> Option<Expr> {
    conds.into_iter().reduce(|a, b| Expr::Logic {
        op: LogicOp::And,
        lhs: Box::new(a),
        rhs: Box::new(b),
    })
}

fn inner_loops(stmts: &[Stmt]) -> Vec<&For> {
    let mut out = Vec::new();
    Stmt::visit_all(stmts, &mut |s| {
        if let Stmt::For(f) = s {
            out.push(f);
        }
    });
    out
}
