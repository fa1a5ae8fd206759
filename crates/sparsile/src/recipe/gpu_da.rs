//! `gpu_da`: the eight SpMM designs of DA-SpMM on the GPU, one recipe with three
//! choices (DA-SpMM §3, "three-loop" model; the names are the paper's).
//!
//! For `C[i,k] += A[i,j]·B[j,k]` with `A` sparse (rows, then a variable sparse axis of
//! columns: CSR) and `B` dense, a design is three choices:
//! - `balance` — how the non-zeros are divided between workers. `rb` (row balance):
//!   rows over the grid and `threadIdx.y` (`.z` when `.y` holds columns). `eb` (element
//!   balance): the non-zeros of the whole matrix as one loop (`sparse_fuse` of the row
//!   and column axes, each non-zero's row found by a binary search), spread evenly
//!   whatever the row lengths; a row shared by several workers gets atomic adds
//!   (`bind_atomic`) after the output's initialisation (a launch of its own).
//! - `reduce` — how the products of a row are summed. `sr` (sequential): one thread sums
//!   an output element over the row's non-zeros, the dense width over `lanes` threads
//!   along `threadIdx.x`. `pr` (parallel): the non-zeros over the `lanes` threads along
//!   `threadIdx.x`, every lane walking the width; with `rb` each lane sums every
//!   `lanes`-th non-zero of its row and `warp_reduce` adds the lanes' sums by a shuffle
//!   tree (`warp_sum`); with `eb` each lane takes one non-zero and `warp_segment_reduce`
//!   adds the lanes of each row by `warp_segment_sum`, the first lane of each row adding
//!   the row's sum (DA-SpMM's conditional reduction). With `lanes` below 32 the other
//!   `32 / lanes` threads of the warp take as many columns of the width side by side
//!   along `threadIdx.y` (DA-SpMM's several columns per warp), so a warp is always whole.
//! - `order` — how `B` is laid out: `rm` (row-major, `B[j, k]`: the lanes of an `sr`
//!   warp read consecutive addresses) or `cm` (column-major: a column of `B` contiguous,
//!   so one worker walking a row's non-zeros reads nearby memory, and the lanes of a
//!   `pr` warp, on neighbouring non-zeros of a row, read nearby elements of a column).
//!
//! | design | loops of the main launch (outermost first) |
//! |---|---|
//! | rb, sr | passes over the width `blockIdx.y` (when it is split) › rows `blockIdx.x`, `threadIdx.y` › width `threadIdx.x` › row's non-zeros (a register) |
//! | rb, pr | rows `blockIdx.x`, `threadIdx.y` › width › lanes `threadIdx.x` › row's non-zeros by `lanes` › `warp_sum` |
//! | eb, sr | non-zeros `blockIdx.x`, `threadIdx.y` › row search › width `threadIdx.x` › atomic add |
//! | eb, pr | groups of `lanes` non-zeros `blockIdx.x`, `threadIdx.y` › lane `threadIdx.x` › row search › width › `warp_segment_sum` › atomic add |
//!
//! `sr` puts the width on a power of two of lanes (20 columns on 32 lanes, 12 idle) so
//! that the lanes of a row never straddle two warps; `rb, sr` runs passes of `lanes`
//! columns as the grid's `y` (GE-SpMM's column tiles) instead of a loop in every thread,
//! and keeps each output element in a register started at zero, with no initialisation
//! launch when every row is written (`cache_write`, `absorb_init`). Otherwise `rb, sr`
//! is `gpu_rowwise`'s SpMM schedule and `eb, sr` `gpu_nnz`'s: one non-zero per thread
//! row with an atomic add per non-zero and column. (DA-SpMM's EB+SR gives a thread a run
//! of non-zeros, summed in a register flushed at each change of row; no schedule
//! primitive writes such a data-dependent flush, so here the sequential sum is over one
//! non-zero.)
//!
//! # How `order=cm` is expressed
//! Sparsile lays a dense tensor out row-major over its dimensions in declaration order
//! (format `dense`: one parentless `dense_fixed` axis per dimension; there is no
//! column-major dense format). A column-major `n × k` operand is therefore stored as the
//! row-major `k × n` tensor of the same memory, its transpose, and the program says so:
//! ```text
//! tensor B: f32[k, n]          # B stored column-major: Bᵀ row-major
//! C[i,c] = A[i,j] * B[c,j]
//! ```
//! The schedule of each design is the same for both layouts (as in DA-SpMM, where CM is
//! the RM kernel reading `B` column-major); what changes is the address of `B[j, k]`,
//! `k·n + j` instead of `j·K + k`, which lowering derives from the program. `order`
//! therefore states the layout the design is meant for: `auto` (the default) takes the
//! program's, `rm` and `cm` check it and refuse a program that reads `B` the other way
//! ([`RecipeError::NotApplicable`], saying how to declare it). A recipe cannot change the
//! layout of an operand the caller passes: that would be a transposed copy made before
//! every run, which is not the CM design.
//!
//! # Preconditions
//! The main iteration is SpMM-shaped (row: spatial, sparse column: reduction, width:
//! spatial) and reads one dense input at (column, width) or (width, column);
//! `lanes × rows ≤ 1024` (SR) or `32 × rows ≤ 1024` (PR); PR needs `lanes` a power of two
//! from 2 to 32 and, below 32, a width fixed by the inputs (or `k=`) that `32 / lanes`
//! divides. Otherwise [`RecipeError`] says which.
//!
//! # Example
//! ```
//! use std::collections::HashMap;
//! use sparsile::formats::{CooTensor, Format, SparseTensor};
//! use sparsile::ir::DType;
//! use sparsile::{RunOptions, Target};
//! let a = CooTensor::from_triplets(vec![2, 3], &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)]).unwrap();
//! // B is 3 × 2, column-major: its transpose, 2 × 3, row-major.
//! let bt = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let inputs = HashMap::from([
//!     ("A".to_string(), SparseTensor::from_coo_with(&a, &Format::Csr, DType::F32).unwrap()),
//!     ("B".to_string(), SparseTensor::dense_from_f64(&[2, 3], &bt, DType::F32).unwrap()),
//! ]);
//! let program = "tensor A: f32[m, n] csr\ntensor B: f32[k, n]\ntensor C: f32[m, k]\nC[i,c] = A[i,j] * B[c,j]\n";
//! let spec = "gpu_da:balance=eb,order=cm,reduce=pr";
//! let kernel = sparsile::recipe::compile_recipe_for(program, &inputs, spec, Target::CudaSim).unwrap();
//! let c = &kernel.run(&inputs, &RunOptions::default()).unwrap()["C"];
//! // C = A·B with B = [[1, 4], [2, 5], [3, 6]].
//! assert_eq!(c.to_dense_f64(), vec![7.0, 16.0, 6.0, 15.0]);
//! ```

use sparsile_ir::coord::{self, IterKind, Program, Stmt as CoordStmt};
use sparsile_ir::loops::{GpuAxis, GpuDim, Stmt};
use sparsile_transform::schedule::{LoopRef, Schedule};

use super::gpu_block::{
    block_shape, constant_extent, lanes_param, rows_and_lanes, rows_param, split, unbound_blocks,
    width_param, BLOCK_X, THREAD_Y,
};
use super::nest::{main_iteration, nest};
use super::rowwise::{cache_row, width};
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_da";
const THREAD_Z: GpuAxis = GpuAxis::Thread(GpuDim::Z);
const BLOCK_Y: GpuAxis = GpuAxis::Block(GpuDim::Y);
/// The threads of a warp.
const WARP: i64 = 32;

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "GPU SpMM, the 8 DA-SpMM designs: balance=rb|eb x order=rm|cm (B's layout) x reduce=sr|pr (warp shuffles; segmented for eb)",
        ops: &["spmm"],
        formats: &["any"],
        params: vec![
            ParamInfo {
                name: "balance",
                default: "rb",
                doc: "`rb`: rows over blocks and warps; `eb`: all non-zeros spread evenly (rows by binary search, atomic adds)",
            },
            ParamInfo {
                name: "order",
                default: "auto",
                doc: "B's layout: `rm` (B[j,k], row-major), `cm` (column-major: declared as its transpose, read B[k,j]), `auto` (the program's)",
            },
            ParamInfo {
                name: "reduce",
                default: "sr",
                doc: "`sr`: a thread sums an element over a row's non-zeros; `pr`: the non-zeros over the lanes, combined by warp shuffles (segmented by row for eb)",
            },
            width_param("k"),
            lanes_param("threads along threadIdx.x: the dense width's columns (sr), or the non-zeros of a reduction (pr: 2, 4, 8, 16 or 32; below 32 the rest of the warp takes 32/lanes columns along threadIdx.y)"),
            rows_param("rows (rb) or groups of non-zeros (eb) per block: along threadIdx.y (threadIdx.z for pr with lanes below 32); for pr, warps per block"),
        ],
        source: "DA-SpMM (Dai et al., DAC 2022): the design space of Table 1 (RB/EB x RM/CM x SR/PR) with conditional reduction",
        gpu: true,
    }
}

/// The layout of the dense operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Rm,
    Cm,
}

/// The row, column and width axes of the SpMM iteration, and the layout of its dense
/// operand.
struct Spmm {
    main: String,
    row: String,
    col: String,
    order: Order,
    output: String,
}

fn not_applicable(reason: impl Into<String>) -> RecipeError {
    RecipeError::NotApplicable {
        recipe: NAME.into(),
        reason: reason.into(),
    }
}

fn spmm(program: &Program) -> Result<Spmm, RecipeError> {
    let main =
        main_iteration(program).ok_or_else(|| not_applicable("the program has no iteration"))?;
    let it = program
        .body
        .iter()
        .find_map(|s| match s {
            CoordStmt::Iteration(it) if it.name == main => Some(it),
            _ => None,
        })
        .ok_or_else(|| not_applicable("no top-level iteration with a reduction"))?;
    let kinds: Vec<IterKind> = it.axes.iter().map(|a| a.kind).collect();
    if kinds != [IterKind::Spatial, IterKind::Reduction, IterKind::Spatial]
        || !program.axes[it.axes[1].axis].kind.is_sparse()
    {
        return Err(not_applicable(
            "the main iteration is not SpMM-shaped (row: spatial, sparse column: reduction, width: spatial)",
        ));
    }
    let (col, wid) = (
        coord::Expr::Var(it.axes[1].var),
        coord::Expr::Var(it.axes[2].var),
    );
    let mut order = None;
    let mut output = None;
    for s in &it.body {
        let CoordStmt::Store(store) = s else { continue };
        output.get_or_insert_with(|| program.buffers[store.buffer].name.clone());
        visit_loads(&store.value, &mut |buffer, indices| {
            if program.buffers[buffer].role != coord::BufferRole::Input {
                return;
            }
            if indices == [col.clone(), wid.clone()] {
                order.get_or_insert(Order::Rm);
            } else if indices == [wid.clone(), col.clone()] {
                order.get_or_insert(Order::Cm);
            }
        });
    }
    let order = order.ok_or_else(|| {
        not_applicable(
            "the main iteration reads no dense input at (column, width) or (width, column)",
        )
    })?;
    let output = output.ok_or_else(|| not_applicable("the main iteration stores nothing"))?;
    let name = |k: usize| program.axes[it.axes[k].axis].name.clone();
    Ok(Spmm {
        main,
        row: name(0),
        col: name(1),
        order,
        output,
    })
}

fn visit_loads(e: &coord::Expr, f: &mut impl FnMut(sparsile_ir::BufferId, &[coord::Expr])) {
    match e {
        coord::Expr::Load { buffer, indices } => {
            f(*buffer, indices);
            for ix in indices {
                visit_loads(ix, f);
            }
        }
        coord::Expr::Unary { arg, .. } => visit_loads(arg, f),
        coord::Expr::Binary { lhs, rhs, .. } => {
            visit_loads(lhs, f);
            visit_loads(rhs, f);
        }
        coord::Expr::Int(_)
        | coord::Expr::Float(_)
        | coord::Expr::Var(_)
        | coord::Expr::Param(_) => {}
    }
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let balance = args.choice("balance", &["rb", "eb"])?;
    let wanted = args.choice("order", &["auto", "rm", "cm"])?;
    let reduce = args.choice("reduce", &["sr", "pr"])?;
    let (lanes, rows) = block_shape(args, NAME, 1024)?;
    let shape = spmm(sch.program())?;
    match (wanted, shape.order) {
        ("rm", Order::Cm) => {
            return Err(not_applicable(
                "order=rm, but the program reads its dense operand column-major (B[k, j]); declare it `tensor B: f32[n, k]` and read `B[j, k]`",
            ))
        }
        ("cm", Order::Rm) => {
            return Err(not_applicable(
                "order=cm, but the program reads its dense operand row-major (B[j, k]); a column-major B is declared as its transpose, `tensor B: f32[k, n]`, and read `B[k, j]`",
            ))
        }
        _ => {}
    }
    if reduce == "pr" {
        if lanes < 2 || !(lanes as u64).is_power_of_two() || lanes > WARP {
            return Err(RecipeError::BadArg {
                recipe: NAME.into(),
                arg: "lanes".into(),
                value: lanes.to_string(),
                expected: "2, 4, 8, 16 or 32 with reduce=pr".into(),
            });
        }
        if WARP * rows > 1024 {
            return Err(RecipeError::BadArg {
                recipe: NAME.into(),
                arg: "rows".into(),
                value: rows.to_string(),
                expected: "at most 32 with reduce=pr (a warp per row or group of non-zeros)".into(),
            });
        }
    }
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(sched(NAME))?;
    }
    let s = sched(NAME);
    if balance == "eb" {
        sch.sparse_fuse(&shape.main, &[shape.row.clone(), shape.col.clone()])
            .map_err(&s)?;
    }
    let func = sch.func_or_lower().map_err(&s)?.clone();
    let loops: Vec<LoopRef> = nest(&func, &shape.main)
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    match (balance, reduce) {
        ("rb", "sr") => rb_sr(sch, &shape, &loops, lanes, rows)?,
        ("rb", _) => rb_pr(sch, &loops, lanes, rows)?,
        (_, "sr") => eb_sr(sch, &shape, lanes, rows)?,
        _ => eb_pr(sch, &shape, lanes, rows)?,
    }
    unbound_blocks(sch, NAME, lanes, rows)
}

/// The loop `k` of `loops`, or why the lowered nest is not SpMM's.
fn loop_at(loops: &[LoopRef], k: usize) -> Result<LoopRef, RecipeError> {
    loops.get(k).cloned().ok_or_else(|| {
        not_applicable(format!(
            "the lowered main block has fewer than {} loops",
            k + 1
        ))
    })
}

/// RB+SR (`gpu_rowwise`): `[i, j_p, k]` → `[i, k, j_p]`, each element in a register,
/// `k` over the lanes, rows over the grid and `threadIdx.y`.
fn rb_sr(
    sch: &mut Schedule,
    shape: &Spmm,
    loops: &[LoopRef],
    lanes: i64,
    rows: i64,
) -> Result<(), RecipeError> {
    let (row, nz, k) = (loop_at(loops, 0)?, loop_at(loops, 1)?, loop_at(loops, 2)?);
    sch.reorder(&[k.clone(), nz]).map_err(sched(NAME))?;
    cache_row(sch, &k, &shape.main, &shape.output, NAME)?;
    let (passes, lane) = width_lanes(sch, &k, lanes)?;
    if let Some(passes) = passes {
        // Passes of `lanes` columns over the grid's y (GE-SpMM's column tiles) rather
        // than a loop in every thread.
        sch.reorder(&[passes.clone(), row.clone()])
            .map_err(sched(NAME))?;
        sch.bind(&passes, BLOCK_Y).map_err(sched(NAME))?;
    }
    rows_and_lanes(sch, NAME, &row, &lane, rows, false)
}

/// The loop of the width to put on the lanes: the width itself when it is a power of
/// two no larger than `lanes`, else the inner loop of a split by `lanes` or, for a
/// narrower width, by the power of two above it — so that the lanes of a row never
/// straddle two warps (20 columns run on 32 lanes, 12 of them idle, rather than 20
/// lanes with the next row's first 12 in the same warp).
/// Returns the loop over the passes of `lanes` columns (when the width was split) and
/// the lane loop.
fn width_lanes(
    sch: &mut Schedule,
    k: &LoopRef,
    lanes: i64,
) -> Result<(Option<LoopRef>, LoopRef), RecipeError> {
    let factor = match extent_of(sch, k)? {
        Some(w) if w <= lanes && (w as u64).is_power_of_two() => return Ok((None, k.clone())),
        Some(w) if w < lanes => ((w as u64).next_power_of_two() as i64).min(lanes),
        _ => lanes,
    };
    let (o, i) = split(sch, NAME, k, factor)?;
    Ok((Some(o), i))
}

/// EB+SR (`gpu_nnz`): the fused non-zero loop over the grid and `threadIdx.y` with
/// atomic adds, the width over the lanes.
fn eb_sr(sch: &mut Schedule, shape: &Spmm, lanes: i64, rows: i64) -> Result<(), RecipeError> {
    let (nz, k) = fused_nest(sch, shape)?;
    let (_, lane) = width_lanes(sch, &k, lanes)?;
    rows_and_lanes(sch, NAME, &nz, &lane, rows, true)
}

/// The fused non-zero loop and the width loop at the end of its body (after the row
/// search, whose loop stores nothing).
fn fused_nest(sch: &mut Schedule, shape: &Spmm) -> Result<(LoopRef, LoopRef), RecipeError> {
    let func = sch.func_or_lower().map_err(sched(NAME))?.clone();
    let Some((nz, nz_loop)) = nest(&func, &shape.main).first().cloned() else {
        return Err(not_applicable("the lowered main block has no loop"));
    };
    let k = nz_loop
        .body
        .iter()
        .rev()
        .find_map(|s| match s {
            Stmt::For(f) if !Stmt::stored_buffers(&f.body).is_empty() => Some(LoopRef::new(
                shape.main.as_str(),
                func.vars[f.var].name.clone(),
            )),
            _ => None,
        })
        .ok_or_else(|| not_applicable("the fused non-zero loop holds no loop over the width"))?;
    Ok((nz, k))
}

/// The constant extent of loop `k` (of its block, at any depth), if it has one.
fn extent_of(sch: &mut Schedule, k: &LoopRef) -> Result<Option<i64>, RecipeError> {
    let func = sch.func_or_lower().map_err(sched(NAME))?;
    let mut found = None;
    for s in &func.body {
        let body = match s {
            Stmt::Launch { body, .. } => body.as_slice(),
            other => std::slice::from_ref(other),
        };
        for b in body {
            let Stmt::Block { name, body, .. } = b else {
                continue;
            };
            if *name != k.block {
                continue;
            }
            Stmt::visit_all(body, &mut |s| {
                if let Stmt::For(f) = s {
                    if func.vars[f.var].name == k.var {
                        found = constant_extent(&f.lo, &f.hi);
                    }
                }
            });
        }
    }
    Ok(found)
}

/// Columns of the width side by side in a warp (`32 / lanes`), and the width loop split
/// by them (the inner loop to put on `threadIdx.y`), when `lanes` is below 32.
fn warp_columns(
    sch: &mut Schedule,
    k: &LoopRef,
    lanes: i64,
) -> Result<Option<LoopRef>, RecipeError> {
    let cols = WARP / lanes;
    if cols == 1 {
        return Ok(None);
    }
    match extent_of(sch, k)? {
        Some(w) if w % cols == 0 => Ok(Some(split(sch, NAME, k, cols)?.1)),
        Some(w) => Err(not_applicable(format!(
            "reduce=pr with lanes={lanes} puts {cols} columns of the width side by side in a warp, but the width {w} is not a multiple of {cols} (use lanes=32)"
        ))),
        None => Err(not_applicable(format!(
            "reduce=pr with lanes={lanes} puts {cols} columns of the width side by side in a warp, which needs the width fixed (k=auto with the inputs, or k=N)"
        ))),
    }
}

/// RB+PR: `[i, j_p, k]` → `[i, k, j_p_i, j_p_o]`: for each column, the lanes sum
/// interleaved non-zeros of the row, combined by `warp_sum`; rows over the grid and
/// `threadIdx.y` (one warp each), or with several columns per warp, those along
/// `threadIdx.y` and the rows along `threadIdx.z`.
fn rb_pr(sch: &mut Schedule, loops: &[LoopRef], lanes: i64, rows: i64) -> Result<(), RecipeError> {
    let s = sched(NAME);
    let (row, nz, k) = (loop_at(loops, 0)?, loop_at(loops, 1)?, loop_at(loops, 2)?);
    sch.reorder(&[k.clone(), nz.clone()]).map_err(&s)?;
    let columns = warp_columns(sch, &k, lanes)?;
    let (nz_o, nz_i) = split(sch, NAME, &nz, lanes)?;
    sch.reorder(&[nz_i.clone(), nz_o]).map_err(&s)?;
    // The columns first: the warp reduction needs whole warps (lanes × columns).
    let row_axis = match &columns {
        Some(c) => {
            sch.bind(c, THREAD_Y).map_err(&s)?;
            THREAD_Z
        }
        None => THREAD_Y,
    };
    sch.warp_reduce(&nz_i).map_err(&s)?;
    let (o, i) = split(sch, NAME, &row, rows)?;
    sch.bind(&o, BLOCK_X).map_err(&s)?;
    sch.bind(&i, row_axis).map_err(&s)
}

/// EB+PR: the fused non-zero loop split by `lanes`, one non-zero per lane, every update
/// combined over the lanes of its row by `warp_segment_reduce`; groups of non-zeros over
/// the grid and `threadIdx.y` (or `.z` with several columns per warp), atomic adds.
fn eb_pr(sch: &mut Schedule, shape: &Spmm, lanes: i64, rows: i64) -> Result<(), RecipeError> {
    let s = sched(NAME);
    let (nz, k) = fused_nest(sch, shape)?;
    let columns = warp_columns(sch, &k, lanes)?;
    let (nz_o, nz_i) = split(sch, NAME, &nz, lanes)?;
    // The columns first: the warp reduction needs whole warps (lanes × columns).
    let group_axis = match &columns {
        Some(c) => {
            sch.bind(c, THREAD_Y).map_err(&s)?;
            THREAD_Z
        }
        None => THREAD_Y,
    };
    sch.warp_segment_reduce(&nz_i).map_err(&s)?;
    let (o, i) = split(sch, NAME, &nz_o, rows)?;
    sch.bind_atomic(&o, BLOCK_X).map_err(&s)?;
    sch.bind_atomic(&i, group_axis).map_err(&s)
}
