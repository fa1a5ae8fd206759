//! `gpu_warp`: one warp per reduction — a row of SpMV (CSR-vector) or a non-zero of
//! SDDMM (Sputnik-style) — its terms spread over the lanes (`threadIdx.x`) and combined
//! by a warp reduction (`warp_reduce`); warps side by side along `threadIdx.y`.
//!
//! - SpMV (`y[i] += A[i,j]·x[j]`): the row's non-zeros split into `lanes` interleaved
//!   streams, one per lane, so a warp reads `lanes` consecutive non-zeros at a time
//!   (coalesced); rows over the grid and `threadIdx.y`.
//! - SDDMM (`C[i,j] = A[i,j]·Σ_k X[i,k]·Y[j,k]`): the non-zeros of the whole matrix
//!   become one loop (`sparse_fuse` of the row and column axes: every warp gets the same
//!   work whatever the row lengths, rows found by a binary search), each non-zero's dot
//!   product over the lanes (`K` in passes of `lanes`).
//!
//! With more than 32 lanes (long rows, wide dot products) each reduction takes a block:
//! `warp_reduce` sums each warp with shuffles and the warps' sums in shared memory.
//!
//! SpMM keeps its width on the lanes without a reduction: use `gpu_rowwise`.

use sparsile_ir::coord::{IterKind, Program, Stmt as CoordStmt};
use sparsile_ir::loops::Stmt;
use sparsile_transform::schedule::{LoopRef, ParallelUnit, RaceStrategy, Schedule};

use super::gpu_block::{
    block_shape, constant_extent, lanes_param, rows_param, split, unbound_blocks, width_param,
};
use super::nest::{main_iteration, nest};
use super::rowwise::width;
use super::{sched, Args, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_warp";

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "GPU: a warp per SpMV row or SDDMM non-zero, its terms over the lanes, combined by warp_sum",
        ops: &["sddmm", "spmv"],
        formats: &["any"],
        params: vec![
            width_param("k"),
            lanes_param("lanes per reduction along threadIdx.x, a power of two from 32 to 1024: 32 a warp_sum; more, a block per reduction whose warps' sums meet in shared memory"),
            rows_param("reductions per block along threadIdx.y"),
        ],
        source: "CSR-vector SpMV; Sputnik SDDMM (a warp per non-zero, one launch over all non-zeros)",
        gpu: true,
    }
}

/// The kinds of the main iteration's axes and their names.
pub(super) fn axes(program: &Program, main: &str) -> Option<Vec<(IterKind, String)>> {
    program.body.iter().find_map(|s| match s {
        CoordStmt::Iteration(it) if it.name == main => Some(
            it.axes
                .iter()
                .map(|a| (a.kind, program.axes[a.axis].name.clone()))
                .collect(),
        ),
        _ => None,
    })
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let (lanes, rows) = block_shape(args, NAME, 1024)?;
    // Fewer than 32 lanes would put several reductions in one warp, and the guard on
    // the last rows (or non-zeros) would leave some of its lanes out of the warp's
    // shuffles, which every lane of the warp must reach.
    if !(32..=1024).contains(&lanes) || !(lanes as u64).is_power_of_two() {
        return Err(RecipeError::BadArg {
            recipe: NAME.into(),
            arg: "lanes".into(),
            value: lanes.to_string(),
            expected: "32, 64, 128, 256, 512 or 1024: a reduction takes whole warps (with fewer lanes the last rows' guard would leave lanes of a warp out of its shuffles)".into(),
        });
    }
    if lanes > 32 && rows != 1 {
        return Err(RecipeError::BadArg {
            recipe: NAME.into(),
            arg: "rows".into(),
            value: rows.to_string(),
            expected: format!(
                "1: {lanes} lanes (more than a warp) take a block per reduction, whose warps' sums meet behind sync_threads"
            ),
        });
    }
    let not = |reason: &str| RecipeError::NotApplicable {
        recipe: NAME.into(),
        reason: reason.to_string(),
    };
    let main = main_iteration(sch.program()).ok_or_else(|| not("the program has no iteration"))?;
    let kinds = axes(sch.program(), &main).ok_or_else(|| not("no top-level main iteration"))?;
    let s = sched(NAME);
    match kinds.as_slice() {
        [(IterKind::Spatial, _), (IterKind::Reduction, _)] => {}
        kinds if fuse_sddmm_nonzeros(sch, args, ctx, NAME, &main, kinds)? => {}
        _ => {
            return Err(not(
                "the main iteration is neither SpMV-shaped (row, reduction) nor SDDMM-shaped (row, sparse column, reduction); SpMM runs with gpu_rowwise",
            ))
        }
    };
    let (outer, reduction, extent) = outer_and_reduction(sch, NAME, &main)?;
    // The reduction loop in `lanes` interleaved streams: [r_o, r_i] → [r_i, r_o] (one
    // pass when it runs `lanes` iterations).
    let r_i = if extent == Some(lanes) {
        reduction
    } else {
        let (r_o, r_i) = split(sch, NAME, &reduction, lanes)?;
        sch.reorder(&[r_i.clone(), r_o]).map_err(&s)?;
        r_i
    };
    // Written with TACO's `parallelize`: lanes (`threadIdx.x`) reduce, warps
    // (`threadIdx.y`) and blocks (`blockIdx.x`) take reductions of their own.
    let par =
        |sch: &mut Schedule, at: &LoopRef, unit, race| sch.parallelize(at, unit, race).map_err(&s);
    par(
        sch,
        &r_i,
        ParallelUnit::GpuThread,
        RaceStrategy::ParallelReduction,
    )?;
    if lanes > 32 {
        // A block per reduction: no condition on the thread around sync_threads.
        par(sch, &outer, ParallelUnit::GpuBlock, RaceStrategy::NoRaces)?;
    } else {
        let (o, i) = split(sch, NAME, &outer, rows)?;
        par(sch, &o, ParallelUnit::GpuBlock, RaceStrategy::NoRaces)?;
        par(sch, &i, ParallelUnit::GpuWarp, RaceStrategy::NoRaces)?;
    }
    unbound_blocks(sch, NAME, lanes, rows)
}

/// Whether `kinds` is an SDDMM-shaped main iteration: row, sparse column, reduction.
pub(super) fn is_sddmm(sch: &Schedule, kinds: &[(IterKind, String)]) -> bool {
    let [(IterKind::Spatial, _), (IterKind::Spatial, col), (IterKind::Reduction, _)] = kinds else {
        return false;
    };
    sch.program()
        .axes
        .iter()
        .any(|(_, a)| a.name == *col && a.kind.is_sparse())
}

/// For an SDDMM-shaped main iteration (row, sparse column, reduction: `kinds`), fixes the
/// dense width (`k`) and fuses the row and column axes into one loop over all non-zeros;
/// `false` (and nothing done) for other shapes.
pub(super) fn fuse_sddmm_nonzeros(
    sch: &mut Schedule,
    args: &Args,
    ctx: &RecipeContext,
    recipe: &'static str,
    main: &str,
    kinds: &[(IterKind, String)],
) -> Result<bool, RecipeError> {
    if !is_sddmm(sch, kinds) {
        return Ok(false);
    }
    let [(_, row), (_, col), _] = kinds else {
        return Ok(false);
    };
    let s = sched(recipe);
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(&s)?;
    }
    sch.sparse_fuse(main, &[row.clone(), col.clone()])
        .map_err(&s)?;
    Ok(true)
}

/// The main block's outer loop (rows, or all non-zeros once fused) and the reduction:
/// the last loop of its body (after a fused loop's search for the row), with its
/// constant extent if it has one.
pub(super) fn outer_and_reduction(
    sch: &mut Schedule,
    recipe: &'static str,
    main: &str,
) -> Result<(LoopRef, LoopRef, Option<i64>), RecipeError> {
    let not = |reason: &str| RecipeError::NotApplicable {
        recipe: recipe.into(),
        reason: reason.to_string(),
    };
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    let loops = nest(&func, main);
    let Some((outer, outer_loop)) = loops.first().cloned() else {
        return Err(not("the lowered main block has no loop"));
    };
    let (reduction, extent) = outer_loop
        .body
        .iter()
        .rev()
        .find_map(|s| match s {
            Stmt::For(f) => Some((
                LoopRef::new(main, func.vars[f.var].name.clone()),
                constant_extent(&f.lo, &f.hi),
            )),
            _ => None,
        })
        .ok_or_else(|| not("the main loop holds no reduction loop"))?;
    Ok((outer, reduction, extent))
}
