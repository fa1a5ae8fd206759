//! `default`: the schedule `compile` applies when none is given — the outermost
//! spatial loop of every block runs in parallel (see
//! [`default_schedule`](sparsile_transform::default_schedule())), recorded as
//! `parallel` steps.

use sparsile_ir::loops::ForKind;
use sparsile_transform::default_schedule;
use sparsile_transform::schedule::{Schedule, ScheduleError};

use super::nest::{blocks, nest};
use super::{sched, Args, Recipe, RecipeContext, RecipeError, RecipeInfo};

pub(super) const RECIPE: Recipe = Recipe { info, apply };

fn info() -> RecipeInfo {
    RecipeInfo {
        name: "default",
        summary: "outermost spatial loop of each block in parallel, even static chunks (what compiling without a schedule does)",
        ops: &["any"],
        formats: &["any"],
        params: Vec::new(),
        source: "Sparsile",
        gpu: false,
    }
}

fn apply(sch: &mut Schedule, _args: &Args, _ctx: &RecipeContext) -> Result<(), RecipeError> {
    parallel_outer(sch, "default")
}

/// Marks parallel the loops the default schedule would: lowers the program if needed.
pub(super) fn parallel_outer(sch: &mut Schedule, recipe: &str) -> Result<(), RecipeError> {
    parallel_outer_except(sch, recipe, &[])
}

/// [`parallel_outer`], leaving the blocks named in `skip` as they are.
pub(super) fn parallel_outer_except(
    sch: &mut Schedule,
    recipe: &str,
    skip: &[String],
) -> Result<(), RecipeError> {
    let func = sch.func_or_lower().map_err(sched(recipe))?.clone();
    let scheduled =
        default_schedule(sch.program(), func).map_err(|e| sched(recipe)(ScheduleError::from(e)))?;
    for block in blocks(&scheduled).into_iter().filter(|b| !skip.contains(b)) {
        let outer = nest(&scheduled, &block)
            .first()
            .map(|(r, f)| (r.clone(), f.kind));
        if let Some((target, ForKind::Parallel)) = outer {
            sch.parallel(&target).map_err(sched(recipe))?;
        }
    }
    Ok(())
}
