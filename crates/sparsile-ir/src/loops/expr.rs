//! Expressions of the loop-level IR.

use serde::{Deserialize, Serialize};

use crate::coord::{BinaryOp, UnaryOp};
use crate::id::{BufferId, ParamId, VarId};

/// A comparison; the result is an integer 0 or 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CmpOp {
    Lt,
    Le,
    Eq,
    Ne,
    Ge,
    Gt,
}

impl CmpOp {
    pub const ALL: [CmpOp; 6] = [
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Ge,
        CmpOp::Gt,
    ];

    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Ge => ">=",
            CmpOp::Gt => ">",
        }
    }

    pub fn apply<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Ge => a >= b,
            CmpOp::Gt => a > b,
        }
    }
}

/// Short-circuit logic on integer truth values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LogicOp {
    And,
    Or,
}

impl LogicOp {
    pub fn symbol(self) -> &'static str {
        match self {
            LogicOp::And => "&&",
            LogicOp::Or => "||",
        }
    }
}

/// An expression. Integer expressions are i64; floating-point ones take the type of
/// the values they combine (a float literal adapts to the other operand).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    Int(i64),
    Float(f64),
    Var(VarId),
    Param(ParamId),
    /// Stage II: one position per buffer axis (or one offset for flat buffers);
    /// stage III: one offset.
    Load {
        buffer: BufferId,
        indices: Vec<Expr>,
    },
    Unary {
        op: UnaryOp,
        arg: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Cmp {
        op: CmpOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Logic {
        op: LogicOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Select {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// Binary search for `value` in the sorted run `buffer[lo..hi]` of a flat integer
    /// buffer: the position, or -1.
    Search {
        buffer: BufferId,
        lo: Box<Expr>,
        hi: Box<Expr>,
        value: Box<Expr>,
    },
}

impl Expr {
    pub fn load(buffer: BufferId, indices: Vec<Expr>) -> Expr {
        Expr::Load { buffer, indices }
    }

    pub fn binary(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
        Expr::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        }
    }

    pub fn cmp(op: CmpOp, lhs: Expr, rhs: Expr) -> Expr {
        Expr::Cmp {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        }
    }

    pub fn select(cond: Expr, then: Expr, otherwise: Expr) -> Expr {
        Expr::Select {
            cond: Box::new(cond),
            then: Box::new(then),
            otherwise: Box::new(otherwise),
        }
    }

    /// The factors of this expression as a product `a * b * …` (any nesting of `*`), left
    /// to right; an expression that is not a product is its own only factor.
    pub fn factors(&self) -> Vec<&Expr> {
        fn walk<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
            match e {
                Expr::Binary {
                    op: BinaryOp::Mul,
                    lhs,
                    rhs,
                } => {
                    walk(lhs, out);
                    walk(rhs, out);
                }
                _ => out.push(e),
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

    /// The product of `factors` multiplied left to right (`(a * b) * c`), `None` when
    /// there are none.
    pub fn product<'e>(factors: impl IntoIterator<Item = &'e Expr>) -> Option<Expr> {
        factors
            .into_iter()
            .cloned()
            .reduce(|acc, e| Expr::binary(BinaryOp::Mul, acc, e))
    }

    /// Adds to `out` every buffer this expression loads or searches.
    pub fn loaded_buffers(&self, out: &mut std::collections::HashSet<BufferId>) {
        self.visit(&mut |x| {
            if let Expr::Load { buffer, .. } | Expr::Search { buffer, .. } = x {
                out.insert(*buffer);
            }
        });
    }

    /// Whether this expression reads the variable `var` (anywhere in it, indices of its
    /// loads included).
    ///
    /// ```
    /// use sparsile_ir::loops::Expr;
    /// use sparsile_ir::VarId;
    /// let (i, j) = (VarId(0), VarId(1));
    /// let e = Expr::Var(i) + Expr::Int(1);
    /// assert!(e.reads_var(i));
    /// assert!(!e.reads_var(j));
    /// ```
    pub fn reads_var(&self, var: VarId) -> bool {
        let mut found = false;
        self.visit(&mut |x| found |= matches!(x, Expr::Var(v) if *v == var));
        found
    }

    /// Calls `f` on this expression and every sub-expression, parents first.
    pub fn visit(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Int(_) | Expr::Float(_) | Expr::Var(_) | Expr::Param(_) => {}
            Expr::Load { indices, .. } => indices.iter().for_each(|e| e.visit(f)),
            Expr::Unary { arg, .. } => arg.visit(f),
            Expr::Binary { lhs, rhs, .. }
            | Expr::Cmp { lhs, rhs, .. }
            | Expr::Logic { lhs, rhs, .. } => {
                lhs.visit(f);
                rhs.visit(f);
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                cond.visit(f);
                then.visit(f);
                otherwise.visit(f);
            }
            Expr::Search { lo, hi, value, .. } => {
                lo.visit(f);
                hi.visit(f);
                value.visit(f);
            }
        }
    }
}
