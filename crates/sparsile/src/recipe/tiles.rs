//! `tiles`: the sparse operand cut into dense tiles at several nested levels, chosen by
//! cost, and the rest (STile's multi-level tiles); each part run as `rowwise` runs it.
//!
//! The sparse input is decomposed by [`DecomposeRule::Tiles`] with square levels of
//! 32, 16, 8, 4 and 2 (those whose cost parameter `tS` is not 0, largest first): a block
//! becomes a dense tile of its level when that costs no more, in scattered entries,
//! than its sub-blocks and entries at the levels below; the remaining non-zeros form a
//! `csr` part. The rest runs first and accumulates each output row in a local array
//! that starts at zero and is stored whole, so the output needs no zeroing pass; then
//! each tile part adds its blocks, as the `blocks` recipe runs its tile part (the
//! output tile of a block row in registers, gathered dense rows prefetched). Each
//! part's rows are divided between threads by their non-zeros (or blocks); the parts
//! run one after the other, so no two threads add to one element and no atomics are
//! needed.
//!
//! The costs come from the tuner (`sparsile tune --strategy stile`), which fits them
//! to measured tiles of this machine and searches around them; by hand, a cost of
//! `f · S²` makes an `S × S` block a tile once it is a fraction `f` full (and its
//! sub-blocks are not cheaper). Example: `tiles:t16=64,t4=6,t8=0`.

use sparsile_formats::decompose::{DecomposeRule, TileLevel};
use sparsile_transform::schedule::{LoopPartition, Schedule};

use super::blocks::cache_rest_rows;
use super::default::parallel_outer;
use super::hyb::{decompose_parts, pick_buffer};
use super::nest::nest;
use super::rowwise::{
    prefetch_gathers, prefetch_param, register_tile_blocks, row_indptr, vectorize_innermost,
    vectorize_local_sums, width, width_param,
};
use super::{sched, Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

const NAME: &str = "tiles";

/// The sides of the square levels, largest first, with their parameter names.
const LEVELS: [(usize, &str); 5] = [(32, "t32"), (16, "t16"), (8, "t8"), (4, "t4"), (2, "t2")];

/// The parameters of a tile recipe: one cost per level of `sides` (`cost` for the level
/// of side `on`, 0 for the others), then `extra`, then the input to decompose.
pub(super) fn tile_params(
    sides: &[(usize, &'static str)],
    (on, cost): (usize, &'static str),
    extra: Vec<ParamInfo>,
) -> Vec<ParamInfo> {
    let mut params: Vec<ParamInfo> = sides
        .iter()
        .map(|&(side, name)| ParamInfo {
            name,
            default: if side == on { cost } else { "0" },
            doc: "the cost of a dense tile of this side, in scattered entries (0: no tiles of this side)",
        })
        .collect();
    params.extend(extra);
    params.push(ParamInfo {
        name: "buffer",
        default: "auto",
        doc: "the input to decompose: `auto` (the first sparse order-2 input) or its name",
    });
    params
}

fn info() -> RecipeInfo {
    let params = tile_params(&LEVELS, (8, "32"), vec![width_param("k"), prefetch_param()]);
    RecipeInfo {
        name: NAME,
        summary: "dense square tiles at nested levels, each block a tile where that costs no more than its parts, the other non-zeros as a csr part; each part run as rowwise runs it",
        ops: &["spmm", "spmv"],
        formats: &["any"],
        params,
        source: "STile (dense tiles at several levels and one-dimensional tiles)",
        gpu: false,
    }
}

/// The levels the arguments ask for, from the `(side, parameter)` pairs of `sides`
/// (largest first); at least one, or `recipe` is not applicable.
pub(super) fn levels(
    recipe: &str,
    args: &Args,
    sides: &[(usize, &str)],
) -> Result<Vec<TileLevel>, RecipeError> {
    let mut out = Vec::new();
    for &(side, name) in sides {
        let cost = args.int(name, 0, u32::MAX as i64)? as u32;
        if cost > 0 {
            out.push(TileLevel {
                r: side,
                c: side,
                cost,
            });
        }
    }
    if out.is_empty() {
        let names: Vec<&str> = sides.iter().map(|(_, n)| *n).collect();
        return Err(RecipeError::NotApplicable {
            recipe: recipe.to_string(),
            reason: format!(
                "every level's cost is 0: give at least one of {}",
                names.join(", ")
            ),
        });
    }
    Ok(out)
}

/// Decomposes the input the `buffer` argument names by [`DecomposeRule::Tiles`] with
/// `levels`: the part blocks, the rest's first and then one per level.
pub(super) fn tile_parts(
    sch: &mut Schedule,
    args: &Args,
    levels: Vec<TileLevel>,
    recipe: &str,
) -> Result<Vec<String>, RecipeError> {
    let buffer = pick_buffer(sch.program(), args.text("buffer"), 2, recipe)?;
    let n = levels.len();
    let parts = decompose_parts(sch, &buffer, DecomposeRule::Tiles { levels }, recipe)?;
    if parts.len() != n + 1 {
        return Err(RecipeError::NotApplicable {
            recipe: recipe.to_string(),
            reason: format!(
                "the decomposition gave {} part iterations, not {n} tile parts and a rest",
                parts.len()
            ),
        });
    }
    Ok(parts)
}

fn apply(sch: &mut Schedule, args: &Args, ctx: &RecipeContext) -> Result<(), RecipeError> {
    let levels = levels(NAME, args, &LEVELS)?;
    let distance = args.int("prefetch", 0, 1 << 16)?;
    if let Some((param, value)) = width(sch, args, ctx)? {
        sch.specialize(&param, value).map_err(sched(NAME))?;
    }
    let parts = tile_parts(sch, args, levels, NAME)?;
    let (rest, tiles) = (&parts[0], &parts[1..]);
    parallel_outer(sch, NAME)?;
    vectorize_innermost(sch, NAME)?;
    for part in &parts {
        prefetch_gathers(sch, NAME, part, distance)?;
    }
    // The rest's rows accumulate in a local, as CSR rows do under `rowwise`; it runs
    // first and stores every output row, so the output's zeroing pass goes
    // (`absorb_init`).
    cache_rest_rows(sch, rest, NAME)?;
    // Every part's rows divided between threads by their non-zeros (block rows by their
    // blocks), as `rowwise` divides them.
    let func = sch.func_or_lower().map_err(sched(NAME))?.clone();
    for part in &parts {
        if let Some((rows, row_loop)) = nest(&func, part).first() {
            if let (true, Some(indptr)) = (row_loop.kind.is_parallel(), row_indptr(&func, row_loop))
            {
                sch.parallel_with(rows, &LoopPartition::Balanced { indptr })
                    .map_err(sched(NAME))?;
            }
        }
    }
    for part in tiles {
        register_tile_blocks(sch, NAME, part)?;
    }
    vectorize_local_sums(sch, NAME, rest, 1, true)?;
    Ok(())
}
