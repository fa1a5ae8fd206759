//! Statements of stage I: stores and sparse iterations.

use serde::{Deserialize, Serialize};

use super::expr::Expr;
use crate::id::{AxisId, BufferId, IterVarId};
use crate::Span;

/// Whether an iterator is spatial (`S`, indexes the output) or reduction (`R`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IterKind {
    Spatial,
    Reduction,
}

impl IterKind {
    /// `S` or `R`, as in the text IR.
    pub fn letter(self) -> char {
        match self {
            IterKind::Spatial => 'S',
            IterKind::Reduction => 'R',
        }
    }
}

/// One axis of a sparse iteration, with its mark and the variable it binds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterAxis {
    pub axis: AxisId,
    pub kind: IterKind,
    pub var: IterVarId,
}

/// A loop nest over axes in coordinate space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SparseIteration {
    /// Unique within the program; schedules refer to iterations by name.
    pub name: String,
    pub axes: Vec<IterAxis>,
    /// Runs once per point of the spatial axes, before the body (see the module docs).
    pub init: Vec<Stmt>,
    pub body: Vec<Stmt>,
    pub span: Span,
    /// Fused groups of axes, as half-open index ranges `start..end` into `axes`, sorted
    /// and disjoint, each at least two axes long, each axis the parent of the next. A
    /// fused group is iterated by one loop over the positions of its last axis, the
    /// positions of the other axes recovered from it (`fuse(I, J)` in the text IR). The
    /// semantics (the set and order of points visited) are those of the unfused
    /// iteration; fusion only changes how lowering builds the loops.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fused: Vec<(usize, usize)>,
}

/// `buffer[indices] = value`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Store {
    pub buffer: BufferId,
    pub indices: Vec<Expr>,
    pub value: Expr,
    pub span: Span,
}

/// A statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Stmt {
    Store(Store),
    Iteration(SparseIteration),
}
