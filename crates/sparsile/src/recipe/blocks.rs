//! `blocks`: the sparse operand cut into its dense tiles and the rest (STile's first
//! level), each part run as `rowwise` runs its format.
//!
//! The sparse input is decomposed by [`DecomposeRule::Blocks`]: the aligned `r × c`
//! blocks at least `fill` percent full go whole to a `bsr:RxC` part, every other
//! non-zero to a `csr` part. The dense width is fixed at compile time (`k`, as in
//! `rowwise`); each part's rows run in parallel, its innermost loop vectorised and its
//! gathered dense rows prefetched; the tile part's loop over a block row's blocks keeps
//! the output tile in registers (`register_tile`), the rest accumulates each output row
//! in a local array (`cache_write`). The parts run one after the other, each adding into
//! the output that the init block zeroed, so no two threads ever add to the same
//! element and no atomics are needed.
//!
//! A matrix with full blocks among scattered non-zeros (a sparse-transformer mask: a
//! band of local attention and strided columns) pays twice for a single format: as CSR
//! the band's entries are gathered one by one, as BSR the scattered ones drag in blocks
//! of zeros. Split, each kind runs on the kernel made for it.

use sparsile_formats::decompose::DecomposeRule;
use sparsile_transform::schedule::Schedule;

use super::default::parallel_outer;
use super::hyb::{decompose_parts, pick_buffer};
use super::nest::nest;
use super::rowwise::{
    cache_row, prefetch_gathers, prefetch_param, register_tile_blocks, stored_values,
    vectorize_innermost, vectorize_local_sums, width, width_param,
};
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "blocks";

fn info() -> RecipeInfo {
    RecipeInfo {
        name: NAME,
        summary: "dense r x c tiles (at least `fill` % full) as a bsr part, the other non-zeros as a csr part, each run as rowwise runs it",
        ops: &["spmm", "spmv"],
        formats: &["any"],
        params: vec![
            ParamInfo {
                name: "r",
                default: "8",
                doc: "rows of a tile",
            },
            ParamInfo {
                name: "c",
                default: "8",
                doc: "columns of a tile",
            },
            ParamInfo {
                name: "fill",
                default: "50",
                doc: "the percentage of a tile's cells that must hold non-zeros for it to be stored dense",
            },
            width_param("k"),
            prefetch_param(),
            ParamInfo {
                name: "buffer",
                default: "auto",
                doc: "the input to decompose: `auto` (the first sparse order-2 input) or its name",
            },
        ],
        source: "STile (dense tiles and one-dimensional tiles, first level)",
        gpu: false,
    }
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let r = args.int("r", 1, DecomposeRule::MAX_BLOCK as i64)? as usize;
    let c = args.int("c", 1, DecomposeRule::MAX_BLOCK as i64)? as usize;
    let fill = args.int("fill", 1, 100)? as u32;
    let distance = args.int("prefetch", 0, 1 << 16)?;
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(sched(NAME))?;
    }
    let buffer = pick_buffer(sch.program(), args.text("buffer"), 2, NAME)?;
    let parts = decompose_parts(sch, &buffer, DecomposeRule::Blocks { r, c, fill }, NAME)?;
    let [tiles, rest] = parts.as_slice() else {
        return Err(RecipeError::NotApplicable {
            recipe: NAME.to_string(),
            reason: format!(
                "the decomposition gave {} part iterations, not a tile part and a rest",
                parts.len()
            ),
        });
    };
    parallel_outer(sch, NAME)?;
    vectorize_innermost(sch, NAME)?;
    for part in [tiles, rest] {
        prefetch_gathers(sch, NAME, part, distance)?;
    }
    cache_rest_rows(sch, rest, NAME)?;
    register_tile_blocks(sch, NAME, tiles)?;
    vectorize_local_sums(sch, NAME, rest, 1, true)?;
    Ok(())
}

/// The rows of the scattered part `rest` accumulate in a local, as CSR rows do under
/// `rowwise` (`cache_write`, and `absorb_init` where the part runs first).
pub(super) fn cache_rest_rows(
    sch: &mut Schedule,
    rest: &str,
    recipe: &str,
) -> Result<(), RecipeError> {
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    if let Some((rows, row_loop)) = nest(&func, rest).first() {
        for stored in stored_values(&func, row_loop) {
            cache_row(sch, rows, rest, &stored, recipe)?;
        }
    }
    Ok(())
}
