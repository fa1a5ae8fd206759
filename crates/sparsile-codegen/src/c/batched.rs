//! C for a `batched` loop: groups of iterations whose dot products are summed together.
//!
//! A loop `for L { pre; for k vectorized(reassociate) { acc[c] = acc[c] + … }; post }`
//! of the shape [`batched_shape`] checks runs in groups of `W` iterations, `W` the lanes
//! of a vector of the accumulator's type (8 for f32, 4 for f64): each iteration of a
//! group runs `pre` and the reduction's vector steps into a vector of partial sums of
//! its own; one transposed tree of shuffles (`sparsile_tsum_*`) adds the lanes of all
//! `W` vectors at once; then each iteration runs `pre` again (without prefetches), adds
//! its sum into `acc[c]`, and runs `post`. The iterations left after the groups run as a
//! plain loop. At K = 32 (f32) that replaces eight horizontal sums of one vector each (a
//! dependent chain of shuffles and adds per non-zero) by one tree of 21 shuffles and adds
//! for eight non-zeros.
//!
//! When the reduction reads no local that `pre` stores to (its accumulator aside), the
//! group's reductions run side by side in one pass over `k`, each iteration's step
//! after its `let`s alone: a vector several iterations load (the row of `X` that every
//! column of a BSR SDDMM block multiplies) is then loaded once per step, not once per
//! iteration (bigbird, `bsr:8x8`, K = 128, two threads: 12.2 → 9.9 ms).
//!
//! The groups are written only when the reduction's bounds are constants whose distance
//! is a positive multiple of `W` and its body can be written with vectors
//! ([`vectorizable`]); otherwise the loop is written as a plain loop (its serial
//! meaning).
//!
//! ```text
//! for jp in P[i]..P[i + 1] batched {
//!   acc[0] = 0.0
//!   let j: idx = J[jp]
//!   for k in 0..32 vectorized(reassociate) { acc[0] = acc[0] + X[i * 32 + k] * Y[j * 32 + k] }
//!   C[jp] = A[jp] * acc[0]
//! }
//!   ->  {
//!           const int64_t jp_end = (int64_t)P[i + 1];
//!           int64_t jp_group = (int64_t)P[i];
//!           for (; jp_group + 8 <= jp_end; jp_group += 8) {
//!               sparsile_vf32 acc_s0 = {0}, ..., acc_s7 = {0};
//!               for (int64_t k = 0; k < 32; k += 8) {
//!                   { const int64_t jp = jp_group + 0; const int64_t j = J[jp];
//!                     acc_s0 = acc_s0 + X[..k] * Y[..k]; }
//!                   ... (lanes 1 to 7)
//!               }
//!               const sparsile_vf32 acc_t = sparsile_tsum_f32(acc_s0, ..., acc_s7);
//!               { const int64_t jp = jp_group + 0; acc[0] = 0.0f; const int64_t j = J[jp];
//!                 acc[0] = acc[0] + acc_t[0]; C[jp] = A[jp] * acc[0]; }
//!               ... (lanes 1 to 7)
//!           }
//!           for (int64_t jp = jp_group; jp < jp_end; ++jp) { the plain body }
//!       }
//! ```

use sparsile_ir::loops::{batched_shape, BatchedShape, Expr, For, Stmt};
use sparsile_ir::BufferId;

use super::ctx::Ctx;
use super::expr::{emit_as, emit_offset};
use super::prelude::Helper;
use super::reduction::Accumulator;
use super::stmt::{emit_stmts, loop_comment, Writer};
use super::types::Ty;
use super::vector::{body_lets, emit_vector_step, lanes, names, vectorizable};
use crate::CodegenError;

/// Writes the batched loop `f` (see the module docs) and returns `true`, or returns
/// `false` having written nothing when the groups do not apply.
pub(crate) fn emit_batched_loop(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    block: Option<&str>,
) -> Result<bool, CodegenError> {
    let Some((shape, inner, ty)) = groupable(ctx, f)? else {
        return Ok(false);
    };
    let acc = &shape.accumulator;
    let width = lanes(ty);
    let (Expr::Int(lo), Expr::Int(hi)) = (&inner.lo, &inner.hi) else {
        return Ok(false);
    };
    let (lo, hi) = (*lo, *hi);
    if hi <= lo || (hi - lo) % width != 0 {
        return Ok(false);
    }
    let buffer = ctx.buffer_name(acc.buffer)?.to_string();
    let offset = emit_offset(ctx, acc.buffer, std::slice::from_ref(&acc.index))?.text;
    let accs = vec![Accumulator {
        buffer: acc.buffer,
        index: acc.index.clone(),
        name: format!("{buffer}[{offset}]"),
        ty,
    }];
    if !vectorizable(ctx, inner, &accs) {
        return Ok(false);
    }
    ctx.helpers.insert(Helper::VectorTypes);
    ctx.helpers.insert(Helper::TransposedSums);
    ctx.helpers.insert(Helper::NoOuterVectorizeMacro);
    let (vty, suffix) = names(ty);
    let (pre, post) = (&f.body[..shape.reduction], &f.body[shape.reduction + 1..]);
    let v = ctx.var_name(f.var)?;
    let k = ctx.var_name(inner.var)?;
    let scope = body_lets(ctx, inner, ty);

    w.line("{");
    w.indent += 1;
    let end = ctx.names.fresh(&format!("{v}_end"));
    let group = ctx.names.fresh(&format!("{v}_group"));
    let hi_text = emit_as(ctx, &f.hi, Ty::I64)?.text;
    let lo_text = emit_as(ctx, &f.lo, Ty::I64)?.text;
    w.line(&format!("const int64_t {end} = {hi_text};"));
    w.line(&format!("int64_t {group} = {lo_text};"));
    w.line(&format!(
        "for (; {group} + {width} <= {end}; {group} += {width}) {{{}",
        loop_comment(block, f.kind)
    ));
    w.indent += 1;
    w.line("SPARSILE_NO_OUTER_VECTORIZE");
    let sums: Vec<String> = (0..width)
        .map(|l| ctx.names.fresh(&format!("{buffer}_s{l}")))
        .collect();
    let decls: Vec<String> = sums.iter().map(|s| format!("{s} = {{0}}")).collect();
    w.line(&format!("{vty} {};", decls.join(", ")));
    // Every iteration's `pre` and reduction, each into its own vector of partial sums:
    // side by side in one pass over `k` where allowed (a vector that several iterations
    // load, BSR SDDMM's row of X, is then loaded once per step), else one after another.
    let side_by_side = interleavable(pre, inner, acc.buffer);
    let k_loop = format!("for (int64_t {k} = {lo}; {k} < {hi}; {k} += {width}) {{");
    if side_by_side.is_some() {
        w.line(&k_loop);
        w.indent += 1;
    }
    for (l, sum) in sums.iter().enumerate() {
        w.line("{");
        w.indent += 1;
        w.line(&format!("const int64_t {v} = {group} + {l};"));
        match &side_by_side {
            Some(lets) => emit_stmts(ctx, w, lets, block)?,
            None => {
                emit_stmts(ctx, w, pre, block)?;
                w.line(&k_loop);
                w.indent += 1;
            }
        }
        emit_vector_step(ctx, w, inner, &accs, &scope, std::slice::from_ref(sum))?;
        if side_by_side.is_none() {
            w.indent -= 1;
            w.line("}");
        }
        w.indent -= 1;
        w.line("}");
    }
    if side_by_side.is_some() {
        w.indent -= 1;
        w.line("}");
    }
    let total = ctx.names.fresh(&format!("{buffer}_t"));
    w.line(&format!(
        "const {vty} {total} = sparsile_tsum_{suffix}({});",
        sums.join(", ")
    ));
    // Then, in order, each iteration's `pre` again (no prefetches), its sum, its `post`:
    // a loop kept a loop (GCC would unroll it completely and leave it scalar), which the
    // C compiler vectorizes where the epilogue allows it (CSR SDDMM's `C[jp] = A[jp] *
    // sum` over consecutive positions).
    let pre_again = without_prefetches(pre);
    let lanes_of_total = ctx.names.fresh(&format!("{buffer}_sums"));
    let l = ctx.names.fresh(&format!("{v}_lane"));
    ctx.helpers.insert(Helper::NoFullUnrollMacro);
    w.line(&format!("{} {lanes_of_total}[{width}];", ty.c_name()));
    w.line(&format!(
        "__builtin_memcpy({lanes_of_total}, &{total}, sizeof {total});"
    ));
    w.line("SPARSILE_NO_FULL_UNROLL");
    w.line(&format!("for (int64_t {l} = 0; {l} < {width}; ++{l}) {{"));
    w.indent += 1;
    w.line(&format!("const int64_t {v} = {group} + {l};"));
    emit_stmts(ctx, w, &pre_again, block)?;
    w.line(&format!(
        "{buffer}[{offset}] = {buffer}[{offset}] + {lanes_of_total}[{l}];"
    ));
    emit_stmts(ctx, w, post, block)?;
    w.indent -= 1;
    w.line("}");
    w.indent -= 1;
    w.line("}");
    // The iterations left: the plain loop.
    w.line(&format!(
        "for (int64_t {v} = {group}; {v} < {end}; ++{v}) {{{}",
        loop_comment(block, f.kind)
    ));
    w.indent += 1;
    w.line("SPARSILE_NO_OUTER_VECTORIZE");
    emit_stmts(ctx, w, &f.body, block)?;
    w.indent -= 1;
    w.line("}");
    w.indent -= 1;
    w.line("}");
    Ok(true)
}

/// The shape of the batched loop `f`, its reduction loop and its accumulator's type,
/// when groups can be written for it: [`batched_shape`] holds and the accumulator is an
/// f32 or f64 buffer (the groups add into its element in place, not into f16/bf16 bits).
pub(crate) fn groupable<'f>(
    ctx: &Ctx,
    f: &'f For,
) -> Result<Option<(BatchedShape, &'f For, Ty)>, CodegenError> {
    let Ok(shape) = batched_shape(ctx.func, f) else {
        return Ok(None);
    };
    let Stmt::For(inner) = &f.body[shape.reduction] else {
        return Ok(None);
    };
    let ty = ctx.buffer_ty(shape.accumulator.buffer)?;
    if !ty.is_float() || ctx.buffer(shape.accumulator.buffer)?.dtype.is_half() {
        return Ok(None);
    }
    Ok(Some((shape, inner, ty)))
}

/// The `let`s of `pre` (top level, in order) when the group's reductions may run side by
/// side in one pass over `k`, each iteration's step preceded by its `let`s alone: neither
/// the reduction nor those `let`s read a buffer that `pre` stores to, the reduction's
/// accumulator `acc` aside (each iteration sums into a vector of its own; `pre`'s stores,
/// to locals, then matter only to `post`, before which `pre` runs again). `None`
/// otherwise.
fn interleavable(pre: &[Stmt], reduction: &For, acc: BufferId) -> Option<Vec<Stmt>> {
    let stored = Stmt::stored_buffers(pre);
    let lets: Vec<Stmt> = pre
        .iter()
        .filter(|s| matches!(s, Stmt::Let { .. }))
        .cloned()
        .collect();
    let mut read = Stmt::loaded_buffers(&reduction.body);
    read.extend(Stmt::loaded_buffers(&lets));
    if stored.iter().any(|b| *b != acc && read.contains(b)) {
        return None;
    }
    Some(lets)
}

/// `stmts` without their prefetches (and without `if`s left empty by that).
pub(crate) fn without_prefetches(stmts: &[Stmt]) -> Vec<Stmt> {
    stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Prefetch { .. } => None,
            Stmt::If {
                cond,
                then_body,
                else_body,
                span,
            } => {
                let then_body = without_prefetches(then_body);
                let else_body = without_prefetches(else_body);
                (!then_body.is_empty() || !else_body.is_empty()).then(|| Stmt::If {
                    cond: cond.clone(),
                    then_body,
                    else_body,
                    span: *span,
                })
            }
            other => Some(other.clone()),
        })
        .collect()
}
