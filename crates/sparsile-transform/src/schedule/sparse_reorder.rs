//! `sparse_reorder`: permutes the axes of a stage-I sparse iteration.
//!
//! Preconditions (each a [`ScheduleError`] naming the iteration and its span):
//! - the program verifies and has an iteration of this name;
//! - `order` is a permutation of the iteration's axis names;
//! - every axis still comes after its parent when the parent is an axis of this
//!   iteration ([`ScheduleError::ChildBeforeParent`] names both);
//! - each fused group stays consecutive and in order (its indices are remapped).
//!
//! Postconditions: the same points are visited (the S/R mark and the variable move with
//! each axis, so `init` still runs once per point of the spatial axes before the body);
//! only the order of the visits changes. The output verifies.
//!
//! Example (`tests/schedule/sparse_reorder/spmm_csr.sir` → `.after.sir`): with order
//! `[I, K, J]`, `iter C over [I: S, J: R, K: S] as (i, j, k)` becomes
//! `iter C over [I: S, K: S, J: R] as (i, k, j)`.

use sparsile_ir::coord::{self, Program, SparseIteration, Stmt};

use super::ScheduleError;

const PRIMITIVE: &str = "sparse_reorder";

/// Reorders the axes of iteration `iteration` to `order` (axis names).
pub fn sparse_reorder(
    program: &Program,
    iteration: &str,
    order: &[String],
) -> Result<Program, ScheduleError> {
    check_program(PRIMITIVE, program)?;
    let mut out = program.clone();
    let axes_decl = program.axes.clone();
    let it = find_iteration_mut(&mut out.body, iteration).ok_or_else(|| {
        ScheduleError::UnknownIteration {
            primitive: PRIMITIVE,
            iteration: iteration.to_string(),
        }
    })?;
    let not_perm = |what: String| ScheduleError::NotAPermutation {
        primitive: PRIMITIVE,
        iteration: it.name.clone(),
        what,
        span: it.span,
    };
    if order.len() != it.axes.len() {
        return Err(not_perm(format!(
            "the order names {} axes, the iteration has {}",
            order.len(),
            it.axes.len()
        )));
    }
    // perm[new index] = old index.
    let mut perm: Vec<usize> = Vec::with_capacity(order.len());
    for name in order {
        let old = it
            .axes
            .iter()
            .position(|a| axes_decl[a.axis].name == *name)
            .ok_or_else(|| ScheduleError::AxisNotInIteration {
                primitive: PRIMITIVE,
                iteration: it.name.clone(),
                axis: name.clone(),
                span: it.span,
            })?;
        if perm.contains(&old) {
            return Err(not_perm(format!("axis `{name}` is named twice")));
        }
        perm.push(old);
    }
    let new_axes: Vec<_> = perm.iter().map(|&k| it.axes[k].clone()).collect();
    for (k, ia) in new_axes.iter().enumerate() {
        let Some(parent) = axes_decl[ia.axis].parent else {
            continue;
        };
        if new_axes[k + 1..].iter().any(|a| a.axis == parent) {
            return Err(ScheduleError::ChildBeforeParent {
                primitive: PRIMITIVE,
                iteration: it.name.clone(),
                axis: axes_decl[ia.axis].name.clone(),
                parent: axes_decl[parent].name.clone(),
                span: it.span,
            });
        }
    }
    let mut fused = Vec::with_capacity(it.fused.len());
    for &(start, end) in &it.fused {
        let new_start = perm
            .iter()
            .position(|&k| k == start)
            .expect("a permutation");
        let kept = (start..end).all(|k| perm.get(new_start + k - start) == Some(&k));
        if !kept {
            let names: Vec<&str> = it.axes[start..end]
                .iter()
                .map(|a| axes_decl[a.axis].name.as_str())
                .collect();
            return Err(ScheduleError::AlreadyFused {
                primitive: PRIMITIVE,
                iteration: it.name.clone(),
                axes: names.join(", "),
                span: it.span,
            });
        }
        fused.push((new_start, new_start + end - start));
    }
    fused.sort_unstable();
    it.axes = new_axes;
    it.fused = fused;
    check_result(PRIMITIVE, &out)?;
    Ok(out)
}

/// The iteration named `name` anywhere in `stmts` (nested iterations included).
pub(super) fn find_iteration_mut<'a>(
    stmts: &'a mut [Stmt],
    name: &str,
) -> Option<&'a mut SparseIteration> {
    for s in stmts {
        if let Stmt::Iteration(it) = s {
            if it.name == name {
                return Some(it);
            }
            if let Some(found) = find_iteration_mut(&mut it.init, name) {
                return Some(found);
            }
            if let Some(found) = find_iteration_mut(&mut it.body, name) {
                return Some(found);
            }
        }
    }
    None
}

/// The input must verify ([`ScheduleError::InputNotVerified`]).
pub(super) fn check_program(
    primitive: &'static str,
    program: &Program,
) -> Result<(), ScheduleError> {
    coord::verify(program).map_err(|errors| ScheduleError::InputNotVerified { primitive, errors })
}

/// The output must verify (a failure, [`ScheduleError::InvalidProgram`], is a bug in the
/// primitive).
pub(super) fn check_result(
    primitive: &'static str,
    program: &Program,
) -> Result<(), ScheduleError> {
    coord::verify(program).map_err(|errors| ScheduleError::InvalidProgram { primitive, errors })
}
