//! The choice for GPU targets: a static rule per operator. GPU kernels are not measured
//! on the machines that build Sparsile, so there is no tuning database or learned model
//! for them yet; the rule picks the recipe whose design fits the operator:
//! - SpMM (and anything not listed): `gpu_rowwise`, the dense width over the lanes of a
//!   warp with each output element summed in a register;
//! - SpMV: `gpu_warp`, a warp per row (CSR-vector), combined by a warp reduction;
//! - SDDMM: `gpu_sddmm_vec`, a warp per non-zero (over all non-zeros, whatever the row
//!   lengths), its lanes reading the dense rows in `float4`/`double2` vectors where the
//!   dense width `K` (taken from the inputs) is a multiple of 4, and one element at a
//!   time (the schedule of `gpu_warp`) otherwise, then a warp reduction.
//!
//! ```
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! assert_eq!(sparsile::auto::gpu_rule(&program), "gpu_warp");
//! ```

use sparsile_ir::coord::Program;
use sparsile_tune::op::{classify, Operator};

/// The GPU recipe for `program` (see the module docs).
pub fn gpu_rule(program: &Program) -> &'static str {
    match classify(program).op {
        Operator::Spmv => "gpu_warp",
        Operator::Sddmm => "gpu_sddmm_vec",
        _ => "gpu_rowwise",
    }
}
