//! Evaluation of loop-level expressions: checked i64 arithmetic (floor `/` and `%`)
//! when both operands are integers, f64 otherwise; loads, comparisons, short-circuit
//! logic, `select` and binary `search`.
//!
//! The rules are written once, in the provided methods of [`Evaluator`]; an
//! interpreter implements the few required methods (where variables, parameters and
//! buffers are, and what to do when an element is loaded). The loop-level interpreter's
//! [`super::exec::Exec`] is one; the SIMT interpreter's per-thread view is another.

use sparsile_ir::coord::UnaryOp;
use sparsile_ir::loops::{Expr, Func, LogicOp, VarType};
use sparsile_ir::{BufferId, ParamId, Span, VarId};

use super::memory::{Data, Mem, Shape};
use super::FlatInterpError;
use sparsile_formats::Pos;

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

/// An environment in which loop-level expressions are evaluated. Ids must have been
/// checked against the function ([`super::ids::check_ids`]): lookups index tables.
pub(crate) trait Evaluator<'i> {
    /// The interpreter's error; every rule broken here is a [`FlatInterpError`].
    type Error: From<FlatInterpError>;

    fn func(&self) -> &Func;
    /// The span of the statement being executed, for messages.
    fn at(&self) -> Span;
    /// The value of a variable, or `None` where it is not bound.
    fn var_value(&self, var: VarId) -> Option<Scalar>;
    fn param(&self, param: ParamId) -> i64;
    /// The memory a buffer refers to here.
    fn mem(&self, buffer: BufferId) -> &Mem<'i>;
    /// Called before element `offset` (in bounds) of `buffer` is loaded.
    fn loaded(&self, buffer: BufferId, offset: usize) -> Result<(), Self::Error>;
    /// Called before a binary search reads the run `lo..hi` (in bounds, not empty) of
    /// `buffer`; nothing to do by default.
    fn searched(&self, _buffer: BufferId, _lo: usize, _hi: usize) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Evaluates `expr` in the current environment.
    fn eval(&self, expr: &Expr) -> Result<Scalar, Self::Error> {
        match expr {
            Expr::Int(i) => Ok(Scalar::Int(*i)),
            Expr::Float(f) => Ok(Scalar::Float(*f)),
            Expr::Var(v) => match self.var_value(*v) {
                Some(value) => Ok(value),
                None => Err(FlatInterpError::UnboundVar {
                    var: self.func().vars[*v].name.clone(),
                    at: self.at(),
                }
                .into()),
            },
            Expr::Param(p) => Ok(Scalar::Int(self.param(*p))),
            Expr::Load { buffer, indices } => {
                let offset = self.offset(*buffer, indices, "load")?;
                self.loaded(*buffer, offset)?;
                Ok(match &self.mem(*buffer).data {
                    Data::Float(v) => Scalar::Float(v[offset]),
                    Data::Int(v) => Scalar::Int(v[offset]),
                })
            }
            Expr::Unary { op, arg } => self.unary(*op, self.eval(arg)?),
            Expr::Binary { op, lhs, rhs } => {
                let (a, b) = (self.eval(lhs)?, self.eval(rhs)?);
                match (a, b) {
                    (Scalar::Int(x), Scalar::Int(y)) => {
                        op.apply_i64(x, y).map(Scalar::Int).ok_or_else(|| {
                            FlatInterpError::IntArithmetic {
                                op: op.symbol().to_string(),
                                lhs: x,
                                rhs: y,
                                at: self.at(),
                            }
                            .into()
                        })
                    }
                    _ => Ok(Scalar::Float(op.apply_f64(a.as_f64(), b.as_f64()))),
                }
            }
            Expr::Cmp { op, lhs, rhs } => {
                let (a, b) = (self.eval(lhs)?, self.eval(rhs)?);
                let holds = match (a, b) {
                    (Scalar::Int(x), Scalar::Int(y)) => op.apply(x, y),
                    _ => op.apply(a.as_f64(), b.as_f64()),
                };
                Ok(Scalar::Int(holds as i64))
            }
            Expr::Logic { op, lhs, rhs } => {
                let what = || format!("an operand of `{}`", op.symbol());
                let a = self.eval_int(lhs, what)? != 0;
                let value = match (op, a) {
                    (LogicOp::And, false) => false,
                    (LogicOp::Or, true) => true,
                    _ => self.eval_int(rhs, what)? != 0,
                };
                Ok(Scalar::Int(value as i64))
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                if self.eval_int(cond, || "the condition of a select".to_string())? != 0 {
                    self.eval(then)
                } else {
                    self.eval(otherwise)
                }
            }
            Expr::Search {
                buffer,
                lo,
                hi,
                value,
            } => self.search(*buffer, lo, hi, value),
        }
    }

    /// Evaluates an expression that must be an integer; `what` names it in the error.
    fn eval_int(&self, expr: &Expr, what: impl FnOnce() -> String) -> Result<i64, Self::Error> {
        match self.eval(expr)? {
            Scalar::Int(i) => Ok(i),
            Scalar::Float(_) => Err(FlatInterpError::FloatWhereInt {
                what: what(),
                at: self.at(),
            }
            .into()),
        }
    }

    /// Evaluates the value of local `var`, converted to its declared type.
    fn typed(&self, var: VarId, value: &Expr) -> Result<Scalar, Self::Error> {
        match self.func().vars[var].ty {
            VarType::Index => self
                .eval_int(value, || {
                    format!(
                        "the value of index variable `{}`",
                        self.func().vars[var].name
                    )
                })
                .map(Scalar::Int),
            VarType::Value(_) => Ok(Scalar::Float(self.eval(value)?.as_f64())),
        }
    }

    fn unary(&self, op: UnaryOp, x: Scalar) -> Result<Scalar, Self::Error> {
        let i = match x {
            Scalar::Float(f) => return Ok(Scalar::Float(op.apply_f64(f))),
            Scalar::Int(i) => i,
        };
        let checked = match op {
            UnaryOp::Neg => i.checked_neg(),
            UnaryOp::Abs => i.checked_abs(),
            UnaryOp::Relu => Some(i.max(0)),
            UnaryOp::Exp | UnaryOp::Sqrt | UnaryOp::Log => {
                return Ok(Scalar::Float(op.apply_f64(i as f64)))
            }
        };
        checked.map(Scalar::Int).ok_or_else(|| {
            FlatInterpError::IntUnary {
                op: op.name().to_string(),
                arg: i,
                at: self.at(),
            }
            .into()
        })
    }

    /// The element offset of an access (`access` is "load", "store" or "prefetch"),
    /// checked to be in bounds.
    fn offset(
        &self,
        buffer: BufferId,
        indices: &[Expr],
        access: &'static str,
    ) -> Result<usize, Self::Error> {
        let mem = self.mem(buffer);
        let name = &self.func().buffers[buffer].name;
        let len = mem.data.len();
        let expected = match &mem.shape {
            Shape::Flat => 1,
            Shape::Axes { structure, .. } => structure.axes.len(),
        };
        if indices.len() != expected {
            return Err(FlatInterpError::IndexCount {
                buffer: name.clone(),
                expected,
                found: indices.len(),
                at: self.at(),
            }
            .into());
        }
        let index = |k: usize, e: &Expr| {
            self.eval_int(e, || format!("index {k} of a {access} of `{name}`"))
        };
        let offset = match &mem.shape {
            Shape::Flat => index(0, &indices[0])?,
            Shape::Axes { structure, names } => {
                let positions = indices
                    .iter()
                    .enumerate()
                    .map(|(k, e)| index(k, e))
                    .collect::<Result<Vec<i64>, _>>()?;
                let mut pos = Vec::with_capacity(positions.len());
                for (k, (&p, axis)) in positions.iter().zip(&structure.axes).enumerate() {
                    if p < 0 || p as u64 >= axis.npos as u64 {
                        return Err(FlatInterpError::PositionOutOfRange {
                            buffer: name.clone(),
                            access,
                            axis: names[k].clone(),
                            position: p,
                            npos: axis.npos,
                            at: self.at(),
                        }
                        .into());
                    }
                    if let Some(q) = axis.parent {
                        let pp = positions[q] as usize;
                        let range = match axis.kind {
                            sparsile_ir::AxisKind::DenseFixed => {
                                pp * axis.length..(pp + 1) * axis.length
                            }
                            _ => axis.positions(Some(Pos(pp))),
                        };
                        if !range.contains(&(p as usize)) {
                            return Err(FlatInterpError::PositionNotUnderParent {
                                buffer: name.clone(),
                                axis: names[k].clone(),
                                position: p,
                                parent_position: positions[q],
                                lo: range.start,
                                hi: range.end,
                                at: self.at(),
                            }
                            .into());
                        }
                    }
                    pos.push(Pos(p as usize));
                }
                structure.value_offset(&pos) as i64
            }
        };
        if offset < 0 || offset as u64 >= len as u64 {
            return Err(FlatInterpError::OutOfBounds {
                buffer: name.clone(),
                access,
                offset,
                len,
                at: self.at(),
            }
            .into());
        }
        Ok(offset as usize)
    }

    fn search(
        &self,
        buffer: BufferId,
        lo: &Expr,
        hi: &Expr,
        value: &Expr,
    ) -> Result<Scalar, Self::Error> {
        let name = &self.func().buffers[buffer].name;
        let Data::Int(data) = &self.mem(buffer).data else {
            return Err(FlatInterpError::SearchInFloat {
                buffer: name.clone(),
                at: self.at(),
            }
            .into());
        };
        let lo = self.eval_int(lo, || format!("the start of a search in `{name}`"))?;
        let hi = self.eval_int(hi, || format!("the end of a search in `{name}`"))?;
        let x = self.eval_int(value, || format!("the value searched in `{name}`"))?;
        if hi <= lo {
            return Ok(Scalar::Int(-1));
        }
        let bad = if lo < 0 {
            Some(lo)
        } else if hi as u64 > data.len() as u64 {
            Some(hi - 1)
        } else {
            None
        };
        if let Some(offset) = bad {
            return Err(FlatInterpError::OutOfBounds {
                buffer: name.clone(),
                access: "search",
                offset,
                len: data.len(),
                at: self.at(),
            }
            .into());
        }
        self.searched(buffer, lo as usize, hi as usize)?;
        let run = &data[lo as usize..hi as usize];
        let at = run.partition_point(|&e| e < x);
        Ok(Scalar::Int(if run.get(at) == Some(&x) {
            lo + at as i64
        } else {
            -1
        }))
    }
}
