//! `sparsile tune calibrate`: measures the STile strategy's tile costs on this machine
//! again (a dense tile of each side and one more part's pass against a scattered entry,
//! per dense width) and
//! stores them beside the tuning database, where `--strategy stile` reads them.
//!
//! ```text
//! sparsile tune calibrate --k 32,128 --threads 2
//! ```

use anyhow::{Context, Result};
use sparsile::auto::stile::{calibration_path, recalibrate};
use sparsile::ir::settings::Settings;
use sparsile::ir::DType;
use sparsile::tune::op::Operator;

use crate::output::outln;
use crate::table::Table;

#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// Dense widths K to calibrate (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "32,128")]
    pub k: Vec<usize>,
    /// Threads of the kernels (default: SPARSILE_NUM_THREADS or every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Element type: f32 or f64.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
}

pub fn run(args: &CalibrateArgs) -> Result<()> {
    let settings = Settings::from_env();
    let dtype: DType = args
        .dtype
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--dtype: {e}"))?;
    if !matches!(dtype, DType::F32 | DType::F64) {
        anyhow::bail!("--dtype must be f32 or f64, got `{dtype}`");
    }
    let threads = args
        .threads
        .unwrap_or_else(|| sparsile_runtime::jit::default_threads(&settings));
    let mut t = Table::new(
        &["K", "tile", "ns a tile", "ns a cell", "in entries"],
        &[true, false, true, true, true],
    );
    for &k in &args.k {
        if k == 0 {
            anyhow::bail!("--k: widths must be positive");
        }
        let c = recalibrate(Operator::Spmm, k, threads, dtype, &settings)
            .with_context(|| format!("calibrating K = {k}"))?;
        t.row(vec![
            k.to_string(),
            "scattered entry".into(),
            format!("{:.2}", c.entry_ms * 1e6),
            format!("{:.3}", c.entry_ms * 1e6),
            "1".into(),
        ]);
        t.row(vec![
            k.to_string(),
            "one more part's pass".into(),
            format!("{:.0}", c.part_ms * 1e6),
            "-".into(),
            format!("{:.0}", c.part_ms / c.entry_ms),
        ]);
        for (side, ms) in &c.tile_ms {
            t.row(vec![
                k.to_string(),
                format!("{side}x{side}"),
                format!("{:.1}", ms * 1e6),
                format!("{:.3}", ms * 1e6 / (side * side) as f64),
                format!("{:.1}", ms / c.entry_ms),
            ]);
        }
    }
    outln!("tile costs, {threads} threads, {}:", args.dtype);
    crate::output::out!("{}", t.render());
    match calibration_path(&settings) {
        Some(p) => outln!("stored in {}", p.display()),
        None => outln!("not stored: no cache folder"),
    }
    Ok(())
}
