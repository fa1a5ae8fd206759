//! `sparsile tune`: measures the candidates of an operator on a matrix and records the
//! best in the tuning database; `corpus`, `label`, `train` and `eval` make and check
//! the learned selector.
//!
//! ```text
//! sparsile tune --op spmm --k 32,128 --matrix data/cora.mtx [--strategy pruned] [--json OUT]
//! sparsile tune --op spmm --matrix M --strategy stile [--picture DIR]
//! sparsile tune calibrate [--k 32,128] [--threads N]
//! sparsile tune corpus [--scale 1] [--per-family 8] [--out DIR]
//! sparsile tune label --out labels.jsonl [--scale 1] [--per-family 8]
//! sparsile tune train --labels labels.jsonl --out crates/sparsile-tune/model/selector.json
//!     (selector-avx2.json for labels measured on a host without AVX-512)
//! sparsile tune eval --matrix ../shared/data/*.mtx [--json OUT]
//! ```

mod calibrate;
mod corpus;
mod eval;
mod label;
mod measure;
mod picture;
mod train;

use anyhow::{bail, Result};
use sparsile::tune::op::Operator;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TuneArgs {
    #[command(subcommand)]
    pub sub: Option<TuneSub>,
    #[command(flatten)]
    pub measure: measure::MeasureArgs,
}

#[derive(clap::Subcommand)]
pub enum TuneSub {
    /// List (or write) the generated training corpus of the selector.
    Corpus(corpus::CorpusArgs),
    /// Measure every candidate on the corpus: the selector's training labels.
    Label(label::LabelArgs),
    /// Train the selector on labels and report its held-out scores.
    Train(train::TrainArgs),
    /// Compare the selector's picks with exhaustive measurement on real matrices.
    Eval(eval::EvalArgs),
    /// Measure the stile strategy's tile costs on this machine again.
    Calibrate(calibrate::CalibrateArgs),
}

pub fn run(args: &TuneArgs) -> Result<()> {
    match &args.sub {
        Some(TuneSub::Corpus(a)) => corpus::run(a),
        Some(TuneSub::Label(a)) => label::run(a),
        Some(TuneSub::Train(a)) => train::run(a),
        Some(TuneSub::Eval(a)) => eval::run(a),
        Some(TuneSub::Calibrate(a)) => calibrate::run(a),
        None => measure::run(&args.measure),
    }
}

/// An operator and dense width, from `spmm:32`, `sddmm:128`, `spmv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpSpec {
    pub op: Operator,
    pub width: usize,
}

impl OpSpec {
    pub fn label(&self) -> String {
        match self.op {
            Operator::Spmv => "spmv".into(),
            op => format!("{op} K={}", self.width),
        }
    }
}

/// Parses `spmm:32,sddmm:128,spmv`.
pub fn op_specs(text: &str) -> Result<Vec<OpSpec>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (name, k) = s.split_once(':').unwrap_or((s, "1"));
            let op = match Operator::from_name(name) {
                Some(op @ (Operator::Spmm | Operator::Sddmm | Operator::Spmv)) => op,
                _ => bail!("`{s}`: the tuner measures spmm:K, sddmm:K and spmv"),
            };
            let width: usize = k
                .parse()
                .ok()
                .filter(|&k| k > 0)
                .ok_or_else(|| anyhow::anyhow!("`{s}`: K must be a positive integer"))?;
            Ok(OpSpec {
                op,
                width: if op == Operator::Spmv { 1 } else { width },
            })
        })
        .collect()
}

/// The machine's roofline for the cost model (cached probe of `sparsile bench`).
pub fn machine(threads: usize) -> sparsile::tune::cost::Machine {
    let settings = sparsile_ir::settings::Settings::from_env();
    let roof = crate::cmd_bench::roofline::roofline(threads, None, None, false, &settings)
        .map(|(r, _)| r)
        .unwrap_or(crate::cmd_bench::roofline::Roofline {
            bandwidth_gbs: 20.0,
            peak_gflops: 100.0,
        });
    sparsile::tune::cost::Machine {
        bandwidth_gbs: roof.bandwidth_gbs,
        peak_gflops: roof.peak_gflops,
        cache_bytes: 32 << 20,
    }
}
