//! Sparsile's lowering passes and schedules.
//!
//! Each pass is a pure function in its own module:
//! - [`lower_iterations()`]: stage I → stage II (position loops, explicit guards);
//! - [`default_schedule()`]: marks the outermost spatial loop of each top-level block
//!   parallel;
//! - [`lower_buffers()`]: stage II → stage III (flat buffers, value offsets);
//! - [`pipeline::compile_to_flat`] runs them in order and can print the IR after each;
//! - [`schedule`]: schedule primitives (one module each), [`Schedule`] and its [`Trace`].

// Schedule errors name the primitive, the loop, the access and the reason (with spans):
// they are large by design and only built on the cold error path, so returning them by
// value is fine.
#![allow(clippy::result_large_err)]

pub mod default_schedule;
mod error;
pub mod index_expr;
pub mod lower_buffers;
pub mod lower_iterations;
pub mod pipeline;

pub use default_schedule::default_schedule;
pub use error::LowerError;
pub use lower_buffers::lower_buffers;
pub use lower_iterations::lower_iterations;
pub use pipeline::{compile_to_flat, Lowered};
pub mod schedule;
pub use schedule::{LoopRef, Schedule, ScheduleError, SplitTail, Step, Trace};
