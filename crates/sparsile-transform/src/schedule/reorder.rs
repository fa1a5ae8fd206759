//! `reorder`: permutes loops of a perfect nest.
//!
//! The named loops (all in one block) must lie on one chain of perfectly nested loops:
//! from the outermost named loop down to the innermost one, every loop's body is the next
//! loop, optionally after `let` locals (a sparse loop's coordinate recovery,
//! `let j: idx = indices[j_p]`, or the variable a `split` leaves). The named loops take
//! the slots of that chain in the order given; loops of the chain that are not named stay
//! where they are. Loop bodies and kinds move with their loops; the innermost body stays
//! innermost. Each `let` of the chain moves to the top of the body of the innermost loop
//! (in the new order) whose variable it reads, directly or through earlier `let`s of the
//! chain (the outermost loop's body when it reads none), so it is evaluated with the same
//! values, possibly more often. Such a `let` is never assigned and reads no buffer the
//! nest writes (otherwise the nest counts as not perfect).
//!
//! ```text
//! for i in 0..m {              for k in 0..n {
//!   for k in 0..n {     ==>      for i in 0..m {
//!     body                         body
//! ```
//! (`reorder([k, i])`).
//!
//! Preconditions (each a [`ScheduleError`]): the loops exist (`UnknownBlock`,
//! `UnknownLoop`); they are distinct, at least one, and in one block (`BadLoopList`); they
//! are perfectly nested (`NotPerfectlyNested`, naming the loop whose body holds more than
//! movable `let`s and the next loop); no loop's bounds read the variable of a loop that would end up inside
//! it (`DependentBounds` naming both: a position loop over a sparse axis depends on its
//! parent's loop and cannot move outside it); every named loop is serial (`NotSerial`:
//! `parallel`, `vectorize` and `unroll` check their loop where it stands, so apply them
//! after reordering).
//!
//! Text-IR examples: `tests/schedule/reorder/`.

use std::collections::HashSet;

use sparsile_ir::loops::{Expr, For, ForKind, Func, Stmt};
use sparsile_ir::VarId;

use super::loop_ref::{contains_loop, loop_stmt_mut, var_name, LoopRef};
use super::ScheduleError;

const PRIMITIVE: &str = "reorder";

/// Reorders the loops of a perfect nest so that `order` lists them outermost first.
pub fn reorder(func: &Func, order: &[LoopRef]) -> Result<Func, ScheduleError> {
    let Some(first) = order.first() else {
        return Err(ScheduleError::BadLoopList {
            primitive: PRIMITIVE,
            what: "no loops given".to_string(),
        });
    };
    let block = &first.block;
    let mut seen = HashSet::new();
    for r in order {
        if &r.block != block {
            return Err(ScheduleError::BadLoopList {
                primitive: PRIMITIVE,
                what: format!("loops {first} and {r} are in different blocks"),
            });
        }
        if !seen.insert(&r.var) {
            return Err(ScheduleError::BadLoopList {
                primitive: PRIMITIVE,
                what: format!("loop {r} is named twice"),
            });
        }
    }
    let mut out = func.clone();
    // Every named loop exists; remember its variable id.
    let mut named: Vec<VarId> = Vec::with_capacity(order.len());
    for r in order {
        match loop_stmt_mut(&mut out, r, PRIMITIVE)? {
            // A loop kind is a promise checked where the loop stands; moving the loop
            // would leave it unchecked.
            Stmt::For(f) if f.kind != ForKind::Serial => {
                return Err(ScheduleError::NotSerial {
                    primitive: PRIMITIVE,
                    block: r.block.clone(),
                    var: r.var.clone(),
                    kind: f.kind.name(),
                    span: f.span,
                })
            }
            Stmt::For(f) => named.push(f.var),
            _ => unreachable!("a loop statement"),
        }
    }
    // The outermost named loop is the one that contains all the others.
    let mut top = None;
    for r in order {
        let Stmt::For(f) = loop_stmt_mut(&mut out, r, PRIMITIVE)? else {
            unreachable!("a loop statement");
        };
        if named
            .iter()
            .all(|&v| v == f.var || contains_loop(&f.body, v))
        {
            top = Some(r.clone());
            break;
        }
    }
    let Some(top) = top else {
        return Err(ScheduleError::BadLoopList {
            primitive: PRIMITIVE,
            what: format!(
                "no loop among {} contains all the others: they are not one nest",
                order
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    };
    let slot = loop_stmt_mut(&mut out, &top, PRIMITIVE)?;
    let Stmt::For(top_loop) = slot.clone() else {
        unreachable!("a loop statement");
    };
    // Walk the chain down until every named loop is on it.
    let mut chain: Vec<For> = Vec::new();
    let mut lets: Vec<Stmt> = Vec::new();
    let movable = movable_lets(&top_loop);
    let mut current = top_loop;
    let mut remaining: HashSet<VarId> = named.iter().copied().collect();
    let innermost_body = loop {
        remaining.remove(&current.var);
        if remaining.is_empty() {
            let body = std::mem::take(&mut current.body);
            chain.push(current);
            break body;
        }
        let split_at = current
            .body
            .iter()
            .position(|s| !matches!(s, Stmt::Let { var, .. } if movable.contains(var)))
            .unwrap_or(current.body.len());
        let next = match &current.body[split_at..] {
            [Stmt::For(next)] => {
                lets.extend(current.body[..split_at].iter().cloned());
                next.clone()
            }
            _ => {
                let missing = remaining
                    .iter()
                    .map(|&v| var_name(func, v))
                    .min()
                    .expect("a remaining loop");
                return Err(ScheduleError::NotPerfectlyNested {
                    primitive: PRIMITIVE,
                    block: block.clone(),
                    outer: var_name(func, current.var),
                    inner: missing,
                    span: current.span,
                });
            }
        };
        current.body.clear();
        chain.push(current);
        current = next;
    };
    // Named loops take the named slots in the given order.
    let mut given = named.iter();
    let by_var = |v: VarId| {
        chain
            .iter()
            .find(|f| f.var == v)
            .expect("on the chain")
            .clone()
    };
    let new_chain: Vec<For> = chain
        .iter()
        .map(|f| {
            if named.contains(&f.var) {
                by_var(*given.next().expect("as many slots as named loops"))
            } else {
                f.clone()
            }
        })
        .collect();
    // A loop's bounds may only read variables of loops outside it.
    for (p, f) in new_chain.iter().enumerate() {
        for inside in &new_chain[p + 1..] {
            if f.lo.reads_var(inside.var) || f.hi.reads_var(inside.var) {
                return Err(ScheduleError::DependentBounds {
                    primitive: PRIMITIVE,
                    block: block.clone(),
                    outer: var_name(func, inside.var),
                    inner: var_name(func, f.var),
                    span: f.span,
                });
            }
        }
    }
    // Each `let` goes to the innermost loop whose variable it reads (through earlier lets).
    let mut level_of: std::collections::HashMap<VarId, usize> = new_chain
        .iter()
        .enumerate()
        .map(|(p, f)| (f.var, p))
        .collect();
    let mut placed: Vec<Vec<Stmt>> = vec![Vec::new(); new_chain.len()];
    for l in lets {
        let Stmt::Let { var, value, .. } = &l else {
            unreachable!("only lets are collected")
        };
        let mut level = 0;
        value.visit(&mut |x| {
            if let Expr::Var(v) = x {
                if let Some(&p) = level_of.get(v) {
                    level = level.max(p);
                }
            }
        });
        level_of.insert(*var, level);
        // A loop's bounds may read only lets placed outside it.
        if let Some(f) = new_chain[..=level]
            .iter()
            .find(|f| f.lo.reads_var(*var) || f.hi.reads_var(*var))
        {
            return Err(ScheduleError::DependentBounds {
                primitive: PRIMITIVE,
                block: block.clone(),
                outer: var_name(func, *var),
                inner: var_name(func, f.var),
                span: f.span,
            });
        }
        placed[level].push(l);
    }
    let mut body = innermost_body;
    for (mut f, mut top) in new_chain.into_iter().zip(placed).rev() {
        top.append(&mut body);
        f.body = top;
        body = vec![Stmt::For(f)];
    }
    *slot = body.pop().expect("one loop");
    Ok(out)
}

/// The `let` locals declared in `nest` that can move: never assigned, and reading no
/// buffer the nest writes.
fn movable_lets(nest: &For) -> HashSet<VarId> {
    let stored = Stmt::stored_buffers(&nest.body);
    let assigned: HashSet<VarId> = Stmt::assigned_vars(&nest.body).into_iter().collect();
    let mut out = HashSet::new();
    Stmt::visit_all(&nest.body, &mut |s| {
        if let Stmt::Let { var, value, .. } = s {
            let mut reads_written = false;
            value.visit(&mut |x| {
                if let Expr::Load { buffer, .. } | Expr::Search { buffer, .. } = x {
                    reads_written |= stored.contains(buffer);
                }
            });
            if !reads_written && !assigned.contains(var) {
                out.insert(*var);
            }
        }
    });
    out
}
