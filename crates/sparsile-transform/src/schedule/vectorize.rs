//! `vectorize`: marks an innermost loop [`ForKind::Vectorized`].
//!
//! Purpose: a vectorised loop keeps serial semantics, but the C backend emits
//! `#pragma GCC ivdep` before it, promising the compiler that its iterations carry no
//! dependence through memory. The preconditions make that promise true. In a GPU launch
//! the loop runs in one thread; the CUDA backend writes a loop of 2 or 4 iterations out
//! iteration by iteration and reads consecutive elements that every iteration reads with
//! one vector load (`float4`, …) where it can prove the address aligned.
//!
//! Preconditions (each its own [`ScheduleError`], naming the loop and its block):
//! - the loop is serial ([`ScheduleError::NotSerial`]): a parallel loop is the
//!   runtime's, an unrolled one already has its hint;
//! - the loop is innermost: its body contains no loop
//!   ([`ScheduleError::NotInnermostLoop`]);
//! - its iterations carry no dependence through memory
//!   ([`ScheduleError::LoopCarriedAccess`]): every buffer stored to inside the loop is
//!   accessed, at one index position, only at elements owned by the current iteration —
//!   the same conservative rule as [`parallel()`](super::parallel()) (an affine index `c*v + r + e`
//!   whose other terms stay within one step, `e` the same loop-invariant expression in
//!   every access). A store whose element does not depend on the loop variable — a
//!   reduction into memory such as `y[i] = y[i] + …` in the innermost loop of SpMV — is
//!   refused. Reductions into a local (`acc = acc + …`) are allowed: they are a register
//!   dependence, which `ivdep` does not cover and compilers handle.
//!
//! Postcondition: the same function with the loop marked `vectorized`.
//!
//! Example (`tests/schedule/vectorize/spmm_csr.before` → `.after`):
//! ```text
//! for k2_2 in 0..k {                     for k2_2 in 0..k vectorized {
//!   C[i_2, k2_2] = C[i_2, k2_2] + …  →     C[i_2, k2_2] = C[i_2, k2_2] + …
//! ```
//!
//! ```
//! use sparsile_transform::schedule::vectorize::vectorize;
//! use sparsile_transform::schedule::LoopRef;
//! let program = sparsile::compile_notation(
//!     "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n",
//! )
//! .unwrap();
//! let func = sparsile_transform::lower_iterations(&program).unwrap();
//! let cols = LoopRef { block: "C".into(), var: "k2_2".into() };
//! let scheduled = vectorize(&func, &cols).unwrap();
//! assert!(scheduled.to_string().contains("for k2_2 in 0..k vectorized {"));
//! ```

use sparsile_ir::loops::{ForKind, Func};

use super::parallel::{check_independent, find_loop, inner_loop_vars, not_serial, with_loop};
use super::{LoopRef, ScheduleError};

/// Marks `target` vectorized after checking the preconditions in the module docs.
pub fn vectorize(func: &Func, target: &LoopRef) -> Result<Func, ScheduleError> {
    let found = find_loop(func, target, "vectorize")?;
    let f = found.for_;
    if f.kind != ForKind::Serial {
        return Err(not_serial("vectorize", target, f));
    }
    if let Some(inner) = inner_loop_vars(f).first() {
        return Err(ScheduleError::NotInnermostLoop {
            block: target.block.clone(),
            var: target.var.clone(),
            inner: func.vars[*inner].name.clone(),
            span: f.span,
        });
    }
    check_independent(func, f, target, "vectorize", true)?;
    Ok(with_loop(func, target, |f| f.kind = ForKind::Vectorized))
}
