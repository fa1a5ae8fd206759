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
//! was 0.63× the best single-format GPU recipe in geometric mean (`bench/README.md`,
//! GPU tiles): it is a candidate to measure, not a default.
//!
//! Operands: f16 or bf16 `A` and `B` with an f32 output (exact products); f32 only with
//! `tf32=on` (the tiles' products rounded to tf32, the rest's exact). SpMM only, with the
//! dense width known at compile time. Example: `gpu_tiles:t16=128,t32=768,warps=4`.

use sparsile_formats::decompose::DecomposeRule;
use sparsile_transform::schedule::Schedule;

use super::gpu_block::{lanes_param, rows_param, unbound_blocks};
use super::gpu_bsr_mma::{acc_param, carry, mma_block};
use super::gpu_rowwise::{main_block, shape_args};
use super::hyb::{decompose_parts, pick_buffer};
use super::rowwise::width;
use super::tiles::levels;
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "gpu_tiles";

/// The sides of the square levels, largest first, with their parameter names: multiples
/// of the 16 rows an `mma` covers.
const LEVELS: [(usize, &str); 2] = [(32, "t32"), (16, "t16")];

fn info() -> RecipeInfo {
    let mut params: Vec<ParamInfo> = LEVELS
        .iter()
        .map(|&(side, name)| ParamInfo {
            name,
            default: if side == 16 { "224" } else { "0" },
            doc: "the cost of a dense tile of this side, in scattered entries (0: no tiles of this side)",
        })
        .collect();
    params.extend([
        ParamInfo {
            name: "k",
            default: "auto",
            doc: "the dense width to compile for: `auto` (the inputs') or a number",
        },
        ParamInfo {
            name: "warps",
            default: "8",
            doc: "warps per block of a tile level along threadIdx.y, each taking 8 columns of C (more columns run in passes)",
        },
        ParamInfo {
            name: "tf32",
            default: "off",
            doc: "`on`: f32 tiles run on tensor cores rounded to tf32 (10 mantissa bits); `off`: f32 operands are refused",
        },
        acc_param(),
        lanes_param("the rest's threads along threadIdx.x over the dense width (`auto`: as gpu_rowwise)"),
        rows_param("the rest's rows per block along threadIdx.y (`auto`: as gpu_rowwise)"),
        ParamInfo {
            name: "buffer",
            default: "auto",
            doc: "the input to decompose: `auto` (the first sparse order-2 input) or its name",
        },
    ]);
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
    let warps = args.int("warps", 1, 32)?;
    let tf32 = args.choice("tf32", &["on", "off"])? == "on";
    let carry = carry(args)?;
    if args.text("k") == "none" {
        return Err(RecipeError::NotApplicable {
            recipe: NAME.into(),
            reason: "the dense width must be known at compile time (`k=auto` or a number): the tiles' warps take its columns".to_string(),
        });
    }
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(sched(NAME))?;
    }
    let buffer = pick_buffer(sch.program(), args.text("buffer"), 2, NAME)?;
    let n = levels.len();
    let parts = decompose_parts(sch, &buffer, DecomposeRule::Tiles { levels }, NAME)?;
    let Some((rest, tiles)) = parts.split_first().filter(|_| parts.len() == n + 1) else {
        return Err(RecipeError::NotApplicable {
            recipe: NAME.to_string(),
            reason: format!(
                "the decomposition gave {} part iterations, not {n} tile parts and a rest",
                parts.len()
            ),
        });
    };
    // The rest first: its rows store every output row, so the output's zeroing goes
    // (`absorb_init`, while no launch separates the two).
    let func = sch.func_or_lower().map_err(sched(NAME))?.clone();
    let (lanes, rows) = shape_args(NAME, args, &func, Some(rest))?;
    main_block(sch, NAME, rest, lanes, rows)?;
    for part in tiles {
        mma_block(sch, NAME, part, warps, tf32, carry)?;
    }
    unbound_blocks(sch, NAME, lanes, rows)
}
