//! Errors of building and running a [`CompiledKernel`](super::CompiledKernel). Every
//! variant names the buffer, tensor, axis or parameter concerned.

use thiserror::Error;

use crate::interp::InterpError;
use crate::jit::JitError;

/// A problem with a compiled kernel or its arguments.
#[derive(Debug, Error)]
pub enum KernelError {
    #[error(transparent)]
    Bind(#[from] InterpError),

    #[error(transparent)]
    Jit(#[from] JitError),

    #[error(
        "function `{func}` is a stage-{stage} function; kernels are built from stage III (flat)"
    )]
    NotFlat { func: String, stage: &'static str },

    #[error("buffer `{buffer}` of the compiled function has no stage-I buffer of that name")]
    UnknownBuffer { buffer: String },

    #[error("buffer `{buffer}` of the compiled function has element type {func_dtype} but stage-I buffer `{buffer}` has {program_dtype}")]
    ValuesDTypeMismatch {
        buffer: String,
        func_dtype: String,
        program_dtype: String,
    },

    #[error("buffer `{buffer}` is a shared (GPU) buffer, which CPU kernels do not have")]
    SharedBuffer { buffer: String },

    #[error("structure buffer `{buffer}` refers to `{tensor}`, which is not a stage-I buffer")]
    UnknownTensor { buffer: String, tensor: String },

    #[error(
        "structure buffer `{buffer}` refers to axis {axis} of `{tensor}`, which has {axes} axes"
    )]
    AxisOutOfRange {
        buffer: String,
        tensor: String,
        axis: usize,
        axes: usize,
    },

    #[error(
        "structure buffer `{buffer}` has element type {dtype}; structure arrays are i32 or i64"
    )]
    NotAnIndexType { buffer: String, dtype: String },

    #[error("structure buffer `{buffer}` wants the {what} array of axis {axis} of `{tensor}`, which has none")]
    NoSuchArray {
        buffer: String,
        tensor: String,
        axis: usize,
        what: &'static str,
    },

    #[error("structure buffer `{buffer}` is {expected} but the {what} array of axis {axis} of `{tensor}` is {found}")]
    IndexTypeMismatch {
        buffer: String,
        tensor: String,
        axis: usize,
        what: &'static str,
        expected: String,
        found: String,
    },

    #[error(
        "parameter `{param}` of the compiled function is not a parameter of the stage-I program"
    )]
    UnknownParam { param: String },

    #[error("parameter `{param}` is bound by no tensor and no option")]
    UnboundParam { param: String },

    /// A loop the schedule bounded (`bound`) would run more iterations on these inputs
    /// than its extent (see [`crate::bound_promises`]).
    #[error("loop `{var}` was bounded to {extent} iterations by the schedule (`bound`), but these inputs give it {trip}: bound it to at least {trip}, or compile for these sizes")]
    BoundExceeded { var: String, extent: i64, trip: i64 },

    #[error("buffer `{buffer}` is declared with {needed} elements but its array has {found}")]
    BufferTooShort {
        buffer: String,
        needed: i64,
        found: usize,
    },

    #[error("buffer `{buffer}` needs {values} values, which cannot be allocated")]
    OutputTooLarge { buffer: String, values: usize },

    #[error("out buffer for `{buffer}`: {reason}")]
    OutBufferMismatch { buffer: String, reason: String },
}
