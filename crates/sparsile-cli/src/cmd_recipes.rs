//! `sparsile recipes`: the named schedules, the operators and formats they apply to, the
//! targets their code runs on and their parameters (a table, or `--json`).

use anyhow::Result;

use crate::output::out;
use crate::table::Table;

#[derive(clap::Args)]
pub struct RecipesArgs {
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &RecipesArgs) -> Result<()> {
    let recipes = sparsile::recipe::list();
    if args.json {
        out!("{}\n", serde_json::to_string_pretty(&recipes)?);
        return Ok(());
    }
    let mut table = Table::new(
        &[
            "recipe",
            "ops",
            "formats",
            "targets",
            "parameters",
            "what it does",
        ],
        &[false; 6],
    );
    for r in &recipes {
        let params = if r.params.is_empty() {
            "-".to_string()
        } else {
            r.params
                .iter()
                .map(|p| format!("{}={}", p.name, p.default))
                .collect::<Vec<_>>()
                .join(",")
        };
        table.row(vec![
            r.name.to_string(),
            r.ops.join(","),
            r.formats.join(","),
            if r.gpu { "cuda,cuda-sim" } else { "cpu" }.to_string(),
            params,
            r.summary.to_string(),
        ]);
    }
    out!("{}", table.render());
    out!("\nParameters:\n");
    for r in &recipes {
        for p in &r.params {
            out!(
                "  {}:{}  {} (default {})\n",
                r.name,
                p.name,
                p.doc,
                p.default
            );
        }
    }
    out!("\nUse: sparsile run ... --recipe NAME[:key=value,...] [--target cuda|cuda-sim for GPU recipes]\n");
    Ok(())
}
