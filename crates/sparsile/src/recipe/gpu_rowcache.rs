//! `gpu_rowcache`: GE-SpMM's SpMM on the GPU — one warp per row, the dense width over
//! the lanes with every lane summing several columns (coarse-grained warp merging), and
//! the row's column indices and values staged in shared memory a chunk of 32 at a time
//! (coalesced row caching).
//!
//! In `gpu_rowwise` every lane of a warp loads each non-zero's column index and value
//! itself, once per pass over the width. Here the warp loads a chunk of 32 non-zeros
//! with one coalesced load per array (`cache_shared`, which also places the
//! `sync_warp`s), every lane then reads the chunk from shared memory, and each loaded
//! non-zero serves all `ceil(K / 32)` columns of the lane (`split` of the width with the
//! lane outermost, `reorder` below the non-zeros, the lane's columns in registers:
//! `cache_write` of the split index, started at 0 by `absorb_init`).
//!
//! Schedule, for `C[i,k] += A[i,j]·B[j,k]` with `K` known (`k=auto` takes the input's):
//! `split(k, 32)`, `reorder(k_i, j, k_o)`, `cache_write(k_i, C)`, `absorb_init`,
//! `split(i, rows)` over `blockIdx.x` and `threadIdx.y`, `bind(k_i, threadIdx.x)`,
//! `split(j, 32)`, `cache_shared(j_o, indices)`, `cache_shared(j_o, values)`.
//! SpMM only; other blocks (an initialisation that was not absorbed) as in `gpu_rowwise`.

use sparsile_ir::loops::Stmt;
use sparsile_transform::schedule::{Schedule, ScheduleError};

use super::gpu_block::{
    constant_extent, rows_and_lanes, rows_param, split, unbound_blocks, width_param,
};
use super::gpu_rowwise::{output_of, shape_of, Shape};
use super::nest::{main_iteration, nest};
use super::rowwise::{cache_row, width};
use super::{sched, Args, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_rowcache";

/// The lanes of a warp, which are also the non-zeros of a staged chunk.
const LANES: i64 = 32;

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "GPU SpMM: a warp per row, each lane several columns of the width in registers, the row's indices and values staged in shared memory 32 at a time (coalesced)",
        ops: &["spmm"],
        params: vec![
            width_param("k"),
            rows_param("rows (warps of 32 lanes) per block along threadIdx.y"),
        ],
        source: "GE-SpMM (coalesced row caching, coarse-grained warp merging)",
        gpu: true,
    }
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let rows = args.int("rows", 1, 1024 / LANES)?;
    let not = |reason: &str| RecipeError::NotApplicable {
        recipe: NAME.into(),
        reason: reason.to_string(),
    };
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(sched(NAME))?;
    }
    let func = sch.func_or_lower().map_err(sched(NAME))?.clone();
    let main = main_iteration(sch.program()).ok_or_else(|| not("the program has no iteration"))?;
    let loops = nest(&func, &main);
    if loops.len() != 3 || !matches!(shape_of(&func, &loops), Shape::DenseOutput) {
        return Err(not(
            "the main iteration is not SpMM-shaped (rows, a row's non-zeros, the dense width)",
        ));
    }
    if constant_extent(&loops[2].1.lo, &loops[2].1.hi).is_none() {
        return Err(not(
            "it needs the dense width: give the inputs (k=auto) or a number (k=64)",
        ));
    }
    let output = output_of(&func, loops[0].1).ok_or_else(|| not("the main nest stores nothing"))?;
    let (row, nz, k) = (loops[0].0.clone(), loops[1].0.clone(), loops[2].0.clone());
    let (k_o, k_i) = split(sch, NAME, &k, LANES)?;
    sch.reorder(&[k_i.clone(), nz.clone(), k_o])
        .map_err(sched(NAME))?;
    cache_row(sch, &k_i, &main, &output, NAME)?;
    rows_and_lanes(sch, NAME, &row, &k_i, rows, false)?;
    let (chunk, _) = split(sch, NAME, &nz, LANES)?;
    // Stage every input the chunk reads at staged positions (the sparse operand's
    // indices and values; the dense rows are indexed through memory and stay).
    let func = sch.func_or_lower().map_err(sched(NAME))?.clone();
    let mut inputs: Vec<String> = Stmt::loaded_buffers(&func.body)
        .into_iter()
        .filter(|&b| func.buffers[b].role == sparsile_ir::coord::BufferRole::Input)
        .map(|b| func.buffers[b].name.clone())
        .collect();
    inputs.sort();
    for buffer in inputs {
        match sch.cache_shared(&chunk, &buffer) {
            Ok(_) => {}
            Err(
                ScheduleError::CacheAccess(_)
                | ScheduleError::CacheBuffer { .. }
                | ScheduleError::CacheTooLarge { .. },
            ) => {}
            Err(e) => return Err(sched(NAME)(e)),
        }
    }
    unbound_blocks(sch, NAME, LANES, rows)
}
