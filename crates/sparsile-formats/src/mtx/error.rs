//! Errors of Matrix Market reading and writing. Each names the line (1-based) or the
//! entry where the problem is.

use thiserror::Error;

/// A problem reading or writing a Matrix Market file.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum MtxError {
    /// An I/O error (including a truncated or corrupt gzip stream). `line` is the line
    /// being read when it happened (0 when writing or opening).
    #[error("I/O error on {path} at line {line}: {message}")]
    Io {
        path: String,
        line: usize,
        message: String,
    },

    #[error("line {line} is longer than {max} bytes: not a Matrix Market file")]
    LineTooLong { line: usize, max: usize },

    #[error("line {line}: bad header: {reason}")]
    BadHeader { line: usize, reason: String },

    #[error("line {line}: {what} is not supported")]
    Unsupported { line: usize, what: String },

    #[error("line {line}: bad size line: {reason}")]
    BadSizeLine { line: usize, reason: String },

    #[error("line {line}: bad entry: {reason}")]
    BadEntry { line: usize, reason: String },

    /// An index outside `1..=dim` (indices in the file are 1-based).
    #[error("line {line}: {axis} index {index} is out of range 1..={dim} (indices are 1-based)")]
    IndexOutOfRange {
        line: usize,
        axis: &'static str,
        index: u64,
        dim: usize,
    },

    #[error("line {line}: more entries than the {declared} declared on the size line")]
    TooManyEntries { line: usize, declared: usize },

    #[error("file ends at line {line} after {found} of the {declared} declared entries")]
    TooFewEntries {
        line: usize,
        found: usize,
        declared: usize,
    },

    /// The same coordinate twice (1-based row and column), after symmetric expansion.
    #[error("lines {first_line} and {second_line}: duplicate entry ({row}, {col})")]
    DuplicateEntry {
        first_line: usize,
        second_line: usize,
        row: usize,
        col: usize,
    },

    #[error("line {line}: diagonal entry ({index}, {index}) in a skew-symmetric matrix")]
    SkewDiagonal { line: usize, index: usize },

    /// The data cannot be written with the requested options.
    #[error("cannot write: {reason}")]
    Write { reason: String },
}

impl MtxError {
    pub(crate) fn io(path: &str, line: usize, err: &std::io::Error) -> MtxError {
        let message = if err.kind() == std::io::ErrorKind::UnexpectedEof {
            format!("unexpected end of data (truncated gzip stream?): {err}")
        } else {
            err.to_string()
        };
        MtxError::Io {
            path: path.to_string(),
            line,
            message,
        }
    }
}
