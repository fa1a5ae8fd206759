//! Schedules: composable, recorded transformations of stage-I programs and stage-II
//! functions.

pub mod error;
pub mod loop_ref;

pub use error::ScheduleError;
pub use loop_ref::LoopRef;
