//! `bind_atomic`: [`bind()`](super::bind()) for a loop whose iterations add into the same
//! elements: those updates become atomic adds first (TACO's `parallelize` with the
//! atomics race strategy).
//!
//! Purpose: element-balanced GPU kernels (a block per group of non-zeros after
//! `sparse_fuse`, several of which may fall in one row) and fused hyb buckets (a long row
//! split over several buckets) add into one output row from different threads.
//!
//! Preconditions: those of [`super::parallel_reduce()`] on the updates (every shared
//! buffer is written only by `X[e] = X[e] + v`, `v` not reading `X`, and read nowhere
//! else in the loop: [`super::ScheduleError::NotAReduction`]), then those of `bind` on the
//! result. The output must start at zero before the loop (an `init` block, a launch of
//! its own, runs first).
//!
//! Postcondition: the shared updates are `atomic X[e] += v` and the loop is bound.
//!
//! ```
//! use sparsile_ir::loops::{GpuAxis, GpuDim};
//! use sparsile_transform::schedule::{LoopRef, Schedule, SplitTail};
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! let mut sch = Schedule::new(&program);
//! sch.sparse_fuse("y", &["I_m".into(), "A_J".into()]).unwrap();
//! let func = sch.func_or_lower().unwrap().clone();
//! // The fused loop over all non-zeros: iterations of one row add into one y[i].
//! let nz = LoopRef::new("y", "j_p");
//! assert!(sch.bind(&nz, GpuAxis::Block(GpuDim::X)).is_err());
//! sch.bind_atomic(&nz, GpuAxis::Block(GpuDim::X)).unwrap();
//! assert!(sch.func().unwrap().to_string().contains("atomic y[i_p] += "));
//! # let _ = func;
//! ```

use sparsile_ir::loops::{Func, GpuAxis};

use super::bind::bind;
use super::reduction::atomic_shared_updates;
use super::{LoopRef, ScheduleError};

/// Makes the shared updates of `target` atomic, then binds it to `axis` (see the module
/// docs).
pub fn bind_atomic(func: &Func, target: &LoopRef, axis: GpuAxis) -> Result<Func, ScheduleError> {
    let (atomic, _) = atomic_shared_updates(func.clone(), target, "bind_atomic")?;
    bind(&atomic, target, axis)
}
