//! Stage I → stage II: sparse iterations become loop nests over positions.
//!
//! Purpose: make every structure access explicit. The output keeps the stage-I
//! parameters and axes; every stage-I buffer `B` becomes a `Values` buffer with layout
//! `Axes(B's axes)` and the same [`BufferId`](sparsile_ir::BufferId), followed by the
//! auxiliary structure arrays (see [`aux`]). Each sparse iteration becomes a
//! [`Stmt::Block`] named like the iteration holding one position loop per axis (see
//! [`nest`]), except that a fused group of axes (`fuse(I, J)`) gets one loop over the
//! positions of its last axis (see [`fused`]); its `init` statements get a block
//! `<name>.init` over the spatial axes alone (never fused), placed before. Buffer accesses translate coordinates to positions and make the
//! stage-I rules explicit as guards (see [`access`]).
//!
//! Preconditions: the program passes [`sparsile_ir::coord::verify()`] (checked here); no
//! axis is computed as a union or intersection (co-iteration is not compiled yet:
//! [`LowerError::CoIteration`]); no coordinate access into a non-unique axis that has
//! children ([`LowerError::RandomAccessNonUnique`]).
//!
//! Postconditions: a [`Stage::Pos`] function; every load and store is in bounds for
//! well-formed inputs; running it on zero-initialised outputs gives the stage-I results.
//!
//! Example: SpMV with `A` in CSR (`tests/lower_iterations/spmv_csr.sir`):
//! ```text
//! iter y over [I_m: S, A_J: R] as (i, j) {
//!   init { y[i] = 0.0 }
//!   y[i] = y[i] + A[i, j] * x[j]
//! }
//! ```
//! becomes (`tests/lower_iterations/spmv_csr.pos`)
//! ```text
//! buffer A_A_J_indptr: i32[m + 1] input indptr(A, 1)
//! buffer A_A_J_indices: i32[nnz_A] input indices(A, 1)
//! block y.init {
//!   for i in 0..m {
//!     y[i] = 0.0
//!   }
//! }
//! block y {
//!   for i_2 in 0..m {
//!     for j_p in A_A_J_indptr[i_2]..A_A_J_indptr[i_2 + 1] {
//!       let j: idx = A_A_J_indices[j_p]
//!       y[i_2] = y[i_2] + select(j < n, A[i_2, j_p], 0.0) * select(j < n, x[j], 0.0)
//!     }
//!   }
//! }
//! ```
//! (`j < n` skips padding coordinates, which equal the axis length.)

pub mod access;
pub mod aux;
pub mod fused;
pub mod nest;

use std::collections::HashSet;

use sparsile_ir::coord::{self, AxisStructure, Program};
use sparsile_ir::loops::{Buffer, BufferKind, BufferLayout, Func, Stage, Stmt, Var, VarType};
use sparsile_ir::{AxisId, IdVec, IterVarId, VarId};

use crate::LowerError;
use aux::AuxArrays;

/// Lowers a stage-I program to a stage-II function (see the module docs).
pub fn lower_iterations(program: &Program) -> Result<Func, LowerError> {
    coord::verify(program).map_err(|errors| LowerError::InvalidProgram { errors })?;
    for axis in program.axes.values() {
        if !matches!(axis.structure, AxisStructure::Bound) {
            return Err(LowerError::CoIteration {
                axis: axis.name.clone(),
                span: axis.span,
            });
        }
    }
    for decl in program.buffers.values() {
        for (k, &a) in decl.axes.iter().enumerate() {
            if let Some(p) = program.axes[a].parent {
                if !decl.axes[..k].contains(&p) {
                    return Err(LowerError::BufferMissingParent {
                        buffer: decl.name.clone(),
                        axis: program.axes[a].name.clone(),
                        parent: program.axes[p].name.clone(),
                    });
                }
            }
        }
    }
    let mut func = Func::new(program.name.clone(), Stage::Pos);
    func.params = program.params.clone();
    func.axes = program.axes.clone();
    for decl in program.buffers.values() {
        func.buffers.push(Buffer {
            name: decl.name.clone(),
            dtype: decl.dtype,
            layout: BufferLayout::Axes(decl.axes.clone()),
            role: decl.role,
            kind: BufferKind::Values,
            span: decl.span,
        });
    }
    let aux = aux::materialise(program, &mut func);
    let mut lowerer = Lowerer {
        program,
        used_names: func
            .buffers
            .values()
            .map(|b| b.name.clone())
            .chain(func.params.values().map(|p| p.name.clone()))
            .collect(),
        func,
        aux,
        vars: program.vars.values().map(|_| None).collect(),
        axis_pos: program.axes.values().map(|_| None).collect(),
    };
    let mut body = Vec::new();
    for stmt in &program.body {
        let lowered = lowerer.stmt(stmt)?;
        match stmt {
            // A store's `let`s and the store stay together.
            coord::Stmt::Store(_) => body.push(nest::phase_unit(lowered)),
            coord::Stmt::Iteration(_) => body.extend(lowered.into_iter().map(nest::phase_safe)),
        }
    }
    lowerer.func.body = body;
    Ok(lowerer.func)
}

/// What an iterator variable is bound to inside its loop.
#[derive(Debug, Clone)]
pub(crate) struct BoundVar {
    pub axis: AxisId,
    /// The loop variable: the position on `axis`.
    pub pos: VarId,
    /// The position of the axis's parent when the loop was entered.
    pub parent_pos: Option<VarId>,
    /// The coordinate (the loop variable itself for `dense_fixed` axes).
    pub crd: sparsile_ir::loops::Expr,
}

/// The state of the lowering of one program.
pub(crate) struct Lowerer<'p> {
    pub program: &'p Program,
    pub func: Func,
    pub aux: IdVec<AxisId, AuxArrays>,
    pub vars: IdVec<IterVarId, Option<BoundVar>>,
    /// The loop variable holding the current position of every axis being iterated.
    pub axis_pos: IdVec<AxisId, Option<VarId>>,
    pub used_names: HashSet<String>,
}

impl Lowerer<'_> {
    /// A new index variable named `base`, or `base_2`, `base_3`... when taken.
    pub fn fresh_var(&mut self, base: &str, ty: VarType) -> VarId {
        let mut name = base.to_string();
        let mut n = 2;
        while self.used_names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.used_names.insert(name.clone());
        self.func.vars.push(Var { name, ty })
    }

    /// Lowers one stage-I statement.
    pub fn stmt(&mut self, stmt: &coord::Stmt) -> Result<Vec<Stmt>, LowerError> {
        match stmt {
            coord::Stmt::Store(s) => self.store(s),
            coord::Stmt::Iteration(it) => self.iteration(it),
        }
    }

    pub fn stmts(&mut self, stmts: &[coord::Stmt]) -> Result<Vec<Stmt>, LowerError> {
        let mut out = Vec::new();
        for s in stmts {
            out.extend(self.stmt(s)?);
        }
        Ok(out)
    }
}
