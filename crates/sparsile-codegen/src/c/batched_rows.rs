//! C for a serial loop over a few rows around a `batched` loop: pairs of rows run as one
//! register tile (the micro-kernel of BSR SDDMM).
//!
//! BSR SDDMM, after the `rowwise` recipe, computes every block as
//! ```text
//! for ii in 0..R {                                  (serial, literal bounds)
//!   for ji in 0..S batched {                        (literal bounds, S a multiple of 8)
//!     pre                                           (stores to locals only, no `let`s)
//!     for k in 0..K vectorized(reassociate) {
//!       if g { acc[c] = acc[c] + select(r, x(ii, k), 0) * select(q, y(ji, k), 0) }
//!     }
//!     post
//!   } }
//! ```
//! The `batched` loop alone (see [`super::batched`]) loads the row vector of `x` once
//! per step for the eight columns of a group, but every vector of `y` once per row, and
//! evaluates the guards `g`, `r`, `q` (the block on the matrix's edge) in every step.
//! Here, with AVX-512 (32 vector registers), two rows run together: per step two
//! vectors of `x` and, for every column, one vector of `y` held in a register for both
//! rows, 16 multiply-adds per 10 loads instead of 8 per 9; the guards are evaluated once
//! per pair of rows and the tile runs without them when they all hold. Measured on the
//! BigBird mask (`bsr:8x8`, K = 128, one thread, a C model of both kernels): 50 → 69
//! GFLOP/s.
//!
//! ```text
//! #if defined(__AVX512F__)
//! for each pair of rows p:
//!     if every guard holds for the pair's rows and all columns:
//!         for each chunk of 8 columns:
//!             s[r][l] = 0                                   (2 × 8 vectors)
//!             for k in steps of a vector:
//!                 x0 = x(p, k); x1 = x(p + 1, k)
//!                 for l: yv = y(l, k); s[0][l] += x0 · yv; s[1][l] += x1 · yv
//!             t[r] = transposed sums of s[r]
//!         for r, for every column l in order: pre; acc[c] += t[r][l]; post
//!     else: the two rows as the plain loop
//! a last odd row: the plain loop
//! #else
//! the plain loop
//! #endif
//! ```
//! The products are the factors of the addend: those that read `ii` (not `ji`) form the
//! row vector, the others the column vector; a factor that reads both, a body with
//! `let`s, or a guard that reads `k` leaves the loop to its plain form. Every
//! iteration's `post` runs in the plain loop's order; results differ from it by
//! floating-point rounding only (as the `batched` loop's).

use std::collections::HashSet;

use sparsile_ir::loops::{reduction_addend, Expr, For, ForKind, Stmt};
use sparsile_ir::{BufferId, VarId};

use super::batched::{groupable, without_prefetches};
use super::ctx::Ctx;
use super::expr::{emit_offset, emit_truth};
use super::prelude::Helper;
use super::reduction::Accumulator;
use super::stmt::{emit_stmts, loop_comment, Writer};
use super::vector::{body_lets, lanes, names, vector_text, vectorizable};
use crate::CodegenError;

/// Rows per tile.
const ROWS: i64 = 2;

/// Columns per chunk of the tile (with [`ROWS`], 16 accumulators of 32 registers).
const COLUMNS: i64 = 8;

/// The parts of a tileable loop nest.
struct Tile<'f> {
    /// The batched loop over the columns.
    columns: &'f For,
    /// Its first column and its count.
    first_column: i64,
    column_count: i64,
    /// The reduction loop inside it.
    reduction: &'f For,
    /// The body of the batched loop before and after the reduction.
    pre: &'f [Stmt],
    post: &'f [Stmt],
    /// The conditions (none reads `k`) that guard the reduction's loads and update: the
    /// tile runs without them for a pair of rows where they hold at every column.
    guards: Vec<Expr>,
    row_factor: Expr,
    column_factor: Expr,
    accumulator: Accumulator,
}

/// Writes the serial loop `f` as row tiles (see the module docs) and returns `true`, or
/// returns `false` having written nothing when its shape does not allow them.
pub(crate) fn emit_batched_rows(
    ctx: &mut Ctx,
    w: &mut Writer,
    f: &For,
    block: Option<&str>,
) -> Result<bool, CodegenError> {
    let Some(tile) = tileable(ctx, f)? else {
        return Ok(false);
    };
    let ty = tile.accumulator.ty;
    let width = lanes(ty);
    let (vty, suffix) = names(ty);
    let (Expr::Int(lo), Expr::Int(hi)) = (&f.lo, &f.hi) else {
        unreachable!("checked by tileable");
    };
    let (lo, hi) = (*lo, *hi);
    let row = ctx.var_name(f.var)?;
    let column = ctx.var_name(tile.columns.var)?;
    let k = ctx.var_name(tile.reduction.var)?;
    let (k_lo, k_hi) = match (&tile.reduction.lo, &tile.reduction.hi) {
        (Expr::Int(a), Expr::Int(b)) => (*a, *b),
        _ => unreachable!("checked by tileable"),
    };
    let scope = body_lets(ctx, tile.reduction, ty);
    let (row_text, row_vector) = vector_text(ctx, &tile.row_factor, &scope)?;
    let (column_text, column_vector) = vector_text(ctx, &tile.column_factor, &scope)?;
    if !row_vector || !column_vector {
        return Ok(false);
    }
    ctx.helpers.insert(Helper::VectorTypes);
    ctx.helpers.insert(Helper::TransposedSums);
    ctx.helpers.insert(Helper::KeepVectorMacro);
    // `pre` again before each sum is added, without its prefetches (they were for the
    // first pass, which this tile does not run).
    let pre = without_prefetches(tile.pre);
    let comment = loop_comment(block, f.kind);
    let plain_rows = |ctx: &mut Ctx, w: &mut Writer, from: &str, to: &str| {
        w.line(&format!(
            "for (int64_t {row} = {from}; {row} < {to}; ++{row}) {{{comment}"
        ));
        w.indent += 1;
        emit_stmts(ctx, w, &f.body, block)?;
        w.indent -= 1;
        w.line("}");
        Ok::<(), CodegenError>(())
    };

    w.line("#if defined(__AVX512F__)");
    w.line("{");
    w.indent += 1;
    let pair = ctx.names.fresh(&format!("{row}_pair"));
    w.line(&format!("int64_t {pair} = {lo};"));
    w.line(&format!(
        "for (; {pair} + {ROWS} <= {hi}; {pair} += {ROWS}) {{{comment}"
    ));
    w.indent += 1;
    // The guards, once for the pair's rows and all columns.
    let ok = ctx.names.fresh("tile_guards_hold");
    if tile.guards.is_empty() {
        w.line(&format!("const int {ok} = 1;"));
    } else {
        let conds: Result<Vec<String>, CodegenError> = tile
            .guards
            .iter()
            .map(|g| Ok(format!("({})", emit_truth(ctx, g)?.text)))
            .collect();
        w.line(&format!("int {ok} = 1;"));
        w.line(&format!(
            "for (int64_t {row} = {pair}; {row} < {pair} + {ROWS}; ++{row}) {{"
        ));
        w.line(&format!(
            "    for (int64_t {column} = {}; {column} < {}; ++{column}) {ok} &= {};",
            tile.first_column,
            tile.first_column + tile.column_count,
            conds?.join(" && ")
        ));
        w.line("}");
    }
    w.line(&format!("if ({ok}) {{"));
    w.indent += 1;
    // Every chunk of columns: the tile's sums, then their transposed sums.
    let mut totals: Vec<Vec<String>> = vec![Vec::new(); ROWS as usize];
    for chunk in 0..tile.column_count / COLUMNS {
        let first = tile.first_column + chunk * COLUMNS;
        let sums: Vec<Vec<String>> = (0..ROWS)
            .map(|r| {
                (0..COLUMNS)
                    .map(|l| {
                        ctx.names
                            .fresh(&format!("tile_s{r}_{}", chunk * COLUMNS + l))
                    })
                    .collect()
            })
            .collect();
        for row_sums in &sums {
            let decls: Vec<String> = row_sums.iter().map(|s| format!("{s} = {{0}}")).collect();
            w.line(&format!("{vty} {};", decls.join(", ")));
        }
        w.line(&format!(
            "for (int64_t {k} = {k_lo}; {k} < {k_hi}; {k} += {width}) {{"
        ));
        w.indent += 1;
        let xs: Vec<String> = (0..ROWS)
            .map(|r| ctx.names.fresh(&format!("tile_x{r}")))
            .collect();
        w.line(&format!("{vty} {};", xs.join(", ")));
        for (r, x) in xs.iter().enumerate() {
            w.line(&format!(
                "{{ const int64_t {row} = {pair} + {r}; {x} = {}; }}",
                row_text
            ));
        }
        let y = ctx.names.fresh("tile_y");
        for l in 0..COLUMNS {
            w.line("{");
            w.indent += 1;
            w.line(&format!("const int64_t {column} = {};", first + l));
            w.line(&format!("{vty} {y} = {column_text};"));
            w.line(&format!("SPARSILE_KEEP_VECTOR({y});"));
            for (r, x) in xs.iter().enumerate() {
                let s = &sums[r][l as usize];
                w.line(&format!("{s} = {s} + {x} * {y};"));
            }
            w.indent -= 1;
            w.line("}");
        }
        w.indent -= 1;
        w.line("}");
        for (r, row_sums) in sums.iter().enumerate() {
            for group in row_sums.chunks(width as usize) {
                let t = ctx.names.fresh(&format!("tile_t{r}"));
                w.line(&format!(
                    "const {vty} {t} = sparsile_tsum_{suffix}({});",
                    group.join(", ")
                ));
                totals[r].push(t);
            }
        }
    }
    // Then, in the plain loop's order, every iteration's `pre`, its sum and its `post`:
    // a loop over the columns of each row, kept a loop (GCC would unroll it completely
    // and leave the straight-line code scalar) that the C compiler vectorizes where the
    // epilogue allows it: SDDMM's `O[p] = A[p] * sum`, elementwise along a block row.
    let acc = &tile.accumulator.name;
    let scalar = ty.c_name();
    for (r, row_totals) in totals.iter().enumerate() {
        let sums = ctx.names.fresh(&format!("tile_sums{r}"));
        w.line("{");
        w.indent += 1;
        w.line(&format!("{scalar} {sums}[{}];", tile.column_count));
        for (g, t) in row_totals.iter().enumerate() {
            w.line(&format!(
                "__builtin_memcpy(&{sums}[{}], &{t}, sizeof {t});",
                g as i64 * width
            ));
        }
        let l = ctx.names.fresh("tile_l");
        ctx.helpers.insert(Helper::NoFullUnrollMacro);
        w.line("SPARSILE_NO_FULL_UNROLL");
        w.line(&format!(
            "for (int64_t {l} = 0; {l} < {}; ++{l}) {{",
            tile.column_count
        ));
        w.indent += 1;
        w.line(&format!("const int64_t {row} = {pair} + {r};"));
        w.line(&format!(
            "const int64_t {column} = {} + {l};",
            tile.first_column
        ));
        emit_stmts(ctx, w, &pre, block)?;
        w.line(&format!("{acc} = {acc} + {sums}[{l}];"));
        emit_stmts(ctx, w, tile.post, block)?;
        w.indent -= 1;
        w.line("}");
        w.indent -= 1;
        w.line("}");
    }
    w.indent -= 1;
    w.line("} else {");
    w.indent += 1;
    plain_rows(ctx, w, &pair, &format!("{pair} + {ROWS}"))?;
    w.indent -= 1;
    w.line("}");
    w.indent -= 1;
    w.line("}");
    plain_rows(ctx, w, &pair, &hi.to_string())?;
    w.indent -= 1;
    w.line("}");
    w.line("#else");
    plain_rows(ctx, w, &lo.to_string(), &hi.to_string())?;
    w.line("#endif");
    Ok(true)
}

/// The parts of `f` when it has the shape of the module docs, else `None`.
fn tileable<'f>(ctx: &mut Ctx, f: &'f For) -> Result<Option<Tile<'f>>, CodegenError> {
    if f.kind != ForKind::Serial {
        return Ok(None);
    }
    let (Expr::Int(lo), Expr::Int(hi)) = (&f.lo, &f.hi) else {
        return Ok(None);
    };
    if hi - lo < ROWS {
        return Ok(None);
    }
    let [Stmt::For(columns)] = f.body.as_slice() else {
        return Ok(None);
    };
    if columns.kind != ForKind::Batched {
        return Ok(None);
    }
    let (Expr::Int(first_column), Expr::Int(end)) = (&columns.lo, &columns.hi) else {
        return Ok(None);
    };
    let column_count = end - first_column;
    if column_count <= 0 || column_count % COLUMNS != 0 {
        return Ok(None);
    }
    let Some((shape, reduction, ty)) = groupable(ctx, columns)? else {
        return Ok(None);
    };
    let acc = &shape.accumulator;
    let width = lanes(ty);
    if COLUMNS % width != 0 {
        return Ok(None);
    }
    let (Expr::Int(k_lo), Expr::Int(k_hi)) = (&reduction.lo, &reduction.hi) else {
        return Ok(None);
    };
    if k_hi <= k_lo || (k_hi - k_lo) % width != 0 {
        return Ok(None);
    }
    let buffer = ctx.buffer_name(acc.buffer)?.to_string();
    let offset = emit_offset(ctx, acc.buffer, std::slice::from_ref(&acc.index))?.text;
    let accumulator = Accumulator {
        buffer: acc.buffer,
        index: acc.index.clone(),
        name: format!("{buffer}[{offset}]"),
        ty,
    };
    if !vectorizable(ctx, reduction, std::slice::from_ref(&accumulator)) {
        return Ok(None);
    }
    let (pre, post) = (
        &columns.body[..shape.reduction],
        &columns.body[shape.reduction + 1..],
    );
    if pre
        .iter()
        .any(|s| !matches!(s, Stmt::Store { .. } | Stmt::Prefetch { .. }))
    {
        return Ok(None);
    }
    // The one accumulation of the reduction, its guards taken out.
    let mut guards = Vec::new();
    let mut store = None;
    for s in &reduction.body {
        match s {
            Stmt::Prefetch { .. } => {}
            Stmt::Store { .. } if store.is_none() => store = Some(s),
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } if else_body.is_empty() && store.is_none() => match then_body.as_slice() {
                [t @ Stmt::Store { .. }] => {
                    guards.push(cond.clone());
                    store = Some(t);
                }
                _ => return Ok(None),
            },
            _ => return Ok(None),
        }
    }
    let Some(addend) = store.and_then(reduction_addend) else {
        return Ok(None);
    };
    let addend = without_selects(addend, reduction.var, &mut guards);
    let k = reduction.var;
    if guards.iter().any(|g| reads(g, k)) {
        return Ok(None);
    }
    // The factors: those that read the row form the row vector, the rest the column's.
    let (mut row, mut col) = (Vec::new(), Vec::new());
    for x in addend.factors() {
        match (reads(x, f.var), reads(x, columns.var)) {
            (true, true) => return Ok(None),
            (true, false) => row.push(x),
            _ => col.push(x),
        }
    }
    let (Some(row_factor), Some(column_factor)) = (Expr::product(row), Expr::product(col)) else {
        return Ok(None);
    };
    if !reads(&row_factor, k) || !reads(&column_factor, k) {
        return Ok(None);
    }
    // The first pass evaluates the guards and the reductions of the whole pair before
    // any `pre` or `post`: neither may store what those read (the accumulator aside,
    // which `pre` resets before each iteration's sum is added).
    let mut read: HashSet<BufferId> = Stmt::loaded_buffers(&reduction.body);
    for g in &guards {
        g.loaded_buffers(&mut read);
    }
    let mut stored = Stmt::stored_buffers(pre);
    stored.extend(Stmt::stored_buffers(post));
    if stored.iter().any(|b| *b != acc.buffer && read.contains(b)) {
        return Ok(None);
    }
    Ok(Some(Tile {
        columns,
        first_column: *first_column,
        column_count,
        reduction,
        pre,
        post,
        guards,
        row_factor,
        column_factor,
        accumulator,
    }))
}

/// `e` with every `select` whose condition does not read `k` replaced by its first
/// value, the condition added to `guards`.
fn without_selects(e: &Expr, k: VarId, guards: &mut Vec<Expr>) -> Expr {
    match e {
        Expr::Select {
            cond,
            then,
            otherwise: _,
        } if !reads(cond, k) => {
            guards.push((**cond).clone());
            without_selects(then, k, guards)
        }
        Expr::Binary { op, lhs, rhs } => Expr::Binary {
            op: *op,
            lhs: Box::new(without_selects(lhs, k, guards)),
            rhs: Box::new(without_selects(rhs, k, guards)),
        },
        other => other.clone(),
    }
}

/// Whether `e` reads the variable `v`.
fn reads(e: &Expr, v: VarId) -> bool {
    let mut found = false;
    e.visit(&mut |x| found |= matches!(x, Expr::Var(y) if *y == v));
    found
}
