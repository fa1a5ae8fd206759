//! Stage II: position space.
//!
//! A stage-II function is a [`Func`] with [`Stage::Pos`]: it keeps the stage-I
//! parameters and axes, lays every tensor buffer out over its axes (one *position* per
//! axis: `A[i, jp]`) and materialises the structure arrays as flat `indptr` / `indices`
//! buffers that loop bounds (`for jp in A_J_indptr[i]..A_J_indptr[i + 1]`), coordinate
//! recovery (`let j: idx = A_J_indices[jp]`) and searches read. The node types, text
//! form and builder are shared with stage III and live in [`crate::loops`]; this module
//! adds the stage check to the shared verifier.
//!
//! ```
//! use sparsile_ir::loops::Func;
//! let f: Func = "\
//! pos func rowsum(m, n, nnz) {
//!   axis I = dense_fixed(m)
//!   axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
//!   buffer A: f32[I, J] input values
//!   buffer y: f32[I] output values
//!   buffer A_J_indptr: i32[m + 1] input indptr(A, 1)
//!   for i in 0..m parallel {
//!     let acc: f32 = 0.0
//!     for jp in A_J_indptr[i]..A_J_indptr[i + 1] {
//!       acc = acc + A[i, jp]
//!     }
//!     y[i] = acc
//!   }
//! }
//! ".parse().unwrap();
//! assert!(sparsile_ir::pos::verify(&f).is_ok());
//! assert!(sparsile_ir::flat::verify(&f).is_err());
//! ```

pub use crate::loops::{expr_type, Func, Stage, VerifyError};

/// Checks that `func` is a stage-II function and passes every rule of
/// [`crate::loops::verify()`].
pub fn verify(func: &Func) -> Result<(), Vec<VerifyError>> {
    crate::loops::verify_stage(func, Stage::Pos)
}
