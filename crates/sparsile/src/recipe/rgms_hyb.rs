//! `rgms_hyb`: RGMS (relational gather-matmul-scatter, `Y[o,c] = M[r,o,i] * X[i,d] *
//! W[r,d,c]`) with a 3-D hyb decomposition of the order-3 sparse operand `M`: per
//! relation, rows bucketed into ELL parts of width 1, 2, …, 2^k, every part's work fused
//! into one loop (see `hyb`).

use sparsile_formats::decompose::DecomposeRule;
use sparsile_transform::schedule::Schedule;

use super::hyb::{decompose_and_fuse, pick_buffer};
use super::{Args, ParamInfo, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

fn info() -> RecipeInfo {
    RecipeInfo {
        name: "rgms_hyb",
        summary: "decompose the order-3 sparse operand (relation x row x column) into one bucketed ELL per relation, parts fused into one loop",
        ops: &["rgms"],
        formats: &["any"],
        params: vec![
            ParamInfo {
                name: "k",
                default: "3",
                doc: "bucket widths 1, 2, ..., 2^k; longer rows are split",
            },
            ParamInfo {
                name: "buffer",
                default: "auto",
                doc: "the input to decompose: `auto` (the first sparse order-3 input) or its name",
            },
        ],
        source: "SparseTIR (RGMS with a 3-D hyb decomposition)",
        gpu: false,
    }
}

fn apply(sch: &mut Schedule, args: &Args, _ctx: &RecipeContext) -> Result<(), RecipeError> {
    let k = args.int("k", 0, DecomposeRule::MAX_HYB_K as i64)? as u32;
    let buffer = pick_buffer(sch.program(), args.text("buffer"), 3, "rgms_hyb")?;
    decompose_and_fuse(sch, &buffer, DecomposeRule::Hyb { c: 1, k }, "rgms_hyb")
}
