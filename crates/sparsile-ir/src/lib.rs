//! Sparsile's intermediate representations.
//!
//! Sparsile lowers a computation through three stages (see the design reference):
//! stage I works in *coordinate space* over axes, sparse buffers and sparse iterations;
//! stage II in *position space* over loops; stage III over flat loops and 1-D buffers.
//! This crate holds the vocabulary shared by every other crate (typed ids, element and
//! index types, axis kinds) and the stage-I IR in [`coord`]: node types, a builder,
//! the text form (`Display`), its parser and the verifier.
//!
//! ```
//! use sparsile_ir::coord::Program;
//! let text = "\
//! func scale(m) {
//!   axis I = dense_fixed(m)
//!   buffer X: f32[I] input
//!   buffer Y: f32[I] output
//!   iter s over [I: S] as (i) {
//!     Y[i] = 2.0 * X[i]
//!   }
//! }
//! ";
//! let program: Program = text.parse().unwrap();
//! assert_eq!(program.to_string(), text);
//! ```

pub mod axis_kind;
pub mod coord;
pub mod dtype;
pub mod flat;
pub mod id;
pub mod loops;
pub mod pos;
pub mod settings;
pub mod span;

pub use axis_kind::AxisKind;
pub use dtype::{DType, IndexType};
pub use id::{AxisId, BufferId, IdVec, IterVarId, ParamId, VarId};
pub use span::Span;
