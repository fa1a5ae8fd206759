//! Source locations for error messages in text IR and index notation.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A location in a source text: 1-based line and column, and the byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Span {
    pub line: u32,
    pub col: u32,
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(line: u32, col: u32, start: usize, end: usize) -> Span {
        Span {
            line,
            col,
            start,
            end,
        }
    }

    /// The smallest span covering both.
    pub fn join(self, other: Span) -> Span {
        let (first, _) = if self.start <= other.start {
            (self, other)
        } else {
            (other, self)
        };
        Span {
            line: first.line,
            col: first.col,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.col)
    }
}
