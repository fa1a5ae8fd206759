//! `vectorize_reduction`: marks an innermost loop that reduces into local buffers
//! [`ForKind::VectorizedReduction`] (text `vectorized(reassociate)`).
//!
//! Purpose: a loop such as SpMV's `for j_p in P[i]..P[i + 1] { y_local[0] = y_local[0] +
//! A[j_p] * x[j] }` (after `cache_write`) is a chain of floating-point additions that a
//! compiler must keep in order, so even a vectorized gather and multiply end in one add
//! per non-zero. This primitive records the permission to reassociate those sums: the C
//! backend keeps 16 partial sums (iteration `l` of each block of 16 adds into sum `l`)
//! and adds them after the loop. `scalar_sums` splits the part that stays scalar (short
//! loops, the iterations after the blocks of 16) into that many partial sums too: rows
//! of a few dozen non-zeros then run that many independent multiply-add chains, which
//! pays on matrices of short, even rows (cage11, delaunay) and costs on graphs whose row
//! lengths vary a lot (one more unpredictable branch per row). `masked` lets the backend
//! run the whole loop as vector blocks whose last block masks the lanes past the end
//! (the C backend does so for gathered dot products on AVX-512 targets): no loop exit
//! depends on a short row's length, which pays on graphs whose row lengths vary
//! (SpMV on ppi, flickr, ogbn-arxiv about twice as fast) and costs on rows of one
//! constant length (stencils), whose in-order loop exit is predicted. Results differ from
//! the serial order only by floating-point rounding.
//!
//! Preconditions (each its own [`ScheduleError`], naming the loop and its block):
//! - the loop is serial ([`ScheduleError::NotSerial`]);
//! - the loop is innermost ([`ScheduleError::ReductionNotInnermost`]);
//! - its iterations carry no dependence through memory other than the local reductions
//!   ([`ScheduleError::LoopCarriedAccess`]): the rule of
//!   [`vectorize()`](super::vectorize()), so a reduction into a non-local buffer
//!   (`y[i] = y[i] + …`) is refused;
//! - every store whose element does not depend on the loop variable is a reduction
//!   `L[e] = L[e] + …` into a local buffer that nothing else in the loop touches, and no
//!   local declared outside the loop is assigned in it
//!   ([`ScheduleError::NotReassociable`]; the rules are those of
//!   [`sparsile_ir::loops::local_reductions`]);
//! - there is at least one such reduction ([`ScheduleError::NoLocalReduction`]);
//! - `scalar_sums` is 1 to [`ForKind::MAX_SCALAR_SUMS`] ([`ScheduleError::BadScalarSums`]).
//!
//! Postcondition: the same function with the loop marked `vectorized(reassociate)`
//! (`vectorized(reassociate, scalar_sums=N)` when `scalar_sums` is not 1, `, masked`
//! after it when `masked`).
//!
//! Example (`tests/schedule/vectorize_reduction/spmv_csr.before` → `.after`):
//! ```text
//! for j_p in A_A_J_indptr[i_2]..A_A_J_indptr[i_2 + 1] {
//!   →  for j_p in A_A_J_indptr[i_2]..A_A_J_indptr[i_2 + 1] vectorized(reassociate) {
//!   y_local[0] = y_local[0] + A[i_2, j_p] * x[j]
//! ```
//!
//! ```
//! use sparsile_transform::schedule::{LoopRef, Schedule};
//! let program = sparsile::compile_notation(
//!     "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! let mut sch = Schedule::new(&program);
//! let nonzeros = LoopRef::new("y", "j_p");
//! // `y[i_2] = y[i_2] + …` is a reduction into memory: refused.
//! assert!(sch.vectorize_reduction(&nonzeros, 1, false).is_err());
//! // Accumulating the row in a local makes it a reduction that may be reassociated.
//! sch.cache_write(&LoopRef::new("y", "i_2"), "y").unwrap();
//! sch.vectorize_reduction(&nonzeros, 4, false).unwrap();
//! assert!(sch.func().unwrap().to_string().contains("vectorized(reassociate, scalar_sums=4) {"));
//! ```

use sparsile_ir::loops::{local_reductions, ForKind, Func};

use super::parallel::{check_independent, find_loop, inner_loop_vars, not_serial, with_loop};
use super::{LoopRef, ScheduleError};

/// Marks `target` `vectorized(reassociate)`, with `scalar_sums` partial sums in its
/// scalar part (and, when `masked`, masked vector blocks allowed for the short part),
/// after checking the preconditions in the module docs.
pub fn vectorize_reduction(
    func: &Func,
    target: &LoopRef,
    scalar_sums: u32,
    masked: bool,
) -> Result<Func, ScheduleError> {
    let primitive = "vectorize_reduction";
    let found = find_loop(func, target, primitive)?;
    let f = found.for_;
    if !(1..=ForKind::MAX_SCALAR_SUMS).contains(&scalar_sums) {
        return Err(ScheduleError::BadScalarSums {
            block: target.block.clone(),
            var: target.var.clone(),
            scalar_sums,
            span: f.span,
        });
    }
    if f.kind != ForKind::Serial {
        return Err(not_serial(primitive, target, f));
    }
    if let Some(inner) = inner_loop_vars(f).first() {
        return Err(ScheduleError::ReductionNotInnermost {
            block: target.block.clone(),
            var: target.var.clone(),
            inner: func.vars[*inner].name.clone(),
            span: f.span,
        });
    }
    check_independent(func, f, target, primitive, true)?;
    let reductions = local_reductions(func, f).map_err(|e| ScheduleError::NotReassociable {
        block: target.block.clone(),
        var: target.var.clone(),
        reason: e.message,
        span: e.span,
        loop_span: f.span,
    })?;
    if reductions.is_empty() {
        return Err(ScheduleError::NoLocalReduction {
            block: target.block.clone(),
            var: target.var.clone(),
            span: f.span,
        });
    }
    Ok(with_loop(func, target, |f| {
        f.kind = ForKind::VectorizedReduction {
            scalar_sums,
            masked,
        }
    }))
}
