//! `gpu_tiles`: STile's multi-level tiles on the GPU. The sparse operand is cut into
//! dense square tiles of 32 and 16 (the levels whose cost parameter is not 0) and a rest
//! of scattered non-zeros, as the CPU recipe `tiles` cuts it ([`DecomposeRule::Tiles`]);
//! each tile level runs on tensor cores as `gpu_bsr_mma` runs a BSR operand (a block row
//! of tiles per block of the grid, 8 output columns per warp, each tile `mma`s), and the
//! rest runs as `gpu_rowwise` runs CSR (rows over the grid and `threadIdx.y`, the dense
//! width over lanes, sums in registers). The rest runs first and stores every output row
//! (so the output needs no zeroing launch); each level's launch then adds its tiles. The
//! parts run one launch after another on one stream, so no two threads add to one element
//! at once and no atomics are needed.
//!
//! A block of side `S` becomes a tile when its cost `tS` (in scattered entries) is no
//! more than what its sub-blocks and entries cost at the levels below: `tS = f · S²`
//! makes a tile of a block a fraction `f` full. The default `t16=224` takes a 16 × 16
//! block once seven eighths of it hold non-zeros: measured on an H200 (tf32, the
//! attention masks, the graph-challenge layer and DLMC weights, K = 32 and 128), the
//! tensor-core kernel costs more per stored element than the rest's CSR kernel costs
//! per non-zero, so only nearly full blocks pay as tiles, and even then this recipe
//! was 0.84× the best single-format GPU recipe in geometric mean at K = 32
//! (`bench/README.md`, tile decompositions on the GPU): it is a candidate to measure, not
//! a default. The rest's block shape is `gpu_rowwise`'s (`lanes`, `rows`: `auto`).
//!
//! Operands: f16 or bf16 `A` and `B` with an f32 output (exact products); f32 only with
//! `tf32=on` (the tiles' products rounded to tf32, the rest's exact). SpMM only, with the
//! dense width known at compile time. Example: `gpu_tiles:t16=128,t32=768,warps=4`.

use sparsile_transform::schedule::Schedule;

use super::gpu_block::unbound_blocks;
use super::gpu_bsr_mma::{mma_block, mma_params, MmaArgs};
use super::gpu_rowwise::{main_block, shape_args, shape_params};
use super::tiles::{levels, tile_params, tile_parts};
use super::{sched, Args, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_tiles";

/// The sides of the square levels, largest first, with their parameter names: multiples
/// of the 16 rows an `mma` covers.
const LEVELS: [(usize, &str); 2] = [(32, "t32"), (16, "t16")];

fn info() -> RecipeInfo {
    // The rest's block shape as `gpu_rowwise` chooses it (`auto`).
    let mut extra = mma_params();
    extra.extend(shape_params());
    let params = tile_params(&LEVELS, (16, "224"), extra);
    RecipeInfo {
        name: NAME,
        summary: "GPU: dense square tiles at nested levels on tensor cores (as gpu_bsr_mma), the other non-zeros as a csr part run as gpu_rowwise; the parts in launches one after another",
        ops: &["spmm"],
        formats: &["any"],
        params,
        source: "STile (dense tiles at several levels and one-dimensional tiles); SparseTIR (BSR SpMM with tensor cores)",
        gpu: true,
    }
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let levels = levels(NAME, args, &LEVELS)?;
    let mma = MmaArgs::read(sch, args, ctx, NAME)?;
    let parts = tile_parts(sch, args, levels, NAME)?;
    let (rest, tiles) = (&parts[0], &parts[1..]);
    // The rest first: its rows store every output row, so the output's zeroing goes
    // (`absorb_init`, while no launch separates the two).
    let func = sch.func_or_lower().map_err(sched(NAME))?.clone();
    let (lanes, rows) = shape_args(NAME, args, &func, Some(rest))?;
    main_block(sch, NAME, rest, lanes, rows)?;
    for part in tiles {
        mma_block(sch, NAME, part, &mma)?;
    }
    unbound_blocks(sch, NAME, lanes, rows)
}
