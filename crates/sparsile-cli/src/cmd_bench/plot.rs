//! `--plot OUT.png`: the chart is drawn by `bench/plot.py` with matplotlib from the bench
//! environment (bench/setup.sh), from the records written as JSON: Sparsile's speedup
//! over each peer per case (log scale, 1× marked), and every system's position under
//! the roofline (GFLOP/s against arithmetic intensity).

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::cmd_bench::peers;

/// Draws `records_json` into `png` with `bench/plot.py`, run by `python` (`--python`) or
/// the bench environment's interpreter.
pub fn draw(
    bench_dir: &Path,
    python: Option<&Path>,
    records_json: &Path,
    png: &Path,
) -> Result<()> {
    let python = peers::python(bench_dir, python).context("--plot needs matplotlib")?;
    let script = bench_dir.join("plot.py");
    let output = Command::new(&python)
        .arg(&script)
        .arg(records_json)
        .arg(png)
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !output.status.success() {
        bail!(
            "{} failed ({}): {}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}
