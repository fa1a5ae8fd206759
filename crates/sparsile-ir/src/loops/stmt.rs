//! Statements of the loop-level IR.

use serde::{Deserialize, Serialize};

use super::expr::Expr;
use crate::id::{BufferId, VarId};
use crate::Span;

/// How a loop may run (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ForKind {
    Serial,
    Parallel,
    Vectorized,
    Unrolled,
}

impl ForKind {
    pub const ALL: [ForKind; 4] = [
        ForKind::Serial,
        ForKind::Parallel,
        ForKind::Vectorized,
        ForKind::Unrolled,
    ];

    /// The keyword in the text IR (`serial` loops print without one).
    pub fn name(self) -> &'static str {
        match self {
            ForKind::Serial => "serial",
            ForKind::Parallel => "parallel",
            ForKind::Vectorized => "vectorized",
            ForKind::Unrolled => "unrolled",
        }
    }
}

/// `for var in lo..hi { body }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct For {
    pub var: VarId,
    pub lo: Expr,
    pub hi: Expr,
    pub kind: ForKind,
    pub body: Vec<Stmt>,
    pub span: Span,
}

/// A statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Stmt {
    For(For),
    If {
        cond: Expr,
        then_body: Vec<Stmt>,
        else_body: Vec<Stmt>,
        span: Span,
    },
    /// Declares a local with its first value.
    Let {
        var: VarId,
        value: Expr,
        span: Span,
    },
    /// Assigns a local declared by an enclosing `Let`.
    Assign {
        var: VarId,
        value: Expr,
        span: Span,
    },
    Store {
        buffer: BufferId,
        indices: Vec<Expr>,
        value: Expr,
        span: Span,
    },
    /// A hint: fetch the element `buffer[indices]` into the cache ahead of its use. It
    /// changes no value; its indices are evaluated like a load's, and the element must
    /// be in bounds (the `prefetch` primitive guards it). Text: `prefetch B[j, 0]`.
    Prefetch {
        buffer: BufferId,
        indices: Vec<Expr>,
        span: Span,
    },
    /// A named region: the work of one stage-I iteration (`spmm`) or of its init
    /// (`spmm.init`). Schedules find loops through block names.
    Block {
        name: String,
        body: Vec<Stmt>,
        span: Span,
    },
}
