//! Building loop-level functions (stages II and III) in Rust.
//!
//! [`FuncBuilder`] declares parameters, axes and buffers and returns their ids; it
//! appends statements to the innermost open body. [`FuncBuilder::for_loop`],
//! [`FuncBuilder::if_`] (then [`FuncBuilder::else_`]), [`FuncBuilder::if_else`] and
//! [`FuncBuilder::block`] open a nested body for the duration of a closure. Variables are numbered in declaration
//! order (as the parser numbers them), and a requested variable name that is taken (by
//! a parameter or a variable in scope) gets a numeric suffix (`j`, `j_2`, ...), so the
//! function always prints and parses back. Expressions combine with `+ - * / %` (the
//! `std::ops` traits on [`Expr`]), `From` conversions (`i64`, `f64`, [`VarId`],
//! [`ParamId`]) and the helper functions of this module.
//!
//! ```
//! use sparsile_ir::coord::BufferRole;
//! use sparsile_ir::loops::builder::{float, lt, FuncBuilder};
//! use sparsile_ir::loops::{BufferKind, Expr, ForKind, Stage, VarType};
//! use sparsile_ir::DType;
//! let mut b = FuncBuilder::new("scale", Stage::Flat);
//! let n = b.param("n");
//! let x = b.flat_buffer("X", DType::F32, n.into(), BufferRole::Input, BufferKind::Values);
//! let y = b.flat_buffer("Y", DType::F32, n.into(), BufferRole::Output, BufferKind::Values);
//! b.block("scale", |b| {
//!     b.for_loop("i", 0.into(), n.into(), ForKind::Parallel, |b, i| {
//!         let v = b.let_("v", VarType::Value(DType::F32), Expr::load(x, vec![i.into()]));
//!         b.if_(lt(Expr::from(v), float(0.0)), |b| b.assign(v, float(0.0)));
//!         b.store(y, vec![i.into()], float(2.0) * v.into());
//!     });
//! });
//! let f = b.finish();
//! assert!(sparsile_ir::flat::verify(&f).is_ok());
//! assert_eq!(f.to_string(), "\
//! flat func scale(n) {
//!   buffer X: f32[n] input values
//!   buffer Y: f32[n] output values
//!   block scale {
//!     for i in 0..n parallel {
//!       let v: f32 = X[i]
//!       if v < 0.0 {
//!         v = 0.0
//!       }
//!       Y[i] = 2.0 * v
//!     }
//!   }
//! }
//! ");
//! ```

use std::ops;

use super::expr::{CmpOp, Expr, LogicOp};
use super::func::{Buffer, BufferKind, BufferLayout, Func, Stage, Var, VarType};
use super::stmt::{For, ForKind, Stmt};
use crate::coord::{AxisDecl, BinaryOp, BufferRole, Param, UnaryOp};
use crate::id::{AxisId, BufferId, ParamId, VarId};
use crate::{DType, Span};

/// Builds a [`Func`] statement by statement; see the module doc.
pub struct FuncBuilder {
    func: Func,
    /// Open statement lists, outermost (the function body) first.
    bodies: Vec<Vec<Stmt>>,
    /// Variables in scope, outermost first.
    scope: Vec<VarId>,
}

impl FuncBuilder {
    pub fn new(name: impl Into<String>, stage: Stage) -> FuncBuilder {
        FuncBuilder {
            func: Func::new(name, stage),
            bodies: vec![Vec::new()],
            scope: Vec::new(),
        }
    }

    /// The function built so far (without the statements of open bodies).
    pub fn func(&self) -> &Func {
        &self.func
    }

    pub fn param(&mut self, name: impl Into<String>) -> ParamId {
        self.func.params.push(Param { name: name.into() })
    }

    pub fn axis(&mut self, decl: AxisDecl) -> AxisId {
        self.func.axes.push(decl)
    }

    /// Declares a buffer with every field given.
    pub fn buffer(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        layout: BufferLayout,
        role: BufferRole,
        kind: BufferKind,
    ) -> BufferId {
        self.func.buffers.push(Buffer {
            name: name.into(),
            dtype,
            layout,
            role,
            kind,
            span: Span::default(),
        })
    }

    /// A `values` buffer laid out over `axes` (stage II).
    pub fn axes_buffer(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        axes: &[AxisId],
        role: BufferRole,
    ) -> BufferId {
        self.buffer(
            name,
            dtype,
            BufferLayout::Axes(axes.to_vec()),
            role,
            BufferKind::Values,
        )
    }

    /// A flat buffer of length `len` (an integer expression over parameters).
    pub fn flat_buffer(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        len: Expr,
        role: BufferRole,
        kind: BufferKind,
    ) -> BufferId {
        self.buffer(name, dtype, BufferLayout::Flat(len), role, kind)
    }

    /// `name` if no parameter or variable in scope has it, else `name_2`, `name_3`, ...
    pub fn fresh_name(&self, name: &str) -> String {
        let taken = |n: &str| {
            self.func.param_by_name(n).is_some()
                || self.scope.iter().any(|&v| self.func.vars[v].name == n)
        };
        if !taken(name) {
            return name.to_string();
        }
        (2..)
            .map(|k| format!("{name}_{k}"))
            .find(|n| !taken(n))
            .unwrap_or_else(|| name.to_string())
    }

    fn new_var(&mut self, name: &str, ty: VarType) -> VarId {
        let name = self.fresh_name(name);
        self.func.vars.push(Var { name, ty })
    }

    fn push(&mut self, stmt: Stmt) {
        self.bodies
            .last_mut()
            .expect("the function body is always open")
            .push(stmt);
    }

    /// Runs `f` with a fresh statement list open and returns what it appended. Locals
    /// declared in it go out of scope at the end.
    fn nested(&mut self, f: impl FnOnce(&mut Self)) -> Vec<Stmt> {
        let scope_len = self.scope.len();
        self.bodies.push(Vec::new());
        f(self);
        self.scope.truncate(scope_len);
        self.bodies
            .pop()
            .expect("the body pushed above is still open")
    }

    /// Appends a statement built elsewhere (its variables must come from this builder).
    pub fn stmt(&mut self, stmt: Stmt) {
        self.push(stmt);
    }

    /// `for name in lo..hi kind { body }`; `body` gets the builder and the loop variable.
    pub fn for_loop(
        &mut self,
        name: &str,
        lo: Expr,
        hi: Expr,
        kind: ForKind,
        body: impl FnOnce(&mut Self, VarId),
    ) -> VarId {
        let var = self.new_var(name, VarType::Index);
        let scope_len = self.scope.len();
        self.scope.push(var);
        let stmts = self.nested(|b| body(b, var));
        self.scope.truncate(scope_len);
        self.push(Stmt::For(For {
            var,
            lo,
            hi,
            kind,
            body: stmts,
            span: Span::default(),
        }));
        var
    }

    /// `let name: ty = value`; the local is in scope until the end of the current body.
    pub fn let_(&mut self, name: &str, ty: VarType, value: Expr) -> VarId {
        let var = self.new_var(name, ty);
        self.scope.push(var);
        self.push(Stmt::Let {
            var,
            value,
            span: Span::default(),
        });
        var
    }

    /// `var = value`.
    pub fn assign(&mut self, var: VarId, value: Expr) {
        self.push(Stmt::Assign {
            var,
            value,
            span: Span::default(),
        });
    }

    /// `buffer[indices] = value`.
    pub fn store(&mut self, buffer: BufferId, indices: Vec<Expr>, value: Expr) {
        self.push(Stmt::Store {
            buffer,
            indices,
            value,
            span: Span::default(),
        });
    }

    /// `atomic buffer[indices] += value`.
    pub fn atomic_add(&mut self, buffer: BufferId, indices: Vec<Expr>, value: Expr) {
        self.push(Stmt::AtomicAdd {
            buffer,
            indices,
            value,
            span: Span::default(),
        });
    }

    /// `if cond { then }`.
    pub fn if_(&mut self, cond: Expr, then: impl FnOnce(&mut Self)) {
        self.if_else(cond, then, |_| {});
    }

    /// `if cond { then } else { otherwise }`.
    pub fn if_else(
        &mut self,
        cond: Expr,
        then: impl FnOnce(&mut Self),
        otherwise: impl FnOnce(&mut Self),
    ) {
        let then_body = self.nested(then);
        let else_body = self.nested(otherwise);
        self.push(Stmt::If {
            cond,
            then_body,
            else_body,
            span: Span::default(),
        });
    }

    /// Gives the `if` statement just appended an `else` body. Use it instead of
    /// [`FuncBuilder::if_else`] when both branches need the same mutable state.
    ///
    /// # Panics
    /// When the last statement of the current body is not an `if` without an `else`
    /// (a misuse of the builder).
    pub fn else_(&mut self, otherwise: impl FnOnce(&mut Self)) {
        let else_stmts = self.nested(otherwise);
        let last = self.bodies.last_mut().and_then(|body| body.last_mut());
        match last {
            Some(Stmt::If { else_body, .. }) if else_body.is_empty() => *else_body = else_stmts,
            _ => panic!("FuncBuilder::else_ must follow FuncBuilder::if_"),
        }
    }

    /// `block name { body }`.
    pub fn block(&mut self, name: impl Into<String>, body: impl FnOnce(&mut Self)) {
        let body = self.nested(body);
        self.push(Stmt::Block {
            name: name.into(),
            body,
            span: Span::default(),
        });
    }

    /// The finished function.
    pub fn finish(mut self) -> Func {
        self.func.body = self.bodies.swap_remove(0);
        self.func
    }
}

impl From<i64> for Expr {
    fn from(v: i64) -> Expr {
        Expr::Int(v)
    }
}

impl From<f64> for Expr {
    fn from(v: f64) -> Expr {
        Expr::Float(v)
    }
}

impl From<VarId> for Expr {
    fn from(v: VarId) -> Expr {
        Expr::Var(v)
    }
}

impl From<ParamId> for Expr {
    fn from(p: ParamId) -> Expr {
        Expr::Param(p)
    }
}

macro_rules! binary_op {
    ($trait:ident, $method:ident, $op:expr) => {
        impl ops::$trait for Expr {
            type Output = Expr;
            fn $method(self, rhs: Expr) -> Expr {
                Expr::binary($op, self, rhs)
            }
        }
    };
}

binary_op!(Add, add, BinaryOp::Add);
binary_op!(Sub, sub, BinaryOp::Sub);
binary_op!(Mul, mul, BinaryOp::Mul);
binary_op!(Div, div, BinaryOp::Div);
binary_op!(Rem, rem, BinaryOp::Rem);

/// An integer literal.
pub fn int(v: i64) -> Expr {
    Expr::Int(v)
}

/// A float literal.
pub fn float(v: f64) -> Expr {
    Expr::Float(v)
}

pub fn max(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Max, a, b)
}

pub fn min(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Min, a, b)
}

pub fn unary(op: UnaryOp, a: Expr) -> Expr {
    Expr::Unary {
        op,
        arg: Box::new(a),
    }
}

pub fn lt(a: Expr, b: Expr) -> Expr {
    Expr::cmp(CmpOp::Lt, a, b)
}

pub fn le(a: Expr, b: Expr) -> Expr {
    Expr::cmp(CmpOp::Le, a, b)
}

pub fn eq(a: Expr, b: Expr) -> Expr {
    Expr::cmp(CmpOp::Eq, a, b)
}

pub fn ne(a: Expr, b: Expr) -> Expr {
    Expr::cmp(CmpOp::Ne, a, b)
}

pub fn ge(a: Expr, b: Expr) -> Expr {
    Expr::cmp(CmpOp::Ge, a, b)
}

pub fn gt(a: Expr, b: Expr) -> Expr {
    Expr::cmp(CmpOp::Gt, a, b)
}

/// `a && b`.
pub fn and(a: Expr, b: Expr) -> Expr {
    Expr::Logic {
        op: LogicOp::And,
        lhs: Box::new(a),
        rhs: Box::new(b),
    }
}

/// `a || b`.
pub fn or(a: Expr, b: Expr) -> Expr {
    Expr::Logic {
        op: LogicOp::Or,
        lhs: Box::new(a),
        rhs: Box::new(b),
    }
}

/// `select(cond, then, otherwise)`.
pub fn select(cond: Expr, then: Expr, otherwise: Expr) -> Expr {
    Expr::select(cond, then, otherwise)
}

/// `search(buffer, lo, hi, value)`: the position of `value` in `buffer[lo..hi]`, or -1.
pub fn search(buffer: BufferId, lo: Expr, hi: Expr, value: Expr) -> Expr {
    Expr::Search {
        buffer,
        lo: Box::new(lo),
        hi: Box::new(hi),
        value: Box::new(value),
    }
}

/// `buffer[indices]`.
pub fn load(buffer: BufferId, indices: Vec<Expr>) -> Expr {
    Expr::load(buffer, indices)
}
