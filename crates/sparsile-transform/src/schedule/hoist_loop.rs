//! `hoist_loop`: moves the outer loop of a split dense range up a chain of loops, above
//! the loop `above` (column panels of SpMM's dense operand).
//!
//! Purpose: SpMM with a wide dense operand that does not fit in the last-level cache
//! (ogbn-arxiv or Flickr at K = 128) gathers rows of `B` from memory for every non-zero.
//! Split the width into panels (`split(k, 32)`) and move the panel loop above the rows:
//! every row then reads only one panel of `B` at a time, which stays in cache for the
//! whole pass over the rows. Run as `for ko { parallel for i … }`, each panel is one
//! parallel phase of the kernel (see `sparsile_codegen`'s `phases`). No recipe uses it
//! yet: on a 2-core AVX2 machine, SpMM at K = 128 with panels of 32 or 64 columns ran
//! 1.5-2.4 times slower than `rowwise` on Flickr, ogbn-arxiv and PPI, because the
//! panelled nest loses what `rowwise` adds after it (`cache_write` cannot yet bound the
//! panel's `k_o * F + k_i` index, and the gathered rows are no longer prefetched).
//!
//! ```text
//! for i_2 in 0..n_i {                                   for k_o in 0..4 {
//!   for j_p in P[i_2]..P[i_2 + 1] {                       for i_2 in 0..n_i {
//!     let j: idx = J[j_p]                         →         for j_p in P[i_2]..P[i_2 + 1] {
//!     for k_o in 0..4 {                                       let j: idx = J[j_p]
//!       for k_i in 0..32 {                                    for k_i in 0..32 {
//!         let k: idx = k_o * 32 + k_i                           let k: idx = k_o * 32 + k_i
//!         C[i_2, k] = C[i_2, k] + A[i_2, j_p] * B[j, k]         C[i_2, k] = …
//! ```
//! (`hoist_loop(k_o, above = i_2)`).
//!
//! Preconditions (each a [`ScheduleError`]): both loops exist (`UnknownLoop`) and are
//! serial (`NotSerial`); then [`ScheduleError::NotHoistable`], naming the rule:
//! - `target` lies on the chain of loops below `above`: each loop from `above` down
//!   holds, besides the next loop of the chain, only `let`s whose values load no buffer
//!   the nest writes (they run once per iteration of `target` afterwards);
//! - `target`'s bounds are integer constants;
//! - every access (load or store) to a buffer the nest writes has an index that is a
//!   local `v = target * F + t` (in either order, `F * target` too) with `t` the variable
//!   of a loop `0..F` inside `target` (what `split` makes): iterations of `target` then
//!   touch disjoint elements, so running them outermost computes the same values.
//!
//! Postcondition: `target` (serial, same bounds) encloses `above`, and its body takes its
//! place in the chain. Text-IR example: `tests/schedule/hoist_loop/`.

use std::collections::{HashMap, HashSet};

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{Expr, For, ForKind, Func, Stmt};
use sparsile_ir::{BufferId, Span, VarId};

use super::parallel::{find_loop, not_serial, with_loop};
use super::{LoopRef, ScheduleError};

const PRIMITIVE: &str = "hoist_loop";

/// Moves `target` up the chain of loops to enclose `above` (see the module docs).
pub fn hoist_loop(func: &Func, target: &LoopRef, above: &LoopRef) -> Result<Func, ScheduleError> {
    let top = find_loop(func, above, PRIMITIVE)?.for_;
    let moved = find_loop(func, target, PRIMITIVE)?.for_;
    let refuse = |reason: String, span: Span| ScheduleError::NotHoistable {
        block: target.block.clone(),
        var: target.var.clone(),
        above: above.var.clone(),
        reason,
        span,
    };
    if target.block != above.block {
        return Err(refuse(
            format!("loop `{}` is in block `{}`", above.var, above.block),
            moved.span,
        ));
    }
    for (r, f) in [(above, top), (target, moved)] {
        if f.kind != ForKind::Serial {
            return Err(not_serial(PRIMITIVE, r, f));
        }
    }
    if top.var == moved.var {
        return Err(refuse("a loop cannot move above itself".into(), moved.span));
    }
    let mut inside = false;
    Stmt::visit_all(&top.body, &mut |s| {
        inside |= matches!(s, Stmt::For(f) if f.var == moved.var);
    });
    if !inside {
        return Err(refuse(
            format!(
                "loop `{}` is not on the chain of loops below `{}`",
                target.var, above.var
            ),
            moved.span,
        ));
    }
    // The chain from `above` down to `target`: lets and exactly one loop per level.
    let mut chain_lets: Vec<&Stmt> = Vec::new();
    let mut level = top;
    loop {
        let mut next: Option<&For> = None;
        for s in &level.body {
            match s {
                Stmt::For(f) if next.is_none() => next = Some(f),
                Stmt::Let { .. } => chain_lets.push(s),
                other => {
                    return Err(refuse(
                        format!(
                            "loop `{}` holds a statement other than `let`s and one loop (at {})",
                            func.vars[level.var].name,
                            other.span()
                        ),
                        other.span(),
                    ))
                }
            }
        }
        match next {
            Some(f) if f.var == moved.var => break,
            Some(f) => level = f,
            None => {
                return Err(refuse(
                    format!(
                        "loop `{}` is not on the chain of loops below `{}`",
                        target.var, above.var
                    ),
                    moved.span,
                ))
            }
        }
    }
    let (Expr::Int(_), Expr::Int(_)) = (&moved.lo, &moved.hi) else {
        return Err(refuse(
            "its bounds are not integer constants".into(),
            moved.span,
        ));
    };
    let written = Stmt::stored_buffers(&moved.body);
    for s in &chain_lets {
        if let Stmt::Let { value, span, .. } = s {
            let mut reads = HashSet::new();
            value.loaded_buffers(&mut reads);
            if let Some(b) = reads.into_iter().find(|b| written.contains(b)) {
                return Err(refuse(
                    format!(
                        "the `let` at {span} reads `{}`, which the nest writes",
                        func.buffers[b].name
                    ),
                    *span,
                ));
            }
        }
    }
    check_disjoint(func, moved, &written).map_err(|(reason, span)| refuse(reason, span))?;
    let moved_copy = moved.clone();
    Ok(with_loop(func, above, |f| {
        let mut inner = f.clone();
        splice_out(&mut inner.body, moved_copy.var);
        *f = For {
            var: moved_copy.var,
            lo: moved_copy.lo.clone(),
            hi: moved_copy.hi.clone(),
            kind: ForKind::Serial,
            body: vec![Stmt::For(inner)],
            span: moved_copy.span,
        };
    }))
}

/// Replaces the loop over `var` somewhere down `stmts`' chain by its body.
fn splice_out(stmts: &mut Vec<Stmt>, var: VarId) -> bool {
    if let Some(k) = stmts
        .iter()
        .position(|s| matches!(s, Stmt::For(f) if f.var == var))
    {
        let Stmt::For(f) = stmts.remove(k) else {
            unreachable!("found above")
        };
        for (n, s) in f.body.into_iter().enumerate() {
            stmts.insert(k + n, s);
        }
        return true;
    }
    stmts.iter_mut().any(|s| match s {
        Stmt::For(f) => splice_out(&mut f.body, var),
        _ => false,
    })
}

/// Checks the disjointness rule of the module docs for the body of `moved`.
fn check_disjoint(
    func: &Func,
    moved: &For,
    written: &HashSet<BufferId>,
) -> Result<(), (String, Span)> {
    // The locals `v = moved * F + t`, with F from a loop `t in 0..F` inside.
    let mut loops: HashMap<VarId, i64> = HashMap::new();
    let mut panel_locals: HashSet<VarId> = HashSet::new();
    Stmt::visit_all(&moved.body, &mut |s| {
        if let Stmt::For(f) = s {
            if let (Expr::Int(0), Expr::Int(hi)) = (&f.lo, &f.hi) {
                loops.insert(f.var, *hi);
            }
        }
    });
    Stmt::visit_all(&moved.body, &mut |s| {
        if let Stmt::Let { var, value, .. } = s {
            if let Some((t, factor)) = panel_offset(value, moved.var) {
                if loops.get(&t) == Some(&factor) {
                    panel_locals.insert(*var);
                }
            }
        }
    });
    let mut bad: Option<(String, Span)> = None;
    let mut check = |buffer: BufferId, indices: &[Expr], span: Span| {
        if bad.is_some() || !written.contains(&buffer) {
            return;
        }
        let ok = indices
            .iter()
            .any(|e| matches!(e, Expr::Var(v) if panel_locals.contains(v)));
        if !ok {
            bad = Some((
                format!(
                    "an access to `{}` at {span} has no index of the form `{} * F + t` (t a loop 0..F inside it): iterations could touch the same elements",
                    func.buffers[buffer].name, func.vars[moved.var].name
                ),
                span,
            ));
        }
    };
    Stmt::visit_all(&moved.body, &mut |s| {
        let span = s.span();
        if let Stmt::Store {
            buffer, indices, ..
        }
        | Stmt::AtomicAdd {
            buffer, indices, ..
        } = s
        {
            check(*buffer, indices, span);
        }
        for e in s.own_exprs() {
            e.visit(&mut |x| match x {
                Expr::Load { buffer, indices } => check(*buffer, indices, span),
                Expr::Search { buffer, .. } => check(*buffer, &[], span),
                _ => {}
            });
        }
    });
    match bad {
        Some(b) => Err(b),
        None => Ok(()),
    }
}

/// `(t, F)` when `e` is `o * F + t` or `t + o * F` (or `F * o`), `o` the moved loop's
/// variable.
fn panel_offset(e: &Expr, o: VarId) -> Option<(VarId, i64)> {
    let Expr::Binary {
        op: BinaryOp::Add,
        lhs,
        rhs,
    } = e
    else {
        return None;
    };
    let scaled = |x: &Expr| match x {
        Expr::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } => match (&**lhs, &**rhs) {
            (Expr::Var(v), Expr::Int(f)) | (Expr::Int(f), Expr::Var(v)) if *v == o => Some(*f),
            _ => None,
        },
        _ => None,
    };
    match (&**lhs, &**rhs) {
        (a, Expr::Var(t)) if *t != o => scaled(a).map(|f| (*t, f)),
        (Expr::Var(t), b) if *t != o => scaled(b).map(|f| (*t, f)),
        _ => None,
    }
}
