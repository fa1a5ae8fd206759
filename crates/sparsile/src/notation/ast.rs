//! The syntax tree of an index notation program, as written (names, not ids).
//!
//! ```text
//! tensor A: f32[m, n] csr        -> TensorDecl { name: "A", dims: [m, n], format: Csr }
//! C[i,k] = A[i,j] * B[j,k]       -> Statement { lhs: C[i,k], op: Assign, rhs: Mul(..) }
//! m[i] max= A[i,j]               -> Statement { lhs: m[i], op: Max, rhs: A[i,j] }
//! s = x[i] * y[i]                -> Statement { lhs: s[], op: Assign, rhs: Mul(..) }
//! ```

use sparsile_formats::Format;
use sparsile_ir::coord::{BinaryOp, UnaryOp};
use sparsile_ir::{DType, Span};

/// A whole program: declarations, then statements (in any interleaving).
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub tensors: Vec<TensorDecl>,
    pub statements: Vec<Statement>,
}

impl Program {
    /// The declaration of the tensor called `name`, with its index.
    pub fn tensor(&self, name: &str) -> Option<(usize, &TensorDecl)> {
        self.tensors
            .iter()
            .enumerate()
            .find(|(_, t)| t.name == name)
    }
}

/// A size of one tensor dimension: a symbolic name or a constant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dim {
    Named(String),
    Const(i64),
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Named(n) => f.write_str(n),
            Dim::Const(c) => write!(f, "{c}"),
        }
    }
}

/// `tensor NAME: DTYPE[DIMS] FORMAT`.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorDecl {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<Dim>,
    pub format: Format,
    /// The whole declaration.
    pub span: Span,
    /// The format text (or the dims when no format is written).
    pub format_span: Span,
}

/// `=`, `+=`, `max=` or `min=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignOp {
    Assign,
    Accumulate,
    /// `max=`: the largest value of the right-hand side over its indices not on the left.
    Max,
    /// `min=`: the smallest value of the right-hand side over its indices not on the left.
    Min,
}

impl AssignOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            AssignOp::Assign => "=",
            AssignOp::Accumulate => "+=",
            AssignOp::Max => "max=",
            AssignOp::Min => "min=",
        }
    }

    /// The stage-I operator of a `max=`/`min=` reduction.
    pub fn extremum(self) -> Option<BinaryOp> {
        match self {
            AssignOp::Max => Some(BinaryOp::Max),
            AssignOp::Min => Some(BinaryOp::Min),
            AssignOp::Assign | AssignOp::Accumulate => None,
        }
    }
}

/// `LHS = RHS`, `LHS += RHS`, `LHS max= RHS` or `LHS min= RHS`.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub lhs: Access,
    pub op: AssignOp,
    pub rhs: Expr,
    pub span: Span,
}

/// `T[idx, ...]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    pub tensor: String,
    pub indices: Vec<Index>,
    pub span: Span,
}

/// One index of an access: an index variable, or an integer tensor read (`idx[i]`).
#[derive(Debug, Clone, PartialEq)]
pub enum Index {
    Var { name: String, span: Span },
    Indirect(Box<Access>),
}

impl Index {
    pub fn span(&self) -> Span {
        match self {
            Index::Var { span, .. } => *span,
            Index::Indirect(a) => a.span,
        }
    }

    /// The variable name, for a plain index.
    pub fn as_var(&self) -> Option<&str> {
        match self {
            Index::Var { name, .. } => Some(name),
            Index::Indirect(_) => None,
        }
    }
}

/// An expression on the right-hand side.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Access(Access),
    Int {
        value: i64,
        span: Span,
    },
    Float {
        value: f64,
        span: Span,
    },
    /// Unary minus and the one-argument functions.
    Unary {
        op: UnaryOp,
        arg: Box<Expr>,
        span: Span,
    },
    /// `+ - * /` and the two-argument functions `max`, `min`.
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        span: Span,
    },
}

impl Expr {
    pub fn span(&self) -> Span {
        match self {
            Expr::Access(a) => a.span,
            Expr::Int { span, .. }
            | Expr::Float { span, .. }
            | Expr::Unary { span, .. }
            | Expr::Binary { span, .. } => *span,
        }
    }

    /// Calls `f` on every access, outer accesses before the indirect ones they contain.
    pub fn visit_accesses<'a>(&'a self, f: &mut impl FnMut(&'a Access)) {
        match self {
            Expr::Access(a) => a.visit(f),
            Expr::Int { .. } | Expr::Float { .. } => {}
            Expr::Unary { arg, .. } => arg.visit_accesses(f),
            Expr::Binary { lhs, rhs, .. } => {
                lhs.visit_accesses(f);
                rhs.visit_accesses(f);
            }
        }
    }

    /// The index variables used, in order of first appearance.
    pub fn vars(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        self.visit_accesses(&mut |a| {
            for ix in &a.indices {
                if let Index::Var { name, .. } = ix {
                    if !out.contains(name) {
                        out.push(name.clone());
                    }
                }
            }
        });
        out
    }
}

impl Access {
    /// Calls `f` on this access and on the indirect accesses in its indices.
    pub fn visit<'a>(&'a self, f: &mut impl FnMut(&'a Access)) {
        f(self);
        for ix in &self.indices {
            if let Index::Indirect(inner) = ix {
                inner.visit(f);
            }
        }
    }
}
