//! Functions of the loop-level IR and their declarations.

use serde::{Deserialize, Serialize};

use super::expr::Expr;
use super::stmt::Stmt;
use crate::coord::{AxisDecl, BufferRole, Param};
use crate::id::{AxisId, BufferId, IdVec, ParamId, VarId};
use crate::{DType, Span};

/// Which stage a [`Func`] is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Stage {
    /// Stage II: position space, buffers over axes.
    Pos,
    /// Stage III: flat 1-D buffers only.
    Flat,
}

impl Stage {
    /// The keyword that opens the text form (`pos func` / `flat func`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Pos => "pos",
            Stage::Flat => "flat",
        }
    }
}

/// How a buffer is indexed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum BufferLayout {
    /// Stage II only: values over these axes, one position per axis.
    Axes(Vec<AxisId>),
    /// One dimension of this length (an integer expression over parameters).
    Flat(Expr),
}

/// What a buffer holds, which tells the runtime what to bind it to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BufferKind {
    /// The values of the stage-I buffer of the same name.
    Values,
    /// The `indptr` array of axis number `axis` (in storage order) of the stage-I buffer
    /// `tensor`.
    Indptr { tensor: String, axis: usize },
    /// The `indices` array of axis number `axis` of the stage-I buffer `tensor`.
    Indices { tensor: String, axis: usize },
    /// Working memory owned by the function (cached tiles, per-thread partial results).
    Scratch,
    /// A small array private to each work item: flat, of constant length, and private
    /// to each iteration of the innermost enclosing parallel loop (to the whole function
    /// outside parallel loops); its contents are undefined when an iteration starts, so
    /// an iteration writes what it reads first. Compiled code keeps it on the stack
    /// (text `local`). In a GPU launch it is private to each thread.
    Local,
    /// GPU only: an array of constant length held once per block of a launch, shared by
    /// its threads and undefined when the launch starts (text `shared`).
    Shared,
}

/// A buffer of a loop-level function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Buffer {
    pub name: String,
    /// Element type; integer for structure arrays (their index type).
    pub dtype: DType,
    pub layout: BufferLayout,
    pub role: BufferRole,
    pub kind: BufferKind,
    pub span: Span,
}

/// The type of a loop variable or local.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum VarType {
    /// An i64 index.
    Index,
    /// A value of this floating-point type.
    Value(DType),
}

/// A loop variable or local.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Var {
    pub name: String,
    pub ty: VarType,
}

/// A loop-level function (stage II or III).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Func {
    pub name: String,
    pub stage: Stage,
    pub params: IdVec<ParamId, Param>,
    /// The stage-I axes (stage II; empty in stage III).
    pub axes: IdVec<AxisId, AxisDecl>,
    pub buffers: IdVec<BufferId, Buffer>,
    pub vars: IdVec<VarId, Var>,
    pub body: Vec<Stmt>,
}

impl Func {
    pub fn new(name: impl Into<String>, stage: Stage) -> Func {
        Func {
            name: name.into(),
            stage,
            params: IdVec::new(),
            axes: IdVec::new(),
            buffers: IdVec::new(),
            vars: IdVec::new(),
            body: Vec::new(),
        }
    }

    pub fn buffer_by_name(&self, name: &str) -> Option<BufferId> {
        self.buffers.position(|b| b.name == name)
    }

    pub fn param_by_name(&self, name: &str) -> Option<ParamId> {
        self.params.position(|p| p.name == name)
    }
}
