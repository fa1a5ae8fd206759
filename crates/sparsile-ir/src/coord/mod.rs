//! Stage I: computation in coordinate space.
//!
//! A [`Program`] declares symbolic integer parameters, axes, buffers over axes, and a
//! body of statements; the main statement is a [`SparseIteration`], a loop nest over a
//! list of axes, each marked spatial (`S`) or reduction (`R`), that binds one iterator
//! variable per axis. Buffer accesses give one index expression per buffer axis, in
//! *coordinate space*: the index of a sparse axis is a coordinate, never a position.
//!
//! # Semantics (what the interpreter executes and later stages must preserve)
//! - An iteration visits the axes in order. An axis with a parent must come after its
//!   parent in the list; it ranges over the positions stored under the parent's current
//!   position. A parentless axis ranges over all of its positions. The iterator variable's
//!   value is the coordinate at the current position.
//! - `init` statements run once for every point of the *spatial* axes alone (in order,
//!   reduction axes left out), before any body instance of the iteration runs; so an
//!   output row with no stored entries is still initialised. A spatial axis may not have a
//!   reduction axis as its parent.
//! - Reading a sparse buffer at a coordinate that is not stored yields `0`; reading any
//!   buffer at a coordinate outside an axis's length yields `0`. Writing outside an axis's
//!   length is skipped (this is how padding, e.g. block rows past the matrix edge, is
//!   ignored); writing a sparse buffer at a coordinate that is in range but not stored is
//!   an error.
//! - Integer division `/` and remainder `%` round towards negative infinity.
//!
//! See `crates/sparsile-ir/tests/` for text-IR examples.

pub mod builder;
pub mod derived;
pub mod display;
mod expr;
pub mod parser;
mod program;
mod stmt;
pub mod verify;

pub use builder::{BodyBuilder, ProgramBuilder};
pub use derived::{DerivedBuffer, RuleSpec};
pub use expr::{BinaryOp, Expr, UnaryOp};
pub use parser::ParseError;
pub use program::{
    AxisDecl, AxisStructure, BufferDecl, BufferRole, Extent, IterVar, Param, Program,
};
pub use stmt::{IterAxis, IterKind, SparseIteration, Stmt, Store};
pub use verify::{expr_type, verify, ScalarKind, TypeError, VerifyError};
