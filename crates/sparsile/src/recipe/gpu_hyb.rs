//! `gpu_hyb`: SparseTIR's hyb(c, k) on the GPU. The sparse operand is decomposed into `c`
//! column partitions × power-of-two row buckets (ELL parts of width 1, 2, …, 2^k; longer
//! rows split), so every row of a bucket has the same length and the threads of a warp
//! finish together. Each part runs like `gpu_rowwise` (rows over the grid and
//! `threadIdx.y`, the dense width over `threadIdx.x` lanes) with atomic adds (`bind_atomic`:
//! pieces of one row in several parts add into one output row), and all parts run in one
//! launch, their grids side by side (`fuse_launches`).

use sparsile_formats::decompose::DecomposeRule;
use sparsile_ir::loops::Stmt;
use sparsile_transform::schedule::Schedule;

use super::gpu_block::{
    block_shape, constant_extent, lane_loop, lanes_param, rows_and_lanes, rows_on_lanes,
    rows_param, unbound_blocks, width_param,
};
use super::hyb::{decompose_parts, pick_buffer};
use super::nest::nest;
use super::rowwise::width_named;
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_hyb";

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "GPU: hyb(c, k) decomposition, each part's rows over blocks and threadIdx.y and the dense width over lanes, all parts in one launch",
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
            width_param("width"),
            lanes_param("threads along threadIdx.x over the dense width (SpMM); SpMV runs lanes x rows rows per block"),
            rows_param("rows per block along threadIdx.y"),
        ],
        source: "SparseTIR (hyb(c, k), one launch for all buckets by horizontal fusion)",
        gpu: true,
    }
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let c = args.int("c", 1, 1 << 16)? as usize;
    let k = args.int("k", 0, DecomposeRule::MAX_HYB_K as i64)? as u32;
    let (lanes, rows) = block_shape(args, NAME, 1024)?;
    let s = sched(NAME);
    // The dense width is `width=` here (`k` is hyb's bucket parameter).
    if let Some((param, value)) = width_named(sch, args, ctx, "width")? {
        sch.specialize(&param, value).map_err(&s)?;
    }
    let buffer = pick_buffer(sch.program(), "auto", 2, NAME)?;
    let parts = decompose_parts(sch, &buffer, DecomposeRule::Hyb { c, k }, NAME)?;
    for part in &parts {
        let func = sch.func_or_lower().map_err(&s)?.clone();
        let loops = nest(&func, part);
        let [(row, _), (nz, _), rest @ ..] = loops.as_slice() else {
            return Err(RecipeError::NotApplicable {
                recipe: NAME.into(),
                reason: format!("part `{part}` is not a loop over rows and their non-zeros"),
            });
        };
        let (row, nz) = (row.clone(), nz.clone());
        match rest.last() {
            // SpMM: the dense loop above the row's non-zeros, over the lanes.
            Some((dense, f)) if constant_extent(&f.lo, &f.hi).is_some() => {
                let dense = dense.clone();
                sch.reorder(&[dense.clone(), nz]).map_err(&s)?;
                let lane = lane_loop(sch, NAME, &dense, lanes)?;
                rows_and_lanes(sch, NAME, &row, &lane, rows, true)?;
            }
            // SpMV: a row per thread.
            _ => rows_on_lanes(sch, NAME, &row, lanes * rows, true)?,
        }
    }
    unbound_blocks(sch, NAME, lanes, rows)?;
    if parts.len() > 1 {
        let func = sch.func_or_lower().map_err(&s)?;
        let launches: Vec<String> = parts.iter().filter_map(|p| launch_of(func, p)).collect();
        sch.fuse_launches(&launches).map_err(&s)?;
    }
    Ok(())
}

/// The launch holding block `block`.
fn launch_of(func: &sparsile_ir::loops::Func, block: &str) -> Option<String> {
    func.body.iter().find_map(|s| match s {
        Stmt::Launch { name, body, .. }
            if body
                .iter()
                .any(|b| matches!(b, Stmt::Block { name: n, .. } if n == block)) =>
        {
            Some(name.clone())
        }
        _ => None,
    })
}
