//! `sparse_fuse`: iterates a group of axes of a stage-I sparse iteration as one loop
//! over the stored non-zeros of the group.
//!
//! The group is recorded in [`SparseIteration::fused`](sparsile_ir::coord::SparseIteration)
//! (`fuse(I, J)` in the text IR). The points visited and their order are unchanged; the
//! lowering ([`crate::lower_iterations()`]) then emits one position loop over the positions
//! of the group's last axis under the group's first axis's parent, and recovers the
//! position of every other axis of the group from it (see
//! [`crate::lower_iterations::fused`]). For SDDMM over CSR this is one loop over all
//! `(i, j)` non-zeros, with the row found by a binary search in `indptr`.
//!
//! Preconditions (each a [`ScheduleError`] naming the iteration and its span):
//! - the program verifies and has an iteration of this name;
//! - at least two axes are named, each an axis of the iteration;
//! - they are consecutive in the iteration, in the given order;
//! - each is the child of the one before it (so only the first may be `dense_fixed`);
//! - none of them is already in a fused group.
//!
//! `init` blocks do not conflict: `init` runs over the spatial axes alone and is lowered
//! without the fusion, before the fused body.
//!
//! Example (`tests/schedule/sparse_fuse/sddmm_csr.sir` → `.after.sir`): fusing `[I, J]`
//! turns `iter C over [I: S, J: S, K: R] as (i, j, k)` into
//! `iter C over [I: S, J: S, K: R] fuse(I, J) as (i, j, k)`.

use sparsile_ir::coord::Program;

use super::sparse_reorder::{check_program, check_result, find_iteration_mut};
use super::ScheduleError;

const PRIMITIVE: &str = "sparse_fuse";

/// Fuses the consecutive axes `axes` (names, a parent chain) of iteration `iteration`.
pub fn sparse_fuse(
    program: &Program,
    iteration: &str,
    axes: &[String],
) -> Result<Program, ScheduleError> {
    check_program(PRIMITIVE, program)?;
    let mut out = program.clone();
    let decls = &program.axes;
    let it = find_iteration_mut(&mut out.body, iteration).ok_or_else(|| {
        ScheduleError::UnknownIteration {
            primitive: PRIMITIVE,
            iteration: iteration.to_string(),
        }
    })?;
    if axes.len() < 2 {
        return Err(ScheduleError::TooFewAxes {
            primitive: PRIMITIVE,
            iteration: it.name.clone(),
            count: axes.len(),
            span: it.span,
        });
    }
    let mut indices = Vec::with_capacity(axes.len());
    for name in axes {
        let k = it
            .axes
            .iter()
            .position(|a| decls[a.axis].name == *name)
            .ok_or_else(|| ScheduleError::AxisNotInIteration {
                primitive: PRIMITIVE,
                iteration: it.name.clone(),
                axis: name.clone(),
                span: it.span,
            })?;
        indices.push(k);
    }
    for (w, pair) in indices.windows(2).enumerate() {
        let (previous, axis) = (axes[w].clone(), axes[w + 1].clone());
        if pair[1] != pair[0] + 1 {
            return Err(ScheduleError::NotConsecutive {
                primitive: PRIMITIVE,
                iteration: it.name.clone(),
                previous,
                axis,
                span: it.span,
            });
        }
        if decls[it.axes[pair[1]].axis].parent != Some(it.axes[pair[0]].axis) {
            return Err(ScheduleError::NotParentChain {
                primitive: PRIMITIVE,
                iteration: it.name.clone(),
                previous,
                axis,
                span: it.span,
            });
        }
    }
    let (start, end) = (indices[0], indices[0] + indices.len());
    if let Some(&(s, e)) = it.fused.iter().find(|&&(s, e)| s < end && start < e) {
        let names: Vec<&str> = it.axes[s..e]
            .iter()
            .map(|a| decls[a.axis].name.as_str())
            .collect();
        return Err(ScheduleError::AlreadyFused {
            primitive: PRIMITIVE,
            iteration: it.name.clone(),
            axes: names.join(", "),
            span: it.span,
        });
    }
    it.fused.push((start, end));
    it.fused.sort_unstable();
    check_result(PRIMITIVE, &out)?;
    Ok(out)
}
