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
use sparsile_ir::loops::{Expr, GpuAxis, GpuDim, Stmt};
use sparsile_transform::schedule::{LoopRef, Schedule, SplitTail};

use super::gpu_rowwise::unbound_blocks;
use super::nest::{main_iteration, nest};
use super::rowwise::width;
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_nnz";

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "GPU: all non-zeros as one loop spread evenly over blocks and threadIdx.y (rows by binary search), the dense width over lanes, atomic adds into the output",
        ops: &["spmm", "spmv"],
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
                doc: "threads along threadIdx.x over the dense width (SpMM); SpMV runs lanes x rows non-zeros per block",
            },
            ParamInfo {
                name: "rows",
                default: "4",
                doc: "non-zeros per block along threadIdx.y",
            },
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
        Stmt::For(f) if stores(f) && matches!((&f.lo, &f.hi), (Expr::Int(_), Expr::Int(_))) => {
            Some((
                LoopRef::new(main.as_str(), func.vars[f.var].name.clone()),
                match (&f.lo, &f.hi) {
                    (Expr::Int(lo), Expr::Int(hi)) => hi - lo,
                    _ => unreachable!("matched above"),
                },
            ))
        }
        _ => None,
    });
    match dense {
        Some((k, extent)) => {
            let lane = if extent <= lanes {
                k
            } else {
                sch.split(&k, lanes, SplitTail::InnerFixed).map_err(&s)?.1
            };
            let (o, i) = sch.split(&nz, rows, SplitTail::InnerFixed).map_err(&s)?;
            sch.bind_atomic(&o, GpuAxis::Block(GpuDim::X)).map_err(&s)?;
            sch.bind_atomic(&i, GpuAxis::Thread(GpuDim::Y))
                .map_err(&s)?;
            sch.bind(&lane, GpuAxis::Thread(GpuDim::X)).map_err(&s)?;
        }
        None => {
            let (o, i) = sch
                .split(&nz, lanes * rows, SplitTail::InnerFixed)
                .map_err(&s)?;
            sch.bind_atomic(&o, GpuAxis::Block(GpuDim::X)).map_err(&s)?;
            sch.bind_atomic(&i, GpuAxis::Thread(GpuDim::X))
                .map_err(&s)?;
        }
    }
    unbound_blocks(sch, NAME, lanes, rows)
}
