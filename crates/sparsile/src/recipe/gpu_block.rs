//! The thread block the GPU recipes share: `lanes` threads along `threadIdx.x` (the dense
//! width, a row's non-zeros, or rows) by `rows` along `threadIdx.y`, their parameters and
//! checks, and the schedule steps that put loops on it — a row loop over the grid and
//! `threadIdx.y` with a lane loop over `threadIdx.x`, or rows one per thread — plus the
//! spreading of blocks a recipe leaves unbound (an output's initialisation).

use sparsile_ir::loops::{Expr, GpuAxis, GpuDim};
use sparsile_transform::schedule::{LoopRef, Schedule, SplitTail};

use super::nest::{blocks, nest};
use super::{sched, Args, ParamInfo, RecipeError};

pub(super) const BLOCK_X: GpuAxis = GpuAxis::Block(GpuDim::X);
pub(super) const THREAD_X: GpuAxis = GpuAxis::Thread(GpuDim::X);
pub(super) const THREAD_Y: GpuAxis = GpuAxis::Thread(GpuDim::Y);

pub(super) use super::rowwise::width_param;

/// The `lanes` parameter, with what the lanes run in this recipe.
pub(super) fn lanes_param(doc: &'static str) -> ParamInfo {
    ParamInfo {
        name: "lanes",
        default: "32",
        doc,
    }
}

/// The `rows` parameter, with what the rows are in this recipe.
pub(super) fn rows_param(doc: &'static str) -> ParamInfo {
    ParamInfo {
        name: "rows",
        default: "4",
        doc,
    }
}

/// `(lanes, rows)` from the arguments: each at least 1, at most 1,024 threads in all.
pub(super) fn block_shape(
    args: &Args,
    recipe: &str,
    max_lanes: i64,
) -> Result<(i64, i64), RecipeError> {
    let lanes = args.int("lanes", 1, max_lanes)?;
    let rows = args.int("rows", 1, 1024)?;
    block_shape_checked(recipe, lanes, rows)
}

/// `(lanes, rows)` if they make at most 1,024 threads, else the error naming `rows`.
pub(super) fn block_shape_checked(
    recipe: &str,
    lanes: i64,
    rows: i64,
) -> Result<(i64, i64), RecipeError> {
    if lanes * rows > 1024 {
        return Err(RecipeError::BadArg {
            recipe: recipe.into(),
            arg: "rows".into(),
            value: rows.to_string(),
            expected: format!("lanes x rows threads per block, at most 1024 (lanes is {lanes})"),
        });
    }
    Ok((lanes, rows))
}

/// `row` split by `rows` over the grid and `threadIdx.y`, and `lane` over `threadIdx.x`;
/// with `atomic`, the row loops add into shared elements with atomic adds
/// (`bind_atomic`).
pub(super) fn rows_and_lanes(
    sch: &mut Schedule,
    recipe: &str,
    row: &LoopRef,
    lane: &LoopRef,
    rows: i64,
    atomic: bool,
) -> Result<(), RecipeError> {
    let (o, i) = split(sch, recipe, row, rows)?;
    bind(sch, recipe, &o, BLOCK_X, atomic)?;
    bind(sch, recipe, &i, THREAD_Y, atomic)?;
    bind(sch, recipe, lane, THREAD_X, false)
}

/// `row` split by `threads`, one row per thread along `threadIdx.x`.
pub(super) fn rows_on_lanes(
    sch: &mut Schedule,
    recipe: &str,
    row: &LoopRef,
    threads: i64,
    atomic: bool,
) -> Result<(), RecipeError> {
    let (o, i) = split(sch, recipe, row, threads)?;
    bind(sch, recipe, &o, BLOCK_X, atomic)?;
    bind(sch, recipe, &i, THREAD_X, atomic)
}

/// The loop of at most `lanes` iterations to put on the lanes: `target` itself when its
/// constant extent is at most `lanes`, else the inner loop of a split by `lanes`.
pub(super) fn lane_loop(
    sch: &mut Schedule,
    recipe: &str,
    target: &LoopRef,
    lanes: i64,
) -> Result<LoopRef, RecipeError> {
    let func = sch.func_or_lower().map_err(sched(recipe))?;
    let extent = nest(func, &target.block)
        .iter()
        .find(|(r, _)| r == target)
        .and_then(|(_, f)| constant_extent(&f.lo, &f.hi));
    match extent {
        Some(n) if n <= lanes => Ok(target.clone()),
        _ => Ok(split(sch, recipe, target, lanes)?.1),
    }
}

/// `hi - lo` when both are integer literals.
pub(super) fn constant_extent(lo: &Expr, hi: &Expr) -> Option<i64> {
    match (lo, hi) {
        (Expr::Int(lo), Expr::Int(hi)) => Some(hi - lo),
        _ => None,
    }
}

/// Spreads every block that has no bound loop yet (initialisation blocks, or everything
/// when there is no main nest) over the GPU: rows over the grid and `threadIdx.y`, the
/// innermost constant loop over `lanes` threads along `threadIdx.x`, or one row per
/// thread.
pub(super) fn unbound_blocks(
    sch: &mut Schedule,
    recipe: &str,
    lanes: i64,
    rows: i64,
) -> Result<(), RecipeError> {
    loop {
        let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
        let Some(block) = blocks(&func).into_iter().find(|b| {
            !nest(&func, b)
                .iter()
                .any(|(_, f)| f.kind.gpu_axis().is_some())
        }) else {
            return Ok(());
        };
        let loops = nest(&func, &block);
        let Some((row, _)) = loops.first().cloned() else {
            return Err(RecipeError::NotApplicable {
                recipe: recipe.into(),
                reason: format!("block `{block}` has no loop to spread over the GPU"),
            });
        };
        let inner = loops
            .iter()
            .skip(1)
            .rev()
            .find(|(_, f)| constant_extent(&f.lo, &f.hi).is_some())
            .map(|(r, _)| r.clone());
        match inner {
            Some(inner) => {
                let lane = lane_loop(sch, recipe, &inner, lanes)?;
                rows_and_lanes(sch, recipe, &row, &lane, rows, false)?;
            }
            None => rows_on_lanes(sch, recipe, &row, lanes * rows, false)?,
        }
    }
}

/// `split(target, factor)` with the inner loop of `factor` iterations.
pub(super) fn split(
    sch: &mut Schedule,
    recipe: &str,
    target: &LoopRef,
    factor: i64,
) -> Result<(LoopRef, LoopRef), RecipeError> {
    sch.split(target, factor, SplitTail::InnerFixed)
        .map_err(sched(recipe))
}

fn bind(
    sch: &mut Schedule,
    recipe: &str,
    target: &LoopRef,
    axis: GpuAxis,
    atomic: bool,
) -> Result<(), RecipeError> {
    if atomic {
        sch.bind_atomic(target, axis).map_err(sched(recipe))
    } else {
        sch.bind(target, axis).map_err(sched(recipe))
    }
}
