//! Stage III: flat loops over 1-D buffers.
//!
//! A stage-III function is a [`Func`] with [`Stage::Flat`]: it has no axes, and every
//! buffer is flat ([`crate::loops::BufferLayout::Flat`]) and accessed with one offset;
//! tensor values are addressed with the value-offset formula of the storage format
//! (`A[(jbp * bs + bi) * bs + bj]` for a BSR block). This is what code generation
//! consumes. The node types, text form and builder are shared with stage II and live in
//! [`crate::loops`]; this module adds the stage check to the shared verifier.
//!
//! ```
//! use sparsile_ir::loops::Func;
//! let f: Func = "\
//! flat func rowsum(m, n, nnz) {
//!   buffer A: f32[nnz] input values
//!   buffer y: f32[m] output values
//!   buffer A_J_indptr: i32[m + 1] input indptr(A, 1)
//!   for i in 0..m parallel {
//!     let acc: f32 = 0.0
//!     for jp in A_J_indptr[i]..A_J_indptr[i + 1] {
//!       acc = acc + A[jp]
//!     }
//!     y[i] = acc
//!   }
//! }
//! ".parse().unwrap();
//! assert!(sparsile_ir::flat::verify(&f).is_ok());
//! assert!(sparsile_ir::pos::verify(&f).is_err());
//! ```

pub use crate::loops::{expr_type, Func, Stage, VerifyError};

/// Checks that `func` is a stage-III function and passes every rule of
/// [`crate::loops::verify()`].
pub fn verify(func: &Func) -> Result<(), Vec<VerifyError>> {
    crate::loops::verify_stage(func, Stage::Flat)
}
