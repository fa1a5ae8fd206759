//! `specialize`: fixes a program parameter to a constant (stage I).
//!
//! Purpose: a kernel compiled for one value of a size (typically the dense width `K`
//! of SpMM and SDDMM) gets constant loop trip counts, which the C compiler unrolls and
//! vectorises without remainder loops, and constant-size accumulators for
//! [`cache_write`](super). Every `Extent::Param(p)` of the program (axis lengths, `nnz`,
//! positions per parent) and every `Expr::Param(p)` becomes the constant.
//!
//! Safety: the parameter stays declared, and the axes that had it as their length now
//! have a constant length, so binding a tensor whose size differs is refused at run time
//! with the usual extent-mismatch error (a constant must be equal) — the promise is
//! checked, not trusted.
//!
//! Preconditions (each its own [`ScheduleError`]):
//! - the program declares a parameter of that name ([`ScheduleError::UnknownParam`]);
//! - the value is not negative ([`ScheduleError::NegativeSpecialization`]);
//! - only before the program is lowered (stage I).
//!
//! Example:
//! ```
//! use sparsile_transform::schedule::specialize::specialize;
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n",
//! )
//! .unwrap();
//! let fixed = specialize(&program, "k", 32).unwrap();
//! assert!(fixed.to_string().contains("axis I_k = dense_fixed(32)"));
//! ```

use sparsile_ir::coord::{Expr, Extent, Program, SparseIteration, Stmt};
use sparsile_ir::ParamId;

use super::ScheduleError;

const PRIMITIVE: &str = "specialize";

/// `program` with parameter `param` replaced by `value` everywhere.
pub fn specialize(program: &Program, param: &str, value: i64) -> Result<Program, ScheduleError> {
    let id = program
        .params
        .iter()
        .find(|(_, p)| p.name == param)
        .map(|(id, _)| id)
        .ok_or_else(|| ScheduleError::UnknownParam {
            primitive: PRIMITIVE,
            param: param.to_string(),
        })?;
    if value < 0 {
        return Err(ScheduleError::NegativeSpecialization {
            primitive: PRIMITIVE,
            param: param.to_string(),
            value,
        });
    }
    let mut out = program.clone();
    let fix = |e: &mut Extent| {
        if *e == Extent::Param(id) {
            *e = Extent::Const(value);
        }
    };
    for (_, axis) in out.axes.iter_mut() {
        fix(&mut axis.length);
        if let Some(n) = axis.nnz.as_mut() {
            fix(n);
        }
        if let Some(n) = axis.nnz_per_parent.as_mut() {
            fix(n);
        }
    }
    for stmt in &mut out.body {
        stmt_params(stmt, id, value);
    }
    Ok(out)
}

fn stmt_params(stmt: &mut Stmt, id: ParamId, value: i64) {
    match stmt {
        Stmt::Store(s) => {
            for e in s.indices.iter_mut() {
                expr_params(e, id, value);
            }
            expr_params(&mut s.value, id, value);
        }
        Stmt::Iteration(SparseIteration { init, body, .. }) => {
            for s in init.iter_mut().chain(body.iter_mut()) {
                stmt_params(s, id, value);
            }
        }
    }
}

fn expr_params(e: &mut Expr, id: ParamId, value: i64) {
    match e {
        Expr::Param(p) if *p == id => *e = Expr::Int(value),
        Expr::Int(_) | Expr::Float(_) | Expr::Param(_) | Expr::Var(_) => {}
        Expr::Load { indices, .. } => {
            for x in indices.iter_mut() {
                expr_params(x, id, value);
            }
        }
        Expr::Unary { arg, .. } => expr_params(arg, id, value),
        Expr::Binary { lhs, rhs, .. } => {
            expr_params(lhs, id, value);
            expr_params(rhs, id, value);
        }
    }
}
