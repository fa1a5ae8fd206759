//! Errors about user-supplied sparse data. Each names the problem and where it is.

use thiserror::Error;

/// A problem with a format string, user arrays, a conversion or a file.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum FormatError {
    #[error("bad format `{text}`: {reason}")]
    BadFormatString { text: String, reason: String },

    #[error("format `{format}` cannot hold a tensor of order {ndim}")]
    UnsupportedOrder { format: String, ndim: usize },

    #[error(
        "coordinate {coordinate} of entry {entry} on axis {axis} is out of range (dimension {dim})"
    )]
    CoordinateOutOfRange {
        entry: usize,
        axis: usize,
        coordinate: i64,
        dim: usize,
    },

    #[error("{what} has length {found}, expected {expected}")]
    LengthMismatch {
        what: String,
        found: usize,
        expected: usize,
    },

    #[error("duplicate coordinate {coordinate:?} at entries {first} and {second}")]
    DuplicateCoordinate {
        coordinate: Vec<usize>,
        first: usize,
        second: usize,
    },

    #[error("{0}")]
    Other(String),
}
