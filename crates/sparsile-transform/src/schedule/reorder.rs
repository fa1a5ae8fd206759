//! `reorder`: permutes loops of a perfect nest.
//!
//! The named loops (all in one block) must lie on one chain of perfectly nested loops:
//! from the outermost named loop down to the innermost one, every loop is the only
//! statement of its parent's body. The named loops take the slots of that chain in the
//! order given; loops of the chain that are not named stay where they are. Loop bodies
//! and kinds move with their loops; the innermost body stays innermost.
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
//! the next loop); no loop's bounds read the variable of a loop that would end up inside
//! it (`DependentBounds` naming both: a position loop over a sparse axis depends on its
//! parent's loop and cannot move outside it); every named loop is serial (`NotSerial`:
//! `parallel`, `vectorize` and `unroll` check their loop where it stands, so apply them
//! after reordering).
//!
//! Text-IR examples: `tests/schedule/reorder/`.

use std::collections::HashSet;

use sparsile_ir::loops::{For, ForKind, Func, Stmt};
use sparsile_ir::VarId;

use super::loop_ref::{contains_loop, loop_stmt_mut, uses_var, var_name, LoopRef};
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
    let mut current = top_loop;
    let mut remaining: HashSet<VarId> = named.iter().copied().collect();
    let innermost_body = loop {
        remaining.remove(&current.var);
        if remaining.is_empty() {
            let body = std::mem::take(&mut current.body);
            chain.push(current);
            break body;
        }
        let next = match current.body.as_slice() {
            [Stmt::For(next)] => next.clone(),
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
            if uses_var(&f.lo, inside.var) || uses_var(&f.hi, inside.var) {
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
    let mut body = innermost_body;
    for mut f in new_chain.into_iter().rev() {
        f.body = body;
        body = vec![Stmt::For(f)];
    }
    *slot = body.pop().expect("one loop");
    Ok(out)
}
