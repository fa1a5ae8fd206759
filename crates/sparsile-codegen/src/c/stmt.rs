//! C statements for loop-IR statements.
//!
//! ```text
//! for jp in A_indptr[i]..A_indptr[i + 1] { acc = acc + A[jp] * x[A_indices[jp]] }
//!   ->  for (int64_t jp = (int64_t)A_indptr[i], jp_end = (int64_t)A_indptr[i + 1]; jp < jp_end; ++jp) { /* spmv */
//!           acc = acc + A[jp] * x[(int64_t)A_indices[jp]];
//!       }
//! ```
//! A loop that holds a vectorized loop starts its body with
//! `SPARSILE_NO_OUTER_VECTORIZE` (see [`Helper`]), so that GCC vectorizes the inner loop
//! only. A loop bound that reads memory or a local the body assigns is evaluated once into a
//! second loop variable (`jp_end`), as the IR requires; a plain bound (`m`, `4 * m`) is
//! written in the condition. A `vectorized(reassociate)` loop is written by
//! [`super::reduction`], a `batched` one by [`super::batched`]. Blocks become C scopes headed by their name, and every loop
//! names the block it came from.

use std::collections::HashSet;

use sparsile_ir::loops::{Expr, For, ForKind, Stmt};
use sparsile_ir::{BufferId, DType, VarId};

use super::batched::emit_batched_loop;
use super::batched_rows::emit_batched_rows;
use super::ctx::Ctx;
use super::expr::{emit_as, emit_offset, emit_truth};
use super::invariant_guards::{
    invariant_condition, invariant_guards, range_guards, where_guards_fail, without_guards,
};
use super::prelude::Helper;
use super::reduction::{accumulate, emit_reassociated_loop};
use super::register_tiled::emit_register_tiled_loop;
use super::types::{var_ty, Ty};
use crate::CodegenError;

/// Indented lines of C.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub(crate) out: String,
    pub(crate) indent: usize,
}

impl Writer {
    pub(crate) fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }
}

/// Writes `stmts`; `block` is the name of the innermost enclosing block.
pub(crate) fn emit_stmts(
    ctx: &mut Ctx,
    w: &mut Writer,
    stmts: &[Stmt],
    block: Option<&str>,
) -> Result<(), CodegenError> {
    for s in stmts {
        emit_stmt(ctx, w, s, block)?;
    }
    Ok(())
}

fn emit_stmt(
    ctx: &mut Ctx,
    w: &mut Writer,
    s: &Stmt,
    block: Option<&str>,
) -> Result<(), CodegenError> {
    match s {
        Stmt::For(f) if matches!(f.kind, ForKind::VectorizedReduction { .. }) => {
            ctx.span = f.span;
            emit_reassociated_loop(ctx, w, f, block)?;
        }
        Stmt::For(f) if f.kind == ForKind::Batched && emit_batched_loop(ctx, w, f, block)? => {}
        Stmt::For(f) if f.kind == ForKind::Serial && emit_batched_rows(ctx, w, f, block)? => {}
        Stmt::For(f)
            if f.kind == ForKind::RegisterTiled && emit_register_tiled_loop(ctx, w, f, block)? => {}
        Stmt::For(f) if f.kind == ForKind::Vectorized && hoistable_if(f).is_some() => {
            // The whole body under one condition that does not change across the loop (a
            // padded block row's `io * 8 + ii < m`): tested once, the loop inside it.
            let Some((cond, body)) = hoistable_if(f) else {
                unreachable!("checked by the guard")
            };
            ctx.span = f.span;
            let c = emit_truth(ctx, cond)?;
            w.line(&format!("if ({}) {{", c.text));
            w.indent += 1;
            let inner = Stmt::For(For {
                body: body.to_vec(),
                ..f.clone()
            });
            emit_stmt(ctx, w, &inner, block)?;
            w.indent -= 1;
            w.line("}");
        }
        Stmt::For(f) if f.kind == ForKind::Vectorized => {
            let mut guards = invariant_guards(f);
            let mut checks = guards.clone();
            // Conditions that hold over the whole range when they hold at its ends (a
            // block on the matrix's edge: `jo * 8 + ji < n`): checked at both ends.
            let ranges = range_guards(f);
            let ranged = !ranges.is_empty();
            for (cond, check) in ranges {
                guards.push(cond);
                checks.push(check);
            }
            if guards.is_empty() {
                emit_for(ctx, w, f, block)?;
            } else {
                // Unswitched on the guards: without them where they hold; elsewhere
                // without the stores that then add zero (see `invariant_guards`), or as
                // it stands where a range guard may hold for some iterations only.
                ctx.span = f.span;
                let conds: Result<Vec<String>, CodegenError> = checks
                    .iter()
                    .map(|g| Ok(format!("({})", emit_truth(ctx, g)?.text)))
                    .collect();
                w.line(&format!("if ({}) {{", conds?.join(" && ")));
                w.indent += 1;
                let stripped = For {
                    body: without_guards(&f.body, &guards),
                    ..f.clone()
                };
                // A loop unswitched on a range guard is short and had guarded loads:
                // kept a loop for the vectorizer like them (see `holds_guarded_load`;
                // fully unrolled, `bsr:8x8` SpMV with `tile=off` ran 1.3x slower).
                emit_loop(ctx, w, &stripped, block, ranged)?;
                w.indent -= 1;
                let elsewhere = if ranged {
                    Some(f.body.clone())
                } else {
                    where_guards_fail(&f.body, &guards)
                };
                match elsewhere {
                    Some(body) => {
                        w.line("} else {");
                        w.indent += 1;
                        emit_for(ctx, w, &For { body, ..f.clone() }, block)?;
                        w.indent -= 1;
                        w.line("}");
                    }
                    None => w.line("}"),
                }
            }
        }
        Stmt::For(f) => emit_for(ctx, w, f, block)?,
        Stmt::If {
            cond,
            then_body,
            else_body,
            span,
        } => {
            ctx.span = *span;
            let c = emit_truth(ctx, cond)?;
            w.line(&format!("if ({}) {{", c.text));
            w.indent += 1;
            emit_stmts(ctx, w, then_body, block)?;
            w.indent -= 1;
            if else_body.is_empty() {
                w.line("}");
            } else {
                w.line("} else {");
                w.indent += 1;
                emit_stmts(ctx, w, else_body, block)?;
                w.indent -= 1;
                w.line("}");
            }
        }
        Stmt::Let { var, .. } | Stmt::Assign { var, .. } if !ctx.live.contains(var) => {}
        Stmt::Let { var, value, span } => {
            ctx.span = *span;
            w.line(&let_line(ctx, *var, value)?);
        }
        Stmt::Assign { var, value, span } => {
            ctx.span = *span;
            w.line(&assign_line(ctx, *var, value)?);
        }
        Stmt::Prefetch {
            buffer,
            indices,
            span,
        } => {
            ctx.span = *span;
            let offset = emit_offset(ctx, *buffer, indices)?;
            w.line(&format!(
                "__builtin_prefetch(&{}[{}], 0, 3);",
                ctx.buffer_name(*buffer)?,
                offset.text
            ));
        }
        Stmt::Store {
            buffer,
            indices,
            value,
            span,
        } => {
            ctx.span = *span;
            if let Some(line) = accumulate(ctx, s)? {
                w.line(&line);
                return Ok(());
            }
            w.line(&store_line(ctx, *buffer, indices, value)?);
        }
        Stmt::AtomicAdd {
            buffer,
            indices,
            value,
            span,
        } => {
            ctx.span = *span;
            let offset = emit_offset(ctx, *buffer, indices)?;
            let ty = ctx.buffer_ty(*buffer)?;
            let v = emit_as(ctx, value, ty)?;
            let helper = match ctx.buffer(*buffer)?.dtype {
                DType::F32 => Helper::AtomicAddF32,
                DType::F64 => Helper::AtomicAddF64,
                dtype => {
                    return Err(CodegenError::AtomicType {
                        buffer: ctx.buffer(*buffer)?.name.clone(),
                        dtype,
                        span: *span,
                    })
                }
            };
            ctx.helpers.insert(helper);
            let name = match helper {
                Helper::AtomicAddF32 => "sparsile_atomic_add_f32",
                _ => "sparsile_atomic_add_f64",
            };
            w.line(&format!(
                "{name}(&{}[{}], {});",
                ctx.buffer_name(*buffer)?,
                offset.text,
                v.text
            ));
        }
        Stmt::Block { name, body, span } => {
            ctx.span = *span;
            w.line(&format!("{{ /* block {} */", comment_text(name)));
            w.indent += 1;
            emit_stmts(ctx, w, body, Some(name))?;
            w.indent -= 1;
            w.line("}");
        }
        Stmt::Launch { span, .. } | Stmt::Barrier { span, .. } | Stmt::WarpReduce { span, .. } => {
            return Err(CodegenError::GpuNode {
                what: match s {
                    Stmt::Launch { name, .. } => format!("launch `{name}`"),
                    Stmt::Barrier { scope, .. } => format!("`{}`", scope.keyword()),
                    _ => "a warp reduction".to_string(),
                },
                span: *span,
            })
        }
        Stmt::Mma(m) => {
            return Err(CodegenError::GpuNode {
                what: "an `mma`".to_string(),
                span: m.span,
            })
        }
    }
    Ok(())
}

/// `T v = value;` for `let v: T = value`.
pub(crate) fn let_line(ctx: &mut Ctx, var: VarId, value: &Expr) -> Result<String, CodegenError> {
    let ty = var_ty(ctx.var(var)?.ty);
    let v = emit_as(ctx, value, ty)?;
    Ok(format!(
        "{} {} = {};",
        ty.c_name(),
        ctx.var_name(var)?,
        v.text
    ))
}

/// `v = value;`.
pub(crate) fn assign_line(ctx: &mut Ctx, var: VarId, value: &Expr) -> Result<String, CodegenError> {
    let ty = var_ty(ctx.var(var)?.ty);
    let v = emit_as(ctx, value, ty)?;
    Ok(format!("{} = {};", ctx.var_name(var)?, v.text))
}

/// `B[offset] = value;` (narrowed to `int32_t` for an i32 buffer).
pub(crate) fn store_line(
    ctx: &mut Ctx,
    buffer: BufferId,
    indices: &[Expr],
    value: &Expr,
) -> Result<String, CodegenError> {
    let offset = emit_offset(ctx, buffer, indices)?;
    let ty = ctx.buffer_ty(buffer)?;
    let v = emit_as(ctx, value, ty)?;
    let v = match ctx.buffer(buffer)?.dtype {
        DType::I32 => format!("(int32_t){}", v.at(super::expr::PREC_UNARY)),
        // Half-precision elements are stored as their raw bits, rounded to nearest even.
        dtype => super::expr::narrow_element(ctx, dtype, v.text),
    };
    Ok(format!(
        "{}[{}] = {v};",
        ctx.buffer_name(buffer)?,
        offset.text
    ))
}

/// Whether `stmts` hold a vectorized loop directly (not inside another loop).
fn holds_vectorized_loop(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::For(f) => f.kind.is_vectorized(),
        Stmt::If {
            then_body,
            else_body,
            ..
        } => holds_vectorized_loop(then_body) || holds_vectorized_loop(else_body),
        Stmt::Block { body, .. } => holds_vectorized_loop(body),
        _ => false,
    })
}

/// `for (int64_t v = lo; v < hi; ++v)`, with the bound evaluated once when it must be.
pub(crate) fn for_header(ctx: &mut Ctx, f: &For) -> Result<String, CodegenError> {
    let v = ctx.var_name(f.var)?;
    let lo = emit_as(ctx, &f.lo, Ty::I64)?;
    let hi = emit_as(ctx, &f.hi, Ty::I64)?;
    if bound_is_plain(&f.hi, &assigned_vars(&f.body)) {
        Ok(format!(
            "for (int64_t {v} = {}; {v} < {}; ++{v})",
            lo.text,
            hi.at(11)
        ))
    } else {
        let end = ctx.names.fresh(&format!("{v}_end"));
        Ok(format!(
            "for (int64_t {v} = {}, {end} = {}; {v} < {end}; ++{v})",
            lo.text, hi.text
        ))
    }
}

/// Whether writing `hi` in the loop condition reads the same value every iteration and
/// costs nothing: no loads or searches, no locals the body assigns.
pub(crate) fn bound_is_plain(hi: &Expr, assigned: &HashSet<VarId>) -> bool {
    let mut plain = true;
    hi.visit(&mut |e| match e {
        Expr::Load { .. } | Expr::Search { .. } => plain = false,
        Expr::Var(v) if assigned.contains(v) => plain = false,
        _ => {}
    });
    plain
}

/// The locals assigned anywhere in `stmts`.
pub(crate) fn assigned_vars(stmts: &[Stmt]) -> HashSet<VarId> {
    let mut out = HashSet::new();
    fn walk(stmts: &[Stmt], out: &mut HashSet<VarId>) {
        for s in stmts {
            match s {
                Stmt::Assign { var, .. } => {
                    out.insert(*var);
                }
                Stmt::For(f) => walk(&f.body, out),
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(then_body, out);
                    walk(else_body, out);
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => walk(body, out),
                Stmt::Let { .. }
                | Stmt::Store { .. }
                | Stmt::Prefetch { .. }
                | Stmt::AtomicAdd { .. }
                | Stmt::Barrier { .. }
                | Stmt::WarpReduce { .. }
                | Stmt::Mma(_) => {}
            }
        }
    }
    walk(stmts, &mut out);
    out
}

pub(crate) fn loop_comment(block: Option<&str>, kind: ForKind) -> String {
    let kind = match kind {
        ForKind::Serial => "",
        ForKind::Parallel | ForKind::ParallelDynamic | ForKind::ParallelBalanced { .. } => {
            ", parallel (runs serially inside a work item)"
        }
        ForKind::Vectorized => ", vectorized",
        ForKind::VectorizedReduction { .. } => ", vectorized(reassociate)",
        ForKind::Unrolled => ", unrolled",
        ForKind::Batched => ", batched",
        ForKind::RegisterTiled => ", register_tiled",
        ForKind::Bound(_) => ", bound",
    };
    match block {
        Some(b) => format!(" /* {}{kind} */", comment_text(b)),
        None if kind.is_empty() => String::new(),
        None => format!(" /* {} */", &kind[2..]),
    }
}

/// `text` made safe inside a C comment.
pub(crate) fn comment_text(text: &str) -> String {
    text.replace("*/", "* /")
}

/// Writes the loop `f` as one C loop (its pragmas, header and body).
fn emit_for(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    block: Option<&str>,
) -> Result<(), CodegenError> {
    emit_loop(ctx, w, f, block, false)
}

/// [`emit_for`], a vectorized loop kept from full unrolling also when `no_full_unroll`.
fn emit_loop(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    block: Option<&str>,
    no_full_unroll: bool,
) -> Result<(), CodegenError> {
    ctx.span = f.span;
    let header = for_header(ctx, f)?;
    match f.kind {
        ForKind::Vectorized => {
            ctx.helpers.insert(Helper::IvdepMacro);
            w.line("SPARSILE_IVDEP");
            if no_full_unroll || holds_guarded_load(&f.body) {
                ctx.helpers.insert(Helper::NoFullUnrollMacro);
                w.line("SPARSILE_NO_FULL_UNROLL");
            }
        }
        ForKind::Unrolled => {
            ctx.helpers.insert(Helper::UnrollMacro);
            w.line("SPARSILE_UNROLL");
        }
        ForKind::Serial
        | ForKind::Parallel
        | ForKind::ParallelDynamic
        | ForKind::ParallelBalanced { .. }
        | ForKind::VectorizedReduction { .. }
        | ForKind::Batched
        | ForKind::RegisterTiled => {}
        ForKind::Bound(axis) => {
            return Err(CodegenError::GpuNode {
                what: format!("a loop bound to `{axis}`"),
                span: f.span,
            })
        }
    }
    w.line(&format!("{header} {{{}", loop_comment(block, f.kind)));
    w.indent += 1;
    if !f.kind.is_vectorized() && holds_vectorized_loop(&f.body) {
        ctx.helpers.insert(Helper::NoOuterVectorizeMacro);
        w.line("SPARSILE_NO_OUTER_VECTORIZE");
    }
    emit_stmts(ctx, w, &f.body, block)?;
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// The condition and the statements of a vectorized loop `f` whose body is one `if`
/// without `else` on a condition that does not change across the loop.
fn hoistable_if(f: &For) -> Option<(&Expr, &[Stmt])> {
    match f.body.as_slice() {
        [Stmt::If {
            cond,
            then_body,
            else_body,
            ..
        }] if else_body.is_empty() && invariant_condition(f, cond) => Some((cond, then_body)),
        _ => None,
    }
}

/// Whether a statement of `stmts` reads memory under a `select` (a load guarded by a
/// condition: a block on the matrix's edge). GCC unrolls a short vectorized loop
/// completely before vectorizing it, and the straight-line code of such loads then
/// stays scalar; `SPARSILE_NO_FULL_UNROLL` keeps the loop for the loop vectorizer,
/// which masks the loads (`bsr:1x16` SpMV on a sparse-transformer mask: 0.81 → 0.17 ms).
fn holds_guarded_load(stmts: &[Stmt]) -> bool {
    fn guarded(e: &Expr) -> bool {
        let mut found = false;
        e.visit(&mut |x| {
            if let Expr::Select {
                then, otherwise, ..
            } = x
            {
                for side in [then, otherwise] {
                    side.visit(&mut |y| found |= matches!(y, Expr::Load { .. }));
                }
            }
        });
        found
    }
    let mut found = false;
    Stmt::visit_all(stmts, &mut |s| match s {
        Stmt::Store { value, .. } | Stmt::Let { value, .. } | Stmt::Assign { value, .. } => {
            found |= guarded(value)
        }
        Stmt::If { cond, .. } => found |= guarded(cond),
        _ => {}
    });
    found
}
