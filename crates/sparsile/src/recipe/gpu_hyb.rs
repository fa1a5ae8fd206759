//! `gpu_hyb`: SparseTIR's hyb(c, k) on the GPU. The sparse operand is decomposed into `c`
//! column partitions × power-of-two row buckets (ELL parts of width 1, 2, …, 2^k; longer
//! rows split), so every row of a bucket has the same length and the threads of a warp
//! finish together. Each part runs like `gpu_rowwise` (rows over the grid and
//! `threadIdx.y`, the dense width over `threadIdx.x` lanes) with atomic adds (`bind_atomic`:
//! pieces of one row in several parts add into one output row), and all parts run in one
//! launch, their grids side by side (`fuse_launches`).

use sparsile_formats::decompose::DecomposeRule;
use sparsile_ir::loops::{Expr, GpuAxis, GpuDim, Stmt};
use sparsile_transform::schedule::{Schedule, SplitTail};

use super::gpu_rowwise::unbound_blocks;
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
            ParamInfo {
                name: "width",
                default: "auto",
                doc: "the dense width to compile for: `auto` (the inputs'), `none`, or a number",
            },
            ParamInfo {
                name: "lanes",
                default: "32",
                doc: "threads along threadIdx.x over the dense width (SpMM); SpMV runs lanes x rows rows per block",
            },
            ParamInfo {
                name: "rows",
                default: "4",
                doc: "rows per block along threadIdx.y",
            },
        ],
        source: "SparseTIR (hyb(c, k), one launch for all buckets by horizontal fusion)",
        gpu: true,
    }
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let c = args.int("c", 1, 1 << 16)? as usize;
    let k = args.int("k", 0, DecomposeRule::MAX_HYB_K as i64)? as u32;
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
            Some((dense, f)) if matches!((&f.lo, &f.hi), (Expr::Int(_), Expr::Int(_))) => {
                let dense = dense.clone();
                let extent = match (&f.lo, &f.hi) {
                    (Expr::Int(lo), Expr::Int(hi)) => hi - lo,
                    _ => unreachable!("matched above"),
                };
                sch.reorder(&[dense.clone(), nz]).map_err(&s)?;
                let lane = if extent <= lanes {
                    dense
                } else {
                    sch.split(&dense, lanes, SplitTail::InnerFixed)
                        .map_err(&s)?
                        .1
                };
                let (o, i) = sch.split(&row, rows, SplitTail::InnerFixed).map_err(&s)?;
                sch.bind_atomic(&o, GpuAxis::Block(GpuDim::X)).map_err(&s)?;
                sch.bind_atomic(&i, GpuAxis::Thread(GpuDim::Y))
                    .map_err(&s)?;
                sch.bind(&lane, GpuAxis::Thread(GpuDim::X)).map_err(&s)?;
            }
            // SpMV: a row per thread.
            _ => {
                let (o, i) = sch
                    .split(&row, lanes * rows, SplitTail::InnerFixed)
                    .map_err(&s)?;
                sch.bind_atomic(&o, GpuAxis::Block(GpuDim::X)).map_err(&s)?;
                sch.bind_atomic(&i, GpuAxis::Thread(GpuDim::X))
                    .map_err(&s)?;
            }
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
