//! C for a `vectorized(reassociate)` loop: its local reductions become partial sums.
//!
//! Each element `L[e]` the loop reduces into ([`local_reductions`]) gets a scalar
//! accumulator, loaded before the loop and stored back after it. A loop of at least
//! [`MIN_VECTOR_TRIP`] iterations first runs blocks of [`LANES`] iterations, iteration
//! `l` of a block adding into lane `l` of a per-accumulator array, whose lanes are then
//! added to the accumulator. The remaining iterations (and short loops) stay scalar
//! (`SPARSILE_SCALAR_LOOP`: GCC would otherwise vectorize them with gathers and add the
//! lanes one by one, slower on rows of a few non-zeros). With `scalar_sums=N` above 1,
//! groups of `N` iterations of that part add into `N` scalar copies of each accumulator
//! (`N` independent multiply-add chains), and the last few run in order. Measured on
//! SpMV, 2 threads: cage11 (rows of 3 to 31 non-zeros) 0.206 ms in order, 0.18 ms with
//! 2 sums, 0.17 ms with 4, 0.19 ms with 8; ppi and delaunay 15-20% faster with 4; but
//! ogbn-arxiv 30% and pubmed 20% slower, whose row lengths vary so much that the extra
//! loop exit is mispredicted on most rows. A bound that reads memory is evaluated into a
//! constant before the loop.
//!
//! ```text
//! for j_p in P[i]..P[i + 1] vectorized(reassociate) {
//!   y_local[0] = y_local[0] + A[j_p] * x[j]
//! }
//!   ->  {
//!           const int64_t j_p_end = (int64_t)P[i + 1];
//!           float y_local_acc = y_local[0];
//!           const int64_t j_p_begin = (int64_t)P[i];
//!           int64_t j_p_block = j_p_begin;
//!           if (j_p_end - j_p_begin >= 32) {
//!               float y_local_acc_lanes[16];
//!               for (int64_t j_p_lane = 0; j_p_lane < 16; ++j_p_lane) y_local_acc_lanes[j_p_lane] = 0;
//!               for (; j_p_block + 16 <= j_p_end; j_p_block += 16) {
//!                   SPARSILE_NO_OUTER_VECTORIZE
//!                   SPARSILE_IVDEP
//!                   for (int64_t j_p_lane = 0; j_p_lane < 16; ++j_p_lane) {
//!                       const int64_t j_p = j_p_block + j_p_lane;
//!                       y_local_acc_lanes[j_p_lane] = y_local_acc_lanes[j_p_lane] + A[j_p] * x[j];
//!                   }
//!               }
//!               // the lanes added as a tree: 16 -> 8 -> 4 -> 2 -> the accumulator
//!               for (int64_t j_p_lane = 0; j_p_lane < 8; ++j_p_lane) y_local_acc_lanes[j_p_lane] = y_local_acc_lanes[j_p_lane] + y_local_acc_lanes[j_p_lane + 8];
//!               ... (4, 2)
//!               y_local_acc = y_local_acc + (y_local_acc_lanes[0] + y_local_acc_lanes[1]);
//!           }
//!           {   // with scalar_sums=4
//!               float y_local_acc_1 = 0;   // and _2, _3
//!               for (; j_p_block + 4 <= j_p_end; j_p_block += 4) {
//!                   SPARSILE_SCALAR_LOOP
//!                   {
//!                       const int64_t j_p = j_p_block + 0;
//!                       y_local_acc = y_local_acc + A[j_p] * x[j];
//!                   }
//!                   // ... iterations 1, 2, 3 into y_local_acc_1, _2, _3
//!               }
//!               y_local_acc = y_local_acc + (y_local_acc_1 + y_local_acc_2 + y_local_acc_3);
//!           }
//!           for (int64_t j_p = j_p_block; j_p < j_p_end; ++j_p) {
//!               SPARSILE_SCALAR_LOOP
//!               y_local_acc = y_local_acc + A[j_p] * x[j];
//!           }
//!           y_local[0] = y_local_acc;
//!       }
//! ```

use sparsile_ir::loops::{local_reductions, reduction_addend, Expr, For, ForKind, Stmt};
use sparsile_ir::{BufferId, DType};

use super::ctx::Ctx;
use super::expr::{
    emit_as, emit_offset, narrow_element, widen_element, Code, PREC_ADD, PREC_PRIMARY,
};
use super::masked;
use super::prelude::Helper;
use super::stmt::{assigned_vars, bound_is_plain, emit_stmts, loop_comment, Writer};
use super::types::Ty;
use super::vector::{emit_vector_blocks, vectorizable};
use crate::CodegenError;

/// The trip count from which a `vectorized(reassociate)` loop runs as a vector loop.
/// Measured on SpMV (AVX-512, GCC 12): rows of 16 to 31 non-zeros ran about 8% slower
/// with lane sums than in order (the lanes are summed one by one after the loop), rows
/// of hundreds about 1.8 times faster. Keeping the short copy scalar made graphs of
/// short rows 5-25% faster again (cage11, ppi, ogbn-arxiv).
pub(crate) const MIN_VECTOR_TRIP: i64 = 32;

/// The partial sums per accumulator of a long reassociated loop: iteration `l` of each
/// block of `LANES` adds into lane `l`. GCC unrolls the block completely and keeps the
/// lanes in registers (16 independent multiply-add chains, no gathers), which measured
/// 20-27% faster on SpMV with long rows (attention masks, ppi) than an `omp simd`
/// reduction, whose lane sums GCC 12 keeps in a stack slot.
pub(crate) const LANES: i64 = 16;

/// One accumulator: the reduced element and its C variable.
#[derive(Debug, Clone)]
pub(crate) struct Accumulator {
    pub(crate) buffer: BufferId,
    pub(crate) index: Expr,
    pub(crate) name: String,
    pub(crate) ty: Ty,
}

/// Writes the `vectorized(reassociate)` loop `f` (see the module docs).
pub(crate) fn emit_reassociated_loop(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    block: Option<&str>,
) -> Result<(), CodegenError> {
    let found = local_reductions(ctx.func, f).map_err(|e| CodegenError::Reassociation {
        var: ctx
            .func
            .vars
            .get(f.var)
            .map_or_else(|| f.var.to_string(), |v| v.name.clone()),
        reason: e.message,
        span: e.span,
    })?;
    w.line("{");
    w.indent += 1;
    let v = ctx.var_name(f.var)?;
    let lo = emit_as(ctx, &f.lo, Ty::I64)?;
    let hi = emit_as(ctx, &f.hi, Ty::I64)?;
    let bound = if bound_is_plain(&f.hi, &assigned_vars(&f.body)) {
        hi.at(11)
    } else {
        let end = ctx.names.fresh(&format!("{v}_end"));
        w.line(&format!("const int64_t {end} = {};", hi.text));
        end
    };
    let mut accs = Vec::new();
    for r in &found {
        let buffer = ctx.buffer_name(r.buffer)?.to_string();
        let ty = ctx.buffer_ty(r.buffer)?;
        let name = ctx.names.fresh(&format!("{buffer}_acc"));
        let offset = emit_offset(ctx, r.buffer, std::slice::from_ref(&r.index))?;
        let dtype = ctx.buffer(r.buffer)?.dtype;
        let first = Code::new(format!("{buffer}[{}]", offset.text), PREC_PRIMARY);
        let first = widen_element(ctx, dtype, first);
        w.line(&format!("{} {name} = {};", ty.c_name(), first.text));
        accs.push(Accumulator {
            buffer: r.buffer,
            index: r.index.clone(),
            name,
            ty,
        });
    }
    let comment = loop_comment(block, f.kind);
    let header = |lo: &str| format!("for (int64_t {v} = {lo}; {v} < {bound}; ++{v}) {{{comment}");
    let outer = std::mem::replace(&mut ctx.accumulators, accs.clone());
    let written = if accs.is_empty() {
        // Nothing to reassociate: a plain vectorized loop.
        ctx.helpers.insert(Helper::IvdepMacro);
        w.line("SPARSILE_IVDEP");
        emit_body(ctx, w, &header(&lo.text), f, block, false)
    } else {
        let begin = ctx.names.fresh(&format!("{v}_begin"));
        w.line(&format!("const int64_t {begin} = {};", lo.text));
        let masked_shape = match f.kind {
            ForKind::VectorizedReduction { masked: true, .. } => masked::shape(ctx, f, &accs),
            _ => None,
        };
        let masked_written = match &masked_shape {
            Some(shape) => {
                w.line(masked::CONDITION);
                let written = masked::emit(ctx, w, shape, &accs[0].name, &v, (&begin, &bound));
                w.line("#else");
                Some(written)
            }
            None => None,
        };
        let (rest, blocks) = if vectorizable(ctx, f, &accs) {
            let rest = ctx.names.fresh(&format!("{v}_block"));
            w.line(&format!("int64_t {rest} = {begin};"));
            let written = emit_vector_blocks(ctx, w, f, &accs, &v, (&rest, &bound));
            (rest, written)
        } else {
            emit_lane_blocks(ctx, w, f, block, &accs, &v, (&begin, &bound))
        };
        ctx.helpers.insert(Helper::ScalarLoopMacro);
        let sums = match f.kind {
            ForKind::VectorizedReduction { scalar_sums, .. } => scalar_sums.max(1),
            _ => 1,
        };
        blocks
            .and_then(|()| match sums {
                1 => Ok(()),
                _ => emit_short_groups(ctx, w, f, block, &accs, &v, (&rest, &bound), sums),
            })
            .and_then(|()| {
                ctx.accumulators = accs.clone();
                emit_body(ctx, w, &header(&rest), f, block, true)
            })
            .and_then(|()| {
                if masked_written.is_some() {
                    w.line("#endif");
                }
                masked_written.unwrap_or(Ok(()))
            })
    };
    ctx.accumulators = outer;
    written?;
    for a in &accs {
        let buffer = ctx.buffer_name(a.buffer)?.to_string();
        let offset = emit_offset(ctx, a.buffer, std::slice::from_ref(&a.index))?;
        let value = match ctx.buffer(a.buffer)?.dtype {
            DType::I32 => format!("(int32_t){}", a.name),
            dtype => narrow_element(ctx, dtype, a.name.clone()),
        };
        w.line(&format!("{buffer}[{}] = {value};", offset.text));
    }
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// The long-loop part of a reassociated loop (see the module docs): when the loop has at
/// least [`MIN_VECTOR_TRIP`] iterations from `begin` to `bound` (C expressions), blocks of [`LANES`]
/// iterations, iteration `l` of a block adding into lane `l` of a lane array per
/// accumulator (`v` the loop variable's C name), the lanes then added to the
/// accumulators. Returns the variable holding
/// the first iteration left for the in-order loop, and the result of writing the body.
fn emit_lane_blocks(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    block: Option<&str>,
    accs: &[Accumulator],
    v: &str,
    (begin, bound): (&str, &str),
) -> (String, Result<(), CodegenError>) {
    let rest = ctx.names.fresh(&format!("{v}_block"));
    let lane = ctx.names.fresh(&format!("{v}_lane"));
    w.line(&format!("int64_t {rest} = {begin};"));
    w.line(&format!("if ({bound} - {begin} >= {MIN_VECTOR_TRIP}) {{"));
    w.indent += 1;
    let arrays: Vec<String> = accs
        .iter()
        .map(|a| ctx.names.fresh(&format!("{}_lanes", a.name)))
        .collect();
    for (a, arr) in accs.iter().zip(&arrays) {
        w.line(&format!("{} {arr}[{LANES}];", a.ty.c_name()));
        w.line(&format!(
            "for (int64_t {lane} = 0; {lane} < {LANES}; ++{lane}) {arr}[{lane}] = 0;"
        ));
    }
    w.line(&format!(
        "for (; {rest} + {LANES} <= {bound}; {rest} += {LANES}) {{"
    ));
    w.indent += 1;
    ctx.helpers.insert(Helper::NoOuterVectorizeMacro);
    ctx.helpers.insert(Helper::IvdepMacro);
    w.line("SPARSILE_NO_OUTER_VECTORIZE");
    w.line("SPARSILE_IVDEP");
    ctx.accumulators = accs
        .iter()
        .zip(&arrays)
        .map(|(a, arr)| Accumulator {
            name: format!("{arr}[{lane}]"),
            ..a.clone()
        })
        .collect();
    let comment = loop_comment(block, f.kind);
    w.line(&format!(
        "for (int64_t {lane} = 0; {lane} < {LANES}; ++{lane}) {{{comment}"
    ));
    w.indent += 1;
    w.line(&format!("const int64_t {v} = {rest} + {lane};"));
    let written = emit_stmts(ctx, w, &f.body, block);
    w.indent -= 1;
    w.line("}");
    w.indent -= 1;
    w.line("}");
    for (a, arr) in accs.iter().zip(&arrays) {
        // A tree: halves added lane by lane (one vector add each) down to two lanes.
        let mut half = LANES / 2;
        while half >= 2 {
            w.line(&format!(
                "for (int64_t {lane} = 0; {lane} < {half}; ++{lane}) {arr}[{lane}] = {arr}[{lane}] + {arr}[{lane} + {half}];"
            ));
            half /= 2;
        }
        w.line(&format!("{0} = {0} + ({arr}[0] + {arr}[1]);", a.name));
    }
    w.indent -= 1;
    w.line("}");
    (rest, written)
}

/// The groups of `sums` iterations left after the lane blocks (all of a short loop),
/// for a loop with `scalar_sums` above 1: iteration `l` of a group adds into its own
/// scalar copy `l` of each accumulator (copy 0 is the accumulator itself), kept scalar;
/// the copies are then added to the accumulators. `rest` (a C variable) moves past the
/// groups.
#[allow(clippy::too_many_arguments)]
fn emit_short_groups(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    block: Option<&str>,
    accs: &[Accumulator],
    v: &str,
    (rest, bound): (&str, &str),
    sums: u32,
) -> Result<(), CodegenError> {
    w.line("{");
    w.indent += 1;
    let copies: Vec<Vec<String>> = accs
        .iter()
        .map(|a| {
            let mut names = vec![a.name.clone()];
            for l in 1..sums {
                let name = ctx.names.fresh(&format!("{}_{l}", a.name));
                w.line(&format!("{} {name} = 0;", a.ty.c_name()));
                names.push(name);
            }
            names
        })
        .collect();
    w.line(&format!(
        "for (; {rest} + {sums} <= {bound}; {rest} += {sums}) {{{}",
        loop_comment(block, f.kind)
    ));
    w.indent += 1;
    w.line("SPARSILE_SCALAR_LOOP");
    for l in 0..sums as usize {
        ctx.accumulators = accs
            .iter()
            .zip(&copies)
            .map(|(a, names)| Accumulator {
                name: names[l].clone(),
                ..a.clone()
            })
            .collect();
        w.line("{");
        w.indent += 1;
        w.line(&format!("const int64_t {v} = {rest} + {l};"));
        emit_stmts(ctx, w, &f.body, block)?;
        w.indent -= 1;
        w.line("}");
    }
    w.indent -= 1;
    w.line("}");
    for names in &copies {
        w.line(&format!(
            "{0} = {0} + ({1});",
            names[0],
            names[1..].join(" + ")
        ));
    }
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// `header { body }`, the body using the accumulators in `ctx` (and kept scalar when
/// `scalar`).
fn emit_body(
    ctx: &mut Ctx,
    w: &mut Writer,
    header: &str,
    f: &For,
    block: Option<&str>,
    scalar: bool,
) -> Result<(), CodegenError> {
    w.line(header);
    w.indent += 1;
    if scalar {
        w.line("SPARSILE_SCALAR_LOOP");
    }
    emit_stmts(ctx, w, &f.body, block)?;
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// `acc = acc + addend;` when `s` is a reduction into an element that has an
/// accumulator in the loop being written; `None` otherwise.
pub(crate) fn accumulate(ctx: &mut Ctx, s: &Stmt) -> Result<Option<String>, CodegenError> {
    let Stmt::Store {
        buffer, indices, ..
    } = s
    else {
        return Ok(None);
    };
    let Some(acc) = ctx
        .accumulators
        .iter()
        .find(|a| a.buffer == *buffer && indices.as_slice() == [a.index.clone()])
        .cloned()
    else {
        return Ok(None);
    };
    let Some(addend) = reduction_addend(s) else {
        return Ok(None);
    };
    let v = emit_as(ctx, addend, acc.ty)?;
    // The right operand of `+` is parenthesised unless it binds more tightly.
    Ok(Some(format!(
        "{0} = {0} + {1};",
        acc.name,
        v.at(PREC_ADD + 1)
    )))
}
