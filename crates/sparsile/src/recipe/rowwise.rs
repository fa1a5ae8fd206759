//! `rowwise`: rows in parallel, the dense width specialised and vectorised.
//!
//! The row-balanced, row-major, sequential-reduction design (DA-SpMM's RB+RM+SR) for
//! CPUs, for any operator whose main loop nest ends in a dense loop (SpMM, SDDMM) or a
//! sparse one (SpMV): the extent of the innermost loop of the main iteration becomes a
//! constant when the inputs fix it (`specialize`), the outermost spatial loop of each
//! block runs in parallel, and every innermost loop whose iterations carry no
//! dependence through memory is vectorised (a reduction into memory is left serial).
//! Rows of a dense operand gathered through the sparse operand's indices (`B[j, :]` in
//! SpMM, `Y[j, :]` in SDDMM) are prefetched `prefetch` non-zeros ahead, which hides
//! the memory latency of scattered gathers. Each output row is accumulated in a local
//! array (`cache_write`, unless `cache=off`) that starts at the init constant when the
//! rows store every element (`absorb_init`), so the output is written once. An innermost
//! loop that sums into a local after `cache_write` (SpMV) is vectorised with its sums
//! reassociated (`vectorize_reduction`, parameters `reassociate`, `scalar_sums` and
//! `masked`: on AVX-512 targets a gathered dot product runs as masked vector blocks, so
//! rows of varying short lengths cost no mispredicted loop exits).
//!
//! SDDMM's dot products of a row run in groups of a vector's lanes whose partial sums are
//! added together (`batch_reduction`; `batch=off` sums each on its own).
//!
//! In SpMM over a block format (`bsr`, `dbsr`), the loop over a block row's blocks holds
//! a tile of the output rows in vector registers across the whole row (`register_tile`,
//! unless `tile=off`): the register-blocked micro-kernel of dense products, where each
//! vector of the dense operand is loaded once for all the tile's rows.
//!
//! In SpMV over a `bsr:1xC` matrix, the `C` columns of a block keep one partial sum each
//! across all the blocks of a row (`rfactor` over the row's blocks), vectorised: with
//! `C = 32` the index array shrinks 32-fold and the gathers of `x` become contiguous
//! loads. The output row of a one-row block is cached like a CSR row (its block-row
//! loop runs once, so `cache_write` sees one row). Over blocks of several rows
//! (`bsr:RxC`, `dbsr:RxC`) each row of the block keeps its own `C` partial sums
//! (`rfactor` with a block row of partial sums), held in vector registers across the
//! row's blocks (`register_tile`, unless `tile=off`): a vector of `x` is loaded once
//! per block for all its rows.

use sparsile_ir::loops::{BufferKind, Expr, For, ForKind, Func, Stmt};
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::{LoopPartition, LoopRef, Schedule, ScheduleError, SplitTail};

use super::default::parallel_outer;
use super::nest::{blocks, gathered_rows, main_iteration, nest, top_blocks};
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

fn info() -> RecipeInfo {
    RecipeInfo {
        name: "rowwise",
        summary: "rows in parallel; the innermost dense extent (K) fixed at compile time; innermost loops vectorised",
        ops: &["spmm", "sddmm", "spmv"],
        formats: &["any"],
        params: vec![
            width_param("k"),
            prefetch_param(),
            ParamInfo {
                name: "partition",
                default: "balanced",
                doc: "how rows are divided between threads: `static`, `dynamic` or `balanced` (by non-zeros)",
            },
            ParamInfo {
                name: "lanes",
                default: "16",
                doc: "a dense innermost reduction (SDDMM's k) is split into this many independent, vectorised partial sums (0 or 1: not split)",
            },
            ParamInfo {
                name: "dot",
                default: "on",
                doc: "`on`: a dense innermost reduction into one element per non-zero (SDDMM's k) accumulates in a local started at zero, the sparse value multiplied once after it (hoist_factor), as explicit vector dot products (vectorize_reduction); `off`: the `lanes` split",
            },
            ParamInfo {
                name: "batch",
                default: "on",
                doc: "`on`: with `dot=on`, the non-zeros of a row run in groups of a vector's lanes (8 for f32) whose dot products are summed together by one transposed tree of shuffles (batch_reduction); `off`: one horizontal sum per non-zero",
            },
            ParamInfo {
                name: "cache",
                default: "on",
                doc: "`on`: accumulate each output row in a local array (cache_write) started at the init constant where every row is stored (absorb_init); `off`",
            },
            ParamInfo {
                name: "reassociate",
                default: "on",
                doc: "`on`: an innermost loop summing into a local (SpMV's non-zeros of a row) is vectorised with one partial sum per lane (vectorize_reduction); `off`",
            },
            ParamInfo {
                name: "scalar_sums",
                default: "1",
                doc: "partial sums in the scalar part of a reassociated loop (rows shorter than 32, the last iterations of longer ones): 4 pays on short, even rows (cage11, delaunay), 1 on rows whose lengths vary widely (power-law graphs)",
            },
            ParamInfo {
                name: "tile",
                default: "on",
                doc: "`on`: a loop over the blocks of a block row whose body adds a dense tile product into the row's outputs (SpMM over `bsr`/`dbsr`), or a block's element products into the row's partial sums (SpMV over `bsr:RxC`), holds a tile of the output in vector registers across the row (register_tile): each vector of the dense operand is loaded once for all the tile's rows; `off`: every multiply-add loads and stores its output element",
            },
            ParamInfo {
                name: "masked",
                default: "on",
                doc: "`on`: a reassociated loop whose body is a gathered dot product (SpMV's row) runs as vector blocks, the last one masked, on targets with AVX-512 (no loop exit per short row to mispredict); `off`: vector blocks from 32 iterations, the rest scalar",
            },
        ],
        source: "DA-SpMM (row balance, row-major, sequential reduction) with CPU levers",
        gpu: false,
    }
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let name = "rowwise";
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(sched(name))?;
    }
    let partition = args.choice("partition", &["static", "dynamic", "balanced"])?;
    let cache = args.choice("cache", &["on", "off"])? == "on";
    let distance = args.int("prefetch", 0, 1 << 16)?;
    parallel_outer(sch, name)?;
    vectorize_innermost(sch, name)?;
    // The main block: the iteration's name, which no step below changes.
    let main = main_iteration(sch.program());
    if let Some(main) = &main {
        prefetch_gathers(sch, name, main, distance)?;
    }
    let lanes = args.int("lanes", 0, 64)?;
    let dot = args.choice("dot", &["on", "off"])? == "on";
    let batch = args.choice("batch", &["on", "off"])? == "on";
    let reduced = block_row_reduction(sch, name)? || (dot && dot_reduction(sch, name, batch)?);
    if !reduced && lanes > 1 {
        split_reduction(sch, name, lanes)?;
    }
    if let Some(main) = &main {
        let func = sch.func_or_lower().map_err(sched(name))?.clone();
        if let Some((rows, row_loop)) = nest(&func, main).first().map(|(r, f)| (r.clone(), *f)) {
            if cache {
                for buffer in stored_values(&func, row_loop) {
                    cache_row(sch, &rows, &rows.block, &buffer, name)?;
                }
            }
            let part = match partition {
                "dynamic" => Some(LoopPartition::Dynamic),
                "balanced" => {
                    row_indptr(&func, row_loop).map(|indptr| LoopPartition::Balanced { indptr })
                }
                _ => None,
            };
            if let Some(part) = part {
                if row_loop.kind.is_parallel() {
                    sch.parallel_with(&rows, &part).map_err(sched(name))?;
                }
            }
        }
    }
    let tile = args.choice("tile", &["on", "off"])? == "on";
    if let (true, Some(main)) = (tile, &main) {
        register_tile_blocks(sch, name, main)?;
    }
    if args.choice("reassociate", &["on", "off"])? == "on" {
        let sums = args.int("scalar_sums", 1, i64::from(ForKind::MAX_SCALAR_SUMS))?;
        let masked = args.choice("masked", &["on", "off"])? == "on";
        if let Some(main) = &main {
            vectorize_local_sums(sch, name, main, sums as u32, masked)?;
        }
    }
    Ok(())
}

/// Marks the loop over the blocks of a block row of block `main` `register_tiled`
/// (`register_tile`) when its body is a dense tile product into outputs fixed across the
/// row (SpMM over a block format): the innermost serial loop with variable bounds for
/// which `register_tile` holds. Nothing happens (and nothing is recorded) when it does
/// not apply.
pub(super) fn register_tile_blocks(
    sch: &mut Schedule,
    recipe: &str,
    main: &str,
) -> Result<(), RecipeError> {
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    let Some((_, body)) = top_blocks(&func).find(|(name, _)| *name == main) else {
        return Ok(());
    };
    // Every serial loop with variable bounds in the block (a cached output row puts
    // its copy loops before the loop over the row's blocks), innermost last.
    let mut candidates = Vec::new();
    Stmt::visit_all(body, &mut |s| {
        if let Stmt::For(g) = s {
            if g.kind == ForKind::Serial && !matches!((&g.lo, &g.hi), (Expr::Int(_), Expr::Int(_)))
            {
                candidates.push(LoopRef::new(main, func.vars[g.var].name.clone()));
            }
        }
    });
    for blocks_loop in candidates.iter().rev() {
        match sch.register_tile(blocks_loop) {
            Ok(()) => return Ok(()),
            Err(ScheduleError::NotRegisterTileable { .. }) => {}
            Err(e) => return Err(sched(recipe)(e)),
        }
    }
    Ok(())
}

/// Vectorises the innermost loop of block `main` with its sums reassociated
/// (`vectorize_reduction`) when it is a serial loop summing into a local (SpMV's loop
/// over the non-zeros of a row, after `cache_write`). Loops where that does not apply
/// (already vectorised, no local sum, a dependence through memory) stay as they are.
pub(super) fn vectorize_local_sums(
    sch: &mut Schedule,
    recipe: &str,
    main: &str,
    scalar_sums: u32,
    masked: bool,
) -> Result<(), RecipeError> {
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    let Some((inner, _)) = nest(&func, main).pop() else {
        return Ok(());
    };
    match sch.vectorize_reduction(&inner, scalar_sums, masked) {
        Ok(())
        | Err(
            ScheduleError::NotSerial { .. }
            | ScheduleError::ReductionNotInnermost { .. }
            | ScheduleError::LoopCarriedAccess(_)
            | ScheduleError::NotReassociable { .. }
            | ScheduleError::NoLocalReduction { .. },
        ) => Ok(()),
        Err(e) => Err(sched(recipe)(e)),
    }
}

/// Accumulates what `target` stores to `buffer` in a local (`cache_write`), started at the
/// init constant where every element is written (`absorb_init`); an output that is not a
/// dense row (SDDMM's sparse output) stays as it is.
pub(super) fn cache_row(
    sch: &mut Schedule,
    target: &LoopRef,
    block: &str,
    buffer: &str,
    recipe: &str,
) -> Result<(), RecipeError> {
    match sch.cache_write(target, buffer) {
        Ok(_) => absorb_init(sch, block, buffer, recipe),
        Err(
            ScheduleError::CacheAccess(_)
            | ScheduleError::CacheBuffer { .. }
            | ScheduleError::CacheTooLarge { .. },
        ) => Ok(()),
        Err(e) => Err(sched(recipe)(e)),
    }
}

/// Starts the local that `cache_write` just made for `buffer` in `block` at the
/// constant of `buffer`'s init block, dropping that block (one pass over the output
/// instead of three), when `absorb_init`'s preconditions hold; otherwise nothing is
/// done (nor recorded).
fn absorb_init(
    sch: &mut Schedule,
    block: &str,
    buffer: &str,
    recipe: &str,
) -> Result<(), RecipeError> {
    match sch.absorb_init(block, buffer) {
        Ok(()) => Ok(()),
        // The rows do not provably store every element, or something else reads the
        // output in between: the init block stays.
        Err(
            ScheduleError::AbsorbNoInit { .. }
            | ScheduleError::AbsorbInitNotConstant { .. }
            | ScheduleError::AbsorbInitNotFull { .. }
            | ScheduleError::AbsorbInterleaved { .. }
            | ScheduleError::AbsorbTargetShape { .. }
            | ScheduleError::AbsorbRegionNotFull { .. }
            | ScheduleError::AbsorbOtherAccess { .. },
        ) => Ok(()),
        Err(e) => Err(sched(recipe)(e)),
    }
}

/// The widest block reduction kept in vector registers across a row (`bsr:1x64`).
const MAX_BLOCK_LANES: i64 = 64;

/// The narrowest vector of the C backend's register tiles, in bytes.
const MIN_TILE_BYTES: i64 = 16;

/// The element size of the buffer the first store in `f` writes (0 when none).
fn updated_element_bytes(func: &Func, f: &For) -> i64 {
    let mut bytes = 0;
    Stmt::visit_all(&f.body, &mut |s| {
        if let (0, Stmt::Store { buffer, .. }) = (bytes, s) {
            bytes = func.buffers[*buffer].dtype.size_bytes() as i64;
        }
    });
    bytes
}

/// When the innermost loop of the main iteration is a reduction over a constant dense
/// range (the columns of a `bsr:1xC` block in SpMV: `y[io] += A[.., ji] * x[jo * C + ji]`)
/// into an element that is the same for every block of a row, keeps one partial sum per
/// column across the row's blocks (`rfactor` at the nearest enclosing loop with
/// variable bounds, the loop over the row's blocks) and vectorises the columns: the
/// partial sums are added up once per row instead of once per block. Returns whether
/// it applied; nothing is recorded when it does not.
fn block_row_reduction(sch: &mut Schedule, recipe: &str) -> Result<bool, RecipeError> {
    let Some(main) = main_iteration(sch.program()) else {
        return Ok(false);
    };
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    let loops = nest(&func, &main);
    let Some((inner, f)) = loops.last() else {
        return Ok(false);
    };
    let (Expr::Int(lo), Expr::Int(hi)) = (&f.lo, &f.hi) else {
        return Ok(false);
    };
    if f.kind != ForKind::Serial || !(2..=MAX_BLOCK_LANES).contains(&(hi - lo)) {
        return Ok(false);
    }
    // The loop over the row's blocks: the nearest enclosing serial loop whose bounds
    // are not constants.
    let Some(at) = loops[..loops.len() - 1].iter().rposition(|(_, g)| {
        g.kind == ForKind::Serial && !matches!((&g.lo, &g.hi), (Expr::Int(_), Expr::Int(_)))
    }) else {
        return Ok(false);
    };
    let blocks_loop = &loops[at].0;
    // Blocks of several rows keep a row of partial sums per row of the block, held in
    // registers by `register_tile` in vectors of at least 16 bytes: narrower blocks
    // (`bsr:4x2`) keep the plain row loop and its reassociated sums.
    let several_rows = loops[at + 1..loops.len() - 1]
        .iter()
        .any(|(_, g)| matches!((&g.lo, &g.hi), (Expr::Int(lo), Expr::Int(hi)) if hi - lo >= 2));
    // Half outputs (f16/bf16) too: the combine adds each row's partial sums into the
    // output in place, rounding every one of them (the verifier refuses it by name).
    let bytes = updated_element_bytes(&func, f);
    if several_rows && (bytes < 4 || (hi - lo) * bytes < MIN_TILE_BYTES) {
        return Ok(false);
    }
    let mut trial = sch.clone();
    if trial.rfactor(blocks_loop, inner).is_ok() && trial.vectorize(inner).is_ok() {
        *sch = trial;
        return Ok(true);
    }
    Ok(false)
}

/// When the innermost loop of the main iteration is a reduction over a dense range into
/// one element per iteration of the loop around it (SDDMM: `C[i, jp] +=
/// A[i, jp] * X[i, k] * Y[j, k]`), accumulates that element in a local
/// (`cache_write` at the loop around), started at the init constant with the init block
/// gone (`absorb_init`), multiplies the factors fixed across the reduction once after it
/// (`hoist_factor`), and vectorises the reduction with its sums reassociated: a dot
/// product of vectors per non-zero. With `batch`, the loop around runs in groups whose dot
/// products are summed together (`batch_reduction`) where its body allows. Returns
/// whether it applied; nothing is recorded when it does not.
fn dot_reduction(sch: &mut Schedule, recipe: &str, batch: bool) -> Result<bool, RecipeError> {
    let Some(main) = main_iteration(sch.program()) else {
        return Ok(false);
    };
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    let loops = nest(&func, &main);
    let [.., (around, _), (inner, f)] = loops.as_slice() else {
        return Ok(false);
    };
    // A dense range: bounds that read no structure (SpMV's loop over a row's non-zeros
    // is left to the row cache below).
    let reads_memory = |e: &Expr| {
        let mut found = false;
        e.visit(&mut |x| found |= matches!(x, Expr::Load { .. } | Expr::Search { .. }));
        found
    };
    if f.kind != ForKind::Serial || reads_memory(&f.lo) || reads_memory(&f.hi) {
        return Ok(false);
    }
    let Some(buffer) = stored_values(&func, f).into_iter().next() else {
        return Ok(false);
    };
    let mut trial = sch.clone();
    if trial.cache_write(around, &buffer).is_err() {
        return Ok(false);
    }
    absorb_init(&mut trial, &around.block, &buffer, recipe)?;
    match trial.hoist_factor(inner) {
        Ok(()) | Err(ScheduleError::HoistNothing { .. }) => {}
        Err(_) => return Ok(false),
    }
    if trial.vectorize_reduction(inner, 1, false).is_err() {
        return Ok(false);
    }
    if batch {
        match trial.batch_reduction(around) {
            Ok(()) | Err(ScheduleError::NotBatchable { .. } | ScheduleError::NotSerial { .. }) => {}
            Err(e) => return Err(sched(recipe)(e)),
        }
    }
    *sch = trial;
    Ok(true)
}

/// When the innermost loop of the main iteration is a reduction over a constant dense
/// range into one element (SDDMM: `C[i, jp] += X[i, k] * Y[j, k]`), splits it by `lanes`
/// and turns the chain into `lanes` independent partial sums (`rfactor`), vectorised.
/// Nothing happens (and nothing is recorded) when it does not apply.
fn split_reduction(sch: &mut Schedule, recipe: &str, lanes: i64) -> Result<(), RecipeError> {
    let Some(main) = main_iteration(sch.program()) else {
        return Ok(());
    };
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    let Some((inner, f)) = nest(&func, &main).last().map(|(r, f)| (r.clone(), *f)) else {
        return Ok(());
    };
    let (Expr::Int(lo), Expr::Int(hi)) = (&f.lo, &f.hi) else {
        return Ok(());
    };
    if f.kind != ForKind::Serial || hi - lo < lanes {
        return Ok(());
    }
    // Try on a copy: only a schedule where every step applies is kept.
    let mut trial = sch.clone();
    let applied = match trial.split(&inner, lanes, SplitTail::InnerFixed) {
        Ok((outer, lane)) => trial.rfactor(&outer, &lane).is_ok() && trial.vectorize(&lane).is_ok(),
        Err(_) => false,
    };
    if applied {
        *sch = trial;
    }
    Ok(())
}

/// The values buffers stored to in the body of `f`, by name, in order.
pub(super) fn stored_values(func: &Func, f: &For) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    Stmt::visit_all(&f.body, &mut |s| {
        if let Stmt::Store { buffer, .. } = s {
            let b = &func.buffers[*buffer];
            if b.kind == BufferKind::Values && !out.contains(&b.name) {
                out.push(b.name.clone());
            }
        }
    });
    out
}

/// The `indptr` buffer the row loop `f` reads at its own variable (`indptr[v]`), which
/// weighs its iterations by non-zeros.
pub(super) fn row_indptr(func: &Func, f: &For) -> Option<String> {
    let mut found: Option<String> = None;
    let mut look = |e: &Expr| {
        e.visit(&mut |x| {
            if let Expr::Load { buffer, indices } = x {
                let b = &func.buffers[*buffer];
                if found.is_none()
                    && matches!(b.kind, BufferKind::Indptr { .. })
                    && indices.first() == Some(&Expr::Var(f.var))
                {
                    found = Some(b.name.clone());
                }
            }
        })
    };
    for s in &f.body {
        if let Stmt::For(g) = s {
            look(&g.lo);
            look(&g.hi);
        }
    }
    found
}

/// The dense-width parameter (named `name`: `k`, or `width` where `k` is taken).
pub(super) fn width_param(name: &'static str) -> ParamInfo {
    ParamInfo {
        name,
        default: "auto",
        doc: "the dense width to compile for: `auto` (the inputs'), `none`, or a number",
    }
}

/// The `prefetch` parameter of the CPU recipes that gather dense rows.
pub(super) fn prefetch_param() -> ParamInfo {
    ParamInfo {
        name: "prefetch",
        default: "8",
        doc: "how many non-zeros ahead gathered dense rows are prefetched (0: never)",
    }
}

/// The parameter bounding the innermost loop of the main iteration, and the value to
/// fix it to (from `k=` or the inputs).
pub(super) fn width(
    sch: &Schedule,
    args: &Args,
    ctx: &RecipeContext,
) -> Result<Option<(String, i64)>, RecipeError> {
    width_named(sch, args, ctx, "k")
}

/// [`width`] from the recipe parameter `arg` (`auto`, `none` or a number).
pub(super) fn width_named(
    sch: &Schedule,
    args: &Args,
    ctx: &RecipeContext,
    arg: &str,
) -> Result<Option<(String, i64)>, RecipeError> {
    let choice = args.text(arg).to_string();
    if choice == "none" {
        return Ok(None);
    }
    let program = sch.program();
    let Some(main) = main_iteration(program) else {
        return Ok(None);
    };
    let func = lower_iterations(program).map_err(|e| RecipeError::Schedule {
        recipe: "rowwise".into(),
        source: Box::new(ScheduleError::from(e)),
    })?;
    let loops = nest(&func, &main);
    let Some((_, inner)) = loops.last() else {
        return Ok(None);
    };
    let (Expr::Int(0), Expr::Param(p)) = (&inner.lo, &inner.hi) else {
        return Ok(None);
    };
    let param = func.params[*p].name.clone();
    let value = if choice == "auto" {
        match ctx.params.get(&param) {
            Some(v) => *v,
            None => return Ok(None),
        }
    } else {
        args.int(arg, 1, 1 << 20)?
    };
    Ok(Some((param, value)))
}

/// Vectorises the innermost loop of every block where that is legal.
pub(super) fn vectorize_innermost(sch: &mut Schedule, recipe: &str) -> Result<(), RecipeError> {
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    for block in blocks(&func) {
        if let Some((target, _)) = nest(&func, &block).last() {
            match sch.vectorize(target) {
                Ok(()) => {}
                // Loops that carry a dependence (or are parallel) stay as they are.
                Err(ScheduleError::LoopCarriedAccess(_) | ScheduleError::NotSerial { .. }) => {}
                Err(e) => return Err(sched(recipe)(e)),
            }
        }
    }
    Ok(())
}

/// Prefetches, `distance` iterations ahead, every dense row gathered through sparse
/// indices in block `main` (nothing when `distance` is 0).
pub(super) fn prefetch_gathers(
    sch: &mut Schedule,
    recipe: &str,
    main: &str,
    distance: i64,
) -> Result<(), RecipeError> {
    if distance == 0 {
        return Ok(());
    }
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    for (target, buffer) in gathered_rows(&func, main) {
        match sch.prefetch(&target, &buffer, distance) {
            Ok(()) => {}
            // A gather the primitive cannot compute ahead is left as it is.
            Err(ScheduleError::PrefetchIndex { .. }) => {}
            Err(e) => return Err(sched(recipe)(e)),
        }
    }
    Ok(())
}
