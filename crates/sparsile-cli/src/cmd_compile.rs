//! `sparsile compile`: prints the IR of a stage, or the generated C, for a program.

use anyhow::{anyhow, Context, Result};
use sparsile::Stage;

use crate::cmd_eval::{self, EvalArgs};
use crate::output::out;

#[derive(clap::Args)]
pub struct CompileArgs {
    #[command(flatten)]
    pub program: EvalArgs,
    /// What to print: stage1, stage2, stage3 or c.
    #[arg(long, default_value = "c")]
    pub emit: String,
    /// A recorded schedule (trace JSON) to apply instead of the default schedule.
    #[arg(long, value_name = "TRACE.json")]
    pub schedule: Option<std::path::PathBuf>,
}

/// Reads a schedule trace file.
pub fn read_trace(path: &std::path::Path) -> Result<sparsile::transform::schedule::Trace> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    sparsile::transform::schedule::Trace::from_json(&text)
        .with_context(|| format!("bad schedule trace {}", path.display()))
}

pub fn run(args: &CompileArgs) -> Result<()> {
    let stage: Stage = args.emit.parse().map_err(anyhow::Error::msg)?;
    let files = cmd_eval::load_inputs(&args.program)?;
    let formats = cmd_eval::format_overrides(&args.program)?;
    let (_, ast) = cmd_eval::read_program(&args.program, &files, &formats)?;
    let stage1 = sparsile::lower(&ast).map_err(|e| anyhow!("{e}"))?;
    let text = if stage == Stage::Stage1 && args.schedule.is_none() {
        stage1.to_string()
    } else {
        let lowered = match &args.schedule {
            Some(path) => sparsile::lower_program_with(stage1, &read_trace(path)?)?,
            None => sparsile::lower_program(stage1)?,
        };
        match stage {
            Stage::Stage1 => lowered.stage1.to_string(),
            Stage::Stage2 => lowered.stage2.to_string(),
            Stage::Stage3 => lowered.stage3.to_string(),
            Stage::C => lowered.c,
        }
    };
    out!("{text}");
    if !text.ends_with('\n') {
        out!("\n");
    }
    Ok(())
}
