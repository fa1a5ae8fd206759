//! Helpers for the loop-level interpreter tests: a builder over the loop-level node types
//! and short constructors for statements and expressions.
#![allow(dead_code)]

use std::collections::HashMap;

use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::coord::{BinaryOp, BufferRole, BufferRole::*, Program};
use sparsile_runtime::{flat_interp, FlatInterpError, InterpOptions, Outputs};

use sparsile_ir::loops::*;
use sparsile_ir::{AxisId, BufferId, DType, Span, VarId};

use crate::common;

/// Builds a loop-level function lowered from `program` (its parameters, and its axes in
/// stage II).
pub struct FuncBuilder {
    pub f: Func,
}

impl FuncBuilder {
    pub fn new(program: &Program, stage: Stage) -> FuncBuilder {
        let mut f = Func::new(program.name.clone(), stage);
        f.params = program.params.clone();
        if stage == Stage::Pos {
            f.axes = program.axes.clone();
        }
        FuncBuilder { f }
    }

    /// A program parameter as an expression.
    pub fn p(&self, name: &str) -> Expr {
        Expr::Param(self.f.param_by_name(name).expect("known parameter"))
    }

    fn push(
        &mut self,
        name: &str,
        dtype: DType,
        layout: BufferLayout,
        role: BufferRole,
        kind: BufferKind,
    ) -> BufferId {
        self.f.buffers.push(Buffer {
            name: name.into(),
            dtype,
            layout,
            role,
            kind,
            span: Span::default(),
        })
    }

    pub fn values(&mut self, name: &str, dtype: DType, len: Expr, role: BufferRole) -> BufferId {
        self.push(
            name,
            dtype,
            BufferLayout::Flat(len),
            role,
            BufferKind::Values,
        )
    }

    pub fn values_axes(
        &mut self,
        name: &str,
        dtype: DType,
        axes: &[AxisId],
        role: BufferRole,
    ) -> BufferId {
        self.push(
            name,
            dtype,
            BufferLayout::Axes(axes.to_vec()),
            role,
            BufferKind::Values,
        )
    }

    pub fn indptr(&mut self, tensor: &str, axis: usize, len: Expr) -> BufferId {
        let name = format!("{tensor}_{axis}_indptr");
        self.push(
            &name,
            DType::I32,
            BufferLayout::Flat(len),
            BufferRole::Input,
            BufferKind::Indptr {
                tensor: tensor.into(),
                axis,
            },
        )
    }

    pub fn indices(&mut self, tensor: &str, axis: usize, len: Expr) -> BufferId {
        let name = format!("{tensor}_{axis}_indices");
        self.push(
            &name,
            DType::I32,
            BufferLayout::Flat(len),
            BufferRole::Input,
            BufferKind::Indices {
                tensor: tensor.into(),
                axis,
            },
        )
    }

    pub fn scratch(&mut self, name: &str, dtype: DType, len: Expr) -> BufferId {
        self.push(
            name,
            dtype,
            BufferLayout::Flat(len),
            BufferRole::Temp,
            BufferKind::Scratch,
        )
    }

    pub fn idx(&mut self, name: &str) -> VarId {
        self.f.vars.push(Var {
            name: name.into(),
            ty: VarType::Index,
        })
    }

    pub fn val(&mut self, name: &str, dtype: DType) -> VarId {
        self.f.vars.push(Var {
            name: name.into(),
            ty: VarType::Value(dtype),
        })
    }
}

fn lp(kind: ForKind, var: VarId, lo: Expr, hi: Expr, body: Vec<Stmt>) -> Stmt {
    Stmt::For(For {
        var,
        lo,
        hi,
        kind,
        body,
        span: Span::default(),
    })
}
pub fn for_(var: VarId, lo: Expr, hi: Expr, body: Vec<Stmt>) -> Stmt {
    lp(ForKind::Serial, var, lo, hi, body)
}
pub fn par(var: VarId, lo: Expr, hi: Expr, body: Vec<Stmt>) -> Stmt {
    lp(ForKind::Parallel, var, lo, hi, body)
}
pub fn let_(var: VarId, value: Expr) -> Stmt {
    Stmt::Let {
        var,
        value,
        span: Span::default(),
    }
}
pub fn set(var: VarId, value: Expr) -> Stmt {
    Stmt::Assign {
        var,
        value,
        span: Span::default(),
    }
}
pub fn store(buffer: BufferId, indices: Vec<Expr>, value: Expr) -> Stmt {
    Stmt::Store {
        buffer,
        indices,
        value,
        span: Span::default(),
    }
}
/// `buffer[index] = buffer[index] + value` (one flat index).
pub fn acc(buffer: BufferId, index: Expr, value: Expr) -> Stmt {
    store(buffer, vec![index.clone()], add(ld(buffer, index), value))
}
pub fn if_(cond: Expr, then_body: Vec<Stmt>, else_body: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond,
        then_body,
        else_body,
        span: Span::default(),
    }
}
pub fn block(name: &str, body: Vec<Stmt>) -> Stmt {
    Stmt::Block {
        name: name.into(),
        body,
        span: Span::default(),
    }
}

pub fn v(var: VarId) -> Expr {
    Expr::Var(var)
}
pub fn int(i: i64) -> Expr {
    Expr::Int(i)
}
pub fn float(x: f64) -> Expr {
    Expr::Float(x)
}
/// A load at one flat offset.
pub fn ld(buffer: BufferId, index: Expr) -> Expr {
    Expr::load(buffer, vec![index])
}
pub fn ldn(buffer: BufferId, indices: Vec<Expr>) -> Expr {
    Expr::load(buffer, indices)
}
pub fn add(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Add, a, b)
}
pub fn sub(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Sub, a, b)
}
pub fn mul(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Mul, a, b)
}
pub fn div(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Div, a, b)
}
pub fn rem(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Rem, a, b)
}
pub fn cmp(op: CmpOp, a: Expr, b: Expr) -> Expr {
    Expr::cmp(op, a, b)
}
pub fn and(a: Expr, b: Expr) -> Expr {
    Expr::Logic {
        op: LogicOp::And,
        lhs: Box::new(a),
        rhs: Box::new(b),
    }
}
pub fn or(a: Expr, b: Expr) -> Expr {
    Expr::Logic {
        op: LogicOp::Or,
        lhs: Box::new(a),
        rhs: Box::new(b),
    }
}
pub fn search(buffer: BufferId, lo: Expr, hi: Expr, value: Expr) -> Expr {
    Expr::Search {
        buffer,
        lo: Box::new(lo),
        hi: Box::new(hi),
        value: Box::new(value),
    }
}

/// A (3 x 4, CSR) input, `y` (f64) and `z` (i32) outputs over A's rows.
pub fn program() -> Program {
    let mut b = common::Builder::new("t");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    b.buf("A", &[i, j], Input);
    b.buf("y", &[i], Output);
    b.buf_t("z", DType::I32, &[i], Output);
    b.p
}

pub fn inputs() -> HashMap<String, SparseTensor<'static>> {
    let coo =
        CooTensor::from_triplets(vec![3, 4], &[(0, 1, 1.0), (0, 3, 2.0), (2, 0, 3.0)]).unwrap();
    HashMap::from([(
        "A".to_string(),
        SparseTensor::from_coo(&coo, &Format::Csr).unwrap(),
    )])
}

/// A function over `program()` with buffers A, y, z, the indptr of A's J and a
/// 4-element f64 scratch `s`; `body` builds the statements from those ids.
pub struct Kit {
    pub fb: FuncBuilder,
    pub a: BufferId,
    pub y: BufferId,
    pub z: BufferId,
    pub ptr: BufferId,
    pub s: BufferId,
}

pub fn kit() -> (Program, Kit) {
    let p = program();
    let mut fb = FuncBuilder::new(&p, Stage::Flat);
    let (m, nnz) = (fb.p("m"), fb.p("nnz"));
    let a = fb.values("A", DType::F64, nnz, Input);
    let y = fb.values("y", DType::F64, m.clone(), Output);
    let z = fb.values("z", DType::I32, m.clone(), Output);
    let ptr = fb.indptr("A", 1, add(m, int(1)));
    let s = fb.scratch("s", DType::F64, int(4));
    (
        p,
        Kit {
            fb,
            a,
            y,
            z,
            ptr,
            s,
        },
    )
}

pub fn run(p: &Program, f: &Func) -> Result<Outputs, FlatInterpError> {
    flat_interp::run(f, p, &inputs(), &InterpOptions::default())
}

pub fn y_of(p: &Program, f: &Func) -> Vec<f64> {
    run(p, f).unwrap()["y"].values.to_f64_vec()
}

pub fn with_body(mut k: Kit, body: Vec<Stmt>) -> Func {
    k.fb.f.body = body;
    k.fb.f
}
