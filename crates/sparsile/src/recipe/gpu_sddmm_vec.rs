//! `gpu_sddmm_vec`: Sputnik's SDDMM (`C[i,j] = A[i,j]·Σ_k X[i,k]·Y[j,k]`) with vector
//! loads and a two-stage reduction.
//!
//! With `balance=nnz` (the default) the non-zeros of the whole matrix are one loop
//! (`sparse_fuse` of the row and column axes, rows found by a binary search), `lanes`
//! threads along `threadIdx.x` per non-zero (a warp, or with more than 32 lanes a block)
//! and `rows` non-zeros side by side along `threadIdx.y`. With `balance=rows` a warp (a
//! block) takes a row and its non-zeros one after another, `rows` rows side by side: no
//! search, but a long row keeps its warp long. Fewer than 32 lanes (several non-zeros per warp, as Sputnik runs short
//! rows) are refused: the last warp's tail guard would leave lanes out of the warp
//! reduction. The dot product over `K` is split into vectors of
//! `vec` consecutive elements: lane `l` takes vectors `l`, `l + lanes`, … of the rows
//! `X[i,:]` and `Y[j,:]`, reads each with one `float4` (`vec=4`, f32), `float2` or
//! `double2` load and adds its products into a register (stage one, a `vectorized` loop
//! of `vec` iterations), then the lanes' sums meet in a shuffle reduction (stage two,
//! `warp_reduce`; with more than 32 lanes a block per non-zero, the warps' sums in shared
//! memory).
//!
//! Preconditions: an SDDMM-shaped main iteration (row, sparse column, reduction), as
//! `gpu_warp` takes. Vector loads need `K` known when compiling (`k=auto` takes it from
//! the inputs, `specialize`) and a multiple of `vec`: then every row of `X` and `Y`
//! starts on a vector boundary. Otherwise (`k=none`, or `K` not a multiple of `vec`) the
//! recipe schedules scalar loads, one element per lane per pass as `gpu_warp` does: the
//! same result, never a misaligned access.
//!
//! A recipe of its own rather than a parameter of `gpu_warp`: it takes SDDMM only (vector
//! loads of a row have no SpMV counterpart: `x[j]` is gathered), its default is vector
//! loads, and its steps differ (the split into vectors, `vectorize`, the non-zeros bound
//! before the reduction).
//!
//! Example: `sparsile run --target cuda --recipe gpu_sddmm_vec:vec=4 …` on
//! `O[i,j] = A[i,j] * X[i,c] * Y[j,c]` with `K = 256` gives each non-zero a warp whose
//! lanes each read two `float4`s of `X[i,:]` and two of `Y[j,:]` (vectors `l` and
//! `l + 32`), sum their eight products in a register, and add the 32 sums by shuffles;
//! with `K = 32` lanes 0 to 7 read one `float4` each and the others add 0.

use sparsile_transform::schedule::Schedule;

use super::gpu_block::{
    block_shape, constant_extent, lanes_param, rows_param, split, unbound_blocks, width_param,
    BLOCK_X, THREAD_Y,
};
use super::gpu_warp::{axes, fuse_sddmm_nonzeros, is_sddmm, outer_and_reduction};
use super::nest::{main_iteration, nest};
use super::rowwise::width;
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_sddmm_vec";

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "GPU: SDDMM with a non-zero per `lanes` threads, each reading its share of the rows in vector loads (float4/float2/double2), summed in registers, then by warp shuffles",
        ops: &["sddmm"],
        formats: &["any"],
        params: vec![
            width_param("k"),
            ParamInfo {
                name: "vec",
                default: "4",
                doc: "elements per vector load: 1, 2 or 4 (scalar loads when K is unknown or not a multiple)",
            },
            lanes_param("lanes per non-zero along threadIdx.x, a power of two from 32 to 1024: 32 a warp per non-zero; more, a block per non-zero"),
            rows_param("non-zeros (balance=nnz) or rows (balance=rows) per block along threadIdx.y"),
            ParamInfo {
                name: "balance",
                default: "nnz",
                doc: "nnz: all non-zeros as one loop, each finding its row by a binary search (even work whatever the row lengths); rows: a row per warp (block), its non-zeros one after another (no search)",
            },
        ],
        source: "Sputnik SDDMM (Gale et al., SC 2020): vector loads of the dense rows, a two-stage reduction",
        gpu: true,
    }
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let (lanes, rows) = block_shape(args, NAME, 1024)?;
    let bad = |arg: &str, value: i64, expected: String| RecipeError::BadArg {
        recipe: NAME.into(),
        arg: arg.into(),
        value: value.to_string(),
        expected,
    };
    let vec = args.int("vec", 1, 4)?;
    if vec == 3 {
        return Err(bad("vec", vec, "1, 2 or 4".into()));
    }
    if lanes < 32 || !(lanes as u64).is_power_of_two() {
        return Err(bad(
            "lanes",
            lanes,
            "a power of two from 32 to 1024 (fewer lanes would put several non-zeros in a warp, whose last one leaves lanes out of the warp reduction)".into(),
        ));
    }
    if lanes > 32 && rows != 1 {
        return Err(bad(
            "rows",
            rows,
            format!("1: {lanes} lanes (more than a warp) take a block per non-zero, whose warps' sums meet behind sync_threads"),
        ));
    }
    let not = |reason: &str| RecipeError::NotApplicable {
        recipe: NAME.into(),
        reason: reason.to_string(),
    };
    let main = main_iteration(sch.program()).ok_or_else(|| not("the program has no iteration"))?;
    let kinds = axes(sch.program(), &main).ok_or_else(|| not("no top-level main iteration"))?;
    let s = sched(NAME);
    let by_rows = args.choice("balance", &["nnz", "rows"])? == "rows";
    if !is_sddmm(sch, &kinds) {
        return Err(not(
            "the main iteration is not SDDMM-shaped (row, sparse column, reduction)",
        ));
    }
    let (outer, reduction, extent) = if by_rows {
        if let Some((param, value)) = width(sch, args, ctx)? {
            sch.specialize(&param, value).map_err(&s)?;
        }
        // Rows, their non-zeros (serial, in the warp), the dot product.
        let func = sch.func_or_lower().map_err(&s)?.clone();
        match nest(&func, &main).as_slice() {
            [(row, _), (_, _), (k, k_loop), ..] => (
                row.clone(),
                k.clone(),
                constant_extent(&k_loop.lo, &k_loop.hi),
            ),
            _ => {
                return Err(not(
                    "the lowered main block is not a row, non-zero, reduction nest",
                ))
            }
        }
    } else {
        fuse_sddmm_nonzeros(sch, args, ctx, NAME, &main, &kinds)?;
        // The dot product: the last loop of the non-zero's body (after the row search).
        outer_and_reduction(sch, NAME, &main)?
    };
    // Vectors only where every row starts on a vector boundary: K known and a multiple.
    let vec = match extent {
        Some(k) if vec > 1 && k > 0 && k % vec == 0 => vec,
        _ => 1,
    };
    let (streams, vector, stream_extent) = if vec > 1 {
        let (o, v) = split(sch, NAME, &reduction, vec)?;
        (o, Some(v), extent.map(|k| k / vec))
    } else {
        (reduction, None, extent)
    };
    // The vectors in `lanes` interleaved streams: [o_o, o_i] → [o_i, o_o] (one pass
    // when there are `lanes` of them).
    let lane = if stream_extent == Some(lanes) {
        streams
    } else {
        let (o, i) = split(sch, NAME, &streams, lanes)?;
        sch.reorder(&[i.clone(), o]).map_err(&s)?;
        i
    };
    // The non-zeros over the grid (and threadIdx.y) first, then the reduction over the
    // lanes of the block it is in.
    if lanes > 32 {
        sch.bind(&outer, BLOCK_X).map_err(&s)?;
    } else {
        let (o, i) = split(sch, NAME, &outer, rows)?;
        sch.bind(&o, BLOCK_X).map_err(&s)?;
        sch.bind(&i, THREAD_Y).map_err(&s)?;
    }
    sch.warp_reduce(&lane).map_err(&s)?;
    if let Some(v) = vector {
        sch.vectorize(&v).map_err(&s)?;
    }
    unbound_blocks(sch, NAME, lanes, rows)
}
