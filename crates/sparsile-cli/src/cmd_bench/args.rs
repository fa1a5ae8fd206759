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
    /// Where Sparsile's kernels run: `cpu`, `cuda` (an NVIDIA GPU: the GPU recipes'
    /// kernels, each run timed with CUDA events on operands kept on the device, against
    /// the GPU peers) or `cuda-sim` (the same GPU kernels run by the SIMT interpreter on
    /// the CPU: a functional dry run whose results are checked and whose times are not GPU
    /// times; no peers).
    #[arg(long, default_value = "cpu", value_name = "TARGET")]
    pub target: String,
    /// Peers to measure against (comma-separated). On the cpu target: scipy, mkl,
    /// graphblas, torch, cloop (the plain serial C loop a compiler such as TACO generates,
    /// one thread); default scipy,mkl,graphblas,cloop. On the cuda target: cusparse
    /// (every SpMM/SpMV algorithm CuPy exposes, the best per case), torch
    /// (torch.sparse on CUDA), pyg (torch_sparse / PyG SpMM); default all three. `none`
    /// measures Sparsile alone.
    #[arg(long, value_delimiter = ',')]
    pub peers: Option<Vec<String>>,
    /// Threads for Sparsile and for every peer (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Untimed runs before the timed ones (default 3; 10 on cuda; 0 on cuda-sim). On the
    /// cpu target at least one is always made.
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Timed runs (per round); the median, minimum and maximum are reported (default 10;
    /// 100 on cuda; 1 on cuda-sim, whose interpreter is slow).
    #[arg(long)]
    pub repeat: Option<usize>,
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
    /// `auto`, the default, is the automatic choice: tuning database, selector, rule; on
    /// the GPU targets, the GPU rule).
    #[arg(long)]
    pub recipe: Option<String>,
    /// GPU targets: measure several GPU recipes in every case, each in its own record:
    /// `all` (every GPU recipe that lists the operation: `sparsile recipes`), or one
    /// recipe spec per `--recipes` (repeat it; specs hold commas, so none separates them).
    #[arg(long, value_name = "all|SPEC", conflicts_with = "recipe")]
    pub recipes: Vec<String>,
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
    /// The Python interpreter that runs the peers and the chart (default:
    /// `.venv/bin/python` of the bench folder, made by `bench/setup.sh`); a name without
    /// a `/` is looked up in PATH.
    #[arg(long, value_name = "PYTHON")]
    pub python: Option<PathBuf>,
    /// Memory bandwidth in GB/s for the roofline, instead of the STREAM-triad probe (on
    /// cuda: instead of the device's nominal bandwidth).
    #[arg(long, value_name = "GB/s")]
    pub bandwidth: Option<f64>,
    /// Peak in GFLOP/s for the roofline, instead of the peak-flops probe (on cuda:
    /// instead of the device's nominal f32 peak).
    #[arg(long, value_name = "GFLOP/s")]
    pub peak: Option<f64>,
    /// Measure bandwidth and peak again instead of using the cached probe results.
    #[arg(long)]
    pub reprobe: bool,
    /// Measure bandwidth and peak again before each matrix (cpu target), so that every
    /// case's floor comes from a probe taken minutes, not hours, from it: on a host whose
    /// speed drifts, one probe for a whole suite run over- or understates every later floor.
    #[arg(long)]
    pub probe_each: bool,
}

/// How many untimed and timed runs each system makes per case and round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub warmup: usize,
    pub repeat: usize,
}

impl BenchArgs {
    /// `--warmup` and `--repeat`, or the target's defaults.
    pub fn counts(&self, target: sparsile::Target) -> Counts {
        let (warmup, repeat) = match target {
            sparsile::Target::Cpu => (3, 10),
            sparsile::Target::Cuda => (10, 100),
            sparsile::Target::CudaSim => (0, 1),
        };
        Counts {
            warmup: self.warmup.unwrap_or(warmup),
            repeat: self.repeat.unwrap_or(repeat),
        }
    }
}
