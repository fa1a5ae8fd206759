//! `register_tile`: marks a loop over the blocks of a block row [`ForKind::RegisterTiled`]
//! (text `register_tiled`), so that the backend holds a tile of the output in registers
//! across all its iterations.
//!
//! Purpose: BSR SpMM as lowered runs, for every block, `for r { for c { for k { C[row(r),
//! k] += A[.., r, c] * B[col(c), k] } } }`: each multiply-add loads and stores its
//! element of `C`. Over a marked loop the C backend keeps a few rows by a few vectors of
//! `C` in registers for the whole block row, loads each vector of `B` once for all those
//! rows and broadcasts each value of `A` once for all those vectors (the register-blocked
//! micro-kernel of dense products; see `sparsile_codegen`'s `register_tiled` module).
//! Results are those of the plain loop: every element receives its terms in the same
//! order.
//!
//! Preconditions (each its own [`ScheduleError`], naming the loop and its block):
//! - the loop exists ([`ScheduleError::UnknownLoop`]) and is serial
//!   ([`ScheduleError::NotSerial`]);
//! - its body has the shape of [`sparsile_ir::loops::register_tiled_shape`]: `let`s and
//!   prefetches, then rows × columns × width loops (or the width loop alone: a CSR row
//!   of SpMM, whose output row is then held in registers across the row's non-zeros)
//!   with literal bounds around one update
//!   `C[idx] = C[idx] + a * b` whose element does not move across the blocks and the
//!   columns and is distinct for distinct rows and widths
//!   ([`ScheduleError::NotRegisterTileable`], naming the statement and the rule).
//!
//! Postcondition: the same function with the loop marked `register_tiled`.
//!
//! Example (`tests/schedule/register_tile/bsr.before` → `.after`):
//! ```text
//! for jo_p in A_indptr[io]..A_indptr[io + 1] {          →   ... register_tiled {
//!   let jo: idx = A_indices[jo_p]
//!   for ii in 0..4 { for ji in 0..4 { for k in 0..64 vectorized {
//!     if io * 4 + ii < n { C[io * 4 + ii, k] = C[io * 4 + ii, k] + A[io, jo_p, ii, ji] * B[jo * 4 + ji, k] }
//!   } } }
//! }
//! ```
//!
//! ```
//! use sparsile_transform::schedule::{LoopRef, Schedule};
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n",
//! )
//! .unwrap();
//! let mut sch = Schedule::new(&program);
//! // The width is a parameter: a row of it cannot be held in registers. Refused.
//! assert!(sch.register_tile(&LoopRef::new("C", "j_p")).is_err());
//! // With the width fixed, a CSR row's output is held across its non-zeros.
//! let mut sch = Schedule::new(&program);
//! sch.specialize("k", 64).unwrap();
//! sch.register_tile(&LoopRef::new("C", "j_p")).unwrap();
//! ```

use sparsile_ir::loops::{register_tiled_shape, ForKind, Func};

use super::parallel::{find_loop, not_serial, with_loop};
use super::{LoopRef, ScheduleError};

const PRIMITIVE: &str = "register_tile";

/// Marks `target` `register_tiled` after checking the preconditions in the module docs.
pub fn register_tile(func: &Func, target: &LoopRef) -> Result<Func, ScheduleError> {
    let found = find_loop(func, target, PRIMITIVE)?;
    let f = found.for_;
    if f.kind != ForKind::Serial {
        return Err(not_serial(PRIMITIVE, target, f));
    }
    register_tiled_shape(func, f).map_err(|e| ScheduleError::NotRegisterTileable {
        block: target.block.clone(),
        var: target.var.clone(),
        reason: e.message,
        span: e.span,
        loop_span: f.span,
    })?;
    Ok(with_loop(func, target, |f| f.kind = ForKind::RegisterTiled))
}
