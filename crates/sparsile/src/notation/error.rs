//! Errors of the index notation front end. Every variant says what is wrong and where
//! (the [`Span`] of the offending text: line, column and byte range).

use sparsile_ir::Span;
use thiserror::Error;

/// A mistake in an index notation program.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum NotationError {
    #[error("{span}: unexpected character `{ch}`")]
    UnexpectedChar { ch: char, span: Span },

    #[error("{span}: bad number `{text}`")]
    BadNumber { text: String, span: Span },

    #[error("{span}: expected {expected}, found {found}")]
    UnexpectedToken {
        expected: String,
        found: String,
        span: Span,
    },

    #[error("{span}: the expression is nested more deeply than {max} levels (parentheses, calls, unary minus and each operator of a chain count one)")]
    TooDeep { max: usize, span: Span },

    #[error("{span}: unknown element type `{name}` (expected f16, bf16, f32, f64, i32 or i64)")]
    UnknownDType { name: String, span: Span },

    #[error("{span}: bad format `{text}`: {reason}")]
    BadFormat {
        text: String,
        reason: String,
        span: Span,
    },

    #[error("{span}: tensor `{name}` is declared twice (first at {first})")]
    DuplicateTensor {
        name: String,
        first: Span,
        span: Span,
    },

    #[error("{span}: dimension of tensor `{tensor}` must be positive, found {value}")]
    BadDimension {
        tensor: String,
        value: i64,
        span: Span,
    },

    #[error("{span}: format `{format}` cannot hold tensor `{tensor}` of order {ndim}")]
    UnsupportedOrder {
        tensor: String,
        format: String,
        ndim: usize,
        span: Span,
    },

    #[error("{span}: unknown tensor `{name}`")]
    UnknownTensor { name: String, span: Span },

    #[error("{span}: tensor `{tensor}` has {expected} dimensions but is indexed with {found}")]
    IndexCount {
        tensor: String,
        expected: usize,
        found: usize,
        span: Span,
    },

    #[error("{span}: index `{var}` appears twice in one access of `{tensor}`")]
    RepeatedIndex {
        var: String,
        tensor: String,
        span: Span,
    },

    #[error(
        "{span}: index `{var}` ranges over `{first}` (at {first_span}) but here over `{second}`"
    )]
    DimMismatch {
        var: String,
        first: String,
        first_span: Span,
        second: String,
        span: Span,
    },

    #[error("{span}: element type mismatch: expected {expected}, found {found}")]
    DTypeMismatch {
        expected: String,
        found: String,
        span: Span,
    },

    #[error("{span}: tensor `{tensor}` of type {dtype} used as an index (needs i32 or i64)")]
    IndexNotInteger {
        tensor: String,
        dtype: String,
        span: Span,
    },

    #[error("{span}: unknown function `{name}` with {arity} argument(s) (expected exp, relu, sqrt, neg, abs, log with one, max, min with two)")]
    UnknownFunction {
        name: String,
        arity: usize,
        span: Span,
    },

    #[error("{span}: output index `{var}` does not appear on the right-hand side")]
    UnboundOutputIndex { var: String, span: Span },

    #[error("{span}: `+=` into `{tensor}` before any `=` assigns it")]
    AccumulateBeforeAssign { tensor: String, span: Span },

    #[error("{span}: `{tensor}` is read before it is assigned")]
    ReadBeforeAssign { tensor: String, span: Span },

    #[error("{span}: the statement assigning `{tensor}` also reads it")]
    ReadsOwnOutput { tensor: String, span: Span },

    #[error("{span}: the pattern of sparse output `{tensor}` cannot be derived: {reason}")]
    PatternNotDerivable {
        tensor: String,
        reason: String,
        span: Span,
    },

    #[error("{span}: `{op}` into `{tensor}` is not supported: {reason}")]
    UnsupportedReduction {
        op: &'static str,
        tensor: String,
        reason: String,
        span: Span,
    },

    #[error("{span}: tensor `{tensor}` in format `{format}` cannot be accessed at arbitrary coordinates here; make it the driving operand (a factor of a product) instead")]
    NotRandomAccess {
        tensor: String,
        format: String,
        span: Span,
    },
}

impl NotationError {
    /// Where the mistake is.
    pub fn span(&self) -> Span {
        use NotationError::*;
        match self {
            UnexpectedChar { span, .. }
            | TooDeep { span, .. }
            | BadNumber { span, .. }
            | UnexpectedToken { span, .. }
            | UnknownDType { span, .. }
            | BadFormat { span, .. }
            | DuplicateTensor { span, .. }
            | BadDimension { span, .. }
            | UnsupportedOrder { span, .. }
            | UnknownTensor { span, .. }
            | IndexCount { span, .. }
            | RepeatedIndex { span, .. }
            | DimMismatch { span, .. }
            | DTypeMismatch { span, .. }
            | IndexNotInteger { span, .. }
            | UnknownFunction { span, .. }
            | UnboundOutputIndex { span, .. }
            | AccumulateBeforeAssign { span, .. }
            | ReadBeforeAssign { span, .. }
            | ReadsOwnOutput { span, .. }
            | PatternNotDerivable { span, .. }
            | NotRandomAccess { span, .. }
            | UnsupportedReduction { span, .. } => *span,
        }
    }
}
