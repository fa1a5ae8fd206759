//! Expressions of stage I: integer index arithmetic and floating-point values.

use serde::{Deserialize, Serialize};

use crate::id::{BufferId, IterVarId, ParamId};

/// A unary function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    Neg,
    Exp,
    Relu,
    Sqrt,
    Abs,
    Log,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 6] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Relu,
        UnaryOp::Sqrt,
        UnaryOp::Abs,
        UnaryOp::Log,
    ];

    /// The function name in the text IR and the index notation.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Relu => "relu",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Log => "log",
        }
    }

    pub fn from_name(name: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Applies the function to a floating-point value.
    pub fn apply_f64(self, x: f64) -> f64 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Exp => x.exp(),
            UnaryOp::Relu => {
                if x > 0.0 {
                    x
                } else {
                    0.0
                }
            }
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Abs => x.abs(),
            UnaryOp::Log => x.ln(),
        }
    }
}

/// A binary operator. `Max`/`Min` print as calls `max(a, b)`; the rest infix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Floating-point division, or floor division on integers.
    Div,
    /// Floor remainder; integers only.
    Rem,
    Max,
    Min,
}

impl BinaryOp {
    /// The operator symbol (`+ - * / %`) or function name (`max`, `min`).
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
        }
    }

    /// Binding strength of infix operators (higher binds tighter); `None` for calls.
    pub fn precedence(self) -> Option<u8> {
        match self {
            BinaryOp::Add | BinaryOp::Sub => Some(1),
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => Some(2),
            BinaryOp::Max | BinaryOp::Min => None,
        }
    }

    /// Applies the operator to integers (`/` and `%` floor); `None` on division by zero
    /// or overflow.
    pub fn apply_i64(self, a: i64, b: i64) -> Option<i64> {
        match self {
            BinaryOp::Add => a.checked_add(b),
            BinaryOp::Sub => a.checked_sub(b),
            BinaryOp::Mul => a.checked_mul(b),
            BinaryOp::Div => {
                if b == 0 {
                    None
                } else {
                    floor_div(a, b)
                }
            }
            BinaryOp::Rem => {
                if b == 0 {
                    None
                } else {
                    a.checked_sub(b.checked_mul(floor_div(a, b)?)?)
                }
            }
            BinaryOp::Max => Some(a.max(b)),
            BinaryOp::Min => Some(a.min(b)),
        }
    }

    /// Applies the operator to floating-point values. `Rem` uses the floor convention.
    pub fn apply_f64(self, a: f64, b: f64) -> f64 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Rem => a - b * (a / b).floor(),
            BinaryOp::Max => a.max(b),
            BinaryOp::Min => a.min(b),
        }
    }
}

fn floor_div(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        Some(q - 1)
    } else {
        Some(q)
    }
}

/// An expression. Integer-valued expressions (literals without a dot, iterator
/// variables, parameters, loads of integer buffers, and arithmetic on those) index
/// buffers; floating-point expressions compute values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    /// An integer literal.
    Int(i64),
    /// A floating-point literal (always printed with a `.` or exponent).
    Float(f64),
    /// The coordinate of an iterator variable.
    Var(IterVarId),
    /// A symbolic integer parameter.
    Param(ParamId),
    /// A buffer element at a coordinate (one index per buffer axis).
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
}

impl Expr {
    pub fn load(buffer: BufferId, indices: Vec<Expr>) -> Expr {
        Expr::Load { buffer, indices }
    }

    pub fn unary(op: UnaryOp, arg: Expr) -> Expr {
        Expr::Unary {
            op,
            arg: Box::new(arg),
        }
    }

    pub fn binary(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
        Expr::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        }
    }

    /// Calls `f` on this expression and every sub-expression, parents first.
    pub fn visit(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Int(_) | Expr::Float(_) | Expr::Var(_) | Expr::Param(_) => {}
            Expr::Load { indices, .. } => indices.iter().for_each(|e| e.visit(f)),
            Expr::Unary { arg, .. } => arg.visit(f),
            Expr::Binary { lhs, rhs, .. } => {
                lhs.visit(f);
                rhs.visit(f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_floors() {
        assert_eq!(BinaryOp::Div.apply_i64(7, 2), Some(3));
        assert_eq!(BinaryOp::Div.apply_i64(-7, 2), Some(-4));
        assert_eq!(BinaryOp::Rem.apply_i64(-7, 2), Some(1));
        assert_eq!(BinaryOp::Rem.apply_i64(7, -2), Some(-1));
        assert_eq!(BinaryOp::Div.apply_i64(1, 0), None);
        assert_eq!(BinaryOp::Mul.apply_i64(i64::MAX, 2), None);
        assert_eq!(BinaryOp::Div.apply_i64(i64::MIN, -1), None);
    }
}
