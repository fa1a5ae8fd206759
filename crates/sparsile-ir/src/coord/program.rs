//! Programs and their declarations: parameters, axes, buffers, iterator variables.

use serde::{Deserialize, Serialize};

use super::derived::DerivedBuffer;
use super::stmt::Stmt;
use crate::id::{AxisId, BufferId, IdVec, IterVarId, ParamId};
use crate::{AxisKind, DType, IndexType, Span};

/// A symbolic integer parameter (a dimension, an nnz count). Bound at run time by
/// unifying axis declarations with the tensors passed in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
}

/// A size: a constant or a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Extent {
    Const(i64),
    Param(ParamId),
}

/// Where an axis's structure arrays come from at run time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AxisStructure {
    /// From the tensor bound to a buffer declared over this axis (inputs, or outputs whose
    /// structure the caller supplies).
    Bound,
    /// Computed before execution as the union of the coordinates of the listed axes
    /// (which have the same kind of parent chain); used for sparse + sparse outputs.
    Union(Vec<AxisId>),
    /// Computed as the intersection of the coordinates of the listed axes.
    Intersect(Vec<AxisId>),
}

/// An axis: one dimension of a sparse iteration space.
///
/// Invariants checked by the verifier: `dense_fixed` axes have no parent; variable axes
/// have a parent and an `nnz`; `sparse_fixed` axes have `nnz_per_parent`; parents are
/// declared before their children; `unique == false` only on sparse axes (`padded`
/// is ignored on dense axes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AxisDecl {
    pub name: String,
    pub kind: AxisKind,
    pub parent: Option<AxisId>,
    /// The coordinate range `0..length`.
    pub length: Extent,
    /// Total number of positions (variable axes).
    pub nnz: Option<Extent>,
    /// Number of positions under each parent position (sparse-fixed axes); for a
    /// parentless sparse-fixed axis, the total number of positions.
    pub nnz_per_parent: Option<Extent>,
    /// Integer type of the axis's `indptr` / `indices`.
    pub index_type: IndexType,
    /// Whether coordinates under one parent position are strictly increasing (true for
    /// every axis except the row axis of COO-like formats).
    pub unique: bool,
    /// Whether stored coordinates of this (sparse) axis may equal its length: padding
    /// slots (ELL, SR-BCRS). When `false` every stored coordinate is below the length,
    /// which lets lowering drop range guards on coordinates read from this axis, and
    /// binding refuses a tensor whose axis holds padding. Dense axes store no
    /// coordinates and are never padded. Text form: `nopad` on a sparse axis.
    #[serde(default = "padded_default")]
    pub padded: bool,
    pub structure: AxisStructure,
    pub span: Span,
}

fn padded_default() -> bool {
    true
}

impl AxisDecl {
    /// A `dense_fixed(length)` axis.
    pub fn dense_fixed(name: impl Into<String>, length: Extent) -> AxisDecl {
        AxisDecl {
            name: name.into(),
            kind: AxisKind::DenseFixed,
            parent: None,
            length,
            nnz: None,
            nnz_per_parent: None,
            index_type: IndexType::I32,
            unique: true,
            padded: false,
            structure: AxisStructure::Bound,
            span: Span::default(),
        }
    }

    /// A `sparse_variable(parent, length, nnz)` axis (the column axis of CSR).
    pub fn sparse_variable(
        name: impl Into<String>,
        parent: AxisId,
        length: Extent,
        nnz: Extent,
        index_type: IndexType,
    ) -> AxisDecl {
        AxisDecl {
            name: name.into(),
            kind: AxisKind::SparseVariable,
            parent: Some(parent),
            length,
            nnz: Some(nnz),
            nnz_per_parent: None,
            index_type,
            unique: true,
            padded: true,
            structure: AxisStructure::Bound,
            span: Span::default(),
        }
    }
}

/// How a buffer is used by the program's caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BufferRole {
    /// Supplied by the caller, read only.
    Input,
    /// Produced by the program (it may also read what it wrote).
    Output,
    /// Internal to the program.
    Temp,
}

impl BufferRole {
    pub fn name(self) -> &'static str {
        match self {
            BufferRole::Input => "input",
            BufferRole::Output => "output",
            BufferRole::Temp => "temp",
        }
    }
}

/// A buffer: values stored over a list of axes (its *layout*). Buffers over the same
/// axes share structure arrays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BufferDecl {
    pub name: String,
    pub dtype: DType,
    pub axes: Vec<AxisId>,
    pub role: BufferRole,
    pub span: Span,
}

/// An iterator variable, bound by exactly one sparse iteration to one of its axes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterVar {
    pub name: String,
    pub axis: AxisId,
}

/// A stage-I program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub name: String,
    pub params: IdVec<ParamId, Param>,
    pub axes: IdVec<AxisId, AxisDecl>,
    pub buffers: IdVec<BufferId, BufferDecl>,
    pub vars: IdVec<IterVarId, IterVar>,
    pub body: Vec<Stmt>,
    /// Input buffers computed from other inputs before a run (see [`super::derived`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub derived: Vec<DerivedBuffer>,
}

impl Program {
    /// An empty program.
    pub fn new(name: impl Into<String>) -> Program {
        Program {
            name: name.into(),
            params: IdVec::new(),
            axes: IdVec::new(),
            buffers: IdVec::new(),
            vars: IdVec::new(),
            body: Vec::new(),
            derived: Vec::new(),
        }
    }

    pub fn param_by_name(&self, name: &str) -> Option<ParamId> {
        self.params.position(|p| p.name == name)
    }

    pub fn axis_by_name(&self, name: &str) -> Option<AxisId> {
        self.axes.position(|a| a.name == name)
    }

    pub fn buffer_by_name(&self, name: &str) -> Option<BufferId> {
        self.buffers.position(|b| b.name == name)
    }

    /// The derivation of `buffer`, when it is a derived buffer.
    pub fn derivation(&self, buffer: BufferId) -> Option<&DerivedBuffer> {
        self.derived.iter().find(|d| d.buffer == buffer)
    }

    /// The chain of ancestors of `axis`, root first, ending with `axis` itself.
    pub fn ancestors(&self, axis: AxisId) -> Vec<AxisId> {
        let mut chain = vec![axis];
        let mut cur = axis;
        while let Some(p) = self.axes[cur].parent {
            chain.push(p);
            cur = p;
        }
        chain.reverse();
        chain
    }
}
