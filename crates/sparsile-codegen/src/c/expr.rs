//! C expressions for loop-IR expressions, with exact IR semantics and only the
//! parentheses C's precedence needs.
//!
//! ```text
//! select(i % 2 == 0, x[i] * 2.0, -y[i])   (i: index, x, y: f32)
//!   ->  sparsile_floorrem_pos(i, 2) == 0 ? x[i] * 2.0f : -y[i]
//! ```

use sparsile_ir::coord::{BinaryOp, UnaryOp};
use sparsile_ir::loops::{CmpOp, Expr, LogicOp};
use sparsile_ir::{BufferId, DType};

use super::ctx::Ctx;
use super::literal::{float_literal, int_literal};
use super::prelude::Helper;
use super::types::{join, natural, Ty};
use crate::CodegenError;

pub(crate) const PREC_PRIMARY: u8 = 16;
pub(crate) const PREC_UNARY: u8 = 14;
const PREC_MUL: u8 = 13;
pub(crate) const PREC_ADD: u8 = 12;
const PREC_REL: u8 = 10;
const PREC_EQ: u8 = 9;
const PREC_AND: u8 = 5;
const PREC_OR: u8 = 4;
pub(crate) const PREC_COND: u8 = 3;

/// C text and the precedence of its outermost operator.
#[derive(Debug, Clone)]
pub(crate) struct Code {
    pub(crate) text: String,
    pub(crate) prec: u8,
}

impl Code {
    pub(crate) fn new(text: String, prec: u8) -> Code {
        Code { text, prec }
    }

    /// The text, parenthesised unless it binds at least as tightly as `prec`.
    pub(crate) fn at(&self, prec: u8) -> String {
        if self.prec >= prec {
            self.text.clone()
        } else {
            format!("({})", self.text)
        }
    }
}

/// `e` as a C expression of type `target` (converted with a cast when it computes in
/// another type).
pub(crate) fn emit_as(ctx: &mut Ctx, e: &Expr, target: Ty) -> Result<Code, CodegenError> {
    match (e, target) {
        (Expr::Int(n), Ty::F32 | Ty::F64) => return Ok(float_literal(*n as f64, target)),
        (Expr::Float(x), _) => return Ok(float_literal(*x, target.float_context())),
        _ => {}
    }
    let ty = natural(ctx, e)?.unwrap_or(target.float_context());
    let code = emit_typed(ctx, e, ty)?;
    Ok(if ty == target {
        code
    } else {
        cast(target.c_name(), &code)
    })
}

fn cast(type_name: &str, code: &Code) -> Code {
    Code::new(format!("({type_name}){}", code.at(PREC_UNARY)), PREC_UNARY)
}

fn call(name: &str, args: &[&Code]) -> Code {
    let args: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
    Code::new(format!("{name}({})", args.join(", ")), PREC_PRIMARY)
}

fn infix(lhs: &Code, op: &str, rhs: &Code, prec: u8) -> Code {
    Code::new(format!("{} {op} {}", lhs.at(prec), rhs.at(prec + 1)), prec)
}

/// A comparison or logic expression as a C condition (type `int`, 0 or 1); `None` for
/// other expressions.
fn emit_condition(ctx: &mut Ctx, e: &Expr) -> Result<Option<Code>, CodegenError> {
    Ok(Some(match e {
        Expr::Cmp { op, lhs, rhs } => {
            let operand = join(natural(ctx, lhs)?, natural(ctx, rhs)?).unwrap_or(Ty::F64);
            let l = emit_as(ctx, lhs, operand)?;
            let r = emit_as(ctx, rhs, operand)?;
            let prec = match op {
                CmpOp::Eq | CmpOp::Ne => PREC_EQ,
                _ => PREC_REL,
            };
            // Chained comparisons get parentheses (C would read `a < b < c` oddly).
            Code::new(
                format!(
                    "{} {} {}",
                    l.at(PREC_REL + 1),
                    op.symbol(),
                    r.at(PREC_REL + 1)
                ),
                prec,
            )
        }
        Expr::Logic { op, lhs, rhs } => {
            let l = emit_truth(ctx, lhs)?;
            let r = emit_truth(ctx, rhs)?;
            let prec = match op {
                LogicOp::And => PREC_AND,
                LogicOp::Or => PREC_OR,
            };
            // `&&` inside `||` gets parentheses, as compilers suggest.
            Code::new(
                format!(
                    "{} {} {}",
                    l.at(PREC_AND + 1),
                    op.symbol(),
                    r.at(PREC_AND + 1)
                ),
                prec,
            )
        }
        _ => return Ok(None),
    }))
}

/// `e` used as a truth value: comparisons and logic as C conditions, any other integer
/// `x` as `x != 0` (which is what C does, written out so that compilers do not warn).
/// Used as a value, a comparison is the `int64_t` 0 or 1: `(int64_t)(a < b)`.
pub(crate) fn emit_truth(ctx: &mut Ctx, e: &Expr) -> Result<Code, CodegenError> {
    if let Some(code) = emit_condition(ctx, e)? {
        return Ok(code);
    }
    let code = emit_as(ctx, e, Ty::I64)?;
    Ok(Code::new(
        format!("{} != 0", code.at(PREC_REL + 1)),
        PREC_EQ,
    ))
}

/// The offset expression of a one-index access.
pub(crate) fn emit_offset(
    ctx: &mut Ctx,
    buffer: BufferId,
    indices: &[Expr],
) -> Result<Code, CodegenError> {
    match indices {
        [offset] => emit_as(ctx, offset, Ty::I64),
        _ => Err(CodegenError::IndexCount {
            buffer: ctx.buffer(buffer)?.name.clone(),
            count: indices.len(),
            span: ctx.span,
        }),
    }
}

/// `e` computed in `ty`, which is its natural type (or the resolved type of an open
/// float expression).
fn emit_typed(ctx: &mut Ctx, e: &Expr, ty: Ty) -> Result<Code, CodegenError> {
    Ok(match e {
        Expr::Int(n) => int_literal(*n),
        Expr::Float(x) => float_literal(*x, ty.float_context()),
        Expr::Var(v) => Code::new(ctx.var_name(*v)?, PREC_PRIMARY),
        Expr::Param(p) => Code::new(ctx.param_name(*p)?.to_string(), PREC_PRIMARY),
        Expr::Load { buffer, indices } => {
            if let Some((_, _, element)) = ctx.vector_elements.iter().find(|(b, index, _)| {
                b == buffer && indices.as_slice() == std::slice::from_ref(index)
            }) {
                return Ok(Code::new(element.clone(), PREC_PRIMARY));
            }
            let offset = emit_offset(ctx, *buffer, indices)?;
            let access = Code::new(
                format!("{}[{}]", ctx.buffer_name(*buffer)?, offset.text),
                PREC_PRIMARY,
            );
            let dtype = ctx.buffer(*buffer)?.dtype;
            match dtype {
                DType::I32 => cast("int64_t", &access),
                _ => widen_element(ctx, dtype, access),
            }
        }
        Expr::Unary { op, arg } => emit_unary(ctx, *op, arg, ty)?,
        Expr::Binary { op, lhs, rhs } => emit_binary(ctx, *op, lhs, rhs, ty)?,
        Expr::Cmp { .. } | Expr::Logic { .. } => {
            let raw = emit_condition(ctx, e)?.expect("a comparison or logic");
            cast("int64_t", &raw)
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            let c = emit_truth(ctx, cond)?;
            let t = emit_as(ctx, then, ty)?;
            let o = emit_as(ctx, otherwise, ty)?;
            Code::new(
                format!(
                    "{} ? {} : {}",
                    c.at(PREC_COND + 1),
                    t.at(PREC_COND + 1),
                    o.at(PREC_COND + 1)
                ),
                PREC_COND,
            )
        }
        Expr::Search {
            buffer,
            lo,
            hi,
            value,
        } => {
            let b = ctx.buffer(*buffer)?;
            let helper = match b.dtype {
                DType::I32 => Helper::SearchI32,
                DType::I64 => Helper::SearchI64,
                dtype => {
                    return Err(CodegenError::SearchNotInteger {
                        buffer: b.name.clone(),
                        dtype,
                        span: ctx.span,
                    })
                }
            };
            ctx.helpers.insert(helper);
            let name = Code::new(ctx.buffer_name(*buffer)?.to_string(), PREC_PRIMARY);
            let lo = emit_as(ctx, lo, Ty::I64)?;
            let hi = emit_as(ctx, hi, Ty::I64)?;
            let value = emit_as(ctx, value, Ty::I64)?;
            let fname = match helper {
                Helper::SearchI32 => "sparsile_search_i32",
                _ => "sparsile_search_i64",
            };
            call(fname, &[&name, &lo, &hi, &value])
        }
    })
}

fn emit_unary(ctx: &mut Ctx, op: UnaryOp, arg: &Expr, ty: Ty) -> Result<Code, CodegenError> {
    if op == UnaryOp::Neg {
        if let (Expr::Int(n), Ty::I64) = (arg, ty) {
            if let Some(neg) = n.checked_neg() {
                return Ok(int_literal(neg));
            }
        }
        let a = emit_as(ctx, arg, ty)?;
        // `- -x` must not become `--x`.
        let inner = if a.prec > PREC_UNARY && !a.text.starts_with('-') {
            a.text
        } else {
            format!("({})", a.text)
        };
        return Ok(Code::new(format!("-{inner}"), PREC_UNARY));
    }
    let a = emit_as(ctx, arg, ty)?;
    let (helper, name) = match (op, ty) {
        (UnaryOp::Abs, Ty::I64) => (Some(Helper::AbsI64), "sparsile_abs_i64"),
        (UnaryOp::Relu, Ty::I64) => {
            ctx.helpers.insert(Helper::MaxI64);
            return Ok(call("sparsile_max_i64", &[&a, &int_literal(0)]));
        }
        (UnaryOp::Exp | UnaryOp::Sqrt | UnaryOp::Log, Ty::I64) => {
            return Err(CodegenError::IntegerUnary {
                op: op.name(),
                span: ctx.span,
            })
        }
        (UnaryOp::Relu, Ty::F32) => (Some(Helper::ReluF32), "sparsile_relu_f32"),
        (UnaryOp::Relu, _) => (Some(Helper::ReluF64), "sparsile_relu_f64"),
        (UnaryOp::Exp, Ty::F32) => (None, "expf"),
        (UnaryOp::Exp, _) => (None, "exp"),
        (UnaryOp::Sqrt, Ty::F32) => (None, "sqrtf"),
        (UnaryOp::Sqrt, _) => (None, "sqrt"),
        (UnaryOp::Log, Ty::F32) => (None, "logf"),
        (UnaryOp::Log, _) => (None, "log"),
        (UnaryOp::Abs, Ty::F32) => (None, "fabsf"),
        (UnaryOp::Abs, _) => (None, "fabs"),
        (UnaryOp::Neg, _) => unreachable!("handled above"),
    };
    if let Some(h) = helper {
        ctx.helpers.insert(h);
    }
    Ok(call(name, &[&a]))
}

fn emit_binary(
    ctx: &mut Ctx,
    op: BinaryOp,
    lhs: &Expr,
    rhs: &Expr,
    ty: Ty,
) -> Result<Code, CodegenError> {
    let mut l = emit_as(ctx, lhs, ty)?;
    let r = emit_as(ctx, rhs, ty)?;
    if ty == Ty::I64 {
        // Two small literals would multiply as `int`: make the left one int64_t.
        if let (Expr::Int(a), Expr::Int(_)) = (lhs, rhs) {
            if i32::try_from(*a).is_ok() {
                l = Code::new(format!("INT64_C({a})"), PREC_PRIMARY);
            }
        }
        let positive_divisor = matches!(rhs, Expr::Int(c) if *c > 0);
        return Ok(match op {
            BinaryOp::Add => infix(&l, "+", &r, PREC_ADD),
            BinaryOp::Sub => infix(&l, "-", &r, PREC_ADD),
            BinaryOp::Mul => infix(&l, "*", &r, PREC_MUL),
            BinaryOp::Div | BinaryOp::Rem => {
                let (helper, name) = match (op, positive_divisor) {
                    (BinaryOp::Div, true) => (Helper::FloorDivPos, "sparsile_floordiv_pos"),
                    (BinaryOp::Div, false) => (Helper::FloorDiv, "sparsile_floordiv"),
                    (_, true) => (Helper::FloorRemPos, "sparsile_floorrem_pos"),
                    (_, false) => (Helper::FloorRem, "sparsile_floorrem"),
                };
                ctx.helpers.insert(helper);
                call(name, &[&l, &r])
            }
            BinaryOp::Max => {
                ctx.helpers.insert(Helper::MaxI64);
                call("sparsile_max_i64", &[&l, &r])
            }
            BinaryOp::Min => {
                ctx.helpers.insert(Helper::MinI64);
                call("sparsile_min_i64", &[&l, &r])
            }
        });
    }
    let f32 = ty == Ty::F32;
    Ok(match op {
        BinaryOp::Add => infix(&l, "+", &r, PREC_ADD),
        BinaryOp::Sub => infix(&l, "-", &r, PREC_ADD),
        BinaryOp::Mul => infix(&l, "*", &r, PREC_MUL),
        BinaryOp::Div => infix(&l, "/", &r, PREC_MUL),
        BinaryOp::Rem => {
            let (helper, name) = if f32 {
                (Helper::RemF32, "sparsile_rem_f32")
            } else {
                (Helper::RemF64, "sparsile_rem_f64")
            };
            ctx.helpers.insert(helper);
            call(name, &[&l, &r])
        }
        BinaryOp::Max => call(if f32 { "fmaxf" } else { "fmax" }, &[&l, &r]),
        BinaryOp::Min => call(if f32 { "fminf" } else { "fmin" }, &[&l, &r]),
    })
}

/// An element of a float buffer of `dtype` read by `access`, in its computation type:
/// the raw bits of a half-precision element widened exactly to f32.
pub(crate) fn widen_element(ctx: &mut Ctx, dtype: DType, access: Code) -> Code {
    match dtype {
        DType::F16 => {
            ctx.helpers.insert(Helper::F16ToF32);
            call("sparsile_f16_to_f32", &[&access])
        }
        DType::BF16 => {
            ctx.helpers.insert(Helper::Bf16ToF32);
            call("sparsile_bf16_to_f32", &[&access])
        }
        _ => access,
    }
}

/// The C text storing `value` (of the element's computation type) in an element of
/// `dtype`: half-precision elements take their bits rounded to nearest even.
pub(crate) fn narrow_element(ctx: &mut Ctx, dtype: DType, value: String) -> String {
    match dtype {
        DType::F16 => {
            ctx.helpers.insert(Helper::F32ToF16);
            format!("sparsile_f32_to_f16({value})")
        }
        DType::BF16 => {
            ctx.helpers.insert(Helper::F32ToBf16);
            format!("sparsile_f32_to_bf16({value})")
        }
        _ => value,
    }
}
