//! Schedules: composable, recorded transformations of stage-I programs and stage-II
//! functions.

pub mod bound;
pub mod error;
pub mod parallel;
pub mod sparse_fuse;
pub mod sparse_reorder;
pub mod unroll;
pub mod vectorize;

pub use error::ScheduleError;
pub use sparse_fuse::sparse_fuse;
pub use sparse_reorder::sparse_reorder;

/// A loop, named by the block that contains it and its variable (interim definition,
/// until the schedule core's `loop_ref` module lands).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopRef {
    pub block: String,
    pub var: String,
}
