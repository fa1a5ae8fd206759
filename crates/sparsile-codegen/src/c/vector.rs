//! Explicit vector code for the lane blocks of a `vectorized(reassociate)` loop whose
//! body reads memory contiguously, with GCC/Clang vector extensions.
//!
//! Purpose: a reduction over a dense range (SDDMM's `k`, a `bsr:1xC` row) written as an
//! array of scalar lanes is left to the C compiler's vectoriser, which often unrolls the
//! lane loop first and then keeps every lane scalar (measured: SDDMM at K = 32 ran on
//! scalar multiply-adds). Written with vector types, the loads, multiply-adds and the
//! final horizontal sum are vector instructions by construction.
//!
//! Preconditions ([`vectorizable`]): every statement of the loop body is a `let` of an
//! index local, a `let` of a float local of the accumulators' type, a prefetch (dropped:
//! it is a hint), or a reduction into one of the loop's accumulators; every float load
//! is of the accumulators' type and reads at an offset that is `v + c` (a contiguous
//! vector) or does not involve `v` at all (one value for every lane), `v` being the
//! loop variable and `c` an expression free of it; float operations are `+ - * /`,
//! negation, and `select`s whose condition is the same for every lane (it reads neither
//! `v`, an index local defined from it, nor a float local); reductions may stand under
//! an `if` without `else` whose condition is the same for every lane (BSR's guards on
//! the matrix's edge and on padding: one scalar branch per vector step, and a guarded
//! load is only evaluated where its guard holds). Anything else (a gather, a condition
//! that varies across lanes, a call) keeps the scalar lane arrays.
//!
//! Postcondition: lane block `b` computes lanes `v = b .. b + 2·W` as two vectors of
//! `W` lanes (32 bytes: `W` = 8 for f32, 4 for f64), each accumulator in two vector
//! partial sums, added as a tree when the blocks end (`sparsile_vsum_*`).
//!
//! ```text
//! for k in 0..32 vectorized(reassociate) { C_local[0] = C_local[0] + X[i * 32 + k] * Y[j * 32 + k] }
//!   ->  sparsile_vf32 C_local_acc_v0 = {0}, C_local_acc_v1 = {0};
//!       for (; k_block + 16 <= 32; k_block += 16) {
//!           { const int64_t k = k_block;
//!             C_local_acc_v0 = C_local_acc_v0 + sparsile_vload_f32(&X[i * 32 + k]) * sparsile_vload_f32(&Y[j * 32 + k]); }
//!           { const int64_t k = k_block + 8; ... C_local_acc_v1 ... }
//!       }
//!       C_local_acc = C_local_acc + sparsile_vsum_f32(C_local_acc_v0 + C_local_acc_v1);
//! ```

use std::collections::{HashMap, HashSet};

use sparsile_ir::coord::{BinaryOp, UnaryOp};
use sparsile_ir::loops::{reduction_addend, Expr, For, Stmt, VarType};
use sparsile_ir::{DType, VarId};

use super::ctx::Ctx;
use super::expr::{emit_as, emit_truth};
use super::prelude::Helper;
use super::reduction::Accumulator;
use super::stmt::Writer;
use super::types::{var_ty, Ty};
use crate::CodegenError;

/// Bytes of one vector.
pub(crate) const VECTOR_BYTES: i64 = 32;

/// Vectors per lane block (independent partial sums per accumulator).
pub(crate) const UNROLL: i64 = 2;

/// Lanes of one vector of `ty`.
pub(crate) fn lanes(ty: Ty) -> i64 {
    match ty {
        Ty::F32 => VECTOR_BYTES / 4,
        _ => VECTOR_BYTES / 8,
    }
}

/// The C vector type and the helper suffix of `ty`.
pub(crate) fn names(ty: Ty) -> (&'static str, &'static str) {
    match ty {
        Ty::F32 => ("sparsile_vf32", "f32"),
        _ => ("sparsile_vf64", "f64"),
    }
}

/// How the coefficient of the loop variable in an index expression came out.
fn coefficient(e: &Expr, v: VarId, lets: &HashMap<VarId, &Expr>) -> Option<i64> {
    match e {
        Expr::Int(_) | Expr::Param(_) => Some(0),
        Expr::Var(x) if *x == v => Some(1),
        Expr::Var(x) => match lets.get(x) {
            Some(def) => coefficient(def, v, lets),
            None => Some(0),
        },
        Expr::Load { indices, .. } => indices
            .iter()
            .all(|i| coefficient(i, v, lets) == Some(0))
            .then_some(0),
        Expr::Unary {
            op: UnaryOp::Neg,
            arg,
        } => coefficient(arg, v, lets).map(|c| -c),
        Expr::Binary { op, lhs, rhs } => {
            let (a, b) = (coefficient(lhs, v, lets)?, coefficient(rhs, v, lets)?);
            match op {
                BinaryOp::Add => Some(a + b),
                BinaryOp::Sub => Some(a - b),
                BinaryOp::Mul => match (a, b, &**lhs, &**rhs) {
                    (0, 0, _, _) => Some(0),
                    (0, _, Expr::Int(c), _) => Some(c * b),
                    (_, 0, _, Expr::Int(c)) => Some(a * c),
                    _ => None,
                },
                _ => (a == 0 && b == 0).then_some(0),
            }
        }
        _ => free_of(e, v, lets).then_some(0),
    }
}

/// Whether `e` reads neither `v` nor a local defined from it.
fn free_of(e: &Expr, v: VarId, lets: &HashMap<VarId, &Expr>) -> bool {
    let mut free = true;
    e.visit(&mut |x| {
        if let Expr::Var(y) = x {
            if *y == v || lets.get(y).is_some_and(|d| !free_of(d, v, lets)) {
                free = false;
            }
        }
    });
    free
}

/// What the analysis knows about the body: index `let`s (by definition) and float `let`s.
struct Scope<'a> {
    v: VarId,
    ty: Ty,
    dtype: DType,
    index_lets: HashMap<VarId, &'a Expr>,
    float_lets: HashSet<VarId>,
}

impl Scope<'_> {
    /// Whether the float expression `e` can be computed lane-parallel.
    fn float_ok(&self, ctx: &Ctx, e: &Expr) -> bool {
        match e {
            Expr::Float(_) | Expr::Int(_) | Expr::Param(_) => true,
            Expr::Var(x) => self.float_lets.contains(x) || !self.mentions_v(e),
            Expr::Load { buffer, indices } => {
                ctx.buffer(*buffer).is_ok_and(|b| b.dtype == self.dtype)
                    && indices.len() == 1
                    && matches!(
                        coefficient(&indices[0], self.v, &self.index_lets),
                        Some(0 | 1)
                    )
            }
            Expr::Unary {
                op: UnaryOp::Neg,
                arg,
            } => self.float_ok(ctx, arg),
            Expr::Binary {
                op: BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div,
                lhs,
                rhs,
            } => self.float_ok(ctx, lhs) && self.float_ok(ctx, rhs),
            // A guard the same for every lane (a block on the matrix's edge): one scalar
            // condition choosing between two lane-parallel values.
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                self.lane_invariant(cond)
                    && self.float_ok(ctx, then)
                    && self.float_ok(ctx, otherwise)
            }
            _ => false,
        }
    }

    /// Whether the condition `e` is the same for every lane: it reads neither the loop
    /// variable (nor an index `let` defined from it) nor a float `let` of the body.
    fn lane_invariant(&self, e: &Expr) -> bool {
        let mut float_let = false;
        e.visit(&mut |x| float_let |= matches!(x, Expr::Var(y) if self.float_lets.contains(y)));
        !float_let && !self.mentions_v(e)
    }

    fn mentions_v(&self, e: &Expr) -> bool {
        !free_of(e, self.v, &self.index_lets)
    }
}

/// Whether the body of the reassociated loop `f`, whose accumulators are `accs`, can be
/// written with vectors (see the module docs).
pub(crate) fn vectorizable(ctx: &Ctx, f: &For, accs: &[Accumulator]) -> bool {
    let Some(ty) = accs.first().map(|a| a.ty) else {
        return false;
    };
    if !ty.is_float() || accs.iter().any(|a| a.ty != ty) {
        return false;
    }
    let dtype = if ty == Ty::F32 {
        DType::F32
    } else {
        DType::F64
    };
    let mut scope = Scope {
        v: f.var,
        ty,
        dtype,
        index_lets: HashMap::new(),
        float_lets: HashSet::new(),
    };
    for s in &f.body {
        let ok = match s {
            Stmt::Prefetch { .. } => true,
            Stmt::Let { var, value, .. } => match ctx.var(*var).map(|x| x.ty) {
                Ok(VarType::Index) => {
                    scope.index_lets.insert(*var, value);
                    true
                }
                Ok(t @ VarType::Value(_)) if var_ty(t) == scope.ty => {
                    let ok = scope.float_ok(ctx, value);
                    scope.float_lets.insert(*var);
                    ok
                }
                _ => false,
            },
            Stmt::Store { .. } => accumulation_ok(ctx, &scope, accs, s),
            // A guard the same for every lane around accumulations (BSR's check that a
            // block column is not padding): written as one scalar `if` per vector step.
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } => {
                else_body.is_empty()
                    && scope.lane_invariant(cond)
                    && then_body.iter().all(|t| match t {
                        Stmt::Prefetch { .. } => true,
                        Stmt::Store { .. } => accumulation_ok(ctx, &scope, accs, t),
                        _ => false,
                    })
            }
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Whether `s` adds a lane-parallel value into one of `accs`.
fn accumulation_ok(ctx: &Ctx, scope: &Scope<'_>, accs: &[Accumulator], s: &Stmt) -> bool {
    accumulator_of(accs, s).is_some() && reduction_addend(s).is_some_and(|e| scope.float_ok(ctx, e))
}

/// The position in `accs` of the accumulator a store reduces into, if any.
fn accumulator_of(accs: &[Accumulator], s: &Stmt) -> Option<usize> {
    let Stmt::Store {
        buffer, indices, ..
    } = s
    else {
        return None;
    };
    accs.iter()
        .position(|a| a.buffer == *buffer && indices.as_slice() == [a.index.clone()])
}

/// A lane-parallel value: C text, and whether it is a vector (else one scalar).
struct Value {
    text: String,
    vector: bool,
}

/// Writes the lane blocks of `f` from `rest` (a C variable, moved past them) up to
/// `bound` with vector accumulators for `accs`, then adds them into the accumulators.
/// The caller checked [`vectorizable`]; `v` is the loop variable's C name.
pub(crate) fn emit_vector_blocks(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    accs: &[Accumulator],
    v: &str,
    (rest, bound): (&str, &str),
) -> Result<(), CodegenError> {
    let ty = accs[0].ty;
    let width = lanes(ty);
    let block = width * UNROLL;
    let (vty, suffix) = names(ty);
    ctx.helpers.insert(Helper::VectorTypes);
    let scope = body_lets(ctx, f, ty);
    w.line(&format!("if ({bound} - {rest} >= {block}) {{"));
    w.indent += 1;
    let vectors: Vec<Vec<String>> = accs
        .iter()
        .map(|a| {
            (0..UNROLL)
                .map(|u| ctx.names.fresh(&format!("{}_v{u}", a.name)))
                .collect()
        })
        .collect();
    for names in &vectors {
        let decls: Vec<String> = names.iter().map(|n| format!("{n} = {{0}}")).collect();
        w.line(&format!("{vty} {};", decls.join(", ")));
    }
    w.line(&format!(
        "for (; {rest} + {block} <= {bound}; {rest} += {block}) {{"
    ));
    w.indent += 1;
    for u in 0..UNROLL {
        w.line("{");
        w.indent += 1;
        let offset = if u == 0 {
            String::new()
        } else {
            format!(" + {}", u * width)
        };
        w.line(&format!("const int64_t {v} = {rest}{offset};"));
        let targets: Vec<String> = vectors.iter().map(|n| n[u as usize].clone()).collect();
        emit_vector_step(ctx, w, f, accs, &scope, &targets)?;
        w.indent -= 1;
        w.line("}");
    }
    w.indent -= 1;
    w.line("}");
    for (a, names) in accs.iter().zip(&vectors) {
        w.line(&format!(
            "{0} = {0} + sparsile_vsum_{suffix}({1});",
            a.name,
            names.join(" + ")
        ));
    }
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// The index `let`s of `f`'s body, for [`emit_vector_step`].
pub(crate) fn body_lets<'f>(ctx: &Ctx, f: &'f For, ty: Ty) -> BodyLets<'f> {
    BodyLets {
        v: f.var,
        ty,
        index_lets: f
            .body
            .iter()
            .filter_map(|s| match s {
                Stmt::Let { var, value, .. }
                    if ctx.var(*var).is_ok_and(|x| x.ty == VarType::Index) =>
                {
                    Some((*var, value))
                }
                _ => None,
            })
            .collect(),
    }
}

/// One vector step of the body of `f` (checked by [`vectorizable`]): the body's
/// statements for the lanes starting at the C variable of `f`'s loop variable (declared
/// by the caller), each reduction into `accs[k]` added to the vector variable
/// `targets[k]`.
pub(crate) fn emit_vector_step(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    accs: &[Accumulator],
    scope: &BodyLets,
    targets: &[String],
) -> Result<(), CodegenError> {
    let ty = scope.ty;
    let (vty, _) = names(ty);
    let mut lets: HashMap<VarId, bool> = HashMap::new();
    for s in &f.body {
        match s {
            Stmt::Prefetch { .. } => {}
            Stmt::Let { var, value, span } => {
                ctx.span = *span;
                if !ctx.live.contains(var) {
                    continue;
                }
                let name = ctx.var_name(*var)?;
                match ctx.var(*var)?.ty {
                    VarType::Index => {
                        let code = emit_as(ctx, value, Ty::I64)?;
                        w.line(&format!("const int64_t {name} = {};", code.text));
                    }
                    _ => {
                        let val = vector_value(ctx, value, scope, &lets)?;
                        let decl = if val.vector { vty } else { ty.c_name() };
                        w.line(&format!("const {decl} {name} = {};", val.text));
                        lets.insert(*var, val.vector);
                    }
                }
            }
            Stmt::Store { .. } => emit_accumulation(ctx, w, s, accs, scope, &lets, targets)?,
            Stmt::If {
                cond,
                then_body,
                span,
                ..
            } => {
                ctx.span = *span;
                let c = emit_truth(ctx, cond)?;
                w.line(&format!("if ({}) {{", c.text));
                w.indent += 1;
                for t in then_body {
                    if let Stmt::Store { .. } = t {
                        emit_accumulation(ctx, w, t, accs, scope, &lets, targets)?;
                    }
                }
                w.indent -= 1;
                w.line("}");
            }
            _ => unreachable!("checked by vectorizable"),
        }
    }
    Ok(())
}

/// The vector step of one accumulation `s` (checked by [`vectorizable`]).
fn emit_accumulation(
    ctx: &mut Ctx,
    w: &mut Writer,
    s: &Stmt,
    accs: &[Accumulator],
    scope: &BodyLets,
    lets: &HashMap<VarId, bool>,
    targets: &[String],
) -> Result<(), CodegenError> {
    ctx.span = s.span();
    let k = accumulator_of(accs, s).expect("checked by vectorizable");
    let addend = reduction_addend(s).expect("checked by vectorizable");
    let val = vector_value(ctx, addend, scope, lets)?;
    let acc = &targets[k];
    w.line(&format!("{acc} = {acc} + {};", paren(&val.text)));
    Ok(())
}

fn paren(text: &str) -> String {
    format!("({text})")
}

/// `e` (a float expression [`vectorizable`] accepted) for the lanes of the block: loads
/// at offset `v + c` become vector loads at lane 0's offset (the C variable of `v` holds
/// the block's first lane), others scalars that arithmetic broadcasts.
fn vector_value(
    ctx: &mut Ctx,
    e: &Expr,
    scope: &BodyLets,
    lets: &HashMap<VarId, bool>,
) -> Result<Value, CodegenError> {
    let ty = scope.ty;
    let (vty, suffix) = names(ty);
    Ok(match e {
        Expr::Var(x) if lets.contains_key(x) => Value {
            text: ctx.var_name(*x)?,
            vector: lets[x],
        },
        Expr::Load { indices, .. }
            if coefficient(&indices[0], scope.v, &scope.index_lets) != Some(0) =>
        {
            let code = emit_as(ctx, e, ty)?;
            Value {
                text: format!("sparsile_vload_{suffix}(&{})", code.text),
                vector: true,
            }
        }
        Expr::Unary {
            op: UnaryOp::Neg,
            arg,
        } => {
            let a = vector_value(ctx, arg, scope, lets)?;
            Value {
                text: format!("-{}", paren(&a.text)),
                vector: a.vector,
            }
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            let c = emit_truth(ctx, cond)?;
            let a = vector_value(ctx, then, scope, lets)?;
            let b = vector_value(ctx, otherwise, scope, lets)?;
            let vector = a.vector || b.vector;
            // Both sides of one type: a scalar side is broadcast when the other is a
            // vector. Only the chosen side is evaluated (a guarded load stays guarded).
            let side = |v: &Value| match (vector, v.vector) {
                (true, false) => format!("(({vty}){{0}} + {})", paren(&v.text)),
                _ => paren(&v.text),
            };
            Value {
                text: format!("({} ? {} : {})", c.text, side(&a), side(&b)),
                vector,
            }
        }
        Expr::Binary { op, lhs, rhs } => {
            let a = vector_value(ctx, lhs, scope, lets)?;
            let b = vector_value(ctx, rhs, scope, lets)?;
            let sym = match op {
                BinaryOp::Add => "+",
                BinaryOp::Sub => "-",
                BinaryOp::Mul => "*",
                _ => "/",
            };
            Value {
                text: format!("{} {sym} {}", paren(&a.text), paren(&b.text)),
                vector: a.vector || b.vector,
            }
        }
        _ => Value {
            text: emit_as(ctx, e, ty)?.text,
            vector: false,
        },
    })
}

/// `e`, an expression of the body of the loop of `scope` that reads none of the body's
/// float `let`s, for the lanes starting at the C variable of the loop variable: its C
/// text, and whether it is a vector (else one scalar that arithmetic broadcasts).
pub(crate) fn vector_text(
    ctx: &mut Ctx,
    e: &Expr,
    scope: &BodyLets,
) -> Result<(String, bool), CodegenError> {
    let v = vector_value(ctx, e, scope, &HashMap::new())?;
    Ok((v.text, v.vector))
}

/// The loop variable, the accumulators' type and the index `let`s of the body.
pub(crate) struct BodyLets<'a> {
    v: VarId,
    ty: Ty,
    index_lets: HashMap<VarId, &'a Expr>,
}
