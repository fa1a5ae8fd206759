//! The default schedule: run the outermost spatial loop of each top-level block in
//! parallel.
//!
//! Purpose: give every compiled kernel parallel work without any schedule call. The
//! front end marks an iteration axis spatial (`S`) only where distinct points write
//! distinct outputs, so the iterations of such an outermost loop are independent.
//!
//! Preconditions: `func` is the stage-II output of
//! [`lower_iterations`](crate::lower_iterations()) for `program` (blocks named like the
//! iterations, init blocks `<name>.init`), every loop serial.
//!
//! Postconditions: the outermost loop of a top-level block is
//! [`ForKind::Parallel`] when the first axis of the block's iteration is spatial (an init
//! block iterates spatial axes only), or, when the iteration's first axes are a fused
//! group (one loop), when all of them are spatial; every other loop is unchanged.
//!
//! Example: `block spmm { for i in 0..m { ... } }` over `[I: S, J: R, K: S]` becomes
//! `block spmm { for i in 0..m parallel { ... } }`; SpMV transposed (`y[j] += A[i,j] *
//! x[i]`, `[I: R, J: S]`) stays serial.

use std::collections::HashMap;

use sparsile_ir::coord::{IterKind, Program, Stmt as CoordStmt};
use sparsile_ir::loops::{ForKind, Func, Stmt};

use crate::LowerError;

/// Applies the default schedule (see the module docs).
pub fn default_schedule(program: &Program, mut func: Func) -> Result<Func, LowerError> {
    let mut outer_spatial: HashMap<String, bool> = HashMap::new();
    for stmt in &program.body {
        if let CoordStmt::Iteration(it) = stmt {
            // A fused group at the front is one loop: parallel only if all its axes are
            // spatial.
            let outer = match it.fused.first() {
                Some(&(0, end)) => end,
                _ => 1,
            };
            let spatial = !it.axes.is_empty()
                && it
                    .axes
                    .iter()
                    .take(outer)
                    .all(|a| a.kind == IterKind::Spatial);
            outer_spatial.insert(it.name.clone(), spatial);
            // The init nest iterates the spatial axes alone: its first one is spatial.
            let init_has_axis = it.axes.iter().any(|a| a.kind == IterKind::Spatial);
            outer_spatial.insert(format!("{}.init", it.name), init_has_axis);
        }
    }
    for stmt in &mut func.body {
        let Stmt::Block { name, body, .. } = stmt else {
            continue;
        };
        if !outer_spatial.get(name.as_str()).copied().unwrap_or(false) {
            continue;
        }
        if let [Stmt::For(f)] = body.as_mut_slice() {
            f.kind = ForKind::Parallel;
        }
    }
    Ok(func)
}
