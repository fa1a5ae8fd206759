//! `sparsile info FILE`: shape, nnz, density, row-length statistics and histogram,
//! empty rows, symmetry, bandwidth and block fill of a matrix.

use crate::output::{out, outln};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use sparsile_formats::MatrixStats;

use crate::table::{thousands, Table};
use crate::{load, progress};

#[derive(clap::Args)]
pub struct InfoArgs {
    /// A Matrix Market file (`.mtx`, `.mtx.gz`) or a Sparsile tensor file (`.spt`).
    pub file: PathBuf,
    /// Print the statistics as JSON.
    #[arg(long)]
    pub json: bool,
}

fn yes_no(b: Option<bool>) -> String {
    match b {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => "n/a (not square)".into(),
    }
}

pub fn run(args: &InfoArgs) -> Result<()> {
    let bar = progress::spinner(!args.json, format!("reading {}", args.file.display()));
    let start = Instant::now();
    let loaded = load::read(&args.file)?;
    let coo = loaded.to_coo()?;
    let load_secs = start.elapsed().as_secs_f64();
    if coo.ndim() != 2 {
        bail!(
            "{} holds a tensor of order {}; `info` describes matrices",
            args.file.display(),
            coo.ndim()
        );
    }
    bar.set_message("computing statistics");
    let stats = MatrixStats::of(&coo)?;
    bar.finish_and_clear();
    if args.json {
        let mut v = serde_json::to_value(&stats)?;
        v["file"] = serde_json::Value::String(args.file.display().to_string());
        v["load_seconds"] = serde_json::json!(load_secs);
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    out!(
        "{}",
        render(&args.file.display().to_string(), &stats, load_secs)
    );
    Ok(())
}

/// The human-readable report.
pub fn render(name: &str, s: &MatrixStats, load_secs: f64) -> String {
    let mut out = format!(
        "{name}  (read in {})\n\n",
        crate::table::duration(load_secs)
    );
    let mut t = Table::new(&["property", "value"], &[false, true]);
    t.row(vec![
        "shape".into(),
        format!(
            "{} x {}",
            thousands(s.rows as u64),
            thousands(s.cols as u64)
        ),
    ]);
    t.row(vec!["nonzeros".into(), thousands(s.nnz as u64)]);
    t.row(vec!["density".into(), format!("{:.3e}", s.density)]);
    t.row(vec![
        "row length mean".into(),
        format!("{:.2}", s.row_length_mean),
    ]);
    t.row(vec![
        "row length std".into(),
        format!("{:.2}", s.row_length_std),
    ]);
    t.row(vec![
        "row length min / max".into(),
        format!(
            "{} / {}",
            s.row_length_min,
            thousands(s.row_length_max as u64)
        ),
    ]);
    t.row(vec!["empty rows".into(), thousands(s.empty_rows as u64)]);
    t.row(vec!["empty columns".into(), thousands(s.empty_cols as u64)]);
    t.row(vec![
        "structurally symmetric".into(),
        yes_no(s.structurally_symmetric),
    ]);
    t.row(vec![
        "numerically symmetric".into(),
        yes_no(s.numerically_symmetric),
    ]);
    t.row(vec!["bandwidth".into(), thousands(s.bandwidth as u64)]);
    out.push_str(&t.render());

    out.push_str("\nrow lengths\n");
    let mut h = Table::new(&["length", "rows", "share", ""], &[true, true, true, false]);
    let max_rows = s
        .row_length_histogram
        .iter()
        .map(|b| b.rows)
        .max()
        .unwrap_or(0)
        .max(1);
    for b in &s.row_length_histogram {
        let label = if b.lo == b.hi {
            b.lo.to_string()
        } else {
            format!("{}-{}", b.lo, b.hi)
        };
        let share = if s.rows == 0 {
            0.0
        } else {
            100.0 * b.rows as f64 / s.rows as f64
        };
        let bar = "#".repeat((40 * b.rows).div_ceil(max_rows));
        h.row(vec![
            label,
            thousands(b.rows as u64),
            format!("{share:.1}%"),
            bar,
        ]);
    }
    out.push_str(&h.render());

    out.push_str("\naligned r x r blocks\n");
    let mut bt = Table::new(
        &["r", "non-empty blocks", "fill", "nnz in full blocks"],
        &[true, true, true, true],
    );
    for b in &s.blocks {
        bt.row(vec![
            b.r.to_string(),
            thousands(b.nonempty_blocks as u64),
            format!("{:.2}%", 100.0 * b.fill_ratio),
            format!("{:.2}%", 100.0 * b.dense_block_fraction),
        ]);
    }
    out.push_str(&bt.render());
    out
}
