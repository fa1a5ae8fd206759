//! `sparsile tune label`: exhaustive measurement of every candidate on every corpus
//! matrix and operator — the selector's training labels — as JSON lines. A run that
//! stops can be continued: examples already in the output file are skipped.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use sparsile::auto::tune::{tune, TuneRequest};
use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::tune::features::Features;
use sparsile::tune::search::{SearchOptions, Strategy};
use sparsile::tune::selector::Example;

use super::corpus::SpecArgs;
use super::{machine, op_specs};
use crate::output::outln;

#[derive(clap::Args)]
pub struct LabelArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Operators and widths.
    #[arg(long, default_value = "spmm:32,spmm:128,sddmm:32,sddmm:128,spmv")]
    pub ops: String,
    /// Threads of the kernels (default: SPARSILE_NUM_THREADS or every core).
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// The labels file (JSON lines, appended to).
    #[arg(long, value_name = "OUT")]
    pub out: PathBuf,
}

pub fn run(args: &LabelArgs) -> Result<()> {
    let specs = op_specs(&args.ops)?;
    let threads = args.threads.unwrap_or_else(|| {
        sparsile_runtime::jit::default_threads(&sparsile_ir::settings::Settings::from_env())
    });
    let done: HashSet<String> = std::fs::read_to_string(&args.out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Example>(l).ok())
        .map(|e| e.name)
        .collect();
    let matrices = args.spec.matrices()?;
    let bar = crate::progress::bar(true, (matrices.len() * specs.len()) as u64);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .with_context(|| format!("cannot open {}", args.out.display()))?;
    let (mut written, mut skipped) = (0usize, 0usize);
    for m in &matrices {
        let a = SparseTensor::from_coo_with(&m.coo, &Format::Csr, DType::F32)?;
        for spec in &specs {
            bar.inc(1);
            let name = format!("{} {}", m.name, spec.label());
            if done.contains(&name) {
                skipped += 1;
                continue;
            }
            bar.set_message(name.clone());
            let req = TuneRequest {
                op: spec.op,
                width: spec.width,
                threads,
                other_formats: true,
                options: SearchOptions {
                    strategy: Strategy::Exhaustive,
                    rounds: args.rounds.max(1),
                    warmup: args.warmup,
                    repeat: args.repeat.max(1),
                    extra_rounds: 1,
                    ..SearchOptions::default()
                },
                machine: machine(threads),
                record: false,
                seed: 0,
            };
            let report =
                tune(&a, &req, &mut |_| {}).with_context(|| format!("labelling {name}"))?;
            let times: BTreeMap<String, Option<f64>> = report
                .candidates
                .iter()
                .map(|c| (c.candidate.clone(), c.median_ms))
                .collect();
            let example = Example {
                op: spec.op,
                name,
                features: Features {
                    values: report.features.clone(),
                },
                times,
            };
            writeln!(file, "{}", serde_json::to_string(&example)?)?;
            file.flush()?;
            written += 1;
        }
    }
    bar.finish_and_clear();
    outln!(
        "{written} examples written to {} ({skipped} already there; corpus {})",
        args.out.display(),
        args.spec.describe()
    );
    Ok(())
}
