//! Rewriting loop-level expressions: a bottom-up map, and variable substitution on it.

use super::expr::Expr;
use crate::id::VarId;

impl Expr {
    /// The expression rebuilt bottom-up: every node is rebuilt from its (already mapped)
    /// children, then `f` may replace it (`Some`) or keep it (`None`).
    ///
    /// ```
    /// use sparsile_ir::loops::Expr;
    /// let e = Expr::Int(1) + Expr::Int(2);
    /// let doubled = e.map(&mut |x| match x {
    ///     Expr::Int(v) => Some(Expr::Int(2 * v)),
    ///     _ => None,
    /// });
    /// assert_eq!(doubled, Expr::Int(2) + Expr::Int(4));
    /// ```
    pub fn map(&self, f: &mut impl FnMut(&Expr) -> Option<Expr>) -> Expr {
        let mut m = |x: &Expr| Box::new(x.map(f));
        let rebuilt = match self {
            Expr::Int(_) | Expr::Float(_) | Expr::Var(_) | Expr::Param(_) => self.clone(),
            Expr::Load { buffer, indices } => Expr::Load {
                buffer: *buffer,
                indices: indices.iter().map(|x| *m(x)).collect(),
            },
            Expr::Unary { op, arg } => Expr::Unary {
                op: *op,
                arg: m(arg),
            },
            Expr::Binary { op, lhs, rhs } => Expr::Binary {
                op: *op,
                lhs: m(lhs),
                rhs: m(rhs),
            },
            Expr::Cmp { op, lhs, rhs } => Expr::Cmp {
                op: *op,
                lhs: m(lhs),
                rhs: m(rhs),
            },
            Expr::Logic { op, lhs, rhs } => Expr::Logic {
                op: *op,
                lhs: m(lhs),
                rhs: m(rhs),
            },
            Expr::Select {
                cond,
                then,
                otherwise,
            } => Expr::Select {
                cond: m(cond),
                then: m(then),
                otherwise: m(otherwise),
            },
            Expr::Search {
                buffer,
                lo,
                hi,
                value,
            } => Expr::Search {
                buffer: *buffer,
                lo: m(lo),
                hi: m(hi),
                value: m(value),
            },
        };
        f(&rebuilt).unwrap_or(rebuilt)
    }

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
        self.map(&mut |x| match x {
            Expr::Var(v) => f(*v),
            _ => None,
        })
    }
}
