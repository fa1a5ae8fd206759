//! `sparsile bench`: measures Sparsile and its peers (SciPy, MKL, python-graphblas,
//! PyTorch) on SpMM, SDDMM and SpMV in the same run, checks every result, and reports
//! times, throughput, the roofline floor and speedups.
//!
//! ```text
//! sparsile bench --op spmm,sddmm,spmv --k 32,128 --matrix data/cora.mtx --peers scipy,mkl \
//!     --threads 2 --json out.json --plot out.png
//! sparsile bench --suite bench/suite.json --json suite.json --plot suite.png
//! ```
//!
//! Per case: Sparsile compiles the program for the case's format and recipe, runs the
//! warm-up and the timed repeats in this process, and its result is checked against an
//! f64 reference; each peer then runs in its own process (one at a time, with the same
//! thread count) on the same operands, and its result is checked against Sparsile's.
//! With `--rounds R` that sequence runs R times and each system's runs are pooled.
//! Preconditions: a C compiler for Sparsile's kernels; `bench/setup.sh` for the peers
//! and the chart (`--peers none` needs no Python).
//!
//! `--target cuda` is the GPU benchmark (`gpu.rs`): Sparsile's GPU recipes (the GPU rule's,
//! `--recipe`, or several with `--recipes`) compiled by NVRTC, each timed with CUDA
//! events on operands kept on the device, against the GPU peers (cuSPARSE through CuPy,
//! `torch.sparse` on CUDA, PyG), with the same checks, rounds and records plus the
//! device's name. `--target cuda-sim` runs the same cases with the kernels in the SIMT
//! interpreter and no peers: a dry run of the GPU benchmark on a machine without a GPU.
//!
//! ```text
//! sparsile bench --target cuda --suite bench/suite-gpu.json --recipes all --json gpu.json
//! sparsile bench --target cuda-sim --op spmm,sddmm,spmv --k 32 --matrix data/cora.mtx
//! ```

mod args;
mod cases;
mod gpu;
mod gpu_side;
mod metrics;
mod operands;
mod peer_server;
mod peers;
mod plot;
mod record;
mod reference;
mod report;
pub(crate) mod roofline;
mod sparsile_side;
mod suite;
mod tally;

use std::path::{Path, PathBuf};

pub use args::BenchArgs;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sparsile::Target;
use sparsile_formats::CooTensor;
use sparsile_ir::settings::Settings;

use crate::cmd_bench::args::Counts;
use crate::cmd_bench::cases::Case;
use crate::cmd_bench::metrics::{cost, floor_seconds};
use crate::cmd_bench::operands::{Csr, Dense};
use crate::cmd_bench::peers::PeerRun;
use crate::cmd_bench::record::{Record, SPARSILE};
use crate::cmd_bench::reference::{compare, reference};
use crate::cmd_bench::roofline::{Roofline, Source};
use crate::cmd_bench::tally::{set_speedups, Tally};
use crate::load;
use crate::output::{out, outln};

/// The cases of the run: the suite's, or --matrix × --op × --k; --format and --recipe
/// override every case's.
fn collect_cases(args: &BenchArgs, settings: &Settings) -> Result<Vec<Case>> {
    let mut cases = match &args.suite {
        Some(path) => suite::read(path, settings)?,
        None => {
            if args.matrices.is_empty() {
                bail!("give --matrix FILE (one or more) or --suite FILE");
            }
            if args.op.is_empty() {
                bail!("give --op spmm, sddmm or spmv (comma-separated)");
            }
            if args.k.contains(&0) {
                bail!("--k widths must be positive");
            }
            args.matrices
                .iter()
                .flat_map(|m| cases::expand(m, &args.op, &args.k, "auto", "auto"))
                .collect()
        }
    };
    for c in &mut cases {
        if let Some(f) = &args.format {
            c.format = f.clone();
        }
        if let Some(r) = &args.recipe {
            c.recipe = r.clone();
        }
    }
    if cases.is_empty() {
        bail!("no case to measure");
    }
    let mut missing: Vec<String> = cases
        .iter()
        .filter(|c| !c.path.is_file())
        .map(|c| c.path.display().to_string())
        .collect();
    missing.dedup();
    if !missing.is_empty() {
        bail!(
            "{} matrix file(s) not found: {}{}",
            missing.len(),
            missing.join(", "),
            if args.suite.is_some() {
                " (suite paths under ../shared/data/ follow SPARSILE_DATA_DIR when it is set)"
            } else {
                ""
            }
        );
    }
    Ok(cases)
}

/// Where the records and the chart go: `--json` and `--plot`; a suite run without them
/// writes `sparsile-bench-STEM.json` and `sparsile-bench-STEM.png` in the current folder
/// (the chart only when the bench environment can draw it).
fn output_paths(args: &BenchArgs) -> (Option<PathBuf>, Option<PathBuf>) {
    let default = |ext: &str| {
        args.suite.as_ref().map(|s| {
            let stem = s.file_stem().unwrap_or_default().to_string_lossy();
            PathBuf::from(format!("sparsile-bench-{stem}.{ext}"))
        })
    };
    (
        args.json.clone().or_else(|| default("json")),
        args.plot.clone().or_else(|| default("png")),
    )
}

/// A matrix read once for all its cases.
struct Matrix {
    path: PathBuf,
    coo: CooTensor,
    csr: Csr,
}

fn read_matrix(path: &Path) -> Result<Matrix> {
    let loaded = load::read(path)?;
    if !loaded.is_sparse() {
        bail!(
            "{} holds a dense matrix; bench needs a sparse one",
            path.display()
        );
    }
    let coo = loaded.to_coo()?;
    let csr = Csr::from_coo(&coo).with_context(|| format!("in {}", path.display()))?;
    Ok(Matrix {
        path: path.to_path_buf(),
        coo,
        csr,
    })
}

/// Where the peers and the chart come from.
struct PeerSetup {
    names: Vec<String>,
    /// Whether the peers are GPU peers (`NAME_gpu_peer.py`).
    gpu: bool,
    bench_dir: Option<PathBuf>,
    python: Option<PathBuf>,
    /// GPU peers, kept running from case to case (see `peer_server.rs`).
    servers: std::cell::RefCell<peer_server::PeerServers>,
}

fn peer_setup(args: &BenchArgs, peers: peers::PeerList) -> Result<PeerSetup> {
    let needs_python = !peers.names.is_empty() || args.plot.is_some();
    if !needs_python {
        return Ok(PeerSetup {
            names: peers.names,
            gpu: peers.gpu,
            bench_dir: None,
            python: None,
            servers: Default::default(),
        });
    }
    let bench_dir = peers::find_bench_dir(args.bench_dir.as_deref())?;
    let python = peers::python(&bench_dir, args.python.as_deref())?;
    Ok(PeerSetup {
        names: peers.names,
        gpu: peers.gpu,
        bench_dir: Some(bench_dir),
        python: Some(python),
        servers: Default::default(),
    })
}

fn progress_bar(len: u64) -> ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} ({elapsed}, eta {eta})")
            .expect("valid template"),
    );
    bar
}

/// The checks every target shares, before anything is read or measured.
fn check_args(args: &BenchArgs, counts: Counts) -> Result<()> {
    if counts.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    crate::limits::check_repeat(counts.repeat)?;
    if args.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    for (name, v) in [("--bandwidth", args.bandwidth), ("--peak", args.peak)] {
        if v.is_some_and(|v| !(v > 0.0 && v.is_finite())) {
            bail!("{name} must be a positive number");
        }
    }
    Ok(())
}

pub fn run(args: &BenchArgs) -> Result<()> {
    let target: Target = args.target.parse().map_err(anyhow::Error::msg)?;
    let counts = args.counts(target);
    check_args(args, counts)?;
    if target.is_gpu() {
        return gpu::run(args, target, counts);
    }
    if !args.recipes.is_empty() {
        bail!(
            "--recipes measures several GPU recipes: use it with --target cuda or cuda-sim (on the cpu target, --recipe names one recipe)"
        );
    }
    let settings = Settings::from_env();
    let cases = collect_cases(args, &settings)?;
    let setup = peer_setup(args, peers::for_target(args.peers.as_deref(), target)?)?;
    let threads = args
        .threads
        .unwrap_or_else(|| sparsile_runtime::jit::default_threads(&settings));

    let spinner = crate::progress::spinner(true, "measuring memory bandwidth and peak flops");
    let (roof, source) =
        roofline::roofline(threads, args.bandwidth, args.peak, args.reprobe, &settings)?;
    spinner.finish_and_clear();
    outln!(
        "roofline: {:.1} GB/s (STREAM triad), {:.1} GFLOP/s (f32 FMA peak), {threads} threads, {}",
        roof.bandwidth_gbs,
        roof.peak_gflops,
        source_name(source)
    );
    let context = RunContext {
        setup: &setup,
        threads,
        roof,
        counts,
        args,
        target: None,
        device: None,
        cuda_device: None,
    };
    let entries: Vec<Vec<Entry>> = cases
        .iter()
        .map(|c| {
            vec![Entry {
                case: c.clone(),
                chosen_by: None,
            }]
        })
        .collect();
    let mut ours = |entry: &Entry, mat: &Matrix, dense: &Dense| {
        sparsile_side::measure(
            &entry.case,
            &mat.coo,
            &mat.csr,
            dense,
            threads,
            counts.warmup,
            counts.repeat,
        )
    };
    let (records, work) = measure_all(&cases, &entries, &context, &mut ours)?;
    write_report(args, &records, work.path())
}

/// How a roofline's numbers were obtained, for the report.
fn source_name(source: Source) -> &'static str {
    match source {
        Source::Measured => "measured",
        Source::Cached => "cached probe",
        Source::Given => "given",
    }
}

/// What every case of a run shares.
struct RunContext<'a> {
    setup: &'a PeerSetup,
    threads: usize,
    roof: Roofline,
    counts: Counts,
    args: &'a BenchArgs,
    /// GPU targets: the target and the device, for the records.
    target: Option<Target>,
    device: Option<String>,
    /// `cuda`: the GPU's ordinal, passed to the GPU peers.
    cuda_device: Option<usize>,
}

/// One of Sparsile's records of a case: the case with the format and recipe to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub case: Case,
    /// What chose the recipe when the case left it to Sparsile and it is known before
    /// measuring (the GPU rule); the record's note says so even if the run fails.
    pub chosen_by: Option<String>,
}

/// Sparsile's measurement of one entry of a case.
type MeasureOurs<'f> = dyn FnMut(&Entry, &Matrix, &Dense) -> Result<sparsile_side::Measured> + 'f;

/// Measures every case: `entries[i]` are the Sparsile records of `cases[i]` (the case
/// with each recipe to measure), measured by `ours`; then every peer. Returns the
/// records of each case and the folder of the operands (which the chart may use).
fn measure_all(
    cases: &[Case],
    entries: &[Vec<Entry>],
    context: &RunContext<'_>,
    ours: &mut MeasureOurs<'_>,
) -> Result<(Vec<Vec<Record>>, tempfile::TempDir)> {
    let work = tempfile::Builder::new()
        .prefix("sparsile-bench")
        .tempdir()
        .context("cannot create a temporary folder for the operands")?;
    let steps: usize = entries
        .iter()
        .map(|e| e.len() + context.setup.names.len())
        .sum();
    let bar = progress_bar((steps * context.args.rounds) as u64);
    let mut records: Vec<Vec<Record>> = Vec::new();
    let mut matrix: Option<Matrix> = None;
    let mut roof = context.roof;
    for (index, (case, entries)) in cases.iter().zip(entries).enumerate() {
        if matrix.as_ref().is_none_or(|m| m.path != case.path) {
            bar.set_message(format!("reading {}", case.matrix));
            matrix = Some(read_matrix(&case.path)?);
            if context.args.probe_each && context.target.is_none() {
                bar.set_message(format!("probing the roofline before {}", case.matrix));
                roof = roofline::roofline(
                    context.threads,
                    context.args.bandwidth,
                    context.args.peak,
                    true,
                    &Settings::from_env(),
                )?
                .0;
            }
        }
        let mat = matrix.as_ref().expect("read just above");
        let dir = work.path().join(format!("case{index}"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        records.push(measure_case(
            case, entries, mat, &dir, context, roof, ours, &bar,
        )?);
        let _ = std::fs::remove_dir_all(&dir);
    }
    bar.finish_and_clear();
    Ok((records, work))
}

/// Prints the table and the geometric means, and writes the records and the chart.
fn write_report(args: &BenchArgs, cases: &[Vec<Record>], work: &Path) -> Result<()> {
    let records: Vec<Record> = cases.iter().flatten().cloned().collect();
    let records = records.as_slice();
    out!("{}", report::table(records));
    let means = report::geomeans(cases);
    if !means.is_empty() {
        outln!();
        out!("{means}");
    }
    let (json_path, plot_path) = output_paths(args);
    if let Some(path) = &json_path {
        record::write(path, records)?;
        outln!("records: {}", path.display());
    }
    if let Some(png) = &plot_path {
        let json = match &json_path {
            Some(p) => p.clone(),
            None => {
                let p = work.join("records.json");
                record::write(&p, records)?;
                p
            }
        };
        let drawn = peers::find_bench_dir(args.bench_dir.as_deref())
            .and_then(|dir| plot::draw(&dir, args.python.as_deref(), &json, png));
        match drawn {
            Ok(()) => outln!("chart: {}", png.display()),
            // The default chart of a suite run is drawn when the bench environment can.
            Err(e) if args.plot.is_none() => outln!("chart: skipped ({})", one_line(&e)),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Measures one case: each entry (the case with one of Sparsile's recipes) with
/// `ours`, then every peer, its floor from `roof`; returns Sparsile's records first.
#[allow(clippy::too_many_arguments)]
fn measure_case(
    case: &Case,
    entries: &[Entry],
    mat: &Matrix,
    dir: &Path,
    context: &RunContext<'_>,
    roof: Roofline,
    ours: &mut MeasureOurs<'_>,
    bar: &ProgressBar,
) -> Result<Vec<Record>> {
    let (setup, args, counts) = (context.setup, context.args, context.counts);
    let csr = &mat.csr;
    let k = case.k.unwrap_or(1);
    let c = cost(case.op, csr.m, csr.n, csr.nnz(), k);
    let base = Record {
        matrix: case.matrix.clone(),
        op: case.op.name().into(),
        k: case.k,
        system: SPARSILE.into(),
        format: Some(case.format.clone()),
        recipe: Some(case.recipe.clone()),
        m: csr.m,
        n: csr.n,
        nnz: csr.nnz(),
        threads: context.threads,
        median_ms: None,
        min_ms: None,
        max_ms: None,
        gflops: None,
        gbs: None,
        floor_ms: floor_seconds(c, roof.bandwidth_gbs, roof.peak_gflops) * 1e3,
        pct_of_floor: None,
        speedup: None,
        best_peer: None,
        correct: None,
        max_abs_err: None,
        note: None,
        version: Some(env!("CARGO_PKG_VERSION").into()),
        compile_ms: None,
        flops: c.flops,
        bytes: c.bytes,
        bandwidth_gbs: roof.bandwidth_gbs,
        peak_gflops: roof.peak_gflops,
        target: context.target.map(|t| t.name().to_string()),
        device: context.device.clone(),
        preprocess_ms: None,
        times_ms: Vec::new(),
    };
    let dense = Dense::random(case.op, csr.m, csr.n, k, args.seed);
    let expected = reference(case.op, csr, &dense, k);
    if !setup.names.is_empty() {
        csr.write(dir)?;
        dense.write(dir)?;
    }
    let runs = peers::Runs {
        threads: context.threads,
        warmup: counts.warmup,
        repeat: counts.repeat,
        device: context.cuda_device,
    };
    let case_json = peers::write_case(dir, case, csr, runs)?;

    // One tally per system, Sparsile's first (one per entry); every round adds its timed
    // runs.
    let mut tallies: Vec<Tally> = entries
        .iter()
        .map(|e| {
            let mut t = Tally::new(&base, SPARSILE.to_string());
            t.record.format = Some(e.case.format.clone());
            t.record.recipe = Some(e.case.recipe.clone());
            t.record.note = e.chosen_by.as_ref().map(|by| format!("chosen by the {by}"));
            t
        })
        .chain(setup.names.iter().map(|p| Tally::new(&base, p.clone())))
        .collect();
    let ours_count = entries.len();
    // Sparsile's first correct result, widened once, against which peers are checked.
    let mut our_output: Option<Vec<f64>> = None;
    for round in 0..args.rounds {
        let of = |who: &str| match args.rounds {
            1 => format!("{} {who}", case.label()),
            n => format!("{} {who} (round {}/{n})", case.label(), round + 1),
        };
        for (entry, ours_tally) in entries.iter().zip(tallies.iter_mut()) {
            bar.set_message(of(&format!("sparsile {}", entry.case.recipe)));
            if ours_tally.live {
                match ours(entry, mat, &dense) {
                    Ok(m) => {
                        ours_tally.record.format = Some(m.format.clone());
                        ours_tally.record.recipe = Some(m.recipe.clone());
                        if let Some(by) = &m.chosen_by {
                            ours_tally
                                .record
                                .note
                                .get_or_insert(format!("chosen by the {by}"));
                        }
                        if let Some(n) = m.note {
                            ours_tally.note(n);
                        }
                        ours_tally.times.extend(&m.times);
                        ours_tally
                            .record
                            .compile_ms
                            .get_or_insert(m.compile_seconds * 1e3);
                        let check = compare(&m.output, &expected);
                        ours_tally.check(check);
                        if check.correct && our_output.is_none() {
                            our_output = Some(m.output.iter().map(|&v| v as f64).collect());
                        }
                    }
                    Err(e) => ours_tally.fail(format!("failed: {}", one_line(&e))),
                }
            }
            bar.inc(1);
        }
        // Peers are checked against Sparsile's result; against the reference when no
        // result of Sparsile's is correct.
        let sparsile_ok = tallies[..ours_count]
            .iter()
            .any(|t| t.record.correct == Some(true));
        let against: &[f64] = match (&our_output, sparsile_ok) {
            (Some(o), true) => o,
            _ => &expected,
        };
        for t in tallies.iter_mut().skip(ours_count) {
            bar.set_message(of(&t.record.system));
            if !t.live {
                bar.inc(1);
                continue;
            }
            let python = setup.python.as_deref().expect("found with the peers");
            let bench_dir = setup.bench_dir.as_deref().expect("found with the peers");
            let name = t.record.system.clone();
            let script = peers::script_name(&name, setup.gpu);
            let call = peers::PeerCall {
                python,
                bench_dir,
                name: &name,
                script: &script,
                case_json: &case_json,
                threads: context.threads,
                timeout: std::time::Duration::from_secs(args.peer_timeout),
            };
            let run = if setup.gpu {
                setup.servers.borrow_mut().run(&call)?
            } else {
                peers::run_peer(&call)?
            };
            match run {
                PeerRun::Ran {
                    times,
                    output,
                    version,
                    note,
                    preprocess_ms,
                } => {
                    t.times.extend(&times);
                    t.check(compare(&output, against));
                    t.record.version = version;
                    if preprocess_ms.is_some() {
                        t.record.preprocess_ms = preprocess_ms;
                    }
                    if let Some(n) = note {
                        t.note(n);
                    }
                    if !sparsile_ok {
                        t.note("checked against the reference".into());
                    }
                }
                PeerRun::Unsupported { note } | PeerRun::Failed { note } => t.fail(note),
            }
            bar.inc(1);
        }
    }
    let mut records: Vec<Record> = tallies
        .into_iter()
        .map(|t| t.finish(c, args.rounds))
        .collect();
    set_speedups(&mut records);
    Ok(records)
}

/// An error and its causes on one line, leaving out causes whose text the message
/// already holds (errors that print their source).
fn one_line(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if text.contains(&c) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_drops_repeated_causes() {
        let e = anyhow::anyhow!("inner detail")
            .context("outer: inner detail")
            .context("while compiling");
        assert_eq!(one_line(&e), "while compiling: outer: inner detail");
    }
}
