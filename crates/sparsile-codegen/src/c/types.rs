//! The C types expressions compute in, and their inference from the loop IR.
//!
//! Integer expressions are `int64_t` (loads of `int32_t` structure arrays are widened);
//! floating-point expressions take the type of the values they combine, the wider one
//! when `float` meets `double`. A float literal has no type of its own: it takes the
//! type of the other operand, else the type the context wants (the stored buffer, the
//! assigned local), else `double`.

use sparsile_ir::loops::{Expr, VarType};
use sparsile_ir::DType;

use super::ctx::Ctx;
use crate::CodegenError;

/// A C computation type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Ty {
    I64,
    F32,
    F64,
}

impl Ty {
    pub(crate) fn c_name(self) -> &'static str {
        match self {
            Ty::I64 => "int64_t",
            Ty::F32 => "float",
            Ty::F64 => "double",
        }
    }

    pub(crate) fn is_float(self) -> bool {
        self != Ty::I64
    }

    /// The computation type of elements of `dtype` (f16 and bf16 elements compute in
    /// f32).
    pub(crate) fn of_dtype(dtype: DType) -> Ty {
        match dtype {
            DType::F32 | DType::F16 | DType::BF16 => Ty::F32,
            DType::F64 => Ty::F64,
            DType::I32 | DType::I64 => Ty::I64,
        }
    }

    /// The floating-point type an untyped float literal takes when `self` is wanted.
    pub(crate) fn float_context(self) -> Ty {
        if self.is_float() {
            self
        } else {
            Ty::F64
        }
    }
}

/// The C storage type of buffer elements of `dtype`: f16 and bf16 elements are their
/// raw 16 bits.
pub(crate) fn storage_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I32 => "int32_t",
        DType::I64 => "int64_t",
        DType::F16 | DType::BF16 => "unsigned short",
    }
}

/// The type two operands combine to; `None` stands for "a float literal, type open".
pub(crate) fn join(a: Option<Ty>, b: Option<Ty>) -> Option<Ty> {
    match (a, b) {
        (Some(Ty::F64), _) | (_, Some(Ty::F64)) => Some(Ty::F64),
        (Some(Ty::F32), _) | (_, Some(Ty::F32)) => Some(Ty::F32),
        (None, _) | (_, None) => None,
        (Some(Ty::I64), Some(Ty::I64)) => Some(Ty::I64),
    }
}

/// The type `e` computes in when nothing constrains it; `None` for an open float type.
pub(crate) fn natural(ctx: &Ctx, e: &Expr) -> Result<Option<Ty>, CodegenError> {
    Ok(match e {
        Expr::Int(_) | Expr::Param(_) | Expr::Cmp { .. } | Expr::Logic { .. } => Some(Ty::I64),
        Expr::Search { .. } => Some(Ty::I64),
        Expr::Float(_) => None,
        Expr::Var(v) => Some(var_ty(ctx.var(*v)?.ty)),
        Expr::Load { buffer, .. } => Some(ctx.buffer_ty(*buffer)?),
        Expr::Unary { arg, .. } => natural(ctx, arg)?,
        Expr::Binary { lhs, rhs, .. } => join(natural(ctx, lhs)?, natural(ctx, rhs)?),
        Expr::Select {
            then, otherwise, ..
        } => join(natural(ctx, then)?, natural(ctx, otherwise)?),
    })
}

/// The C type of a local (validated by [`Ctx::new`]).
pub(crate) fn var_ty(ty: VarType) -> Ty {
    match ty {
        VarType::Index => Ty::I64,
        VarType::Value(DType::F32) => Ty::F32,
        VarType::Value(_) => Ty::F64,
    }
}
