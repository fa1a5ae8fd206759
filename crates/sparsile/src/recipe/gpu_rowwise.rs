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
//!   rows split into blocks of `rows` (`threadIdx.y`). By default (`lanes=auto`,
//!   `rows=auto`) a known `K` takes `K` lanes up to 32, else `K` rounded up to whole
//!   warps, up to 256, and rows for 128 threads per block.
//! - SDDMM (`C[i,j] = A[i,j]·Σ_k X[i,k]·Y[j,k]`): each non-zero's dot product in a
//!   register, the non-zeros of a row over `lanes` threads, rows as above.
//! - SpMV and any other nest: one row per thread, `rows × lanes` rows per block.
//!
//! Other blocks (an output's initialisation that was not absorbed) run one row per
//! `threadIdx.y` and their innermost constant loop over `threadIdx.x`. Loads of rows past
//! the end are guarded by the splits. The result is a GPU function: compile it for
//! `cuda` or run it with the SIMT interpreter (`cuda-sim`).

use sparsile_ir::loops::{BufferKind, Expr, For, Func, Stmt};
use sparsile_transform::schedule::{LoopRef, Schedule};

use super::gpu_block::{
    block_shape_checked, lane_loop, rows_and_lanes, rows_on_lanes, split, unbound_blocks,
    width_param,
};
use super::nest::{blocks, main_iteration, nest};
use super::rowwise::{cache_row, width};
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_rowwise";

/// The `lanes` and `rows` parameters (both `auto` by default: the block shape from the
/// main nest, see `shape_args`).
pub(super) fn shape_params() -> [ParamInfo; 2] {
    [
        ParamInfo {
            name: "lanes",
            default: "auto",
            doc: "threads along threadIdx.x: the dense width's columns (SpMM), a row's non-zeros (SDDMM) or rows (SpMV) side by side; `auto`: for SpMM of a known width K, K up to 32, else K rounded up to whole warps, at most 256 (one pass over the row per thread); otherwise 32",
        },
        ParamInfo {
            name: "rows",
            default: "auto",
            doc: "rows per block along threadIdx.y (SpMM, SDDMM); SpMV runs lanes x rows rows per block; `auto`: for SpMM of a known width, 128 threads per block (128 / min(lanes, K) rows), else 4",
        },
    ]
}

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "GPU: rows over blocks and threadIdx.y, the dense width over threadIdx.x lanes (coalesced), sums in registers",
        ops: &["spmm", "sddmm", "spmv"],
        formats: &["any"],
        params: std::iter::once(width_param("k"))
            .chain(shape_params())
            .collect(),
        source: "DA-SpMM (row balance, row-major, sequential reduction); cuSPARSE CSR row split",
        gpu: true,
    }
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(sched(NAME))?;
    }
    let func = sch.func_or_lower().map_err(sched(NAME))?.clone();
    let main = main_iteration(sch.program());
    let (lanes, rows) = shape_args(NAME, args, &func, main.as_deref())?;
    if let Some(main) = main
        .as_deref()
        .filter(|m| blocks(&func).iter().any(|b| b == m))
    {
        main_block(sch, NAME, main, lanes, rows)?;
    }
    unbound_blocks(sch, NAME, lanes, rows)
}

/// The block shape: `lanes` and `rows` as given, `auto` ones from the main nest. For
/// SpMM of a constant width `K`, `K` lanes up to 32, else `K` rounded up to whole warps
/// (at most 256), so
/// that each thread makes one pass over its row's non-zeros (with 32 lanes and K = 256
/// a thread made eight, and a grid of cora's 2,708 rows filled a third of an H200), and
/// rows for 128 threads per block (`128 / min(lanes, K)`, at least one); otherwise 32
/// lanes and 4 rows.
pub(super) fn shape_args(
    recipe: &str,
    args: &Args,
    func: &Func,
    main: Option<&str>,
) -> Result<(i64, i64), RecipeError> {
    let width = main
        .map(|m| nest(func, m))
        .filter(|loops| matches!(shape_of(func, loops), Shape::DenseOutput))
        .and_then(|loops| match loops.last().map(|(_, f)| (&f.lo, &f.hi)) {
            Some((Expr::Int(lo), Expr::Int(hi))) if hi > lo => Some(hi - lo),
            _ => None,
        });
    let lanes = match (args.text("lanes"), width) {
        // A width below a warp takes that many lanes (the lane loop is the width's).
        ("auto", Some(k)) if k <= 32 => k,
        ("auto", Some(k)) => ((k + 31) / 32 * 32).min(256),
        ("auto", None) => 32,
        _ => args.int("lanes", 1, 1024)?,
    };
    let rows = match (args.text("rows"), width) {
        // The threads a row takes: its lanes, or K of them where K is narrower.
        ("auto", Some(k)) => (128 / lanes.min(k)).clamp(1, 1024 / lanes),
        ("auto", None) => 4,
        _ => args.int("rows", 1, 1024)?,
    };
    block_shape_checked(recipe, lanes, rows)
}

/// What the main nest computes, judged from its innermost loop.
pub(super) enum Shape {
    /// The innermost loop has constant bounds and its variable indexes the output (SpMM).
    DenseOutput,
    /// The innermost loop has constant bounds and sums into one element (SDDMM).
    DenseReduction,
    /// Anything else (SpMV: the innermost loop runs over a row's non-zeros).
    Rows,
}

pub(super) fn shape_of(func: &Func, loops: &[(LoopRef, &For)]) -> Shape {
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
                indexes_output |= indices.iter().any(|e| e.reads_var(inner.var));
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
pub(super) fn output_of(func: &Func, f: &For) -> Option<String> {
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

/// Schedules block `block` as this recipe does its main nest (SpMM, SDDMM or rows, read
/// from the nest), with blocks of `lanes × rows` threads; errors name `recipe`.
pub(super) fn main_block(
    sch: &mut Schedule,
    recipe: &str,
    block: &str,
    lanes: i64,
    rows: i64,
) -> Result<(), RecipeError> {
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
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
            sch.reorder(&[k.clone(), nz]).map_err(sched(recipe))?;
            cache_row(sch, &k, block, &output, recipe)?;
            let lane = lane_loop(sch, recipe, &k, lanes)?;
            rows_and_lanes(sch, recipe, &row, &lane, rows, false)?;
        }
        Shape::DenseReduction => {
            let (nz, _) = loops[1].clone();
            cache_row(sch, &nz, block, &output, recipe)?;
            let (_, nz_lane) = split(sch, recipe, &nz, lanes)?;
            rows_and_lanes(sch, recipe, &row, &nz_lane, rows, false)?;
        }
        Shape::Rows => {
            cache_row(sch, &row, block, &output, recipe)?;
            rows_on_lanes(sch, recipe, &row, lanes * rows, false)?;
        }
    }
    Ok(())
}
