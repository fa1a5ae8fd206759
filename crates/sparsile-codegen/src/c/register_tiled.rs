//! C for a `register_tiled` loop: a tile of the output held in vector registers across
//! the blocks of a block row (the register-blocked micro-kernel of BSR SpMM).
//!
//! A loop of the shape [`register_tiled_shape`] checks,
//! ```text
//! for jp in P[io]..P[io + 1] register_tiled {
//!   let j: idx = J[jp]
//!   for r in 0..R { for c in 0..S { for k in 0..K vectorized {
//!     if G(r) { C[row(r) + k] = C[row(r) + k] + a(jp, r, c) * b(j, c, k) }
//!   } } }
//! }
//! ```
//! runs, when the loop has an iteration and `G` holds for every row, as
//! ```text
//! for each group of g rows, for each chunk of U vectors of k:
//!     acc[r][u] = C[row(r) + k .. + W]                (g · U vector registers)
//!     for jp in P[io]..P[io + 1]:
//!         let j = J[jp]
//!         for c in 0..S:
//!             bv[u] = b(j, c, k + u·W ..)             (U vector loads of B, once for all rows)
//!             for r in the group: acc[r][u] += a(jp, r, c) · bv[u]   (one broadcast per row)
//!     C[row(r) + k .. + W] = acc[r][u]
//! ```
//! and otherwise as the plain loop. Where chunks of `U` vectors leave a width of at least
//! one vector, chunks of fewer vectors follow; a width narrower than one vector ends in
//! the plain loop restricted to the rest of `k`. Every element receives its terms in the
//! plain loop's order, so results are the plain loop's.
//!
//! A row of scalars (a CSR row of SpMM: the loop's body ends in the width loop alone) is
//! a tile of one row and one column: the output row is held in registers across the
//! row's non-zeros, in passes of `U` vectors, each pass reading the row's indices again.
//! On AVX2 at `K = 128` (f32) that is two passes of eight registers, where the plain loop
//! loads and stores its output row for every non-zero (the row does not fit the 16
//! registers): 1.5-2.4x faster on cage11, a DLMC FFN weight and PPI (`bench/README.md`).
//!
//! Without a column loop (a block row's partial sums of BSR SpMV after `rfactor`:
//! `P[r * C + k] += A[jp, r, k] * x[j * C + k]`) both factors read the width: each step
//! loads one vector of `x` for all the rows and one vector of `A` per row, so a group
//! holds as many rows as the budget has registers (eight rows of `bsr:8x8` in f32 on
//! AVX2, where the plain loop ran each row's eight products as a scalar chain: 3.7x
//! faster on the BigBird mask, `bench/README.md`). A `select` on a condition that reads
//! the width and holds over a chunk when it holds at the chunk's ends (the block column
//! on the matrix's right edge: `jo * C + k < n`, see `invariant_guards::range_guards`)
//! is checked at both ends for every block; where it fails the block updates the
//! accumulators lane by lane, the `select`s kept.
//!
//! The code holds two versions: with AVX-512 (`#if defined(__AVX512F__)`), vectors of
//! 64 bytes, groups of up to 8 rows and up to 24 accumulators (of 32 registers), then
//! vectors of 32 bytes (same groups and budget) for the width that 64-byte chunks leave
//! (`K = 8` in f32); without it, vectors of 32 bytes, groups of up to 4 rows and up to 12
//! accumulators (of 16). Both end with vectors of 16 bytes (groups of up to 4 rows, 12
//! accumulators) for the width the others leave (a `bsr:4x4` block of f32). In each, `U` is the largest power of two (at most 8) that keeps
//! the registers live across a column within that budget (`g · U` accumulators, plus the
//! `U` loaded vectors of `b` when `g > 1`; with one row each load folds into its
//! multiply-add) and whose `U` vectors the width fills. Measured on BSR SpMM of the BigBird mask (4,096², 8×8 blocks, K = 128,
//! two threads): see `bench/README.md`.
//!
//! Written only when the accumulated buffer is f32 or f64 (not f16/bf16 bits) with one
//! flat index, consecutive in `k`, and `b` (and `a` where it reads `k`) is built from
//! loads consecutive in `k` of that type, values that do not vary with `k`, `+ - * /`,
//! negation and `select`s whose condition does not read `k` (once the range guards are
//! stripped); otherwise the loop is written as a plain loop (its serial meaning).

use sparsile_ir::coord::{BinaryOp, UnaryOp};
use sparsile_ir::loops::{
    coefficient as vector_coefficient, register_tiled_shape, Expr, For, ForKind,
    RegisterTiledShape, Stmt,
};
use sparsile_ir::VarId;
use std::ops::Range;

use super::ctx::Ctx;
use super::expr::{emit_as, emit_offset, emit_truth};
use super::invariant_guards::{invariant_guards, range_guards, strip, where_guards_fail};
use super::prelude::Helper;
use super::stmt::{emit_stmts, loop_comment, Writer};
use super::types::Ty;
use crate::CodegenError;

/// The most vectors of the width per row of a chunk (a power of two): 8 holds a row of
/// 128 f32 in two chunks of eight 32-byte registers on AVX2.
const MAX_UNROLL: i64 = 8;

/// The condition of the AVX-512 version.
const WIDE: &str = "#if defined(__AVX512F__)";

/// One version of the tile: vector bytes, the most rows per group, the most accumulators.
struct Isa {
    bytes: i64,
    group: i64,
    budget: i64,
    /// `z` (64 bytes) or `v` (32 bytes): the prefix of the helpers' names.
    prefix: &'static str,
}

const AVX512: Isa = Isa {
    bytes: 64,
    group: 8,
    budget: 24,
    prefix: "z",
};

const AVX2: Isa = Isa {
    bytes: 32,
    group: 4,
    budget: 12,
    prefix: "v",
};

/// Vectors of 32 bytes on a target with AVX-512 (its 32 registers): the width that
/// 64-byte chunks leave, e.g. all of `K = 8` in f32 (without it, that width ran as the
/// plain loop, 5-13x slower than CSR on block-sparse attention masks).
const AVX512_HALF: Isa = Isa {
    bytes: 32,
    group: 8,
    budget: 24,
    prefix: "v",
};

/// Vectors of 16 bytes for the width that 32-byte chunks leave (a `bsr:4x4` block of
/// f32 in SpMV, `K = 4` of SpMM), on either target.
const QUARTER: Isa = Isa {
    bytes: 16,
    group: 4,
    budget: 12,
    prefix: "q",
};

/// The versions of each target, in order: each covers in chunks what the one before
/// left of the width; the plain loop covers the rest.
const WIDE_VERSIONS: [&Isa; 3] = [&AVX512, &AVX512_HALF, &QUARTER];
const NARROW_VERSIONS: [&Isa; 2] = [&AVX2, &QUARTER];

/// Whether `e` (the factor `b`) can be written as a vector over `k` (see the module docs).
fn vector_ok(ctx: &Ctx, e: &Expr, k: VarId, ty: Ty) -> bool {
    if !e.reads_var(k) {
        return true;
    }
    match e {
        Expr::Load { buffer, indices } => {
            indices.len() == 1
                && vector_coefficient(&indices[0], k) == Some(1)
                && ctx.buffer_ty(*buffer).is_ok_and(|t| t == ty)
                && ctx.buffer(*buffer).is_ok_and(|b| !b.dtype.is_half())
        }
        Expr::Unary {
            op: UnaryOp::Neg,
            arg,
        } => vector_ok(ctx, arg, k, ty),
        Expr::Binary { op, lhs, rhs } => {
            matches!(
                op,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
            ) && vector_ok(ctx, lhs, k, ty)
                && vector_ok(ctx, rhs, k, ty)
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => !cond.reads_var(k) && vector_ok(ctx, then, k, ty) && vector_ok(ctx, otherwise, k, ty),
        _ => false,
    }
}

/// `e` as C text: a vector of `isa` over the lanes starting at `k`'s C variable, or a
/// scalar when `e` does not read `k` (`.1` says which).
fn vector_text(
    ctx: &mut Ctx,
    e: &Expr,
    k: VarId,
    ty: Ty,
    isa: &Isa,
) -> Result<(String, bool), CodegenError> {
    let (vty, sfx) = vector_names(ty, isa);
    if !e.reads_var(k) {
        return Ok((format!("({})", emit_as(ctx, e, ty)?.text), false));
    }
    let as_vector = |(text, vector): (String, bool)| {
        if vector {
            text
        } else {
            format!("(({vty}){{0}} + {text})")
        }
    };
    Ok(match e {
        Expr::Load { buffer, indices } => {
            let offset = emit_offset(ctx, *buffer, indices)?;
            (
                format!(
                    "sparsile_{}load_{sfx}(&{}[{}])",
                    isa.prefix,
                    ctx.buffer_name(*buffer)?,
                    offset.text
                ),
                true,
            )
        }
        Expr::Unary { arg, .. } => {
            let (a, v) = vector_text(ctx, arg, k, ty, isa)?;
            (format!("(-{a})"), v)
        }
        Expr::Binary { op, lhs, rhs } => {
            let (a, va) = vector_text(ctx, lhs, k, ty, isa)?;
            let (b, vb) = vector_text(ctx, rhs, k, ty, isa)?;
            let sym = match op {
                BinaryOp::Add => "+",
                BinaryOp::Sub => "-",
                BinaryOp::Mul => "*",
                _ => "/",
            };
            (format!("({a} {sym} {b})"), va || vb)
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            let c = emit_truth(ctx, cond)?.text;
            let t = as_vector(vector_text(ctx, then, k, ty, isa)?);
            let o = as_vector(vector_text(ctx, otherwise, k, ty, isa)?);
            (format!("(({c}) ? {t} : {o})"), true)
        }
        _ => unreachable!("checked by vector_ok"),
    })
}

/// The vector type and helper suffix of `ty` in `isa`.
fn vector_names(ty: Ty, isa: &Isa) -> (String, &'static str) {
    let sfx = if ty == Ty::F32 { "f32" } else { "f64" };
    (format!("sparsile_{}{sfx}", isa.prefix), sfx)
}

/// The loop nest `f` with its width loop starting at `from` and its kind serial: the
/// plain loop over the rest of the width.
fn plain_from(f: &For, from: Option<i64>) -> Stmt {
    let mut g = f.clone();
    g.kind = ForKind::Serial;
    if let Some(from) = from {
        if let Some(Stmt::For(outer)) = g.body.last_mut() {
            // The width loop is the innermost of the nest's chain of single loops (the
            // nest itself for a row of scalars).
            let mut l = outer;
            while let [Stmt::For(_)] = l.body.as_slice() {
                let Some(Stmt::For(inner)) = l.body.first_mut() else {
                    unreachable!("matched one loop")
                };
                l = inner;
            }
            l.lo = Expr::Int(from);
        }
    }
    Stmt::For(g)
}

/// Writes the register-tiled loop `f` (see the module docs) and returns `true`, or
/// returns `false` having written nothing when the tile does not apply.
pub(crate) fn emit_register_tiled_loop(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    block: Option<&str>,
) -> Result<bool, CodegenError> {
    let Ok(shape) = register_tiled_shape(ctx.func, f) else {
        return Ok(false);
    };
    let ty = ctx.buffer_ty(shape.c)?;
    if !ty.is_float() || ctx.buffer(shape.c)?.dtype.is_half() {
        return Ok(false);
    }
    let k = shape.width.0;
    // The factors as the tile computes them where its guards hold (`unswitched`).
    let ranges: Vec<Expr> = width_loop(f)
        .map(|l| range_guards(l).into_iter().map(|(c, _)| c).collect())
        .unwrap_or_default();
    if shape.indices.len() != 1
        || vector_coefficient(&shape.indices[0], k) != Some(1)
        || !vector_ok(ctx, &strip(&shape.b, &ranges), k, ty)
        || !vector_ok(ctx, &strip(&shape.a, &ranges), k, ty)
    {
        return Ok(false);
    }
    ctx.span = f.span;
    ctx.helpers.insert(Helper::VectorTypes);
    ctx.helpers.insert(Helper::TileVectors);
    let v = ctx.var_name(f.var)?;
    let lo = emit_as(ctx, &f.lo, Ty::I64)?.text;
    let hi = emit_as(ctx, &f.hi, Ty::I64)?.text;
    let (lo_name, hi_name) = (
        ctx.names.fresh(&format!("{v}_lo")),
        ctx.names.fresh(&format!("{v}_hi")),
    );
    w.line(&format!("{{{}", loop_comment(block, f.kind)));
    w.indent += 1;
    w.line(&format!(
        "const int64_t {lo_name} = {lo}, {hi_name} = {hi};"
    ));
    w.line(&format!("if ({lo_name} < {hi_name}) {{"));
    w.indent += 1;
    let guarded = match &shape.guard {
        Some(g) => {
            let ok = ctx.names.fresh("tile_rows_ok");
            w.line(&format!("int {ok} = 1;"));
            for row in rows_of(&shape) {
                w.line("{");
                w.indent += 1;
                declare_row(ctx, w, &shape, row)?;
                let cond = emit_truth(ctx, g)?.text;
                w.line(&format!("{ok} = {ok} && ({cond});"));
                w.indent -= 1;
                w.line("}");
            }
            w.line(&format!("if ({ok}) {{"));
            w.indent += 1;
            true
        }
        None => false,
    };
    w.line(WIDE);
    emit_tiles(
        ctx,
        w,
        f,
        &shape,
        ty,
        &WIDE_VERSIONS,
        block,
        (&lo_name, &hi_name),
    )?;
    w.line("#else");
    emit_tiles(
        ctx,
        w,
        f,
        &shape,
        ty,
        &NARROW_VERSIONS,
        block,
        (&lo_name, &hi_name),
    )?;
    w.line("#endif");
    if guarded {
        w.indent -= 1;
        w.line("} else {");
        w.indent += 1;
        emit_stmts(ctx, w, &[plain_from(f, None)], block)?;
        w.indent -= 1;
        w.line("}");
    }
    w.indent -= 1;
    w.line("}");
    w.indent -= 1;
    w.line("}");
    Ok(true)
}

/// The innermost loop of the tile nest under `f` (the width loop).
fn width_loop(f: &For) -> Option<&For> {
    let Some(Stmt::For(outer)) = f.body.last() else {
        return None;
    };
    let mut l = outer;
    while let [Stmt::For(inner)] = l.body.as_slice() {
        l = inner;
    }
    Some(l)
}

/// How a column of the tile runs: its factors `a` and `b`, the C condition they hold
/// under, and whether the column must run lane by lane where it fails.
struct Column {
    a: Expr,
    b: Expr,
    cond: Option<String>,
    lanes_otherwise: bool,
}

/// How a column of the tile runs. Where the width loop's update adds only zero unless
/// its invariant guards hold (an ELL or `hyb` padding slot, see `invariant_guards`):
/// the factors with the `select`s on those guards stripped, under the guards'
/// conjunction, and nothing otherwise. Where a `select` on a condition that reads the
/// width holds over the whole chunk when it holds at its ends (a block on the matrix's
/// right edge, `jo * 8 + ji < n`, see `range_guards`): the factors stripped of those
/// and of the invariant guards, under all the checks, and otherwise the factors as they
/// are, lane by lane. Else the factors as they are and no condition. Guards that read
/// the tile's rows are not used (the rows are not declared where the condition stands).
fn unswitched(
    ctx: &mut Ctx,
    f: &For,
    shape: &RegisterTiledShape,
    (from, to): (&str, &str),
) -> Result<Column, CodegenError> {
    let plain = Column {
        a: shape.a.clone(),
        b: shape.b.clone(),
        cond: None,
        lanes_otherwise: false,
    };
    let Some(width) = width_loop(f) else {
        return Ok(plain);
    };
    let mut guards = invariant_guards(width);
    let mut checks: Vec<String> = Vec::new();
    let ranges = range_guards(width);
    let row_free = |g: &Expr| shape.tile.as_ref().is_none_or(|t| !g.reads_var(t.rows.0));
    if !ranges.is_empty() {
        if !guards
            .iter()
            .chain(ranges.iter().map(|(c, _)| c))
            .all(row_free)
        {
            return Ok(plain);
        }
        let k = shape.width.0;
        for (cond, _) in &ranges {
            // The condition at the chunk's first and last width.
            let mut at = |value: &str| -> Result<String, CodegenError> {
                let text = emit_truth(ctx, cond)?.text;
                let kname = ctx.var_name(k)?.to_string();
                Ok(format!(
                    "({{ const int64_t {kname} = {value}; ({text}); }})"
                ))
            };
            checks.push(format!("({} && {})", at(from)?, at(to)?));
            guards.push(cond.clone());
        }
        for g in &guards[..guards.len() - ranges.len()] {
            checks.push(format!("({})", emit_truth(ctx, g)?.text));
        }
        return Ok(Column {
            a: strip(&shape.a, &guards),
            b: strip(&shape.b, &guards),
            cond: Some(checks.join(" && ")),
            lanes_otherwise: true,
        });
    }
    if guards.is_empty()
        || !guards.iter().all(row_free)
        || where_guards_fail(&width.body, &guards).is_some()
    {
        return Ok(plain);
    }
    let conds: Vec<String> = guards
        .iter()
        .map(|g| emit_truth(ctx, g).map(|t| format!("({})", t.text)))
        .collect::<Result<_, _>>()?;
    Ok(Column {
        a: strip(&shape.a, &guards),
        b: strip(&shape.b, &guards),
        cond: Some(conds.join(" && ")),
        lanes_otherwise: false,
    })
}

/// The rows of the tile (one, numbered 0, for a row of scalars).
fn rows_of(shape: &RegisterTiledShape) -> Range<i64> {
    shape.tile.as_ref().map_or(0..1, |t| t.rows.1.clone())
}

/// Declares the row variable as `row` (nothing for a row of scalars, which has none).
fn declare_row(
    ctx: &mut Ctx,
    w: &mut Writer,
    shape: &RegisterTiledShape,
    row: i64,
) -> Result<(), CodegenError> {
    if let Some(t) = &shape.tile {
        let r = ctx.var_name(t.rows.0)?;
        w.line(&format!("const int64_t {r} = {row};"));
    }
    Ok(())
}

/// Writes, in a C block that declares the row variable `r` as `row` and the width
/// variable `k` as the C expression `at`, the line `access` makes of the offset of the
/// accumulated element there (a load or store of the tile).
fn tile_access(
    ctx: &mut Ctx,
    w: &mut Writer,
    shape: &RegisterTiledShape,
    k: &str,
    (row, at): (i64, String),
    access: impl FnOnce(&str) -> String,
) -> Result<(), CodegenError> {
    w.line("{");
    w.indent += 1;
    declare_row(ctx, w, shape, row)?;
    w.line(&format!("const int64_t {k} = {at};"));
    let offset = emit_offset(ctx, shape.c, &shape.indices)?.text;
    w.line(&access(&offset));
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// Writes, in a C block that declares the width variable `k` as the C expression `at`,
/// the line `line` makes.
fn at_width(
    ctx: &mut Ctx,
    w: &mut Writer,
    k: &str,
    at: &str,
    line: impl FnOnce(&mut Ctx) -> Result<String, CodegenError>,
) -> Result<(), CodegenError> {
    w.line("{");
    w.indent += 1;
    w.line(&format!("const int64_t {k} = {at};"));
    let text = line(ctx)?;
    w.line(&text);
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// The tiles of one target: the chunks of each of its versions in turn, then the plain
/// loop over the width they leave.
#[allow(clippy::too_many_arguments)]
fn emit_tiles(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    shape: &RegisterTiledShape,
    ty: Ty,
    versions: &[&Isa],
    block: Option<&str>,
    bounds: (&str, &str),
) -> Result<(), CodegenError> {
    let mut from = shape.width.1.start;
    for isa in versions {
        // Chunks of fewer vectors cover what wider chunks leave (`K = 72`: 64 + 8).
        loop {
            let end = emit_chunks(ctx, w, f, shape, ty, isa, block, bounds, from)?;
            if end == from {
                break;
            }
            from = end;
        }
    }
    if from < shape.width.1.end {
        emit_stmts(ctx, w, &[plain_from(f, Some(from))], block)?;
    }
    Ok(())
}

/// The chunks of one version over the width from `from`: every group of rows, every
/// chunk of whole vectors; returns where the chunks end (`from` when the width left is
/// narrower than one vector).
#[allow(clippy::too_many_arguments)]
fn emit_chunks(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    shape: &RegisterTiledShape,
    ty: Ty,
    isa: &Isa,
    block: Option<&str>,
    (lo, hi): (&str, &str),
    from: i64,
) -> Result<i64, CodegenError> {
    let lanes = isa.bytes / if ty == Ty::F32 { 4 } else { 8 };
    let (vty, sfx) = vector_names(ty, isa);
    let rows = rows_of(shape);
    // When both factors read the width (a block row's element products) a row needs no
    // broadcast register: as many rows as the budget holds at one vector each.
    let most_rows = if shape.a.reads_var(shape.width.0) {
        isa.budget - 1
    } else {
        isa.group
    };
    let group = most_rows.min(rows.end - rows.start);
    let width = from..shape.width.1.end;
    // The most vectors per row that the budget allows and the width fills. With several
    // rows each loaded vector of `b` lives in a register of its own across the rows;
    // with one row the compiler folds each load into its multiply-add.
    let live = |u: i64| group * u + if group > 1 { u } else { 0 };
    let mut unroll = MAX_UNROLL;
    while unroll > 1 && (live(unroll) > isa.budget || lanes * unroll > width.end - width.start) {
        unroll /= 2;
    }
    let chunk = lanes * unroll;
    let chunks_end = width.start + (width.end - width.start) / chunk * chunk;
    let k = ctx.var_name(shape.width.0)?;
    let v = ctx.var_name(f.var)?;
    let c_name = ctx.buffer_name(shape.c)?.to_string();
    let kc = ctx.names.fresh(&format!("{k}_chunk"));
    if chunks_end > width.start {
        let mut first = rows.start;
        while first < rows.end {
            let last = (first + group).min(rows.end);
            let acc = |row: i64, u: i64| format!("tile_{}_{u}", row - first);
            w.line(&format!(
                "for (int64_t {kc} = {}; {kc} < {chunks_end}; {kc} += {chunk}) {{",
                width.start
            ));
            w.indent += 1;
            // Load the tile.
            for row in first..last {
                for u in 0..unroll {
                    let t = acc(row, u);
                    w.line(&format!("{vty} {t};"));
                    let at = (row, format!("{kc} + {}", u * lanes));
                    tile_access(ctx, w, shape, &k, at, |offset| {
                        format!(
                            "{t} = sparsile_{}load_{sfx}(&{c_name}[{offset}]);",
                            isa.prefix
                        )
                    })?;
                }
            }
            // The loop over the blocks: `pre`, then the columns of the tile.
            w.line(&format!(
                "for (int64_t {v} = {lo}; {v} < {hi}; ++{v}) {{{}",
                loop_comment(block, f.kind)
            ));
            w.indent += 1;
            emit_stmts(ctx, w, &f.body[..shape.pre], block)?;
            let cols = shape.tile.as_ref().and_then(|t| t.cols.as_ref());
            if let Some((c, range)) = cols {
                let c = ctx.var_name(*c)?;
                w.line(&format!(
                    "for (int64_t {c} = {}; {c} < {}; ++{c}) {{",
                    range.start, range.end
                ));
                w.indent += 1;
            }
            // A padding slot (ELL, `hyb`) adds only zeros: the column runs under its
            // invariant guards, its `select`s on them stripped (see `invariant_guards`);
            // a block on the right edge runs lane by lane.
            let chunk_end = format!("{kc} + {}", chunk - 1);
            let column = unswitched(ctx, f, shape, (&kc, &chunk_end))?;
            let (a_expr, b_expr) = (column.a.clone(), column.b.clone());
            let guarded = column.cond.clone();
            if let Some(cond) = &guarded {
                w.line(&format!("if ({cond}) {{"));
                w.indent += 1;
            }
            let bv: Vec<String> = (0..unroll)
                .map(|u| ctx.names.fresh(&format!("tile_b{u}")))
                .collect();
            for (u, name) in bv.iter().enumerate() {
                w.line(&format!("{vty} {name};"));
                let at = format!("{kc} + {}", u as i64 * lanes);
                at_width(ctx, w, &k, &at, |ctx| {
                    let (text, _) = vector_text(ctx, &b_expr, shape.width.0, ty, isa)?;
                    Ok(format!("{name} = {text};"))
                })?;
            }
            for row in first..last {
                w.line("{");
                w.indent += 1;
                declare_row(ctx, w, shape, row)?;
                if a_expr.reads_var(shape.width.0) {
                    // Both factors read the width (a block row's element products): `a`
                    // is a vector of its own per row.
                    for (u, name) in bv.iter().enumerate() {
                        let t = acc(row, u as i64);
                        let at = format!("{kc} + {}", u as i64 * lanes);
                        at_width(ctx, w, &k, &at, |ctx| {
                            let (a, _) = vector_text(ctx, &a_expr, shape.width.0, ty, isa)?;
                            Ok(format!("{t} = {t} + {a} * {name};"))
                        })?;
                    }
                } else {
                    let a = emit_as(ctx, &a_expr, ty)?.text;
                    w.line(&format!("const {} tile_a = {a};", ty.c_name()));
                    for (u, name) in bv.iter().enumerate() {
                        let t = acc(row, u as i64);
                        w.line(&format!("{t} = {t} + tile_a * {name};"));
                    }
                }
                w.indent -= 1;
                w.line("}");
            }
            if guarded.is_some() {
                w.indent -= 1;
                if column.lanes_otherwise {
                    // Some widths of the chunk fail a range guard: every lane as the
                    // plain loop computes it, the `select`s kept.
                    w.line("} else {");
                    w.indent += 1;
                    for row in first..last {
                        w.line("{");
                        w.indent += 1;
                        declare_row(ctx, w, shape, row)?;
                        for u in 0..unroll {
                            let t = acc(row, u);
                            w.line(&format!(
                                "for (int64_t tile_lane = 0; tile_lane < {lanes}; ++tile_lane) {{"
                            ));
                            w.indent += 1;
                            w.line(&format!(
                                "const int64_t {k} = {kc} + {} + tile_lane;",
                                u * lanes
                            ));
                            let a = emit_as(ctx, &shape.a, ty)?.text;
                            let b = emit_as(ctx, &shape.b, ty)?.text;
                            w.line(&format!("{t}[tile_lane] += ({a}) * ({b});"));
                            w.indent -= 1;
                            w.line("}");
                        }
                        w.indent -= 1;
                        w.line("}");
                    }
                    w.indent -= 1;
                }
                w.line("}");
            }
            if cols.is_some() {
                w.indent -= 1;
                w.line("}");
            }
            w.indent -= 1;
            w.line("}");
            // Store the tile.
            for row in first..last {
                for u in 0..unroll {
                    let at = (row, format!("{kc} + {}", u * lanes));
                    let t = acc(row, u);
                    tile_access(ctx, w, shape, &k, at, |offset| {
                        format!(
                            "sparsile_{}store_{sfx}(&{c_name}[{offset}], {t});",
                            isa.prefix
                        )
                    })?;
                }
            }
            w.indent -= 1;
            w.line("}");
            first = last;
        }
    }
    Ok(chunks_end)
}
