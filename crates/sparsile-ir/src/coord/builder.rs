//! Building stage-I programs in Rust.
//!
//! [`ProgramBuilder`] declares parameters, axes and buffers and returns their ids;
//! [`ProgramBuilder::iteration`] opens a sparse iteration and hands its closure the
//! iterator variables (as expressions) and a [`BodyBuilder`] for its `init` block and
//! body. Variables are named after their axes in lower case (`I` binds `i`), with a
//! numeric suffix when the name is taken in scope, so the program prints and parses
//! back. Expressions combine with `+ - * / %` (the `std::ops` traits on [`Expr`]) and
//! the helpers [`int`], [`float`], [`max`], [`min`], [`unary`].
//!
//! ```
//! use sparsile_ir::coord::{builder::float, BufferRole, IterKind::*, ProgramBuilder};
//! use sparsile_ir::DType;
//! let mut b = ProgramBuilder::new("scale");
//! let m = b.param("m");
//! let i = b.dense_axis("I", m);
//! let x = b.buffer("X", DType::F32, &[i], BufferRole::Input);
//! let y = b.buffer("Y", DType::F32, &[i], BufferRole::Output);
//! b.iteration("s", &[(i, Spatial)], |v, body| {
//!     body.store(y, vec![v[0].clone()], float(2.0) * body.load(x, vec![v[0].clone()]));
//! });
//! let program = b.finish();
//! assert!(sparsile_ir::coord::verify(&program).is_ok());
//! assert_eq!(program.to_string(), "\
//! func scale(m) {
//!   axis I = dense_fixed(m)
//!   buffer X: f32[I] input
//!   buffer Y: f32[I] output
//!   iter s over [I: S] as (i) {
//!     Y[i] = 2.0 * X[i]
//!   }
//! }
//! ");
//! ```

use std::ops;

use super::expr::{BinaryOp, Expr, UnaryOp};
use super::parser::is_valid_name;
use super::program::{
    AxisDecl, AxisStructure, BufferDecl, BufferRole, Extent, IterVar, Param, Program,
};
use super::stmt::{IterAxis, IterKind, SparseIteration, Stmt, Store};
use crate::id::{AxisId, BufferId, IterVarId, ParamId};
use crate::{AxisKind, DType, IndexType, Span};

impl From<i64> for Extent {
    fn from(c: i64) -> Extent {
        Extent::Const(c)
    }
}

impl From<ParamId> for Extent {
    fn from(p: ParamId) -> Extent {
        Extent::Param(p)
    }
}

/// Builds a [`Program`] declaration by declaration.
pub struct ProgramBuilder {
    program: Program,
}

impl ProgramBuilder {
    pub fn new(name: impl Into<String>) -> ProgramBuilder {
        ProgramBuilder {
            program: Program::new(name),
        }
    }

    /// The program built so far.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Declares a parameter, or returns the existing one of that name.
    pub fn param(&mut self, name: &str) -> ParamId {
        if let Some(p) = self.program.param_by_name(name) {
            return p;
        }
        self.program.params.push(Param {
            name: name.to_string(),
        })
    }

    /// Declares any axis.
    pub fn axis(&mut self, decl: AxisDecl) -> AxisId {
        self.program.axes.push(decl)
    }

    /// `dense_fixed(length)`.
    pub fn dense_axis(&mut self, name: &str, length: impl Into<Extent>) -> AxisId {
        self.axis(AxisDecl::dense_fixed(name, length.into()))
    }

    /// `dense_variable(parent, length, nnz=...)`.
    pub fn dense_variable_axis(
        &mut self,
        name: &str,
        parent: AxisId,
        length: impl Into<Extent>,
        nnz: impl Into<Extent>,
        index_type: IndexType,
    ) -> AxisId {
        let mut d = AxisDecl::sparse_variable(name, parent, length.into(), nnz.into(), index_type);
        d.kind = AxisKind::DenseVariable;
        self.axis(d)
    }

    /// `sparse_variable(parent, length, nnz=...)`.
    pub fn sparse_variable_axis(
        &mut self,
        name: &str,
        parent: AxisId,
        length: impl Into<Extent>,
        nnz: impl Into<Extent>,
        index_type: IndexType,
    ) -> AxisId {
        self.axis(AxisDecl::sparse_variable(
            name,
            parent,
            length.into(),
            nnz.into(),
            index_type,
        ))
    }

    /// `sparse_fixed(parent, length, per=...)`; for a parentless axis `per` is the total
    /// number of positions.
    pub fn sparse_fixed_axis(
        &mut self,
        name: &str,
        parent: Option<AxisId>,
        length: impl Into<Extent>,
        per: impl Into<Extent>,
        index_type: IndexType,
    ) -> AxisId {
        let mut d = AxisDecl::dense_fixed(name, length.into());
        d.kind = AxisKind::SparseFixed;
        d.parent = parent;
        d.nnz_per_parent = Some(per.into());
        d.index_type = index_type;
        self.axis(d)
    }

    /// Marks an axis's coordinates as possibly repeated (COO row axes).
    pub fn set_nonunique(&mut self, axis: AxisId) {
        self.program.axes[axis].unique = false;
    }

    /// Sets how an axis's structure is obtained (`union`/`intersect` of other axes).
    pub fn set_structure(&mut self, axis: AxisId, structure: AxisStructure) {
        self.program.axes[axis].structure = structure;
    }

    pub fn buffer(
        &mut self,
        name: &str,
        dtype: DType,
        axes: &[AxisId],
        role: BufferRole,
    ) -> BufferId {
        self.program.buffers.push(BufferDecl {
            name: name.to_string(),
            dtype,
            axes: axes.to_vec(),
            role,
            span: Span::default(),
        })
    }

    /// A top-level store.
    pub fn store(&mut self, buffer: BufferId, indices: Vec<Expr>, value: Expr) {
        self.program.body.push(Stmt::Store(Store {
            buffer,
            indices,
            value,
            span: Span::default(),
        }));
    }

    /// A top-level sparse iteration; see [`BodyBuilder::iteration`].
    pub fn iteration(
        &mut self,
        name: &str,
        axes: &[(AxisId, IterKind)],
        build: impl FnOnce(&[Expr], &mut BodyBuilder<'_>),
    ) {
        let mut top = BodyBuilder {
            program: &mut self.program,
            scope: Vec::new(),
            init: Vec::new(),
            body: Vec::new(),
        };
        top.iteration(name, axes, build);
        let stmts = top.body;
        self.program.body.extend(stmts);
    }

    /// A top-level sparse iteration with named variables; see
    /// [`BodyBuilder::iteration_with_vars`].
    pub fn iteration_with_vars(
        &mut self,
        name: &str,
        axes: &[(AxisId, IterKind, &str)],
        build: impl FnOnce(&[Expr], &mut BodyBuilder<'_>),
    ) {
        let mut top = BodyBuilder {
            program: &mut self.program,
            scope: Vec::new(),
            init: Vec::new(),
            body: Vec::new(),
        };
        top.iteration_with_vars(name, axes, build);
        let stmts = top.body;
        self.program.body.extend(stmts);
    }

    pub fn finish(self) -> Program {
        self.program
    }
}

/// The `init` block and body of one sparse iteration under construction.
pub struct BodyBuilder<'p> {
    program: &'p mut Program,
    /// Names of variables visible here.
    scope: Vec<String>,
    init: Vec<Stmt>,
    body: Vec<Stmt>,
}

impl BodyBuilder<'_> {
    /// The program being built (to look up declarations).
    pub fn program(&self) -> &Program {
        self.program
    }

    /// A load `buffer[indices]`.
    pub fn load(&self, buffer: BufferId, indices: Vec<Expr>) -> Expr {
        Expr::load(buffer, indices)
    }

    /// Appends `buffer[indices] = value` to the body.
    pub fn store(&mut self, buffer: BufferId, indices: Vec<Expr>, value: Expr) {
        self.body.push(Stmt::Store(Store {
            buffer,
            indices,
            value,
            span: Span::default(),
        }));
    }

    /// Appends `buffer[indices] = value` to the `init` block.
    pub fn init_store(&mut self, buffer: BufferId, indices: Vec<Expr>, value: Expr) {
        self.init.push(Stmt::Store(Store {
            buffer,
            indices,
            value,
            span: Span::default(),
        }));
    }

    /// Appends a nested sparse iteration over `axes` to the body. `build` receives one
    /// `Expr::Var` per axis, in order, and the nested iteration's builder.
    pub fn iteration(
        &mut self,
        name: &str,
        axes: &[(AxisId, IterKind)],
        build: impl FnOnce(&[Expr], &mut BodyBuilder<'_>),
    ) {
        let named: Vec<_> = axes.iter().map(|&(a, k)| (a, k, None)).collect();
        self.iteration_impl(name, &named, build);
    }

    /// Like [`BodyBuilder::iteration`], with the variables' names given (a suffix is
    /// added to a name already in scope).
    pub fn iteration_with_vars(
        &mut self,
        name: &str,
        axes: &[(AxisId, IterKind, &str)],
        build: impl FnOnce(&[Expr], &mut BodyBuilder<'_>),
    ) {
        let named: Vec<_> = axes.iter().map(|&(a, k, v)| (a, k, Some(v))).collect();
        self.iteration_impl(name, &named, build);
    }

    fn iteration_impl(
        &mut self,
        name: &str,
        axes: &[(AxisId, IterKind, Option<&str>)],
        build: impl FnOnce(&[Expr], &mut BodyBuilder<'_>),
    ) {
        let mut scope = self.scope.clone();
        let mut iter_axes = Vec::new();
        let mut vars = Vec::new();
        for &(axis, kind, given) in axes {
            let base = given.map(str::to_string).unwrap_or_else(|| {
                self.program
                    .axes
                    .get(axis)
                    .map_or_else(|| "v".to_string(), |a| a.name.to_lowercase())
            });
            let name = self.fresh_name(&base, &scope);
            scope.push(name.clone());
            let var: IterVarId = self.program.vars.push(IterVar { name, axis });
            iter_axes.push(IterAxis { axis, kind, var });
            vars.push(Expr::Var(var));
        }
        let mut inner = BodyBuilder {
            program: &mut *self.program,
            scope,
            init: Vec::new(),
            body: Vec::new(),
        };
        build(&vars, &mut inner);
        let (init, body) = (inner.init, inner.body);
        self.body.push(Stmt::Iteration(SparseIteration {
            name: name.to_string(),
            axes: iter_axes,
            init,
            body,
            span: Span::default(),
            fused: Vec::new(),
        }));
    }

    fn fresh_name(&self, base: &str, scope: &[String]) -> String {
        let taken = |n: &str| {
            !is_valid_name(n)
                || scope.iter().any(|s| s == n)
                || self.program.param_by_name(n).is_some()
        };
        if !taken(base) {
            return base.to_string();
        }
        (1..)
            .map(|k| format!("{base}{k}"))
            .find(|n| !taken(n))
            .unwrap_or_else(|| base.to_string())
    }
}

/// An integer literal.
pub fn int(v: i64) -> Expr {
    Expr::Int(v)
}

/// A float literal.
pub fn float(v: f64) -> Expr {
    Expr::Float(v)
}

/// A parameter's value.
pub fn param(p: ParamId) -> Expr {
    Expr::Param(p)
}

pub fn max(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Max, a, b)
}

pub fn min(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Min, a, b)
}

pub fn unary(op: UnaryOp, a: Expr) -> Expr {
    Expr::unary(op, a)
}

macro_rules! expr_op {
    ($trait:ident, $method:ident, $op:expr) => {
        impl ops::$trait for Expr {
            type Output = Expr;
            fn $method(self, rhs: Expr) -> Expr {
                Expr::binary($op, self, rhs)
            }
        }
    };
}

expr_op!(Add, add, BinaryOp::Add);
expr_op!(Sub, sub, BinaryOp::Sub);
expr_op!(Mul, mul, BinaryOp::Mul);
expr_op!(Div, div, BinaryOp::Div);
expr_op!(Rem, rem, BinaryOp::Rem);
