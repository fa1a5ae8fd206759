//! Rewriting the variables of a loop-level expression.

use super::expr::Expr;
use crate::id::VarId;

impl Expr {
    /// A copy of the expression in which every `Var(v)` for which `f` returns an
    /// expression is replaced by it (the replacement is not rewritten again).
    ///
    /// ```
    /// use sparsile_ir::loops::Expr;
    /// use sparsile_ir::VarId;
    /// let e = Expr::Var(VarId(0)) + Expr::Int(1);
    /// let r = e.substitute(&mut |v| (v == VarId(0)).then(|| Expr::Int(41)));
    /// assert_eq!(r, Expr::Int(41) + Expr::Int(1));
    /// ```
    pub fn substitute(&self, f: &mut impl FnMut(VarId) -> Option<Expr>) -> Expr {
        let mut b = |x: &Expr| Box::new(x.substitute(f));
        match self {
            Expr::Var(v) => f(*v).unwrap_or_else(|| self.clone()),
            Expr::Int(_) | Expr::Float(_) | Expr::Param(_) => self.clone(),
            Expr::Load { buffer, indices } => Expr::Load {
                buffer: *buffer,
                indices: indices.iter().map(|e| e.substitute(f)).collect(),
            },
            Expr::Unary { op, arg } => Expr::Unary {
                op: *op,
                arg: b(arg),
            },
            Expr::Binary { op, lhs, rhs } => Expr::Binary {
                op: *op,
                lhs: b(lhs),
                rhs: b(rhs),
            },
            Expr::Cmp { op, lhs, rhs } => Expr::Cmp {
                op: *op,
                lhs: b(lhs),
                rhs: b(rhs),
            },
            Expr::Logic { op, lhs, rhs } => Expr::Logic {
                op: *op,
                lhs: b(lhs),
                rhs: b(rhs),
            },
            Expr::Select {
                cond,
                then,
                otherwise,
            } => Expr::Select {
                cond: b(cond),
                then: b(then),
                otherwise: b(otherwise),
            },
            Expr::Search {
                buffer,
                lo,
                hi,
                value,
            } => Expr::Search {
                buffer: *buffer,
                lo: b(lo),
                hi: b(hi),
                value: b(value),
            },
        }
    }
}
