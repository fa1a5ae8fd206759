//! `gpu_bsr_mma`: block-sparse SpMM on tensor cores (SparseTIR's BSR SpMM with
//! `mma.sync`; SpMMPlu's blocks computed at the matrix instruction's granularity;
//! Magicube's and vectorSparse's SR-BCRS, whose gathered columns make the mma's right
//! operand a gather).
//!
//! For `C[i,k] = A[i,j]·B[j,k]` with `A` in BSR (`bsr:RxC`, dense `R × C` blocks), the
//! main nest is block rows `io`, the row's blocks `jo_p`, a block's rows `ii` and columns
//! `ji`, and the dense width `k`. The recipe:
//! - fixes `K` at compile time (`k=auto`: the inputs' width) and splits it into tiles of
//!   8 columns (`k_o`, `k_i`; columns past `K` guarded), the tile loop moved above the
//!   block's loops (`reorder`);
//! - runs one block row per block of the grid (`blockIdx.x`) and the column tiles on the
//!   block's warps (`threadIdx.y`, at most `warps` of them; more tiles run in passes);
//! - turns each block's `R × C` times `C × 8` product into `mma`s (`tensorize`:
//!   `m16n8k16` when `C` is a multiple of 16, else `m16n8k8`, for f16 and bf16; `m16n8k8`
//!   or `m16n8k4` for tf32; `R / 16 · C / K` of them per block), each warp adding into its
//!   16 × 8 tiles of `C` (in global memory) block after block;
//! - zeroes `C` in a launch before (rows over the grid and `threadIdx.y`, columns over
//!   `threadIdx.x`).
//!
//! Operands: f16 or bf16 `A` and `B` multiply exactly; f32 ones only with `tf32=on`
//! (tensor cores round them to tf32, 10 mantissa bits). `C` is f32 (declare an f32 output
//! for f16/bf16 inputs: `tensor C: f32[m, k]`). Block rows of any length (none
//! included), matrices with no rows or no blocks, `K` that is not a multiple of 8 and
//! sizes that are not multiples of the blocks are all handled by the guards. `R` must be
//! a multiple of 16 and `C` of 8 (f16, bf16) or 4 (tf32): other blocks are refused.
//!
//! With `A` in SR-BCRS (`srbcrs:TxG`: rows in tiles of `T`, each tile row's non-zero
//! columns in groups of `G`, padded with explicit zeros), the main nest is tile rows
//! `io`, the row's groups `g_p`, a group's column positions `j_p` (over
//! `g_p · G..g_p · G + G`, the column `j` read from the group's indices) and a tile's rows
//! `ii`, then `k`. The same schedule applies with `j_p` as the depth: the column tile loop
//! goes above `ii` and `j_p` (`reorder` also brings `ii` above `j_p`), and `tensorize`
//! makes each group `T / 16 · G / K` mmas whose right operand is the rows of `B` at the
//! group's column indices (a gather; padding slots, whose column is `n`, read as zeros).
//! One recipe serves both layouts (read from the nest's loops, not from format names):
//! they differ only in which of the two inner loops of a block is the depth. `T` must be
//! a multiple of 16 and `G` of 8 (f16, bf16) or 4 (tf32).
//!
//! The result is a GPU function (sm_80 and later): compile it for `cuda` or run it with
//! the SIMT interpreter (`cuda-sim`).

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{BufferKind, Expr, Func, GpuAxis, GpuDim, MmaType, Stmt};
use sparsile_ir::DType;
use sparsile_transform::schedule::{LoopRef, Schedule, SplitTail};

use super::gpu_block::unbound_blocks;
use super::nest::{main_iteration, nest};
use super::rowwise::width;
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_bsr_mma";

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "GPU tensor cores: BSR or SR-BCRS SpMM, a block (tile) row per block of the grid, 8 columns of C per warp, each block (group of gathered columns) of A an mma.sync (f16/bf16, or f32 as tf32)",
        ops: &["spmm"],
        formats: &["bsr", "srbcrs"],
        params: mma_params(),
        source: "SparseTIR (BSR SpMM with tensor cores); SpMMPlu (meta-ops at the matrix instruction's granularity); Magicube and vectorSparse (SR-BCRS); PTX mma.sync",
        gpu: true,
    }
}

/// The element types of the operands loaded in `stmts` (float values buffers it does not
/// store to), sorted by name.
fn operand_types(func: &Func, stmts: &[Stmt]) -> Vec<DType> {
    let mut out = Vec::new();
    for b in Stmt::loaded_buffers(stmts) {
        let buf = &func.buffers[b];
        if buf.kind == BufferKind::Values && buf.dtype.is_float() && !out.contains(&buf.dtype) {
            let stored = Stmt::stored_buffers(stmts).contains(&b);
            if !stored {
                out.push(buf.dtype);
            }
        }
    }
    out.sort_by_key(|d| d.name());
    out
}

/// The output the nest accumulates into.
fn accumulator(func: &Func, stmts: &[Stmt]) -> Option<DType> {
    let stored = Stmt::stored_buffers(stmts);
    stored
        .into_iter()
        .map(|b| &func.buffers[b])
        .find(|b| b.kind == BufferKind::Values)
        .map(|b| b.dtype)
}

fn constant(lo: &Expr, hi: &Expr) -> Option<i64> {
    match (lo, hi) {
        (Expr::Int(0), Expr::Int(n)) => Some(*n),
        _ => None,
    }
}

/// `N` when a loop runs over `lo..lo + N` with `lo` not a literal: the positions of one
/// group of a `sparse_fixed` axis (`g_p * 8..g_p * 8 + 8`).
fn group(lo: &Expr, hi: &Expr) -> Option<i64> {
    if matches!(lo, Expr::Int(_)) {
        return None;
    }
    match hi {
        Expr::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
        } => match (&**lhs, &**rhs) {
            (x, Expr::Int(n)) | (Expr::Int(n), x) if x == lo => Some(*n),
            _ => None,
        },
        _ => None,
    }
}

/// The sparse operand's layout, read from the main nest's loops under the row's blocks.
enum Tiles {
    /// BSR: a block's rows then its columns, both `0..N`.
    Blocks,
    /// SR-BCRS: a group's gathered columns (`g_p * G..g_p * G + G`) then a tile's rows.
    Groups,
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let mma = MmaArgs::read(sch, args, ctx, NAME)?;
    let Some(main) = main_iteration(sch.program()) else {
        return Err(RecipeError::NotApplicable {
            recipe: NAME.into(),
            reason: "the program has no iteration".to_string(),
        });
    };
    mma_block(sch, NAME, &main, &mma)?;
    unbound_blocks(sch, NAME, 32, 4)
}

/// The tensor-core parameters (`k`, `warps`, `tf32`, `acc`), read and checked, with the
/// dense width specialised.
#[derive(Debug, Clone, Copy)]
pub(super) struct MmaArgs {
    warps: i64,
    tf32: bool,
    carry: bool,
}

impl MmaArgs {
    /// Reads the parameters of [`mma_params`]; specialises the dense width (`k=auto`: the
    /// inputs'), which must be known at compile time.
    pub(super) fn read(
        sch: &mut Schedule,
        args: &Args,
        ctx: &RecipeContext,
        recipe: &str,
    ) -> Result<MmaArgs, RecipeError> {
        let mma = MmaArgs {
            warps: args.int("warps", 1, 32)?,
            tf32: args.choice("tf32", &["on", "off"])? == "on",
            carry: args.choice("acc", &["registers", "memory"])? == "registers",
        };
        if args.text("k") == "none" {
            return Err(RecipeError::NotApplicable {
                recipe: recipe.into(),
                reason: "the dense width must be known at compile time (`k=auto` or a number): the warps take its columns".to_string(),
            });
        }
        if let Some((param, value)) = width(sch, args, ctx)? {
            sch.specialize(&param, value).map_err(sched(recipe))?;
        }
        Ok(mma)
    }
}

/// The parameters of the tensor-core schedule: the dense width, warps per block, tf32
/// rounding, and where a warp's tile of `C` lives (`acc`).
pub(super) fn mma_params() -> Vec<ParamInfo> {
    vec![
        ParamInfo {
            name: "k",
            default: "auto",
            doc: "the dense width to compile for: `auto` (the inputs') or a number",
        },
        ParamInfo {
            name: "warps",
            default: "8",
            doc: "warps per block along threadIdx.y, each taking 8 columns of C (more columns run in passes)",
        },
        ParamInfo {
            name: "tf32",
            default: "off",
            doc: "`on`: f32 operands run on tensor cores rounded to tf32 (10 mantissa bits); `off`: f32 operands are refused",
        },
        acc_param(),
    ]
}

/// The `acc` parameter's values: whether a warp's tile of `C` stays in registers across
/// the blocks of its block row (`registers`) or is loaded and stored around each block's
/// `mma` (`memory`, the default). Measured on an H200 (tf32, 11 block-structured and mixed
/// matrices, `bsr:16x16`): the same time at K = 32, and `registers` 8-10 % slower at
/// K = 128, where the column tiles' passes then each walk the block row again; the kernel
/// waits on its loads either way.
fn acc_param() -> ParamInfo {
    ParamInfo {
        name: "acc",
        default: "memory",
        doc: "`memory`: each warp's 16 x 8 tiles of C are loaded and stored around every block's mma; `registers`: they stay in registers across the blocks of the block row (loaded once, stored once; the column tiles' passes then each walk the block row)",
    }
}

/// Schedules block `block` (a BSR or SR-BCRS SpMM nest of constant width) as `mma`s:
/// one block row per block of the grid, the output's 8-column tiles over at most `warps`
/// warps, each block (group) tensorized, as `mma` asks (`tf32`: f32 operands rounded to
/// tf32; `acc=registers`: the output tiles' loop above the blocks').
/// Errors name `recipe`.
pub(super) fn mma_block(
    sch: &mut Schedule,
    recipe: &str,
    block: &str,
    mma: &MmaArgs,
) -> Result<(), RecipeError> {
    let MmaArgs { warps, tf32, carry } = *mma;
    let not = |reason: String| RecipeError::NotApplicable {
        recipe: recipe.into(),
        reason,
    };
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    let loops = nest(&func, block);
    let shape_hint = "it runs SpMM with the sparse operand in BSR (`bsr:16x16`, ...) or SR-BCRS (`srbcrs:16x8`, ...), whose nest loops over block rows, a row's blocks (groups), a block's rows and columns (a group's columns and a tile's rows), and the dense width";
    let [io, blocks, l2, l3, k] = loops.as_slice() else {
        return Err(not(format!(
            "the main nest has {} loops; {shape_hint}",
            loops.len()
        )));
    };
    let (layout, ii, ji, rows, cols) = match (
        constant(&l2.1.lo, &l2.1.hi),
        group(&l2.1.lo, &l2.1.hi),
        constant(&l3.1.lo, &l3.1.hi),
    ) {
        (Some(rows), _, Some(cols)) => (Tiles::Blocks, l2, l3, rows, cols),
        (_, Some(cols), Some(rows)) => (Tiles::Groups, l3, l2, rows, cols),
        _ => {
            return Err(not(format!(
                "the block's loops `{}` and `{}` do not have constant extents; {shape_hint}",
                l2.0.var, l3.0.var
            )))
        }
    };
    let (what_rows, what_cols, examples) = match layout {
        Tiles::Blocks => ("blocks", "blocks", "bsr:16x16, bsr:32x32"),
        Tiles::Groups => ("tiles", "groups", "srbcrs:16x8, srbcrs:32x16"),
    };
    let Some(width) = constant(&k.1.lo, &k.1.hi) else {
        return Err(not(
            "the dense width is not known at compile time (give the inputs, or `k=N`)".to_string(),
        ));
    };
    let body = &io.1.body;
    let types = operand_types(&func, body);
    let ty = match types.as_slice() {
        [DType::F16] => MmaType::F16,
        [DType::BF16] => MmaType::BF16,
        ts if ts.contains(&DType::F64) => {
            return Err(not(
                "f64 operands: tensor cores multiply f16, bf16 or (rounded) f32 values".to_string(),
            ))
        }
        _ if tf32 => MmaType::TF32,
        ts => {
            let names: Vec<&str> = ts.iter().map(|d| d.name()).collect();
            return Err(not(format!(
                "{} operands: tensor cores multiply f16 or bf16 values exactly; pass `tf32=on` to round f32 operands to tf32",
                names.join(" and ")
            )));
        }
    };
    match accumulator(&func, body) {
        Some(DType::F32) => {}
        Some(d) => {
            return Err(not(format!(
                "the output is {d}; tensor cores accumulate in f32 (declare the output f32: f16 and bf16 operands may be assigned to it)"
            )))
        }
        None => return Err(not(format!("the main nest stores no output; {shape_hint}"))),
    }
    let depth_ok = |k: u32| cols % i64::from(k) == 0;
    let shape = ty
        .shapes()
        .iter()
        .copied()
        .find(|s| depth_ok(s.k()))
        .ok_or_else(|| {
            not(format!(
                "{what_cols} of {cols} columns: an mma on {ty} operands needs a multiple of {}",
                ty.shapes().iter().map(|s| s.k()).min().unwrap_or(1)
            ))
        })?;
    if rows % i64::from(shape.m()) != 0 {
        return Err(not(format!(
            "{what_rows} of {rows} rows: an mma covers {} rows (use {examples}, ...)",
            shape.m()
        )));
    }

    let (k_o, _) = sch
        .split(&k.0, i64::from(shape.n()), SplitTail::InnerFixed)
        .map_err(sched(recipe))?;
    // The column tiles above the row's blocks: each warp then adds the blocks of its
    // block row into one tile of `C`, which the CUDA backend keeps in registers across
    // the blocks (loaded once before them, stored once after) instead of loading and
    // storing it around every `mma`.
    let order: Vec<LoopRef> = if carry {
        vec![k_o.clone(), blocks.0.clone(), ii.0.clone(), ji.0.clone()]
    } else {
        vec![k_o.clone(), ii.0.clone(), ji.0.clone()]
    };
    sch.reorder(&order).map_err(sched(recipe))?;
    sch.bind(&io.0, GpuAxis::Block(GpuDim::X))
        .map_err(sched(recipe))?;
    let tiles = (width + i64::from(shape.n()) - 1) / i64::from(shape.n());
    let warp_loop: LoopRef = if tiles > warps {
        sch.split(&k_o, warps, SplitTail::InnerFixed)
            .map_err(sched(recipe))?
            .1
    } else {
        k_o
    };
    sch.bind(&warp_loop, GpuAxis::Thread(GpuDim::Y))
        .map_err(sched(recipe))?;
    sch.tensorize(&ii.0, shape, ty).map_err(sched(recipe))?;
    Ok(())
}
