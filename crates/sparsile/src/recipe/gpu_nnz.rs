//! `gpu_nnz`: the element-balanced GPU design (DA-SpMM's EB+RM+SR): the non-zeros of
//! the whole matrix as one loop (`sparse_fuse` of the row and column axes, each
//! non-zero's row found by a binary search), spread evenly over the grid and
//! `threadIdx.y` whatever the row lengths; SpMM's dense width over `threadIdx.x` lanes.
//! Non-zeros of one row add into the same output row from different threads, with atomic
//! adds (`bind_atomic`), after the output's initialisation (a launch of its own).
//!
//! Where rows are very uneven (power-law graphs, one huge row) this keeps every warp
//! equally busy, at the price of an atomic add per non-zero and output column.

use sparsile_ir::coord::{IterKind, Program, Stmt as CoordStmt};
use sparsile_ir::loops::Stmt;
use sparsile_transform::schedule::{LoopRef, Schedule};

use super::gpu_block::{
    block_shape, constant_extent, lane_loop, lanes_param, rows_and_lanes, rows_on_lanes,
    rows_param, unbound_blocks, width_param,
};
use super::nest::{main_iteration, nest};
use super::rowwise::width;
use super::{sched, Args, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_nnz";

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "GPU: all non-zeros as one loop spread evenly over blocks and threadIdx.y (rows by binary search), the dense width over lanes, atomic adds into the output",
        ops: &["spmm", "spmv"],
        formats: &["any"],
        params: vec![
            width_param("k"),
            lanes_param("threads along threadIdx.x over the dense width (SpMM); SpMV runs lanes x rows non-zeros per block"),
            rows_param("non-zeros per block along threadIdx.y"),
        ],
        source: "DA-SpMM (element balance, row-major, sequential reduction with atomics)",
        gpu: true,
    }
}

/// The row and column axes of the main iteration when it is SpMM- or SpMV-shaped.
fn row_col(program: &Program, main: &str) -> Option<(String, String)> {
    let it = program.body.iter().find_map(|s| match s {
        CoordStmt::Iteration(it) if it.name == main => Some(it),
        _ => None,
    })?;
    let kinds: Vec<IterKind> = it.axes.iter().map(|a| a.kind).collect();
    let shaped = matches!(
        kinds.as_slice(),
        [IterKind::Spatial, IterKind::Reduction]
            | [IterKind::Spatial, IterKind::Reduction, IterKind::Spatial]
    );
    let col = &program.axes[it.axes.get(1)?.axis];
    (shaped && col.kind.is_sparse())
        .then(|| (program.axes[it.axes[0].axis].name.clone(), col.name.clone()))
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let (lanes, rows) = block_shape(args, NAME, 1024)?;
    let not = |reason: &str| RecipeError::NotApplicable {
        recipe: NAME.into(),
        reason: reason.to_string(),
    };
    let main = main_iteration(sch.program()).ok_or_else(|| not("the program has no iteration"))?;
    let (row, col) = row_col(sch.program(), &main).ok_or_else(|| {
        not("the main iteration is not SpMM- or SpMV-shaped (row, sparse column[, width])")
    })?;
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(sched(NAME))?;
    }
    let s = sched(NAME);
    sch.sparse_fuse(&main, &[row, col]).map_err(&s)?;
    let func = sch.func_or_lower().map_err(&s)?.clone();
    let Some((nz, nz_loop)) = nest(&func, &main).first().cloned() else {
        return Err(not("the lowered main block has no loop"));
    };
    // SpMM: the dense loop that stores, at the end of the non-zero's body (after the row
    // search, whose loop stores nothing).
    let stores = |f: &sparsile_ir::loops::For| !Stmt::stored_buffers(&f.body).is_empty();
    let dense = nz_loop.body.iter().rev().find_map(|s| match s {
        Stmt::For(f) if stores(f) && constant_extent(&f.lo, &f.hi).is_some() => {
            Some(LoopRef::new(main.as_str(), func.vars[f.var].name.clone()))
        }
        _ => None,
    });
    match dense {
        Some(k) => {
            let lane = lane_loop(sch, NAME, &k, lanes)?;
            rows_and_lanes(sch, NAME, &nz, &lane, rows, true)?;
        }
        None => rows_on_lanes(sch, NAME, &nz, lanes * rows, true)?,
    }
    unbound_blocks(sch, NAME, lanes, rows)
}
