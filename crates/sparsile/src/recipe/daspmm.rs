//! `daspmm`: the eight SpMM designs of DA-SpMM, as CPU schedules.
//!
//! DA-SpMM names a design by three choices; on a CPU (threads instead of warps, vector
//! lanes instead of threads of a warp) they become:
//! - `balance=row` (RB): rows are divided between threads (even chunks of rows);
//!   `balance=nnz` (EB): the non-zeros are divided evenly (`sparse_fuse` of the row and
//!   column axes, rows recovered by search), so threads may update the same output row.
//! - `dense=row` (RM): the dense width `k` is the innermost loop — a non-zero scales a
//!   contiguous row of `B` (vectorised); `dense=col` (CM): the non-zeros are the innermost
//!   loop — `B` is walked down its columns (`sparse_reorder` puts `k` before the column
//!   axis; with EB, chunks of non-zeros are split and `k` moved inside each chunk).
//! - `reduce=seq` (SR): every output element is accumulated by one sequential chain
//!   (EB: with atomic adds where threads share rows); `reduce=par` (PR): the sum is
//!   split into independent partial sums combined after (RB+CM: `rfactor` over 4
//!   interleaved partial sums of each output element; EB: per-thread copies of the
//!   output merged after, `parallel_reduce` with `PerThread`; RB+RM: `rfactor` over 4
//!   partial *rows* of each row).
//!
//! All designs specialise the width when the inputs fix it (`k=auto`) and may prefetch
//! the gathered rows of `B` (`prefetch`, non-zeros ahead; 0 turns it off).

use sparsile_ir::coord::{IterKind, Program, Stmt as CoordStmt};
use sparsile_transform::schedule::{LoopRef, ReductionStrategy, Schedule, SplitTail};

use super::default::parallel_outer;
use super::nest::{main_iteration, nest};
use super::rowwise::{prefetch_gathers, vectorize_innermost, width};
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "daspmm";
/// Partial sums of a parallel reduction (RB+PR) / copies of the output (EB+PR).
const PARTS: i64 = 4;
/// Non-zeros per chunk when EB+CM moves `k` inside a chunk.
const CHUNK: i64 = 256;

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "the 8 DA-SpMM designs: balance=row|nnz x dense=row|col x reduce=seq|par",
        ops: &["spmm"],
        formats: &["any"],
        params: vec![
            ParamInfo {
                name: "balance",
                default: "row",
                doc: "`row`: rows divided between threads; `nnz`: non-zeros divided evenly",
            },
            ParamInfo {
                name: "dense",
                default: "row",
                doc: "`row`: the dense width is the innermost loop; `col`: the non-zeros are",
            },
            ParamInfo {
                name: "reduce",
                default: "seq",
                doc:
                    "`seq`: one accumulation chain per element; `par`: partial sums combined after",
            },
            super::rowwise::width_param("k"),
            super::rowwise::prefetch_param(),
        ],
        source: "DA-SpMM (Dai et al., DAC 2022), the design space of Table 1",
        gpu: false,
    }
}

/// The axes of the SpMM iteration: (row, column, dense width), by name.
fn spmm_axes(program: &Program, iteration: &str) -> Result<[String; 3], RecipeError> {
    let it = program.body.iter().find_map(|s| match s {
        CoordStmt::Iteration(it) if it.name == iteration => Some(it),
        _ => None,
    });
    let not = |reason: &str| RecipeError::NotApplicable {
        recipe: NAME.into(),
        reason: reason.into(),
    };
    let it = it.ok_or_else(|| not("no top-level iteration with a reduction"))?;
    let kinds: Vec<IterKind> = it.axes.iter().map(|a| a.kind).collect();
    if kinds != [IterKind::Spatial, IterKind::Reduction, IterKind::Spatial] {
        return Err(not(
            "the main iteration is not SpMM-shaped (row: spatial, column: reduction, width: spatial)",
        ));
    }
    let name = |k: usize| program.axes[it.axes[k].axis].name.clone();
    if !program.axes[it.axes[1].axis].kind.is_sparse() {
        return Err(not("the column axis of the main iteration is not sparse"));
    }
    Ok([name(0), name(1), name(2)])
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let balance = args.choice("balance", &["row", "nnz"])?;
    let dense = args.choice("dense", &["row", "col"])?;
    let reduce = args.choice("reduce", &["seq", "par"])?;
    let distance = args.int("prefetch", 0, 1 << 16)?;
    let main = main_iteration(sch.program()).ok_or_else(|| RecipeError::NotApplicable {
        recipe: NAME.into(),
        reason: "the program has no iteration".into(),
    })?;
    let [row, col, wid] = spmm_axes(sch.program(), &main)?;
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(sched(NAME))?;
    }
    let s = sched(NAME);
    match (balance, dense) {
        ("row", "row") => {}
        ("row", _) => sch
            .sparse_reorder(&main, &[row.clone(), wid.clone(), col.clone()])
            .map_err(&s)?,
        (_, "row") => sch
            .sparse_fuse(&main, &[row.clone(), col.clone()])
            .map_err(&s)?,
        _ => {
            sch.sparse_reorder(&main, &[wid.clone(), row.clone(), col.clone()])
                .map_err(&s)?;
            sch.sparse_fuse(&main, &[row.clone(), col.clone()])
                .map_err(&s)?;
        }
    }
    let func = sch.func_or_lower().map_err(&s)?.clone();
    let loops: Vec<LoopRef> = nest(&func, &main).into_iter().map(|(r, _)| r).collect();
    let loop_at = |k: usize| -> Result<LoopRef, RecipeError> {
        loops
            .get(k)
            .cloned()
            .ok_or_else(|| RecipeError::NotApplicable {
                recipe: NAME.into(),
                reason: format!("the lowered main block has fewer than {} loops", k + 1),
            })
    };
    // Prefetch before the loops are restructured (the gather loop is still whole).
    if dense == "row" {
        prefetch_gathers(sch, NAME, &main, distance)?;
    }
    match (balance, dense, reduce) {
        ("row", "row", "seq") => {
            parallel_outer(sch, NAME)?;
            vectorize_innermost(sch, NAME)?;
        }
        ("row", "row", _) => {
            // [i, j_p, k] → [i, j_p_o, j_p_i, k]: 4 partial rows, one per interleaved
            // group of a row's non-zeros, added into the row after it.
            let (j_o, j_i) = sch
                .split(&loop_at(1)?, PARTS, SplitTail::InnerFixed)
                .map_err(&s)?;
            sch.rfactor(&j_o, &j_i).map_err(&s)?;
            parallel_outer(sch, NAME)?;
        }
        ("row", _, "seq") => {
            // [i, k, j_p]
            parallel_outer(sch, NAME)?;
        }
        ("row", _, _) => {
            let nz = loop_at(2)?;
            let (nz_o, nz_i) = sch.split(&nz, PARTS, SplitTail::InnerFixed).map_err(&s)?;
            sch.rfactor(&nz_o, &nz_i).map_err(&s)?;
            parallel_outer(sch, NAME)?;
        }
        ("nnz", "row", r) => {
            // [p, k]
            sch.parallel_reduce(&loop_at(0)?, strategy(r)).map_err(&s)?;
        }
        (_, _, r) => {
            // [k, p] → [p_o, k, p_i]: chunks of non-zeros in parallel, k inside a chunk.
            let k = loop_at(0)?;
            let (p_o, _) = sch
                .split(&loop_at(1)?, CHUNK, SplitTail::InnerFixed)
                .map_err(&s)?;
            sch.reorder(&[p_o.clone(), k]).map_err(&s)?;
            sch.parallel_reduce(&p_o, strategy(r)).map_err(&s)?;
        }
    }
    Ok(())
}

fn strategy(reduce: &str) -> ReductionStrategy {
    if reduce == "seq" {
        ReductionStrategy::Atomic
    } else {
        ReductionStrategy::PerThread { copies: PARTS }
    }
}
