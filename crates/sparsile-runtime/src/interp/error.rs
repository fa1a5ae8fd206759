//! Errors of the interpreter. Every variant names the buffer, axis, parameter or
//! iteration concerned and, for mismatches, both values.

use thiserror::Error;

/// A problem with the inputs of [`crate::interpret`] (binding) or met while executing.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum InterpError {
    // ---- the program ----------------------------------------------------------------
    #[error("the program does not pass the stage-I verifier: {}", .errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    InvalidProgram {
        errors: Vec<sparsile_ir::coord::VerifyError>,
    },

    // ---- inputs and options -------------------------------------------------------
    #[error("input buffer `{buffer}` was not given a tensor")]
    MissingInput { buffer: String },

    #[error("derived buffer `{buffer}`: {message}")]
    Derive { buffer: String, message: String },

    #[error("a tensor was given for `{name}`, which is not an input buffer of the program")]
    UnknownInput { name: String },

    #[error("a value was given for parameter `{name}`, which the program does not declare")]
    UnknownParam { name: String },

    #[error("an output structure was given for `{name}`, which is not an output or temp buffer")]
    UnknownOutputStructure { name: String },

    // ---- binding a tensor to a buffer ---------------------------------------------
    #[error("buffer `{buffer}` is declared over {expected} axes but its tensor has {found}")]
    AxisCountMismatch {
        buffer: String,
        expected: usize,
        found: usize,
    },

    #[error("buffer `{buffer}`, axis `{axis}`: declared {expected} but the tensor's axis {position} is {found}")]
    AxisKindMismatch {
        buffer: String,
        axis: String,
        position: usize,
        expected: String,
        found: String,
    },

    #[error("buffer `{buffer}`, axis `{axis}`: declared parent is {expected} but the tensor's axis has parent {found}")]
    AxisParentMismatch {
        buffer: String,
        axis: String,
        expected: String,
        found: String,
    },

    #[error("buffer `{buffer}` lists axis `{axis}` but not its parent `{parent}` before it")]
    BufferMissingParent {
        buffer: String,
        axis: String,
        parent: String,
    },

    #[error("buffer `{buffer}`, axis `{axis}`: {what} is {found} in the tensor but parameter `{param}` is already {bound}")]
    ParamConflict {
        buffer: String,
        axis: String,
        what: &'static str,
        param: String,
        bound: i64,
        found: usize,
    },

    #[error("buffer `{buffer}`, axis `{axis}`: {what} is declared {declared} but is {found} in the tensor")]
    ConstMismatch {
        buffer: String,
        axis: String,
        what: &'static str,
        declared: i64,
        found: usize,
    },

    #[error("buffer `{buffer}`, axis `{axis}`: declared unique but the tensor's axis may repeat coordinates")]
    UniquenessMismatch { buffer: String, axis: String },

    #[error("buffer `{buffer}`: axis `{axis}` is declared without padding, but stored position {position} holds the padding coordinate (its length)")]
    PaddingOnUnpaddedAxis {
        buffer: String,
        axis: String,
        position: usize,
    },

    #[error("axis `{axis}` is bound by buffer `{first}` and by buffer `{second}` to different structures: {detail}")]
    SharedAxisMismatch {
        axis: String,
        first: String,
        second: String,
        detail: String,
    },

    #[error("buffer `{buffer}` has element type {expected} but its tensor holds {found}")]
    DTypeMismatch {
        buffer: String,
        expected: String,
        found: String,
    },

    #[error("integer buffer `{buffer}`: value {value} at offset {offset} is not an exact {dtype}")]
    NotAnInteger {
        buffer: String,
        offset: usize,
        value: f64,
        dtype: String,
    },

    #[error(
        "buffer `{buffer}`: its structure stores {expected} values but the tensor has {found}"
    )]
    ValueCountMismatch {
        buffer: String,
        expected: usize,
        found: usize,
    },

    #[error("buffer `{buffer}`, axis {position}: malformed structure: {detail}")]
    InvalidStorage {
        buffer: String,
        position: usize,
        detail: String,
    },

    #[error("parameter `{param}` is {value}, which is not a valid {what}")]
    BadParamValue {
        param: String,
        value: i64,
        what: &'static str,
    },

    // ---- structure of outputs and computed axes -----------------------------------
    #[error(
        "parameter `{param}` is needed for {needed_for} but is bound by no tensor and no option"
    )]
    UnboundParam { param: String, needed_for: String },

    #[error("buffer `{buffer}` has no structure: axis `{axis}` is bound by no tensor, not computed, and not dense_fixed")]
    OutputHasNoStructure { buffer: String, axis: String },

    #[error("axis `{axis}` has no structure: no buffer binds it and it is not dense_fixed")]
    AxisHasNoStructure { axis: String },

    #[error("buffer `{buffer}`: its axes come from several tensors and are not all dense, so no format can be named for it")]
    OutputFormatUnknown { buffer: String },

    #[error("buffer `{buffer}` needs {values} values, which cannot be allocated")]
    OutputTooLarge { buffer: String, values: usize },

    #[error("computed axis `{axis}`: {detail}")]
    ComputedAxis { axis: String, detail: String },

    // ---- execution ----------------------------------------------------------------
    #[error("iteration `{iteration}`: axis `{axis}` has parent `{parent}`, which is neither iterated before it nor by an enclosing iteration")]
    ParentNotIterated {
        iteration: String,
        axis: String,
        parent: String,
    },

    #[error("iteration `{iteration}`: spatial axis `{axis}` has the reduction axis `{parent}` as parent")]
    SpatialUnderReduction {
        iteration: String,
        axis: String,
        parent: String,
    },

    #[error("iterator variable `{var}` is used where it is not bound{context}")]
    UnboundVar { var: String, context: String },

    #[error("access to `{buffer}` has {found} indices, the buffer has {expected} axes")]
    IndexCountMismatch {
        buffer: String,
        expected: usize,
        found: usize,
    },

    #[error("index {position} of an access to `{buffer}` is a floating-point value")]
    FloatIndex { buffer: String, position: usize },

    #[error("integer overflow or division by zero in `{lhs} {op} {rhs}`")]
    IntArithmetic { op: String, lhs: i64, rhs: i64 },

    #[error("integer overflow in `{op}({arg})`")]
    IntUnary { op: String, arg: i64 },

    #[error("store of a floating-point value into integer buffer `{buffer}`")]
    FloatIntoInteger { buffer: String },

    #[error("store into input buffer `{buffer}`")]
    StoreToInput { buffer: String },

    #[error(
        "store into `{buffer}` at coordinate {coordinates:?}, which is in range but not stored"
    )]
    WriteNotStored {
        buffer: String,
        coordinates: Vec<i64>,
    },

    #[error("integer value {value} stored into `{buffer}` does not fit its type {dtype}")]
    IntegerOutOfRange {
        buffer: String,
        value: i64,
        dtype: String,
    },
}
