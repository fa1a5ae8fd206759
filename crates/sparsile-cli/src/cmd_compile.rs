//! `sparsile compile`: prints the IR of a stage, or the generated C, for a program.

use std::collections::HashMap;

use anyhow::{anyhow, Result};
use sparsile::Stage;

use crate::cmd_eval::{self, EvalArgs};
use crate::load;
use crate::output::out;

#[derive(clap::Args)]
pub struct CompileArgs {
    #[command(flatten)]
    pub program: EvalArgs,
    /// What to print: stage1, stage2, stage3 or c.
    #[arg(long, default_value = "c")]
    pub emit: String,
}

pub fn run(args: &CompileArgs) -> Result<()> {
    let stage: Stage = args.emit.parse().map_err(anyhow::Error::msg)?;
    let mut files = HashMap::new();
    for s in &args.program.inputs {
        let (name, path) = s
            .split_once('=')
            .ok_or_else(|| anyhow!("--input `{s}` must look like NAME=FILE"))?;
        files.insert(name.trim().to_string(), load::read(path.trim().as_ref())?);
    }
    let formats = cmd_eval::format_overrides(&args.program)?;
    let (_, ast) = cmd_eval::read_program(&args.program, &files, &formats)?;
    let stage1 = sparsile::lower(&ast).map_err(|e| anyhow!("{e}"))?;
    let text = if stage == Stage::Stage1 {
        stage1.to_string()
    } else {
        let lowered = sparsile::lower_program(stage1)?;
        match stage {
            Stage::Stage1 => unreachable!("handled above"),
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
