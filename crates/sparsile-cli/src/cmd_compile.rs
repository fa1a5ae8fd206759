//! `sparsile compile`: prints the IR of a stage, or the generated C, for a program.

use anyhow::{anyhow, Context, Result};
use sparsile::transform::schedule::Trace;
use sparsile::{Stage, Target};

use crate::cmd_eval::{self, EvalArgs};
use crate::output::out;

#[derive(clap::Args)]
pub struct CompileArgs {
    #[command(flatten)]
    pub program: EvalArgs,
    /// What to print: stage1, stage2, stage3, c (a CPU function's code) or cuda (a GPU
    /// function's); default: c, or cuda with a GPU target.
    #[arg(long)]
    pub emit: Option<String>,
    /// The target to compile for: `cpu`, or `cuda` / `cuda-sim` (a GPU function, from a
    /// GPU recipe; by default the one the GPU rule picks for the operator).
    #[arg(long, default_value = "cpu", value_name = "TARGET")]
    pub target: String,
    /// A recorded schedule (trace JSON) to apply instead of the default schedule.
    #[arg(long, value_name = "TRACE.json", conflicts_with = "recipe")]
    pub schedule: Option<std::path::PathBuf>,
    /// A named recipe (`sparsile recipes` lists them), e.g. `rowwise` or `rowwise:k=32`;
    /// `auto` (the default when a sparse input file is given) compiles the automatic
    /// choice for the inputs; without input files, the default schedule.
    #[arg(long, value_name = "NAME[:key=value,...]")]
    pub recipe: Option<String>,
    /// Writes the schedule that was applied (from --recipe or --schedule) as trace JSON.
    #[arg(long, value_name = "TRACE.json")]
    pub save_trace: Option<std::path::PathBuf>,
}

/// Reads a schedule trace file.
pub fn read_trace(path: &std::path::Path) -> Result<Trace> {
    let text = crate::load::read_text(path)?;
    Trace::from_json(&text).with_context(|| format!("bad schedule trace {}", path.display()))
}

/// The schedule to apply: a trace file, or the trace a recipe builds for `program`
/// given the parameter values the inputs fix; `None` for the default schedule.
pub fn chosen_trace(
    schedule: Option<&std::path::Path>,
    recipe: Option<&str>,
    program: &sparsile_ir::coord::Program,
    params: &std::collections::HashMap<String, i64>,
) -> Result<Option<Trace>> {
    Ok(match (schedule, recipe) {
        (Some(path), _) => Some(read_trace(path)?),
        (None, Some(spec)) => {
            let context = sparsile::recipe::RecipeContext {
                params: params.clone(),
            };
            Some(sparsile::recipe::trace(spec, program, &context)?)
        }
        (None, None) => None,
    })
}

/// Writes `trace` as JSON to `path` when one is given.
pub fn save_trace(path: Option<&std::path::Path>, trace: Option<&Trace>) -> Result<()> {
    if let Some(path) = path {
        let json = trace.cloned().unwrap_or_default().to_json();
        std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

pub fn run(args: &CompileArgs) -> Result<()> {
    let target: Target = args.target.parse().map_err(anyhow::Error::msg)?;
    let emit = args
        .emit
        .as_deref()
        .unwrap_or(if target.is_gpu() { "cuda" } else { "c" });
    let stage: Stage = emit.parse().map_err(anyhow::Error::msg)?;
    let auto = args.recipe.as_deref().is_none_or(|r| r == "auto")
        && args.schedule.is_none()
        && (target.is_gpu() || !args.program.inputs.is_empty());
    let mut recipe = args.recipe.clone().filter(|r| r != "auto");
    let (stage1, params) = if recipe.is_some() || auto {
        // Recipes see the sizes the inputs fix (to specialise the dense width).
        let mut prepared = cmd_eval::prepare(&args.program)?;
        if auto && target.is_gpu() {
            recipe =
                Some(sparsile::auto::gpu_rule_on(&prepared.program, &prepared.inputs).to_string());
        } else if auto {
            let threads = sparsile_runtime::jit::default_threads(
                &sparsile_ir::settings::Settings::from_env(),
            );
            let resolved =
                crate::auto_choice::resolve(&args.program, prepared, None, false, threads, false)?;
            prepared = resolved.prepared;
            recipe = resolved.recipe;
        }
        let mut program = prepared.program.clone();
        let by_buffer = prepared
            .inputs
            .iter()
            .map(|(n, t)| (n.clone(), t))
            .collect();
        sparsile::specialize_index_types(&mut program, &by_buffer);
        (program, prepared.params)
    } else {
        let files = cmd_eval::load_inputs(&args.program)?;
        let formats = cmd_eval::format_overrides(&args.program)?;
        let (_, ast) = cmd_eval::read_program(&args.program, &files, &formats)?;
        let program = sparsile::lower(&ast).map_err(|e| anyhow!("{e}"))?;
        (program, Default::default())
    };
    let trace = chosen_trace(
        args.schedule.as_deref(),
        recipe.as_deref(),
        &stage1,
        &params,
    )?;
    save_trace(args.save_trace.as_deref(), trace.as_ref())?;
    let text =
        if stage == Stage::Stage1 && trace.is_none() {
            stage1.to_string()
        } else {
            let lowered = match &trace {
                Some(trace) => sparsile::lower_program_with(stage1, trace)?,
                None => sparsile::lower_program(stage1)?,
            };
            let kind = |gpu: bool| if gpu { "a GPU" } else { "a CPU" };
            if target.is_gpu() != lowered.code.is_gpu() {
                return Err(anyhow!(
                    "target {target}: the schedule makes {} function{}",
                    kind(lowered.code.is_gpu()),
                    if target.is_gpu() {
                        "; schedule it with a GPU recipe (gpu_rowwise, gpu_warp)"
                    } else {
                        "; compile it with --target cuda"
                    }
                ));
            }
            match stage {
                Stage::Stage1 => lowered.stage1.to_string(),
                Stage::Stage2 => lowered.stage2.to_string(),
                Stage::Stage3 => lowered.stage3.to_string(),
                Stage::C | Stage::Cuda if stage != lowered.code.stage() => {
                    return Err(anyhow!(
                    "--emit {stage}: the schedule makes {} function, whose code is {} (--emit {})",
                    kind(lowered.code.is_gpu()),
                    if lowered.code.is_gpu() { "CUDA C++" } else { "C" },
                    lowered.code.stage()
                ))
                }
                Stage::C | Stage::Cuda => lowered.code.text().to_string(),
            }
        };
    out!("{text}");
    if !text.ends_with('\n') {
        out!("\n");
    }
    Ok(())
}
