//! `batch_reduction`: marks a loop whose iterations each end in one reassociated
//! reduction [`ForKind::Batched`] (text `batched`), so that the backend sums the
//! reductions of a group of iterations together.
//!
//! Purpose: SDDMM computes one dot product per non-zero; after `dot_reduction` in the
//! `rowwise` recipe (`cache_write`, `hoist_factor`, `vectorize_reduction`) each is a
//! vector loop whose lanes are then added by a chain of shuffles, which at K = 32 costs
//! as much as the multiply-adds. A batched loop over the non-zeros lets the C backend
//! keep one vector of partial sums per non-zero of a group (8 for f32) and add the lanes
//! of all of them with one transposed tree of shuffles, the results landing as one
//! vector (see `sparsile_codegen`'s `batched` module). Results differ from the plain
//! loop by floating-point rounding only.
//!
//! Preconditions (each its own [`ScheduleError`], naming the loop and its block):
//! - the loop exists ([`ScheduleError::UnknownLoop`]) and is serial
//!   ([`ScheduleError::NotSerial`]);
//! - its body has the shape of [`sparsile_ir::loops::batched_shape`]: its only loop is a
//!   `vectorized(reassociate)` loop into one local element at a literal index; before
//!   it only `let`s, prefetches and stores to locals that give the same state when run
//!   again; after it nothing that the part before it or the reduction reads
//!   ([`ScheduleError::NotBatchable`], naming the statement and the rule).
//!
//! Postcondition: the same function with the loop marked `batched`.
//!
//! Example (`tests/schedule/batch_reduction/sddmm.before` → `.after`):
//! ```text
//! for j_p_2 in A_indptr[i_2]..A_indptr[i_2 + 1] {      →   ... batched {
//!   C_local[0] = 0.0
//!   let j_2: idx = A_indices[j_p_2]
//!   C_local_sum[0] = 0.0
//!   for k in 0..32 vectorized(reassociate) { C_local_sum[0] = C_local_sum[0] + X[i_2, k] * Y[j_2, k] }
//!   C_local[0] = C_local[0] + A[i_2, j_p_2] * C_local_sum[0]
//!   C[i_2, j_p_2] = C_local[0]
//! }
//! ```
//!
//! ```
//! use sparsile_transform::schedule::{LoopRef, Schedule};
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor X: f32[m, k]\ntensor Y: f32[n, k]\ntensor C: f32[m, n] csr\n\
//!      C[i,j] = A[i,j] * X[i,k] * Y[j,k]\n",
//! )
//! .unwrap();
//! let mut sch = Schedule::new(&program);
//! let nonzeros = LoopRef::new("C", "j_p_2");
//! // The dot product is not a reassociated reduction yet: refused.
//! assert!(sch.batch_reduction(&nonzeros).is_err());
//! ```

use sparsile_ir::loops::{batched_shape, ForKind, Func};

use super::parallel::{find_loop, not_serial, with_loop};
use super::{LoopRef, ScheduleError};

const PRIMITIVE: &str = "batch_reduction";

/// Marks `target` `batched` after checking the preconditions in the module docs.
pub fn batch_reduction(func: &Func, target: &LoopRef) -> Result<Func, ScheduleError> {
    let found = find_loop(func, target, PRIMITIVE)?;
    let f = found.for_;
    if f.kind != ForKind::Serial {
        return Err(not_serial(PRIMITIVE, target, f));
    }
    batched_shape(func, f).map_err(|e| ScheduleError::NotBatchable {
        block: target.block.clone(),
        var: target.var.clone(),
        reason: e.message,
        span: e.span,
        loop_span: f.span,
    })?;
    Ok(with_loop(func, target, |f| f.kind = ForKind::Batched))
}
