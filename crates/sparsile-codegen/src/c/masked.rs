//! Masked vector blocks for a `vectorized(reassociate, masked)` loop whose body is a
//! gathered dot product (SpMV's row: `acc += A[p] * x[J[p]]`), with AVX-512 intrinsics.
//!
//! Purpose: on rows of a few non-zeros whose lengths vary (graphs: pubmed's rows hold 1
//! to 171, half of them one), the in-order loop's exit is mispredicted on most rows, and
//! that costs more than the row's arithmetic. Written as blocks of a vector's lanes
//! whose last block masks the lanes past the end, the loop has no exit that depends on
//! the row length below a vector: one masked load of the indices, one masked gather,
//! one masked load of the values per block. Measured on SpMV, one thread (AVX-512):
//! pubmed 0.26 → 0.11 ms, ppi 0.59 → 0.23 ms, flickr 1.57 → 0.71 ms, ogbn-arxiv
//! 2.99 → 1.28 ms against the in-order loop. Where every row has the same few non-zeros
//! the in-order loop's exit is predicted and it stays faster (measured on the selector's
//! corpus: 0.8× on 5-point stencils, 0.5× on the arrow matrix's rows of 2, while 27-point
//! stencils gain 1.2-1.6×): `masked` is a schedule choice, not a rule of the backend.
//!
//! Preconditions ([`shape`]): one accumulator, of type f32 (16 lanes) or f64 (8 lanes);
//! every statement of the body is a prefetch (dropped), a `let` of an index local read
//! from an `i32` buffer at an offset `v + c` (`v` the loop variable, `c` free of it and of
//! the body's locals), or the accumulating store; its addend is built from `+ - * /`,
//! negation, values free of `v` (one value for every lane), loads of the accumulator's
//! type at `v + c` (contiguous) and loads at `j` or `j + c` with `j` such an index local
//! (a gather). Anything else keeps the unmasked code.
//!
//! Postcondition: the code runs under `#if defined(__AVX512F__) && defined(__AVX512VL__)`
//! (the caller writes the `#else` branch with the unmasked code, so a target without
//! AVX-512 compiles the same loop as before). Inactive lanes never touch memory (masked
//! loads and gathers) and never reach the sums (masked adds), so any addend is safe.
//!
//! ```text
//! for j_p in P[i]..P[i + 1] vectorized(reassociate, masked) {
//!   let j: idx = J[j_p]
//!   y_local[0] = y_local[0] + A[j_p] * x[j]
//! }
//!   ->  if (j_p_begin < j_p_end) {   // an empty row skips the sums
//!           __m512 y_local_acc_m0 = _mm512_setzero_ps(), y_local_acc_m1 = _mm512_setzero_ps();
//!           int64_t j_p_block = j_p_begin;
//!           for (; j_p_block + 32 <= j_p_end; j_p_block += 32) { two full blocks, one per sum }
//!           if (j_p_block + 16 <= j_p_end) { one full block; j_p_block += 16; }
//!           const int64_t j_p_left = j_p_end - j_p_block;   // 0 to 15
//!           if (j_p_left > 8) {   // one masked block of 16 lanes
//!               const __mmask16 j_p_mask = (__mmask16)((1u << j_p_left) - 1u);
//!               const int64_t j_p = j_p_block;
//!               const __m512i j_m = _mm512_maskz_loadu_epi32(j_p_mask, &J[j_p]);
//!               y_local_acc_m0 = _mm512_mask_add_ps(y_local_acc_m0, j_p_mask, y_local_acc_m0,
//!                   _mm512_mul_ps(_mm512_maskz_loadu_ps(j_p_mask, &A[j_p]),
//!                                 _mm512_mask_i32gather_ps(_mm512_setzero_ps(), j_p_mask, j_m, x, 4)));
//!               y_local_acc = y_local_acc + _mm512_reduce_add_ps(y_local_acc_m0);
//!           } else {              // one masked block of 8 lanes (__m256, _mm256_mmask_i32gather_ps)
//!               ...
//!               y_local_acc = y_local_acc + sparsile_hsum256_ps(y_local_acc_h);
//!           }
//!       }
//! ```

use std::collections::{HashMap, HashSet};

use sparsile_ir::coord::{BinaryOp, UnaryOp};
use sparsile_ir::loops::{reduction_addend, Expr, For, Stmt, VarType};
use sparsile_ir::{BufferId, DType, VarId};

use super::ctx::Ctx;
use super::expr::{emit_as, emit_offset};
use super::prelude::Helper;
use super::reduction::Accumulator;
use super::stmt::Writer;
use super::types::Ty;
use crate::CodegenError;

/// The preprocessor condition under which the masked code is compiled.
pub(crate) const CONDITION: &str = "#if defined(__AVX512F__) && defined(__AVX512VL__)";

/// What [`shape`] found: the index locals the gathers use (local, the index buffer and
/// the offset expression of its load; `locals` holds the same locals, for look-ups) and
/// the addend.
pub(crate) struct Shape<'f> {
    v: VarId,
    ty: Ty,
    index_lets: Vec<(VarId, BufferId, &'f Expr)>,
    locals: HashSet<VarId>,
    addend: &'f Expr,
}

/// Whether `e` mentions `v` or one of `locals`.
fn mentions(e: &Expr, v: VarId, locals: &HashSet<VarId>) -> bool {
    let mut found = false;
    e.visit(&mut |x| {
        if let Expr::Var(y) = x {
            found |= *y == v || locals.contains(y);
        }
    });
    found
}

/// Whether `e` is `v`, `v + c` or `c + v` with `c` free of `v` and of the body's locals
/// (a contiguous load).
fn contiguous(e: &Expr, v: VarId, locals: &HashSet<VarId>) -> bool {
    match e {
        Expr::Var(x) => *x == v,
        Expr::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
        } => matches!((&**lhs, &**rhs),
            (Expr::Var(x), c) | (c, Expr::Var(x)) if *x == v && !mentions(c, v, locals)),
        _ => false,
    }
}

/// `Some((local, rest))` when `e` is `j`, `j + c` or `c + j` with `j` one of `locals`
/// and `c` free of `v` and the locals.
fn gathered<'e>(
    e: &'e Expr,
    v: VarId,
    locals: &HashSet<VarId>,
) -> Option<(VarId, Option<&'e Expr>)> {
    match e {
        Expr::Var(j) if locals.contains(j) => Some((*j, None)),
        Expr::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
        } => match (&**lhs, &**rhs) {
            (Expr::Var(j), c) | (c, Expr::Var(j))
                if locals.contains(j) && !mentions(c, v, locals) =>
            {
                Some((*j, Some(c)))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Whether the addend `e` can be computed in masked lanes (see the module docs).
fn addend_ok(ctx: &Ctx, e: &Expr, v: VarId, dtype: DType, locals: &HashSet<VarId>) -> bool {
    if !mentions(e, v, locals) {
        return true;
    }
    match e {
        Expr::Load { buffer, indices } => {
            ctx.buffer(*buffer).is_ok_and(|b| b.dtype == dtype)
                && indices.len() == 1
                && (contiguous(&indices[0], v, locals)
                    || gathered(&indices[0], v, locals).is_some())
        }
        Expr::Unary {
            op: UnaryOp::Neg,
            arg,
        } => addend_ok(ctx, arg, v, dtype, locals),
        Expr::Binary {
            op: BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div,
            lhs,
            rhs,
        } => addend_ok(ctx, lhs, v, dtype, locals) && addend_ok(ctx, rhs, v, dtype, locals),
        _ => false,
    }
}

/// The shape of `f`'s body when it can run as masked blocks (see the module docs).
pub(crate) fn shape<'f>(ctx: &Ctx, f: &'f For, accs: &[Accumulator]) -> Option<Shape<'f>> {
    let [acc] = accs else {
        return None;
    };
    let dtype = match acc.ty {
        Ty::F32 => DType::F32,
        Ty::F64 => DType::F64,
        _ => return None,
    };
    let v = f.var;
    let mut locals = HashSet::new();
    let mut index_lets = Vec::new();
    let mut addend = None;
    for s in &f.body {
        match s {
            Stmt::Prefetch { .. } => {}
            Stmt::Let { var, value, .. } => {
                if ctx.var(*var).ok()?.ty != VarType::Index {
                    return None;
                }
                let Expr::Load { buffer, indices } = value else {
                    return None;
                };
                if ctx.buffer(*buffer).ok()?.dtype != DType::I32
                    || indices.len() != 1
                    || !contiguous(&indices[0], v, &locals)
                {
                    return None;
                }
                locals.insert(*var);
                index_lets.push((*var, *buffer, &indices[0]));
            }
            Stmt::Store {
                buffer, indices, ..
            } => {
                let is_acc = *buffer == acc.buffer && indices.as_slice() == [acc.index.clone()];
                let e = reduction_addend(s)?;
                if !is_acc || addend.is_some() || !addend_ok(ctx, e, v, dtype, &locals) {
                    return None;
                }
                addend = Some(e);
            }
            _ => return None,
        }
    }
    Some(Shape {
        v,
        ty: acc.ty,
        index_lets,
        locals,
        addend: addend?,
    })
}

/// The intrinsics of one element type at one vector width.
struct Isa {
    lanes: i64,
    /// `_mm512` or `_mm256`.
    prefix: &'static str,
    vty: &'static str,
    mask: &'static str,
    sfx: &'static str,
    /// The vector of lane indices for a gather, its masked load, and the gather.
    ity: &'static str,
    iload: &'static str,
    gather: &'static str,
    scale: i64,
}

/// A full vector (64 bytes) of `ty`.
fn full(ty: Ty) -> Isa {
    match ty {
        Ty::F32 => Isa {
            lanes: 16,
            prefix: "_mm512",
            vty: "__m512",
            mask: "__mmask16",
            sfx: "ps",
            ity: "__m512i",
            iload: "_mm512_maskz_loadu_epi32",
            gather: "_mm512_mask_i32gather_ps",
            scale: 4,
        },
        _ => Isa {
            lanes: 8,
            prefix: "_mm512",
            vty: "__m512d",
            mask: "__mmask8",
            sfx: "pd",
            ity: "__m256i",
            iload: "_mm256_maskz_loadu_epi32",
            gather: "_mm512_mask_i32gather_pd",
            scale: 8,
        },
    }
}

/// Half a vector (32 bytes) of `ty`: the last block of a short loop.
fn half(ty: Ty) -> Isa {
    match ty {
        Ty::F32 => Isa {
            lanes: 8,
            prefix: "_mm256",
            vty: "__m256",
            mask: "__mmask8",
            sfx: "ps",
            ity: "__m256i",
            iload: "_mm256_maskz_loadu_epi32",
            gather: "_mm256_mmask_i32gather_ps",
            scale: 4,
        },
        _ => Isa {
            lanes: 4,
            prefix: "_mm256",
            vty: "__m256d",
            mask: "__mmask8",
            sfx: "pd",
            ity: "__m128i",
            iload: "_mm_maskz_loadu_epi32",
            gather: "_mm256_mmask_i32gather_pd",
            scale: 8,
        },
    }
}

/// Writes the masked loop of `f` from `begin` to `bound` (C expressions) into the
/// accumulator `acc` (its C variable), `v` the loop variable's C name. The caller wrote
/// [`CONDITION`] before and writes `#else` after.
///
/// Full blocks run two at a time into two sums, then one; the rest (fewer than a full
/// vector's lanes) is one masked block, a full vector when more than half of it is left
/// and half a vector otherwise: on rows of a few non-zeros the half-width gather and sum
/// cost less (measured on SpMV, one thread: delaunay 0.32 → 0.26 ms, cage11 0.29 → 0.24,
/// a 2-D mesh 0.053 → 0.039, the arrow matrix 0.24 → 0.17; ppi 0.235 → 0.26, whose
/// row tails fall on both sides of the half).
pub(crate) fn emit(
    ctx: &mut Ctx,
    w: &mut Writer,
    shape: &Shape<'_>,
    acc: &str,
    v: &str,
    (begin, bound): (&str, &str),
) -> Result<(), CodegenError> {
    ctx.helpers.insert(Helper::Intrinsics);
    let (wide, narrow) = (full(shape.ty), half(shape.ty));
    let lanes = wide.lanes;
    let sfx = wide.sfx;
    let sums = [
        ctx.names.fresh(&format!("{acc}_m0")),
        ctx.names.fresh(&format!("{acc}_m1")),
    ];
    let block = ctx.names.fresh(&format!("{v}_block"));
    // An empty loop (an empty row) skips the sums and their horizontal add.
    w.line(&format!("if ({begin} < {bound}) {{"));
    w.indent += 1;
    w.line(&format!(
        "{} {} = _mm512_setzero_{sfx}(), {} = _mm512_setzero_{sfx}();",
        wide.vty, sums[0], sums[1],
    ));
    w.line(&format!("int64_t {block} = {begin};"));
    let all = |isa: &Isa| format!("({})0x{:X}", isa.mask, (1u32 << isa.lanes) - 1);
    // Two full blocks per step, one into each sum (two independent chains), then one.
    w.line(&format!(
        "for (; {block} + {} <= {bound}; {block} += {}) {{",
        2 * lanes,
        2 * lanes
    ));
    w.indent += 1;
    for (u, sum) in sums.iter().enumerate() {
        w.line("{");
        w.indent += 1;
        let at = if u == 0 {
            block.clone()
        } else {
            format!("{block} + {lanes}")
        };
        emit_block(ctx, w, shape, &wide, sum, v, &at, &all(&wide))?;
        w.indent -= 1;
        w.line("}");
    }
    w.indent -= 1;
    w.line("}");
    w.line(&format!("if ({block} + {lanes} <= {bound}) {{"));
    w.indent += 1;
    emit_block(ctx, w, shape, &wide, &sums[0], v, &block, &all(&wide))?;
    w.line(&format!("{block} += {lanes};"));
    w.indent -= 1;
    w.line("}");
    // The rest, fewer than `lanes` iterations: one masked block, full or half width.
    let left = ctx.names.fresh(&format!("{v}_left"));
    w.line(&format!("const int64_t {left} = {bound} - {block};"));
    w.line(&format!(
        "{} = _mm512_add_{sfx}({}, {});",
        sums[0], sums[0], sums[1]
    ));
    w.line(&format!("if ({left} > {}) {{", narrow.lanes));
    w.indent += 1;
    let mask = tail_mask(ctx, w, &wide, v, &left);
    emit_block(ctx, w, shape, &wide, &sums[0], v, &block, &mask)?;
    w.line(&format!(
        "{acc} = {acc} + _mm512_reduce_add_{sfx}({});",
        sums[0]
    ));
    w.indent -= 1;
    w.line("} else {");
    w.indent += 1;
    let folded = ctx.names.fresh(&format!("{acc}_h"));
    w.line(&format!(
        "{} {folded} = sparsile_fold_{sfx}({});",
        narrow.vty, sums[0]
    ));
    let mask = tail_mask(ctx, w, &narrow, v, &left);
    emit_block(ctx, w, shape, &narrow, &folded, v, &block, &mask)?;
    w.line(&format!(
        "{acc} = {acc} + sparsile_hsum256_{sfx}({folded});"
    ));
    w.indent -= 1;
    w.line("}");
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// Declares the mask of the last `left` iterations (a C variable, fewer than `isa`'s
/// lanes) and returns its name.
fn tail_mask(ctx: &mut Ctx, w: &mut Writer, isa: &Isa, v: &str, left: &str) -> String {
    let mask = ctx.names.fresh(&format!("{v}_mask"));
    w.line(&format!(
        "const {0} {mask} = ({0})((1u << {left}) - 1u);",
        isa.mask
    ));
    mask
}

/// One block of lanes starting at iteration `at` under `mask`, added into `sum`.
#[allow(clippy::too_many_arguments)]
fn emit_block(
    ctx: &mut Ctx,
    w: &mut Writer,
    shape: &Shape<'_>,
    isa: &Isa,
    sum: &str,
    v: &str,
    at: &str,
    mask: &str,
) -> Result<(), CodegenError> {
    w.line(&format!("const int64_t {v} = {at};"));
    let mut index_vectors = HashMap::new();
    for (var, buffer, offset) in &shape.index_lets {
        let local = ctx.var_name(*var)?;
        let name = ctx.names.fresh(&format!("{local}_m"));
        let buffer_name = ctx.buffer_name(*buffer)?.to_string();
        let offset = emit_as(ctx, offset, Ty::I64)?;
        w.line(&format!(
            "const {} {name} = {}({mask}, &{buffer_name}[{}]);",
            isa.ity, isa.iload, offset.text
        ));
        index_vectors.insert(*var, name);
    }
    let lanes = Lanes {
        v: shape.v,
        ty: shape.ty,
        isa,
        mask,
        locals: &shape.locals,
        index_vectors: &index_vectors,
    };
    let value = vector_expr(ctx, shape.addend, &lanes)?;
    w.line(&format!(
        "{sum} = {prefix}_mask_add_{sfx}({sum}, {mask}, {sum}, {value});",
        prefix = isa.prefix,
        sfx = isa.sfx
    ));
    Ok(())
}

/// The vector of `e`'s values in the lanes of one block (see [`addend_ok`]); `v` is
/// the loop variable.
fn vector_expr(ctx: &mut Ctx, e: &Expr, lanes: &Lanes<'_>) -> Result<String, CodegenError> {
    let (pre, sfx) = (lanes.isa.prefix, lanes.isa.sfx);
    if !mentions(e, lanes.v, lanes.locals) {
        // One value for every lane.
        return Ok(format!(
            "{pre}_set1_{sfx}({})",
            emit_as(ctx, e, lanes.ty)?.text
        ));
    }
    Ok(match e {
        Expr::Load { buffer, indices } if indices.len() == 1 => {
            let name = ctx.buffer_name(*buffer)?.to_string();
            if let Some((j, rest)) = gathered(&indices[0], lanes.v, lanes.locals) {
                let base = match rest {
                    Some(c) => format!("&{name}[{}]", emit_as(ctx, c, Ty::I64)?.text),
                    None => name,
                };
                format!(
                    "{}({pre}_setzero_{sfx}(), {}, {}, {base}, {})",
                    lanes.isa.gather, lanes.mask, lanes.index_vectors[&j], lanes.isa.scale
                )
            } else {
                let offset = emit_offset(ctx, *buffer, indices)?;
                format!(
                    "{pre}_maskz_loadu_{sfx}({}, &{name}[{}])",
                    lanes.mask, offset.text
                )
            }
        }
        Expr::Unary {
            op: UnaryOp::Neg,
            arg,
        } => format!(
            "{pre}_sub_{sfx}({pre}_setzero_{sfx}(), {})",
            vector_expr(ctx, arg, lanes)?
        ),
        Expr::Binary { op, lhs, rhs } => {
            let f = match op {
                BinaryOp::Add => "add",
                BinaryOp::Sub => "sub",
                BinaryOp::Mul => "mul",
                BinaryOp::Div => "div",
                _ => unreachable!("masked lanes: {e:?} passed `shape` but has no vector form"),
            };
            let (a, b) = (vector_expr(ctx, lhs, lanes)?, vector_expr(ctx, rhs, lanes)?);
            format!("{pre}_{f}_{sfx}({a}, {b})")
        }
        _ => unreachable!("masked lanes: {e:?} passed `shape` but has no vector form"),
    })
}

/// What [`vector_expr`] needs about the block being written.
struct Lanes<'a> {
    v: VarId,
    ty: Ty,
    isa: &'a Isa,
    mask: &'a str,
    locals: &'a HashSet<VarId>,
    index_vectors: &'a HashMap<VarId, String>,
}
