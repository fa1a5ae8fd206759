//! Command-line arguments of `sparsile bench`.

use std::path::PathBuf;

use crate::cmd_bench::cases::Op;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Operations to measure (comma-separated): spmm, sddmm, spmv.
    #[arg(long, value_delimiter = ',', value_enum)]
    pub op: Vec<Op>,
    /// Dense widths K for SpMM and SDDMM (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "32,128")]
    pub k: Vec<usize>,
    /// A sparse matrix (Matrix Market or .spt); repeat for several.
    #[arg(long = "matrix", value_name = "FILE")]
    pub matrices: Vec<PathBuf>,
    /// A suite file (JSON) listing the cases; replaces --matrix/--op/--k.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["matrices", "op"])]
    pub suite: Option<PathBuf>,
    /// Peers to measure against (comma-separated): scipy, mkl, graphblas, torch, cloop
    /// (the plain serial C loop a compiler such as TACO generates, one thread); `none`
    /// measures Sparsile alone.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "scipy,mkl,graphblas,cloop"
    )]
    pub peers: Vec<String>,
    /// Threads for Sparsile and for every peer (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Untimed runs before the timed ones (at least one is always made).
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed runs (per round); the median, minimum and maximum are reported.
    #[arg(long, default_value_t = 10)]
    pub repeat: usize,
    /// Measure Sparsile and then every peer this many times in turn, each round with its
    /// own warm-up and --repeat timed runs; the statistics pool the runs of every round.
    /// Rounds spread the slow spells of a shared machine over all the systems instead
    /// of one.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Seconds a peer may take for one case (warm-up and repeats) before it is stopped
    /// and reported as failed.
    #[arg(long, default_value_t = 900, value_name = "SECONDS")]
    pub peer_timeout: u64,
    /// Sparsile's format for the sparse operand in every case (overrides the suite;
    /// `auto`, the default, lets the automatic choice pick it).
    #[arg(long)]
    pub format: Option<String>,
    /// Sparsile's recipe (`name[:key=value,...]`) in every case (overrides the suite;
    /// `auto`, the default, is the automatic choice: tuning database, selector, rule).
    #[arg(long)]
    pub recipe: Option<String>,
    /// Write the records (one per case and system) to this JSON file.
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
    /// Draw the speedups and roofline positions into this PNG (needs bench/setup.sh).
    #[arg(long, value_name = "OUT.png")]
    pub plot: Option<PathBuf>,
    /// Seed of the random dense operands (the same for Sparsile and the peers).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The folder holding `peers/` and `.venv/` (default: `bench/` of this repository).
    #[arg(long, value_name = "DIR")]
    pub bench_dir: Option<PathBuf>,
    /// Memory bandwidth in GB/s for the roofline, instead of the STREAM-triad probe.
    #[arg(long, value_name = "GB/s")]
    pub bandwidth: Option<f64>,
    /// Peak in GFLOP/s for the roofline, instead of the peak-flops probe.
    #[arg(long, value_name = "GFLOP/s")]
    pub peak: Option<f64>,
    /// Measure bandwidth and peak again instead of using the cached probe results.
    #[arg(long)]
    pub reprobe: bool,
}
