//! `gpu_rowwise`: the row-balanced GPU design (DA-SpMM's RB+RM+SR; cuSPARSE's CSR
//! row split): rows spread over the blocks of the grid and, within a block, over
//! `threadIdx.y`; the dense width `K` over `threadIdx.x` lanes, so that a warp reads a
//! row of the dense operand with coalesced loads; each thread sums its element in a
//! register over the row's non-zeros.
//!
//! By operator (recognised from the main loop nest, as `rowwise` does):
//! - SpMM (`C[i,k] += A[i,j]·B[j,k]`): the dense loop moves above the row's non-zeros
//!   (`reorder`), each output element is accumulated in a one-element local
//!   (`cache_write`, started at 0 where every element is written: `absorb_init`),
//!   `K` splits into `lanes` threads (a longer `K` runs in passes of `lanes` columns),
//!   rows split into blocks of `rows` (`threadIdx.y`).
//! - SDDMM (`C[i,j] = A[i,j]·Σ_k X[i,k]·Y[j,k]`): each non-zero's dot product in a
//!   register, the non-zeros of a row over `lanes` threads, rows as above.
//! - SpMV and any other nest: one row per thread, `rows × lanes` rows per block.
//!
//! Other blocks (an output's initialisation that was not absorbed) run one row per
//! `threadIdx.y` and their innermost constant loop over `threadIdx.x`. Loads of rows past
//! the end are guarded by the splits. The result is a GPU function: compile it for
//! `cuda` or run it with the SIMT interpreter (`cuda-sim`).

use sparsile_ir::loops::{BufferKind, Expr, For, Func, GpuAxis, GpuDim, Stmt};
use sparsile_transform::schedule::{LoopRef, Schedule, ScheduleError, SplitTail};

use super::nest::{blocks, main_iteration, nest};
use super::rowwise::width;
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_rowwise";
const BLOCK_X: GpuAxis = GpuAxis::Block(GpuDim::X);
const THREAD_X: GpuAxis = GpuAxis::Thread(GpuDim::X);
const THREAD_Y: GpuAxis = GpuAxis::Thread(GpuDim::Y);

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "GPU: rows over blocks and threadIdx.y, the dense width over threadIdx.x lanes (coalesced), sums in registers",
        ops: &["spmm", "sddmm", "spmv"],
        formats: &["any"],
        params: vec![
            ParamInfo {
                name: "k",
                default: "auto",
                doc: "the dense width to compile for: `auto` (the inputs'), `none`, or a number",
            },
            ParamInfo {
                name: "lanes",
                default: "32",
                doc: "threads along threadIdx.x: the dense width's columns (SpMM), a row's non-zeros (SDDMM) or rows (SpMV) side by side",
            },
            ParamInfo {
                name: "rows",
                default: "4",
                doc: "rows per block along threadIdx.y (SpMM, SDDMM); SpMV runs lanes x rows rows per block",
            },
        ],
        source: "DA-SpMM (row balance, row-major, sequential reduction); cuSPARSE CSR row split",
        gpu: true,
    }
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let lanes = args.int("lanes", 1, 1024)?;
    let rows = args.int("rows", 1, 1024)?;
    if lanes * rows > 1024 {
        return Err(RecipeError::BadArg {
            recipe: NAME.into(),
            arg: "rows".into(),
            value: rows.to_string(),
            expected: format!("lanes x rows threads per block, at most 1024 (lanes is {lanes})"),
        });
    }
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(sched(NAME))?;
    }
    let func = sch.func_or_lower().map_err(sched(NAME))?.clone();
    let main = main_iteration(sch.program());
    if let Some(main) = main
        .as_deref()
        .filter(|m| blocks(&func).iter().any(|b| b == m))
    {
        main_block(sch, main, lanes, rows)?;
    }
    unbound_blocks(sch, NAME, lanes, rows)
}

/// Spreads every block that has no bound loop yet (initialisation blocks, or everything
/// when there is no main nest) over the GPU: rows over blocks and `threadIdx.y`, the
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
        other_block(sch, &block, lanes, rows)?;
    }
}

/// What the main nest computes, judged from its innermost loop.
enum Shape {
    /// The innermost loop has constant bounds and its variable indexes the output (SpMM).
    DenseOutput,
    /// The innermost loop has constant bounds and sums into one element (SDDMM).
    DenseReduction,
    /// Anything else (SpMV: the innermost loop runs over a row's non-zeros).
    Rows,
}

fn shape_of(func: &Func, loops: &[(LoopRef, &For)]) -> Shape {
    let Some((_, inner)) = loops.last() else {
        return Shape::Rows;
    };
    if loops.len() < 3 || !matches!((&inner.lo, &inner.hi), (Expr::Int(_), Expr::Int(_))) {
        return Shape::Rows;
    }
    let mut indexes_output = false;
    Stmt::visit_all(&inner.body, &mut |s| {
        if let Stmt::Store {
            buffer, indices, ..
        } = s
        {
            if func.buffers[*buffer].kind == BufferKind::Values {
                for e in indices {
                    e.visit(&mut |x| {
                        indexes_output |= matches!(x, Expr::Var(v) if *v == inner.var)
                    });
                }
            }
        }
    });
    if indexes_output {
        Shape::DenseOutput
    } else {
        Shape::DenseReduction
    }
}

/// The output values buffer the loop stores to.
fn output_of(func: &Func, f: &For) -> Option<String> {
    let mut out = None;
    Stmt::visit_all(&f.body, &mut |s| {
        if let Stmt::Store { buffer, .. } = s {
            let b = &func.buffers[*buffer];
            if out.is_none() && b.kind == BufferKind::Values {
                out = Some(b.name.clone());
            }
        }
    });
    out
}

fn main_block(sch: &mut Schedule, block: &str, lanes: i64, rows: i64) -> Result<(), RecipeError> {
    let func = sch.func_or_lower().map_err(sched(NAME))?.clone();
    let loops = nest(&func, block);
    let Some((row, row_loop)) = loops.first().map(|(r, f)| (r.clone(), *f)) else {
        return Ok(());
    };
    let Some(output) = output_of(&func, row_loop) else {
        return Ok(());
    };
    match shape_of(&func, &loops) {
        Shape::DenseOutput => {
            let (k, _) = loops.last().expect("three loops").clone();
            let (nz, _) = loops[loops.len() - 2].clone();
            sch.reorder(&[k.clone(), nz]).map_err(sched(NAME))?;
            cache(sch, &k, block, &output)?;
            let lane = split_to(sch, &k, lanes)?;
            let (row_o, row_i) = split(sch, &row, rows)?;
            bind(sch, &row_o, BLOCK_X)?;
            bind(sch, &row_i, THREAD_Y)?;
            bind(sch, &lane, THREAD_X)?;
        }
        Shape::DenseReduction => {
            let (nz, _) = loops[1].clone();
            cache(sch, &nz, block, &output)?;
            let (_, nz_lane) = split(sch, &nz, lanes)?;
            let (row_o, row_i) = split(sch, &row, rows)?;
            bind(sch, &row_o, BLOCK_X)?;
            bind(sch, &row_i, THREAD_Y)?;
            bind(sch, &nz_lane, THREAD_X)?;
        }
        Shape::Rows => {
            cache(sch, &row, block, &output)?;
            let (row_o, row_i) = split(sch, &row, lanes * rows)?;
            bind(sch, &row_o, BLOCK_X)?;
            bind(sch, &row_i, THREAD_X)?;
        }
    }
    Ok(())
}

/// An unbound block: rows over blocks and `threadIdx.y`, the innermost constant loop over
/// `threadIdx.x`; a nest with no constant loop gets one row per thread.
fn other_block(sch: &mut Schedule, block: &str, lanes: i64, rows: i64) -> Result<(), RecipeError> {
    let func = sch.func_or_lower().map_err(sched(NAME))?.clone();
    let loops = nest(&func, block);
    let Some((row, _)) = loops.first().cloned() else {
        return Err(RecipeError::NotApplicable {
            recipe: NAME.into(),
            reason: format!("block `{block}` has no loop to spread over the GPU"),
        });
    };
    let inner = loops
        .iter()
        .skip(1)
        .rev()
        .find(|(_, f)| matches!((&f.lo, &f.hi), (Expr::Int(_), Expr::Int(_))))
        .map(|(r, _)| r.clone());
    match inner {
        Some(inner) => {
            let lane = split_to(sch, &inner, lanes)?;
            let (row_o, row_i) = split(sch, &row, rows)?;
            bind(sch, &row_o, BLOCK_X)?;
            bind(sch, &row_i, THREAD_Y)?;
            bind(sch, &lane, THREAD_X)?;
        }
        None => {
            let (row_o, row_i) = split(sch, &row, lanes * rows)?;
            bind(sch, &row_o, BLOCK_X)?;
            bind(sch, &row_i, THREAD_X)?;
        }
    }
    Ok(())
}

/// Accumulates what `target` stores to `output` in a local (`cache_write`), started at the
/// init constant when possible (`absorb_init`); outputs that cannot be cached stay.
fn cache(
    sch: &mut Schedule,
    target: &LoopRef,
    block: &str,
    output: &str,
) -> Result<(), RecipeError> {
    match sch.cache_write(target, output) {
        Ok(_) => match sch.absorb_init(block, output) {
            Ok(())
            | Err(
                ScheduleError::AbsorbNoInit { .. }
                | ScheduleError::AbsorbInitNotConstant { .. }
                | ScheduleError::AbsorbInitNotFull { .. }
                | ScheduleError::AbsorbInterleaved { .. }
                | ScheduleError::AbsorbTargetShape { .. }
                | ScheduleError::AbsorbRegionNotFull { .. }
                | ScheduleError::AbsorbOtherAccess { .. },
            ) => Ok(()),
            Err(e) => Err(sched(NAME)(e)),
        },
        Err(
            ScheduleError::CacheAccess(_)
            | ScheduleError::CacheBuffer { .. }
            | ScheduleError::CacheTooLarge { .. },
        ) => Ok(()),
        Err(e) => Err(sched(NAME)(e)),
    }
}

/// `split(target, factor)` with the inner loop of `factor` iterations.
fn split(
    sch: &mut Schedule,
    target: &LoopRef,
    factor: i64,
) -> Result<(LoopRef, LoopRef), RecipeError> {
    sch.split(target, factor, SplitTail::InnerFixed)
        .map_err(sched(NAME))
}

/// The loop of at most `lanes` iterations to bind to the lanes: `target` itself when its
/// constant extent is at most `lanes`, else the inner loop of a split by `lanes`.
fn split_to(sch: &mut Schedule, target: &LoopRef, lanes: i64) -> Result<LoopRef, RecipeError> {
    let func = sch.func_or_lower().map_err(sched(NAME))?;
    let extent = nest(func, &target.block)
        .iter()
        .find(|(r, _)| r == target)
        .and_then(|(_, f)| match (&f.lo, &f.hi) {
            (Expr::Int(lo), Expr::Int(hi)) => Some(hi - lo),
            _ => None,
        });
    match extent {
        Some(n) if n <= lanes => Ok(target.clone()),
        _ => Ok(split(sch, target, lanes)?.1),
    }
}

fn bind(sch: &mut Schedule, target: &LoopRef, axis: GpuAxis) -> Result<(), RecipeError> {
    sch.bind(target, axis).map_err(sched(NAME))
}
