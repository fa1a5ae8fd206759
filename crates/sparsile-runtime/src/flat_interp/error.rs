//! Errors of the loop-level interpreter. Every variant names the buffer, variable or
//! parameter concerned and, for executions, the statement (`at`, its source span).

use sparsile_ir::Span;
use thiserror::Error;

use crate::InterpError;

/// A problem binding a loop-level function to its inputs, or met while executing it.
///
/// The loop-level IR promises explicit guards, so every execution error other than
/// integer arithmetic on data means the function was lowered wrongly.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum FlatInterpError {
    /// Binding the stage-I program to the inputs failed (see [`InterpError`]).
    #[error(transparent)]
    Binding(#[from] InterpError),

    /// A loop the schedule bounded (`bound`) would run more iterations on these inputs
    /// than its extent (see [`crate::bound_promises`]).
    #[error("loop `{var}` was bounded to {extent} iterations by the schedule (`bound`), but these inputs give it {trip}: bound it to at least {trip}, or compile for these sizes")]
    BoundExceeded { var: String, extent: i64, trip: i64 },

    /// With [`crate::FlatOptions::verify_func`]: the function breaks a loop-level rule.
    #[error("function does not pass the loop-level verifier: {}", .errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    InvalidFunc {
        errors: Vec<sparsile_ir::loops::VerifyError>,
    },

    /// The function is a GPU function, or holds a GPU node outside one; this interpreter
    /// runs CPU functions (the SIMT interpreter runs GPU functions).
    #[error("{what} at {at}: this interpreter runs CPU functions; run GPU functions (with launches) with the SIMT interpreter")]
    GpuNode { what: String, at: Span },

    // ---- the function against the program -------------------------------------------
    #[error("function `{func}` refers to {what} {id}, which it does not declare")]
    UnknownId {
        func: String,
        what: &'static str,
        id: String,
    },

    #[error("parameter `{param}` of the function is not a parameter of the stage-I program")]
    UnknownParam { param: String },

    #[error(
        "buffer `{buffer}` refers to `{tensor}`, which is not a buffer of the stage-I program"
    )]
    UnknownTensor { buffer: String, tensor: String },

    #[error("buffers `{buffer}` number {first} and {second} both hold the values of `{buffer}`")]
    DuplicateValues {
        buffer: String,
        first: usize,
        second: usize,
    },

    #[error(
        "buffer `{buffer}` has element type {func} but stage-I buffer `{tensor}` has {program}"
    )]
    DTypeMismatch {
        buffer: String,
        tensor: String,
        func: String,
        program: String,
    },

    #[error(
        "buffer `{buffer}` is an {array} buffer but has element type {dtype}, not an integer type"
    )]
    NonIntegerStructure {
        buffer: String,
        array: &'static str,
        dtype: String,
    },

    #[error("buffer `{buffer}` names axis {axis} of `{tensor}`, which has {count} axes")]
    AxisOutOfRange {
        buffer: String,
        tensor: String,
        axis: usize,
        count: usize,
    },

    #[error(
        "buffer `{buffer}` names the {array} array of axis {axis} of `{tensor}`, which has none"
    )]
    MissingArray {
        buffer: String,
        tensor: String,
        axis: usize,
        array: &'static str,
    },

    #[error("buffer `{buffer}` holds the {array} array of axis {axis} of `{tensor}` as {expected}, but the tensor stores it as {found}")]
    IndexTypeMismatch {
        buffer: String,
        tensor: String,
        axis: usize,
        array: &'static str,
        expected: sparsile_ir::DType,
        found: sparsile_ir::IndexType,
    },

    #[error("buffer `{buffer}`: layout does not fit: {detail}")]
    LayoutMismatch { buffer: String, detail: String },

    #[error("buffer `{buffer}` is declared with {declared} elements but holds {actual}")]
    LengthMismatch {
        buffer: String,
        declared: i64,
        actual: usize,
    },

    #[error("scratch buffer `{buffer}` has length {len}, which cannot be allocated")]
    BadScratchLength { buffer: String, len: i64 },

    // ---- execution ------------------------------------------------------------------
    #[error("{at}: {access} of `{buffer}` at offset {offset}, outside its {len} elements")]
    OutOfBounds {
        buffer: String,
        access: &'static str,
        offset: i64,
        len: usize,
        at: Span,
    },

    #[error("{at}: {access} of `{buffer}`: position {position} of axis `{axis}` is outside its {npos} positions")]
    PositionOutOfRange {
        buffer: String,
        access: &'static str,
        axis: String,
        position: i64,
        npos: usize,
        at: Span,
    },

    #[error("{at}: access to `{buffer}`: position {position} of axis `{axis}` is not under position {parent_position} of its parent (range {lo}..{hi})")]
    PositionNotUnderParent {
        buffer: String,
        axis: String,
        position: i64,
        parent_position: i64,
        lo: usize,
        hi: usize,
        at: Span,
    },

    #[error(
        "{at}: access to `{buffer}` has {found} indices, the buffer has {expected} dimensions"
    )]
    IndexCount {
        buffer: String,
        expected: usize,
        found: usize,
        at: Span,
    },

    #[error("{at}: {what} is a floating-point value where an integer is needed")]
    FloatWhereInt { what: String, at: Span },

    #[error("{at}: integer overflow or division by zero in `{lhs} {op} {rhs}`")]
    IntArithmetic {
        op: String,
        lhs: i64,
        rhs: i64,
        at: Span,
    },

    #[error("{at}: integer overflow in `{op}({arg})`")]
    IntUnary { op: String, arg: i64, at: Span },

    #[error("{at}: variable `{var}` is used where it is not bound")]
    UnboundVar { var: String, at: Span },

    #[error("{at}: assignment to `{var}`, which is {why}")]
    BadAssign {
        var: String,
        why: &'static str,
        at: Span,
    },

    #[error("{at}: store of a floating-point value into integer buffer `{buffer}`")]
    FloatIntoInteger { buffer: String, at: Span },

    #[error("{at}: integer value {value} stored into `{buffer}` does not fit its type {dtype}")]
    IntegerOutOfRange {
        buffer: String,
        value: i64,
        dtype: String,
        at: Span,
    },

    #[error("{at}: store into `{buffer}`, which is read-only ({why})")]
    StoreToReadOnly {
        buffer: String,
        why: &'static str,
        at: Span,
    },

    #[error("{at}: search in `{buffer}`, which holds floating-point values")]
    SearchInFloat { buffer: String, at: Span },

    #[error("{at}: parallel loop over `{var}`: iterations {first} and {second} both write `{buffer}` at offset {offset}")]
    ParallelWriteConflict {
        var: String,
        buffer: String,
        offset: usize,
        first: i64,
        second: i64,
        at: Span,
    },

    #[error("{at}: parallel loop over `{var}`: iteration {writer} stores `{buffer}` at offset {offset}, which iteration {reader} loads")]
    ParallelReadWriteConflict {
        var: String,
        buffer: String,
        offset: usize,
        writer: i64,
        reader: i64,
        at: Span,
    },

    #[error("{at}: parallel loop over `{var}`: iteration {iteration} assigns `{local}`, which is declared outside the loop")]
    ParallelSharedLocal {
        var: String,
        local: String,
        iteration: i64,
        at: Span,
    },

    #[error(
        "{at}: balanced parallel loop over `{var}` weighs its iterations with `{buffer}`: {detail}"
    )]
    BalancedIndptr {
        var: String,
        buffer: String,
        detail: String,
        at: Span,
    },
}
