//! `sparsile run`: compiles a program to native code (or finds it in the cache), runs
//! it, and reports compile time, run times and checksums comparable with `eval`'s.

use std::time::Instant;

use anyhow::Result;
use sparsile::{RunOptions, Target};
use sparsile_runtime::jit::CacheOutcome;

use crate::cmd_eval::{self, EvalArgs};
use crate::output::{out, outln};
use crate::progress;
use crate::table::{duration, thousands, Table};

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub program: EvalArgs,
    /// Threads of the CPU pool (default: SPARSILE_NUM_THREADS or every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Timed runs after one warm-up run; the median is reported (default 10; 1 with
    /// `--target cuda-sim`).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// A recorded schedule (trace JSON) to apply instead of the default schedule.
    #[arg(long, value_name = "TRACE.json", conflicts_with = "recipe")]
    pub schedule: Option<std::path::PathBuf>,
    /// A named recipe (`sparsile recipes` lists them), e.g. `rowwise` or `rowwise:k=32`;
    /// `auto` (the default) runs the automatic choice for the inputs (tuning database,
    /// learned selector, static rule), which may store the sparse input in another format
    /// unless --format names one.
    #[arg(long, value_name = "NAME[:key=value,...]")]
    pub recipe: Option<String>,
    /// Writes the schedule that was applied (from --recipe or --schedule) as trace JSON.
    #[arg(long, value_name = "TRACE.json")]
    pub save_trace: Option<std::path::PathBuf>,
    /// Where to run: `cpu`, `cuda` (an NVIDIA GPU) or `cuda-sim` (the GPU kernel run by
    /// the SIMT interpreter on the CPU, checking races and barriers: slow, for testing).
    /// A GPU target runs a GPU recipe (`gpu_rowwise`, `gpu_warp`; by default the one the
    /// GPU rule picks for the operator).
    #[arg(long, default_value = "cpu", value_name = "TARGET")]
    pub target: String,
}

pub fn run(args: &RunArgs) -> Result<()> {
    let target: Target = args.target.parse().map_err(anyhow::Error::msg)?;
    let repeat = args
        .repeat
        .unwrap_or(if target == Target::CudaSim { 1 } else { 10 });
    crate::limits::check_repeat(repeat)?;
    crate::limits::check_threads(args.threads)?;
    let json = args.program.json;
    let bar = progress::spinner(!json, "reading inputs");
    let prepared = cmd_eval::prepare(&args.program)?;
    bar.set_message("choosing");
    let threads = args.threads.unwrap_or_else(|| {
        sparsile_runtime::jit::default_threads(&sparsile_ir::settings::Settings::from_env())
    });
    let resolved = if target.is_gpu() {
        crate::auto_choice::resolve_gpu(prepared, args.recipe.as_deref(), args.schedule.is_some())
    } else {
        crate::auto_choice::resolve(
            &args.program,
            prepared,
            args.recipe.as_deref(),
            args.schedule.is_some(),
            threads,
            true,
        )?
    };
    let prepared = resolved.prepared;
    let schedule = crate::auto_choice::describe(
        resolved.recipe.as_deref(),
        resolved.selection.as_ref(),
        args.schedule.is_some(),
    );
    bar.set_message("compiling");
    // Specialise the kernel to the index types (i32 / i64) of the inputs at hand.
    let mut program = prepared.program.clone();
    let by_buffer = prepared
        .inputs
        .iter()
        .map(|(n, t)| (n.clone(), t))
        .collect();
    sparsile::specialize_index_types(&mut program, &by_buffer);
    let trace = crate::cmd_compile::chosen_trace(
        args.schedule.as_deref(),
        resolved.recipe.as_deref().map(crate::auto_choice::spec),
        &program,
        &prepared.params,
    )?;
    crate::cmd_compile::save_trace(args.save_trace.as_deref(), trace.as_ref())?;
    let kernel = sparsile::compile_program_for(program, trace.as_ref(), target)?;
    // A cache hit after a trial found what the trial compiled (or found) first: its
    // compile is the one to report.
    let info = match (kernel.compile_info(), resolved.trial_compile.clone()) {
        (Some(k), Some(t)) if k.outcome == CacheOutcome::Hit => Some(t),
        (k, _) => k.cloned(),
    };
    // Inputs are keyed by buffer name; the kernel from a stage-I program uses those.
    let options = RunOptions {
        threads: args.threads,
        params: prepared.params.clone(),
        ..RunOptions::default()
    };
    bar.set_message("warming up");
    let mut outputs = kernel.run(&prepared.inputs, &options)?;
    let mut times = Vec::with_capacity(repeat);
    for k in 0..repeat {
        bar.set_message(format!("run {}/{}", k + 1, repeat));
        let t0 = Instant::now();
        // Timed runs overwrite the warm-up's outputs in place (nothing allocated).
        kernel.run_into(&prepared.inputs, &mut outputs, &options)?;
        times.push(t0.elapsed().as_secs_f64());
    }
    bar.finish_and_clear();
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let (min, max) = (times[0], times[times.len() - 1]);
    let mut names: Vec<&String> = outputs.keys().collect();
    names.sort();
    let reports: Vec<cmd_eval::OutputReport> = names
        .iter()
        .map(|n| cmd_eval::report(n, &outputs[*n]))
        .collect();
    cmd_eval::write_outputs(&args.program, &outputs)?;
    let cache_hit = info.as_ref().map(|i| i.outcome == CacheOutcome::Hit);
    if json {
        let v = serde_json::json!({
            "outputs": reports,
            "random_inputs": prepared.random_inputs,
            "seed": args.program.seed,
            "backend": match target {
                Target::Cpu => "c",
                Target::Cuda => "cuda",
                Target::CudaSim => "simt",
            },
            "target": target.name(),
            "recipe": resolved.recipe.as_deref().map(crate::auto_choice::spec).map(str::to_string).unwrap_or_else(|| {
                if args.schedule.is_some() { "trace".to_string() } else { "default".to_string() }
            }),
            "schedule": schedule,
            "chosen_by": resolved.selection.as_ref().map(|s| s.source.name()),
            "threads": threads,
            "compile_seconds": info.as_ref().map(|i| i.duration.as_secs_f64()),
            "cache_hit": cache_hit,
            "object": info.as_ref().map(|i| i.object.display().to_string()),
            "repeat": repeat,
            "median_seconds": median,
            "min_seconds": min,
            "max_seconds": max,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let mut t = Table::new(
        &["tensor", "shape", "format", "stored", "checksum"],
        &[false, true, false, true, true],
    );
    for r in &reports {
        t.row(vec![
            r.name.clone(),
            r.shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(" x "),
            r.format.clone(),
            thousands(r.stored_values as u64),
            format!("{:.9e}", r.checksum),
        ]);
    }
    out!("{}", t.render());
    outln!("schedule: {schedule}");
    match &info {
        Some(info) => outln!(
            "compile: {} ({})",
            duration(info.duration.as_secs_f64()),
            if cache_hit == Some(true) {
                "cache hit"
            } else {
                "compiled"
            }
        ),
        None => outln!("compile: none (the SIMT interpreter runs the GPU function)"),
    }
    let on = match target {
        Target::Cpu => format!("{threads} threads"),
        Target::Cuda => "GPU".to_string(),
        Target::CudaSim => "SIMT interpreter".to_string(),
    };
    outln!(
        "run ({on}): median {}  min {}  max {}  over {} runs",
        duration(median),
        duration(min),
        duration(max),
        repeat
    );
    Ok(())
}
