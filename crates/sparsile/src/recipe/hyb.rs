//! `hyb`: SparseTIR's hyb(c, k) format decomposition of the sparse operand, its parts
//! run as one horizontally fused loop.
//!
//! The sparse input (`buffer`, or the first order-2 input with a sparse axis that an
//! iteration reads) is decomposed by [`DecomposeRule::Hyb`]: `c` column partitions,
//! rows bucketed into ELL parts of width 1, 2, …, 2^k. The other blocks (the output's
//! initialisation) get the default schedule; the part blocks are fused with
//! `horizontal_fuse` into one loop over all bucket rows, run in parallel with atomic
//! adds (`parallel_reduce`): rows of different parts may add into the same output row.

use sparsile_formats::decompose::DecomposeRule;
use sparsile_ir::coord::{BufferRole, Expr, Program, Stmt};
use sparsile_ir::BufferId;
use sparsile_transform::schedule::{ReductionStrategy, Schedule};

use sparsile_transform::schedule::ScheduleError;

use super::default::parallel_outer_except;
use super::nest::{blocks, nest};
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

fn info() -> RecipeInfo {
    RecipeInfo {
        name: "hyb",
        summary: "decompose the sparse operand into c column partitions x power-of-two row buckets (ELL parts), parts fused into one loop",
        ops: &["spmm", "spmv"],
        formats: &["any"],
        params: vec![
            ParamInfo {
                name: "c",
                default: "1",
                doc: "column partitions",
            },
            ParamInfo {
                name: "k",
                default: "5",
                doc: "bucket widths 1, 2, ..., 2^k; longer rows are split",
            },
            ParamInfo {
                name: "buffer",
                default: "auto",
                doc: "the input to decompose: `auto` (the first sparse order-2 input) or its name",
            },
        ],
        source: "SparseTIR (hyb(c, k) decomposition, horizontal fusion)",
        gpu: false,
    }
}

fn apply(sch: &mut Schedule, args: &Args, _ctx: &RecipeContext) -> Result<(), RecipeError> {
    let c = args.int("c", 1, 1 << 16)? as usize;
    let k = args.int("k", 0, DecomposeRule::MAX_HYB_K as i64)? as u32;
    let buffer = pick_buffer(sch.program(), args.text("buffer"), 2, "hyb")?;
    decompose_and_fuse(sch, &buffer, DecomposeRule::Hyb { c, k }, "hyb")
}

/// The buffer named `choice`, or (`auto`) the first input of order `ndim` with a sparse
/// axis that a top-level iteration reads.
pub(super) fn pick_buffer(
    program: &Program,
    choice: &str,
    ndim: usize,
    recipe: &str,
) -> Result<String, RecipeError> {
    if choice != "auto" {
        return Ok(choice.to_string());
    }
    program
        .buffers
        .iter()
        .find(|(id, b)| {
            b.role == BufferRole::Input
                && b.axes.len() == ndim
                && b.axes.iter().any(|&a| program.axes[a].kind.is_sparse())
                && reads(&program.body, *id)
        })
        .map(|(_, b)| b.name.clone())
        .ok_or_else(|| RecipeError::NotApplicable {
            recipe: recipe.to_string(),
            reason: format!("no sparse input of order {ndim} is read by an iteration"),
        })
}

/// Whether a statement (nested iterations included) loads `buffer`.
fn reads(stmts: &[Stmt], buffer: BufferId) -> bool {
    let mut found = false;
    let mut look = |e: &Expr| {
        e.visit(&mut |x| found |= matches!(x, Expr::Load { buffer: b, .. } if *b == buffer))
    };
    for s in stmts {
        match s {
            Stmt::Store(st) => {
                st.indices.iter().for_each(&mut look);
                look(&st.value);
            }
            Stmt::Iteration(it) => {
                if reads(&it.init, buffer) || reads(&it.body, buffer) {
                    return true;
                }
            }
        }
    }
    found
}

/// Decomposes `buffer` by `rule` and lowers the program; returns the part blocks (those of
/// iterations over a derived buffer's axes), in order.
pub(super) fn decompose_parts(
    sch: &mut Schedule,
    buffer: &str,
    rule: DecomposeRule,
    recipe: &str,
) -> Result<Vec<String>, RecipeError> {
    sch.decompose_format(buffer, rule).map_err(sched(recipe))?;
    let program = sch.program().clone();
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    // Part blocks: those of iterations over a derived buffer's axes.
    let part_axes: Vec<_> = program
        .derived
        .iter()
        .flat_map(|d| program.buffers[d.buffer].axes.clone())
        .collect();
    let mut part_iterations = Vec::new();
    for s in &program.body {
        if let Stmt::Iteration(it) = s {
            if it.axes.iter().any(|a| part_axes.contains(&a.axis)) {
                part_iterations.push(it.name.clone());
            }
        }
    }
    Ok(blocks(&func)
        .into_iter()
        .filter(|b| part_iterations.contains(b))
        .collect())
}

/// Decomposes `buffer` by `rule`, applies the default schedule to the other blocks and
/// fuses the part blocks horizontally.
pub(super) fn decompose_and_fuse(
    sch: &mut Schedule,
    buffer: &str,
    rule: DecomposeRule,
    recipe: &str,
) -> Result<(), RecipeError> {
    let parts = decompose_parts(sch, buffer, rule, recipe)?;
    // The default schedule for the other blocks (the output's initialisation).
    parallel_outer_except(sch, recipe, &parts)?;
    // One loop over every part's rows, run in parallel: rows of different parts (and
    // pieces of one long row) may add into the same output row, so with atomic adds.
    let fused = if parts.len() > 1 {
        Some(sch.horizontal_fuse(&parts).map_err(sched(recipe))?)
    } else {
        parts.first().and_then(|b| {
            let func = sch.func()?;
            nest(func, b).first().map(|(r, _)| r.clone())
        })
    };
    if let Some(target) = fused {
        match sch.parallel_reduce(&target, ReductionStrategy::Atomic) {
            Ok(()) => {}
            // A part loop that is not a sum of updates stays serial.
            Err(ScheduleError::NotAReduction { .. }) => {}
            Err(e) => return Err(sched(recipe)(e)),
        }
    }
    Ok(())
}
