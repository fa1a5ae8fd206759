//! Naming loops: a [`LoopRef`] is the name of the block that contains the loop and the
//! loop variable's name. This module finds loops by their `LoopRef` and chooses fresh
//! variable names for the loops that primitives create.
//!
//! Preconditions: block names are unique in a function; a loop variable's name is
//! unique within its block (every primitive keeps it so).

use std::fmt;

use serde::{Deserialize, Serialize};
use sparsile_ir::loops::{Expr, For, Func, Stmt, Var, VarType};
use sparsile_ir::VarId;

use super::ScheduleError;

/// A loop, named by its block and its variable, e.g. `LoopRef::new("C", "i")`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LoopRef {
    pub block: String,
    pub var: String,
}

impl LoopRef {
    pub fn new(block: impl Into<String>, var: impl Into<String>) -> LoopRef {
        LoopRef {
            block: block.into(),
            var: var.into(),
        }
    }
}

impl fmt::Display for LoopRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.block, self.var)
    }
}

/// The body of block `name` (searched at any depth), mutably.
pub fn block_body_mut<'a>(stmts: &'a mut [Stmt], name: &str) -> Option<&'a mut Vec<Stmt>> {
    for s in stmts {
        match s {
            Stmt::Block { name: n, body, .. } => {
                if n == name {
                    return Some(body);
                }
                if let Some(b) = block_body_mut(body, name) {
                    return Some(b);
                }
            }
            Stmt::For(f) => {
                if let Some(b) = block_body_mut(&mut f.body, name) {
                    return Some(b);
                }
            }
            Stmt::Launch { body, .. } => {
                if let Some(b) = block_body_mut(body, name) {
                    return Some(b);
                }
            }
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                if let Some(b) = block_body_mut(then_body, name) {
                    return Some(b);
                }
                if let Some(b) = block_body_mut(else_body, name) {
                    return Some(b);
                }
            }
            _ => {}
        }
    }
    None
}

/// The statement slot holding the loop over `var` in `stmts` (at any depth, not entering
/// nested blocks), mutably.
fn loop_slot_mut(stmts: &mut [Stmt], var: VarId) -> Option<&mut Stmt> {
    for s in stmts {
        let found = matches!(s, Stmt::For(f) if f.var == var);
        if found {
            return Some(s);
        }
        match s {
            Stmt::For(f) => {
                if let Some(x) = loop_slot_mut(&mut f.body, var) {
                    return Some(x);
                }
            }
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                if let Some(x) = loop_slot_mut(then_body, var) {
                    return Some(x);
                }
                if let Some(x) = loop_slot_mut(else_body, var) {
                    return Some(x);
                }
            }
            _ => {}
        }
    }
    None
}

/// The statement (a `Stmt::For`) of the loop `target`, mutably, in a function's body.
///
/// Errors: [`ScheduleError::UnknownBlock`] when no block has that name,
/// [`ScheduleError::UnknownLoop`] when the block has no loop over that variable.
pub fn loop_stmt_mut<'a>(
    func: &'a mut Func,
    target: &LoopRef,
    primitive: &'static str,
) -> Result<&'a mut Stmt, ScheduleError> {
    let unknown_loop = || ScheduleError::UnknownLoop {
        primitive,
        block: target.block.clone(),
        var: target.var.clone(),
    };
    let vars: Vec<VarId> = func
        .vars
        .iter()
        .filter(|(_, v)| v.name == target.var)
        .map(|(id, _)| id)
        .collect();
    let body = block_body_mut(&mut func.body, &target.block).ok_or_else(|| {
        ScheduleError::UnknownBlock {
            primitive,
            block: target.block.clone(),
        }
    })?;
    // Find which candidate variable is a loop of this block, then borrow its slot.
    let var = vars
        .into_iter()
        .find(|&v| loop_slot_mut(body, v).is_some())
        .ok_or_else(unknown_loop)?;
    loop_slot_mut(body, var).ok_or_else(unknown_loop)
}

/// The loop `target`, mutably.
pub fn loop_mut<'a>(
    func: &'a mut Func,
    target: &LoopRef,
    primitive: &'static str,
) -> Result<&'a mut For, ScheduleError> {
    match loop_stmt_mut(func, target, primitive)? {
        Stmt::For(f) => Ok(f),
        _ => unreachable!("loop_stmt_mut returns a loop"),
    }
}

/// A variable name based on `base` that no variable, parameter, axis or buffer of `func`
/// uses: `base`, then `base2`, `base3`, …
pub fn fresh_name(func: &Func, base: &str) -> String {
    let taken = |n: &str| {
        func.vars.values().any(|v| v.name == n)
            || func.params.values().any(|p| p.name == n)
            || func.axes.values().any(|a| a.name == n)
            || func.buffers.values().any(|b| b.name == n)
    };
    if !taken(base) {
        return base.to_string();
    }
    (2..)
        .map(|k| format!("{base}{k}"))
        .find(|n| !taken(n))
        .expect("an unused name exists")
}

/// Declares a fresh index variable named after `base` and returns its id and name.
pub fn fresh_index_var(func: &mut Func, base: &str) -> (VarId, String) {
    let name = fresh_name(func, base);
    let id = func.vars.push(Var {
        name: name.clone(),
        ty: VarType::Index,
    });
    (id, name)
}

/// The name of variable `var`.
pub fn var_name(func: &Func, var: VarId) -> String {
    func.vars[var].name.clone()
}

/// Whether the bounds of `f` stay the same while its body runs: they load no buffer the
/// body stores to and read no local the body assigns. Primitives that re-evaluate bounds
/// inside the new loops (split's guard, fuse's index recovery) require it.
pub fn bounds_invariant(f: &For) -> bool {
    fn written(stmts: &[Stmt], bufs: &mut Vec<sparsile_ir::BufferId>, vars: &mut Vec<VarId>) {
        for s in stmts {
            match s {
                Stmt::Store { buffer, .. } | Stmt::AtomicAdd { buffer, .. } => bufs.push(*buffer),
                Stmt::Mma(m) => bufs.push(m.c),
                Stmt::Assign { var, .. } => vars.push(*var),
                Stmt::For(g) => written(&g.body, bufs, vars),
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    written(then_body, bufs, vars);
                    written(else_body, bufs, vars);
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => written(body, bufs, vars),
                Stmt::Let { .. }
                | Stmt::Prefetch { .. }
                | Stmt::Barrier { .. }
                | Stmt::WarpReduce { .. } => {}
            }
        }
    }
    let (mut bufs, mut vars) = (Vec::new(), Vec::new());
    written(&f.body, &mut bufs, &mut vars);
    let mut ok = true;
    for e in [&f.lo, &f.hi] {
        e.visit(&mut |x| match x {
            Expr::Load { buffer, .. } | Expr::Search { buffer, .. } => ok &= !bufs.contains(buffer),
            Expr::Var(v) => ok &= !vars.contains(v),
            _ => {}
        });
    }
    ok
}

/// Whether a loop over `var` occurs in `stmts`.
pub(crate) fn contains_loop(stmts: &[Stmt], var: VarId) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::For(f) => f.var == var || contains_loop(&f.body, var),
        Stmt::If {
            then_body,
            else_body,
            ..
        } => contains_loop(then_body, var) || contains_loop(else_body, var),
        Stmt::Block { body, .. } | Stmt::Launch { body, .. } => contains_loop(body, var),
        _ => false,
    })
}

/// The statement list holding the loop over `var`, and its index there.
pub(crate) fn parent_list_mut(
    stmts: &mut Vec<Stmt>,
    var: VarId,
) -> Option<(&mut Vec<Stmt>, usize)> {
    if let Some(at) = stmts
        .iter()
        .position(|s| matches!(s, Stmt::For(f) if f.var == var))
    {
        return Some((stmts, at));
    }
    for s in stmts.iter_mut() {
        let found = match s {
            Stmt::For(f) => parent_list_mut(&mut f.body, var),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                if contains_loop(then_body, var) {
                    parent_list_mut(then_body, var)
                } else {
                    parent_list_mut(else_body, var)
                }
            }
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => parent_list_mut(body, var),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}
