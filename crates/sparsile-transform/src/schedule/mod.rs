//! Schedules: composable, recorded transformations of stage-I programs and stage-II
//! functions.

pub mod error;
pub mod sparse_fuse;
pub mod sparse_reorder;

pub use error::ScheduleError;
pub use sparse_fuse::sparse_fuse;
pub use sparse_reorder::sparse_reorder;
