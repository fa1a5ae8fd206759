//! `sparsile convert IN --to FORMAT -o OUT`: stores a tensor in another format.

use crate::output::{out, outln};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sparsile_formats::Format;
use sparsile_ir::DType;

use crate::table::{duration, thousands, Table};
use crate::{load, progress};

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// Input file (`.mtx`, `.mtx.gz` or `.spt`).
    pub input: PathBuf,
    /// Target format: dense, csr, csc, coo, dcsr, bsr:RxC, dbsr:RxC, ell[:K], dia, csf, srbcrs:TxG, ragged.
    #[arg(long = "to")]
    pub to: String,
    /// Output file: `.spt` keeps the format and its structure arrays; `.mtx` / `.mtx.gz`
    /// hold the coordinates only.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Value type stored: f16, bf16, f32, f64.
    #[arg(long, default_value = "f64")]
    pub dtype: String,
    /// Read the output back and check it holds the same entries as the input.
    #[arg(long)]
    pub check: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &ConvertArgs) -> Result<()> {
    let format: Format = args.to.parse()?;
    let dtype: DType = args.dtype.parse().map_err(anyhow::Error::msg)?;
    if !dtype.is_float() {
        bail!("--dtype must be a floating-point type (f16, bf16, f32, f64), found {dtype}");
    }
    let bar = progress::spinner(!args.json, format!("reading {}", args.input.display()));
    let t0 = Instant::now();
    let loaded = load::read(&args.input)?;
    let read_secs = t0.elapsed().as_secs_f64();
    bar.set_message(format!("converting to {format}"));
    let t1 = Instant::now();
    let coo = loaded.to_coo()?;
    let tensor = sparsile_formats::SparseTensor::from_coo_with(&coo, &format, dtype)
        .with_context(|| format!("cannot convert {} to {format}", args.input.display()))?;
    let convert_secs = t1.elapsed().as_secs_f64();
    bar.set_message(format!("writing {}", args.output.display()));
    load::write(&args.output, &tensor)?;
    let mut checked = None;
    if args.check {
        bar.set_message("checking the round trip");
        let back = load::read(&args.output)?.to_coo()?;
        let mut expected = coo.clone();
        if dtype != DType::F64 {
            // Values were rounded to the stored type; compare against the rounded input.
            let rounded = sparsile_formats::Values::from_f64(&expected.values, dtype);
            expected.values = rounded.to_f64_vec();
        }
        if format.pads() {
            let keep: Vec<usize> = (0..expected.nnz())
                .filter(|&e| expected.values[e] != 0.0)
                .collect();
            let d = expected.ndim();
            expected.coords = keep
                .iter()
                .flat_map(|&e| expected.coords[e * d..(e + 1) * d].to_vec())
                .collect();
            expected.values = keep.iter().map(|&e| expected.values[e]).collect();
        }
        if back != expected {
            bail!(
                "round-trip check failed: {} holds {} entries, the input {} (or values differ)",
                args.output.display(),
                back.nnz(),
                expected.nnz()
            );
        }
        checked = Some(true);
    }
    bar.finish_and_clear();
    let stored = tensor.nnz_stored();
    let padding = stored.saturating_sub(coo.nnz());
    if args.json {
        let v = serde_json::json!({
            "input": args.input.display().to_string(),
            "output": args.output.display().to_string(),
            "format": format.to_string(),
            "dtype": dtype.name(),
            "shape": coo.shape,
            "nnz": coo.nnz(),
            "stored_values": stored,
            "padding": padding,
            "read_seconds": read_secs,
            "convert_seconds": convert_secs,
            "round_trip_checked": checked,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let mut t = Table::new(&["", ""], &[false, true]);
    t.row(vec!["format".into(), format.to_string()]);
    t.row(vec!["nonzeros".into(), thousands(coo.nnz() as u64)]);
    t.row(vec!["stored values".into(), thousands(stored as u64)]);
    let pct = if stored == 0 {
        0.0
    } else {
        100.0 * padding as f64 / stored as f64
    };
    t.row(vec![
        "padding".into(),
        format!("{} ({pct:.1}%)", thousands(padding as u64)),
    ]);
    t.row(vec!["read".into(), duration(read_secs)]);
    t.row(vec!["convert".into(), duration(convert_secs)]);
    if checked.is_some() {
        t.row(vec!["round trip".into(), "identical".into()]);
    }
    outln!("{} -> {}", args.input.display(), args.output.display());
    out!("{}", t.render());
    Ok(())
}
