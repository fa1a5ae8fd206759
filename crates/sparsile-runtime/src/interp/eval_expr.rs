//! Evaluation of stage-I expressions: checked integer arithmetic for indices (floor
//! division and remainder), f64 arithmetic for values; reading buffers.
//!
//! An operation on two integers is an integer operation (overflow and division by zero
//! are errors); when either side is floating point, both are widened to f64.

use sparsile_ir::coord::{Expr, UnaryOp};
use sparsile_ir::BufferId;

use super::access::{resolve, IndexArg, Resolved};
use super::iterate::Exec;
use super::InterpError;

/// The value of an expression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scalar {
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
}

impl Exec<'_, '_> {
    /// Evaluates `expr` in the current iteration environment.
    pub(crate) fn eval(&self, expr: &Expr) -> Result<Scalar, InterpError> {
        match expr {
            Expr::Int(i) => Ok(Scalar::Int(*i)),
            Expr::Float(f) => Ok(Scalar::Float(*f)),
            Expr::Var(v) => match self.vars[*v] {
                Some(state) => Ok(Scalar::Int(state.crd)),
                None => Err(InterpError::UnboundVar {
                    var: self.program.vars[*v].name.clone(),
                    context: String::new(),
                }),
            },
            Expr::Param(p) => {
                self.params[*p]
                    .map(Scalar::Int)
                    .ok_or_else(|| InterpError::UnboundParam {
                        param: self.program.params[*p].name.clone(),
                        needed_for: "an expression".to_string(),
                    })
            }
            Expr::Load { buffer, indices } => self.load(*buffer, indices),
            Expr::Unary { op, arg } => {
                let x = self.eval(arg)?;
                unary(*op, x)
            }
            Expr::Binary { op, lhs, rhs } => {
                let (a, b) = (self.eval(lhs)?, self.eval(rhs)?);
                match (a, b) {
                    (Scalar::Int(x), Scalar::Int(y)) => op
                        .apply_i64(x, y)
                        .map(Scalar::Int)
                        .ok_or_else(|| InterpError::IntArithmetic {
                            op: op.symbol().to_string(),
                            lhs: x,
                            rhs: y,
                        }),
                    _ => Ok(Scalar::Float(op.apply_f64(a.as_f64(), b.as_f64()))),
                }
            }
        }
    }

    /// Evaluates the indices of an access to `buffer` into coordinates, keeping the
    /// iterator position where an index is the variable bound to that buffer axis.
    pub(crate) fn index_args(
        &self,
        buffer: BufferId,
        indices: &[Expr],
    ) -> Result<Vec<IndexArg>, InterpError> {
        let decl = &self.program.buffers[buffer];
        if indices.len() != decl.axes.len() {
            return Err(InterpError::IndexCountMismatch {
                buffer: decl.name.clone(),
                expected: decl.axes.len(),
                found: indices.len(),
            });
        }
        indices
            .iter()
            .zip(&decl.axes)
            .enumerate()
            .map(|(k, (e, &axis))| {
                if let Expr::Var(v) = e {
                    if let Some(state) = self.vars[*v] {
                        if self.program.vars[*v].axis == axis {
                            return Ok(IndexArg {
                                crd: state.crd,
                                fast: Some((state.pos, state.parent_pos)),
                            });
                        }
                    }
                }
                match self.eval(e)? {
                    Scalar::Int(crd) => Ok(IndexArg { crd, fast: None }),
                    Scalar::Float(_) => Err(InterpError::FloatIndex {
                        buffer: decl.name.clone(),
                        position: k,
                    }),
                }
            })
            .collect()
    }

    fn load(&self, buffer: BufferId, indices: &[Expr]) -> Result<Scalar, InterpError> {
        let args = self.index_args(buffer, indices)?;
        let state = self.buffer(buffer)?;
        let value = match resolve(&state.structure, &args) {
            Resolved::At(offset) => {
                if offset >= state.values.len() {
                    panic!(
                        "value offset {offset} past the {} values of a validated buffer",
                        state.values.len()
                    );
                }
                state.values.get(offset)
            }
            Resolved::OutOfRange | Resolved::NotStored => 0.0,
        };
        if self.program.buffers[buffer].dtype.is_int() {
            Ok(Scalar::Int(value as i64))
        } else {
            Ok(Scalar::Float(value))
        }
    }
}

fn unary(op: UnaryOp, x: Scalar) -> Result<Scalar, InterpError> {
    match x {
        Scalar::Float(f) => Ok(Scalar::Float(op.apply_f64(f))),
        Scalar::Int(i) => {
            let checked = match op {
                UnaryOp::Neg => Some(i.checked_neg()),
                UnaryOp::Abs => Some(i.checked_abs()),
                UnaryOp::Relu => Some(Some(i.max(0))),
                UnaryOp::Exp | UnaryOp::Sqrt | UnaryOp::Log => None,
            };
            match checked {
                Some(Some(v)) => Ok(Scalar::Int(v)),
                Some(None) => Err(InterpError::IntUnary {
                    op: op.name().to_string(),
                    arg: i,
                }),
                None => Ok(Scalar::Float(op.apply_f64(i as f64))),
            }
        }
    }
}
