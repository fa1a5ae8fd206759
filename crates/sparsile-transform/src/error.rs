//! Errors of the lowering passes. Each variant names the problem and where it is
//! (iteration, buffer, axis, and the source span when the program has one).

use sparsile_ir::coord::VerifyError;
use sparsile_ir::Span;
use thiserror::Error;

/// Why a program could not be lowered.
#[derive(Debug, Error)]
pub enum LowerError {
    /// The input program does not pass the stage-I verifier.
    #[error("the stage-I program is invalid:\n{}", list(.errors))]
    InvalidProgram { errors: Vec<VerifyError> },
    /// Co-iteration (union / intersection of sparse operands) has no compiled form yet.
    #[error(
        "axis `{axis}` is a union or intersection of other axes: co-iteration is not \
         compiled yet; run this program with the interpreter"
    )]
    CoIteration { axis: String },
    /// An iteration visits an axis whose parent is not iterated before it.
    #[error(
        "iteration `{iteration}` (line {}, column {}): axis `{axis}` is visited before its \
         parent `{parent}`",
        .span.line, .span.col
    )]
    ParentNotIterated {
        iteration: String,
        axis: String,
        parent: String,
        span: Span,
    },
    /// An iteration visits an axis that has structure arrays but no buffer declares it,
    /// so nothing at run time supplies them.
    #[error(
        "iteration `{iteration}`: axis `{axis}` has no buffer declared over it, so its \
         structure is unknown"
    )]
    AxisWithoutBuffer { iteration: String, axis: String },
    /// An access into a non-unique axis (COO rows) that has children, by coordinate.
    #[error(
        "access to `{buffer}` (line {}, column {}): random access into the non-unique axis \
         `{axis}` followed by child axes is not compiled; iterate the buffer's axes instead",
        .span.line, .span.col
    )]
    RandomAccessNonUnique {
        buffer: String,
        axis: String,
        span: Span,
    },
    /// An iterator variable is used outside the iteration that binds it.
    #[error("variable `{var}` is used outside the iteration that binds it (line {}, column {})", .span.line, .span.col)]
    UnboundVariable { var: String, span: Span },
    /// A buffer access has the wrong number of indices.
    #[error(
        "access to `{buffer}` (line {}, column {}) has {found} indices, the buffer has {expected} axes",
        .span.line, .span.col
    )]
    IndexCount {
        buffer: String,
        expected: usize,
        found: usize,
        span: Span,
    },
    /// `lower_buffers` was given a function that is not in stage II.
    #[error("`{pass}` expects a stage-{expected} function, found a stage-{found} one")]
    WrongStage {
        pass: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    /// A pass produced a function the loop-level verifier rejects (a compiler bug).
    #[error("internal error: the output of `{pass}` does not verify:\n{}", list(.errors))]
    PassOutputInvalid {
        pass: &'static str,
        errors: Vec<VerifyError>,
    },
    /// A buffer lists an axis before (or without) that axis's parent.
    #[error("buffer `{buffer}`: axis `{axis}` comes before or without its parent `{parent}`")]
    BufferMissingParent {
        buffer: String,
        axis: String,
        parent: String,
    },
}

fn list(errors: &[VerifyError]) -> String {
    errors
        .iter()
        .map(|e| format!("  {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}
