//! `sparsile`: inspect, convert and evaluate sparse tensors from the command line.
//!
//! ```text
//! sparsile info data/cora.mtx
//! sparsile convert data/cora.mtx --to bsr:4x4 -o cora.spt --check
//! sparsile eval --expr 'C[i,k] = A[i,j] * B[j,k]' --input A=data/cora.mtx --dim k=32
//! sparsile run  --expr 'C[i,k] = A[i,j] * B[j,k]' --input A=data/cora.mtx --dim k=32 --threads 2
//! sparsile compile --expr 'y[i] = A[i,j] * x[j]' --format A=csr --emit c
//! sparsile bench --op spmm --k 32 --matrix data/cora.mtx --peers scipy --threads 2
//! sparsile cache info
//! ```

mod auto_choice;
mod cmd_bench;
mod cmd_cache;
mod cmd_compile;
mod cmd_convert;
mod cmd_eval;
mod cmd_info;
mod cmd_recipes;
mod cmd_run;
mod cmd_tune;
mod limits;
mod load;
mod output;
mod progress;
mod table;

use std::process::ExitCode;

/// Large buffers (operands, outputs) start on a cache line: see
/// `sparsile::runtime::line_aligned_alloc`.
#[global_allocator]
static ALLOC: sparsile::runtime::LineAligned = sparsile::runtime::LineAligned;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "sparsile",
    version,
    about = "Sparsile: a sparse tensor compiler for deep learning"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe a matrix: shape, nonzeros, row lengths, symmetry, bandwidth, block fill.
    Info(cmd_info::InfoArgs),
    /// Store a tensor in another format.
    Convert(cmd_convert::ConvertArgs),
    /// Run an index-notation program with the reference interpreter.
    Eval(cmd_eval::EvalArgs),
    /// Print a program's IR at a stage, or its generated C.
    Compile(cmd_compile::CompileArgs),
    /// Compile a program to native code and run it.
    Run(cmd_run::RunArgs),
    /// Measure Sparsile against its peers (SciPy, MKL, GraphBLAS, PyTorch) on SpMM, SDDMM, SpMV.
    Bench(cmd_bench::BenchArgs),
    /// List the named schedules (`--recipe NAME[:key=value,...]`) and their parameters.
    Recipes(cmd_recipes::RecipesArgs),
    /// Measure the candidate formats and schedules of an operator on a matrix and record
    /// the best; train and evaluate the learned selector.
    Tune(cmd_tune::TuneArgs),
    /// Show the kernel cache (folder, kernels, size, age, checks) or clear its kernels.
    Cache(cmd_cache::CacheArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Info(a) => cmd_info::run(a),
        Command::Convert(a) => cmd_convert::run(a),
        Command::Eval(a) => cmd_eval::run(a),
        Command::Compile(a) => cmd_compile::run(a),
        Command::Run(a) => cmd_run::run(a),
        Command::Bench(a) => cmd_bench::run(a),
        Command::Recipes(a) => cmd_recipes::run(a),
        Command::Tune(a) => cmd_tune::run(a),
        Command::Cache(a) => cmd_cache::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}
