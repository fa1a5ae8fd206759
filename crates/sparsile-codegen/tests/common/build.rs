//! Terse constructors for stage-III functions built straight from the node types.

use sparsile_ir::coord::{BinaryOp, BufferRole, Param, UnaryOp};
use sparsile_ir::loops::{
    Buffer, BufferKind, BufferLayout, CmpOp, Expr, For, ForKind, Func, LogicOp, Stage, Stmt, Var,
    VarType,
};
use sparsile_ir::{BufferId, DType, ParamId, Span, VarId};

pub struct FuncBuilder {
    pub func: Func,
}

impl FuncBuilder {
    pub fn new(name: &str) -> FuncBuilder {
        FuncBuilder {
            func: Func::new(name, Stage::Flat),
        }
    }

    pub fn param(&mut self, name: &str) -> ParamId {
        self.func.params.push(Param { name: name.into() })
    }

    pub fn buffer(
        &mut self,
        name: &str,
        dtype: DType,
        len: Expr,
        role: BufferRole,
        kind: BufferKind,
    ) -> BufferId {
        self.func.buffers.push(Buffer {
            name: name.into(),
            dtype,
            layout: BufferLayout::Flat(len),
            role,
            kind,
            span: Span::default(),
        })
    }

    pub fn values(&mut self, name: &str, dtype: DType, len: Expr, role: BufferRole) -> BufferId {
        self.buffer(name, dtype, len, role, BufferKind::Values)
    }

    pub fn indptr(&mut self, tensor: &str, dtype: DType, len: Expr) -> BufferId {
        let kind = BufferKind::Indptr {
            tensor: tensor.into(),
            axis: 1,
        };
        self.buffer(
            &format!("{tensor}_indptr"),
            dtype,
            len,
            BufferRole::Input,
            kind,
        )
    }

    pub fn indices(&mut self, tensor: &str, dtype: DType, len: Expr) -> BufferId {
        let kind = BufferKind::Indices {
            tensor: tensor.into(),
            axis: 1,
        };
        self.buffer(
            &format!("{tensor}_indices"),
            dtype,
            len,
            BufferRole::Input,
            kind,
        )
    }

    pub fn index(&mut self, name: &str) -> VarId {
        self.func.vars.push(Var {
            name: name.into(),
            ty: VarType::Index,
        })
    }

    pub fn value(&mut self, name: &str, dtype: DType) -> VarId {
        self.func.vars.push(Var {
            name: name.into(),
            ty: VarType::Value(dtype),
        })
    }

    pub fn finish(self, body: Vec<Stmt>) -> Func {
        let mut func = self.func;
        func.body = body;
        func
    }
}

pub fn int(n: i64) -> Expr {
    Expr::Int(n)
}
pub fn float(x: f64) -> Expr {
    Expr::Float(x)
}
pub fn v(id: VarId) -> Expr {
    Expr::Var(id)
}
pub fn p(id: ParamId) -> Expr {
    Expr::Param(id)
}
pub fn ld(b: BufferId, offset: Expr) -> Expr {
    Expr::load(b, vec![offset])
}
fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    Expr::binary(op, a, b)
}
pub fn add(a: Expr, b: Expr) -> Expr {
    bin(BinaryOp::Add, a, b)
}
pub fn sub(a: Expr, b: Expr) -> Expr {
    bin(BinaryOp::Sub, a, b)
}
pub fn mul(a: Expr, b: Expr) -> Expr {
    bin(BinaryOp::Mul, a, b)
}
pub fn div(a: Expr, b: Expr) -> Expr {
    bin(BinaryOp::Div, a, b)
}
pub fn rem(a: Expr, b: Expr) -> Expr {
    bin(BinaryOp::Rem, a, b)
}
pub fn max(a: Expr, b: Expr) -> Expr {
    bin(BinaryOp::Max, a, b)
}
pub fn min(a: Expr, b: Expr) -> Expr {
    bin(BinaryOp::Min, a, b)
}
pub fn un(op: UnaryOp, a: Expr) -> Expr {
    Expr::Unary {
        op,
        arg: Box::new(a),
    }
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
pub fn select(c: Expr, a: Expr, b: Expr) -> Expr {
    Expr::select(c, a, b)
}
pub fn search(b: BufferId, lo: Expr, hi: Expr, value: Expr) -> Expr {
    Expr::Search {
        buffer: b,
        lo: Box::new(lo),
        hi: Box::new(hi),
        value: Box::new(value),
    }
}

pub fn for_(kind: ForKind, var: VarId, lo: Expr, hi: Expr, body: Vec<Stmt>) -> Stmt {
    Stmt::For(For {
        var,
        lo,
        hi,
        kind,
        body,
        span: Span::default(),
    })
}
pub fn serial(var: VarId, lo: Expr, hi: Expr, body: Vec<Stmt>) -> Stmt {
    for_(ForKind::Serial, var, lo, hi, body)
}
pub fn parallel(var: VarId, lo: Expr, hi: Expr, body: Vec<Stmt>) -> Stmt {
    for_(ForKind::Parallel, var, lo, hi, body)
}
pub fn let_(var: VarId, value: Expr) -> Stmt {
    Stmt::Let {
        var,
        value,
        span: Span::default(),
    }
}
pub fn assign(var: VarId, value: Expr) -> Stmt {
    Stmt::Assign {
        var,
        value,
        span: Span::default(),
    }
}
pub fn store(b: BufferId, offset: Expr, value: Expr) -> Stmt {
    Stmt::Store {
        buffer: b,
        indices: vec![offset],
        value,
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
pub fn if_(cond: Expr, then_body: Vec<Stmt>, else_body: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond,
        then_body,
        else_body,
        span: Span::default(),
    }
}
