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

mod args;
mod cases;
mod metrics;
mod operands;
mod peers;
mod plot;
mod record;
mod reference;
mod report;
pub(crate) mod roofline;
mod sparsile_side;
mod suite;

use std::path::{Path, PathBuf};

pub use args::BenchArgs;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sparsile_formats::CooTensor;
use sparsile_ir::settings::Settings;

use crate::cmd_bench::cases::Case;
use crate::cmd_bench::metrics::{cost, floor_seconds, summarize};
use crate::cmd_bench::operands::{Csr, Dense};
use crate::cmd_bench::peers::PeerRun;
use crate::cmd_bench::record::{Record, SPARSILE};
use crate::cmd_bench::reference::{compare, reference};
use crate::cmd_bench::roofline::{Roofline, Source};
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
    bench_dir: Option<PathBuf>,
    python: Option<PathBuf>,
}

fn peer_setup(args: &BenchArgs) -> Result<PeerSetup> {
    let names = peers::parse_list(&args.peers)?;
    let needs_python = !names.is_empty() || args.plot.is_some();
    if !needs_python {
        return Ok(PeerSetup {
            names,
            bench_dir: None,
            python: None,
        });
    }
    let bench_dir = peers::find_bench_dir(args.bench_dir.as_deref())?;
    let python = peers::python(&bench_dir)?;
    Ok(PeerSetup {
        names,
        bench_dir: Some(bench_dir),
        python: Some(python),
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

pub fn run(args: &BenchArgs) -> Result<()> {
    if args.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    if args.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    for (name, v) in [("--bandwidth", args.bandwidth), ("--peak", args.peak)] {
        if v.is_some_and(|v| !(v > 0.0 && v.is_finite())) {
            bail!("{name} must be a positive number");
        }
    }
    let settings = Settings::from_env();
    let cases = collect_cases(args, &settings)?;
    let setup = peer_setup(args)?;
    let threads = args
        .threads
        .unwrap_or_else(|| sparsile_runtime::jit::default_threads(&settings));

    let spinner = crate::progress::spinner(true, "measuring memory bandwidth and peak flops");
    let (roof, source) =
        roofline::roofline(threads, args.bandwidth, args.peak, args.reprobe, &settings)?;
    spinner.finish_and_clear();
    let source = match source {
        Source::Measured => "measured",
        Source::Cached => "cached probe",
        Source::Given => "given",
    };
    outln!(
        "roofline: {:.1} GB/s (STREAM triad), {:.1} GFLOP/s (f32 FMA peak), {threads} threads, {source}",
        roof.bandwidth_gbs,
        roof.peak_gflops
    );

    let work = tempfile::Builder::new()
        .prefix("sparsile-bench")
        .tempdir()
        .context("cannot create a temporary folder for the operands")?;
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let bar = progress_bar((cases.len() * (1 + setup.names.len()) * args.rounds) as u64);
    let mut records = Vec::new();
    let mut matrix: Option<Matrix> = None;
    for (index, case) in cases.iter().enumerate() {
        if matrix.as_ref().is_none_or(|m| m.path != case.path) {
            bar.set_message(format!("reading {}", case.matrix));
            matrix = Some(read_matrix(&case.path)?);
        }
        let mat = matrix.as_ref().expect("read just above");
        let dir = work.path().join(format!("case{index}"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        records.extend(measure_case(
            case, mat, &dir, &setup, threads, roof, args, &bar,
        )?);
        let _ = std::fs::remove_dir_all(&dir);
    }
    bar.finish_and_clear();

    out!("{}", report::table(&records));
    let means = report::geomeans(&records);
    if !means.is_empty() {
        outln!();
        out!("{means}");
    }
    let (json_path, plot_path) = output_paths(args);
    if let Some(path) = &json_path {
        record::write(path, &records)?;
        outln!("records: {}", path.display());
    }
    if let Some(png) = &plot_path {
        let json = match &json_path {
            Some(p) => p.clone(),
            None => {
                let p = work.path().join("records.json");
                record::write(&p, &records)?;
                p
            }
        };
        let drawn = peers::find_bench_dir(args.bench_dir.as_deref())
            .and_then(|dir| plot::draw(&dir, &json, png));
        match drawn {
            Ok(()) => outln!("chart: {}", png.display()),
            // The default chart of a suite run is drawn when the bench environment can.
            Err(e) if args.plot.is_none() => outln!("chart: skipped ({})", one_line(&e)),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Measures one case with Sparsile and every peer; returns Sparsile's record first.
#[allow(clippy::too_many_arguments)] // the run's context, passed down unchanged
fn measure_case(
    case: &Case,
    mat: &Matrix,
    dir: &Path,
    setup: &PeerSetup,
    threads: usize,
    roof: Roofline,
    args: &BenchArgs,
    bar: &ProgressBar,
) -> Result<Vec<Record>> {
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
        threads,
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
    };
    let dense = Dense::random(case.op, csr.m, csr.n, k, args.seed);
    let expected = reference(case.op, csr, &dense, k);
    if !setup.names.is_empty() {
        csr.write(dir)?;
        dense.write(dir)?;
    }
    let runs = peers::Runs {
        threads,
        warmup: args.warmup,
        repeat: args.repeat,
    };
    let case_json = peers::write_case(dir, case, csr, runs)?;

    // One tally per system, Sparsile's first; every round adds its timed runs.
    let mut tallies: Vec<Tally> = std::iter::once(SPARSILE.to_string())
        .chain(setup.names.iter().cloned())
        .map(|system| Tally::new(&base, system))
        .collect();
    // Sparsile's first result, widened once, against which peers are checked.
    let mut our_output: Option<Vec<f64>> = None;
    for round in 0..args.rounds {
        let of = |who: &str| match args.rounds {
            1 => format!("{} {who}", case.label()),
            n => format!("{} {who} (round {}/{n})", case.label(), round + 1),
        };
        bar.set_message(of("sparsile"));
        let ours = &mut tallies[0];
        if ours.live {
            match sparsile_side::measure(
                case,
                &mat.coo,
                csr,
                &dense,
                threads,
                args.warmup,
                args.repeat,
            ) {
                Ok(m) => {
                    ours.record.format = Some(m.format.clone());
                    ours.record.recipe = Some(m.recipe.clone());
                    if let Some(by) = &m.chosen_by {
                        ours.record
                            .note
                            .get_or_insert(format!("chosen by the {by}"));
                    }
                    ours.times.extend(&m.times);
                    ours.record
                        .compile_ms
                        .get_or_insert(m.compile_seconds * 1e3);
                    ours.check(compare(&m.output, &expected));
                    our_output.get_or_insert_with(|| m.output.iter().map(|&v| v as f64).collect());
                }
                Err(e) => ours.fail(format!("failed: {}", one_line(&e))),
            }
        }
        bar.inc(1);
        // Peers are checked against Sparsile's result; against the reference when
        // Sparsile's own result is missing or wrong.
        let sparsile_ok = tallies[0].record.correct == Some(true);
        let against: &[f64] = match (&our_output, sparsile_ok) {
            (Some(o), true) => o,
            _ => &expected,
        };
        for t in tallies.iter_mut().skip(1) {
            bar.set_message(of(&t.record.system));
            if !t.live {
                bar.inc(1);
                continue;
            }
            let python = setup.python.as_deref().expect("found with the peers");
            let bench_dir = setup.bench_dir.as_deref().expect("found with the peers");
            match peers::run_peer(
                python,
                bench_dir,
                &t.record.system,
                &case_json,
                threads,
                std::time::Duration::from_secs(args.peer_timeout),
            )? {
                PeerRun::Ran {
                    times,
                    output,
                    version,
                    note,
                } => {
                    t.times.extend(&times);
                    t.check(compare(&output, against));
                    t.record.version = version;
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
    let mut records: Vec<Record> = tallies.into_iter().map(|t| t.finish(c)).collect();
    set_speedups(&mut records);
    Ok(records)
}

/// What one system measured over the rounds of a case.
struct Tally {
    record: Record,
    times: Vec<f64>,
    /// False once the system failed or lacks the operation: later rounds skip it.
    live: bool,
    /// Each distinct note, with how many rounds gave it.
    notes: Vec<(String, usize)>,
}

impl Tally {
    fn new(base: &Record, system: String) -> Tally {
        let mut record = base.clone();
        if system != SPARSILE {
            record.format = None;
            record.recipe = None;
            record.version = None;
        }
        record.system = system;
        Tally {
            record,
            times: Vec::new(),
            live: true,
            notes: Vec::new(),
        }
    }

    /// A round's result check: the record is correct only if every round was.
    fn check(&mut self, check: reference::Check) {
        let r = &mut self.record;
        r.correct = Some(r.correct.unwrap_or(true) && check.correct);
        r.max_abs_err = Some(r.max_abs_err.unwrap_or(0.0).max(check.max_abs_err));
    }

    fn note(&mut self, note: String) {
        match self.notes.iter_mut().find(|(n, _)| *n == note) {
            Some((_, count)) => *count += 1,
            None => self.notes.push((note, 1)),
        }
    }

    /// A failure (or a missing operation): no times are reported, and later rounds
    /// skip the system.
    fn fail(&mut self, note: String) {
        self.live = false;
        self.times.clear();
        self.record.correct = None;
        self.record.max_abs_err = None;
        self.note(note);
    }

    fn finish(mut self, cost: metrics::Cost) -> Record {
        if !self.times.is_empty() {
            let (med, min, max) = summarize(&self.times);
            self.record.set_times(med, min, max, cost);
        }
        // Notes that differ between rounds (MKL's faster variant) say in how many.
        let text: Vec<String> = match self.notes.as_slice() {
            [(n, _)] => vec![n.clone()],
            all => all
                .iter()
                .map(|(n, c)| format!("{n} ({c} round{})", if *c == 1 { "" } else { "s" }))
                .collect(),
        };
        if !text.is_empty() {
            self.record.note = Some(text.join("; "));
        }
        self.record
    }
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

/// Fills `speedup` (and Sparsile's `best_peer`) from the medians of correct results.
fn set_speedups(records: &mut [Record]) {
    let Some(ours) = records[0]
        .median_ms
        .filter(|_| records[0].correct == Some(true))
    else {
        return;
    };
    let mut best: Option<(f64, String)> = None;
    for r in records.iter_mut().skip(1) {
        if let (Some(t), Some(true)) = (r.median_ms, r.correct) {
            r.speedup = Some(t / ours);
            if best.as_ref().is_none_or(|(b, _)| t < *b) {
                best = Some((t, r.system.clone()));
            }
        }
    }
    if let Some((t, name)) = best {
        records[0].speedup = Some(t / ours);
        records[0].best_peer = Some(name);
    }
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

    fn ok(err: f64) -> reference::Check {
        reference::Check {
            correct: true,
            max_abs_err: err,
        }
    }

    #[test]
    fn a_tally_pools_the_rounds() {
        let cost = metrics::Cost {
            flops: 2e6,
            bytes: 4e6,
        };
        let mut t = Tally::new(&record(SPARSILE, None, None), "mkl".into());
        assert_eq!(
            (t.record.format.as_deref(), t.record.recipe.as_deref()),
            (None, None)
        );
        for (round, times) in [[3e-3, 1e-3], [2e-3, 5e-3], [4e-3, 6e-3]]
            .iter()
            .enumerate()
        {
            t.times.extend(times);
            t.check(ok(round as f64 * 1e-6));
            t.note(if round == 1 { "fresh" } else { "out=" }.into());
        }
        let r = t.finish(cost);
        // The median of all six runs, the extremes of all rounds, the largest error.
        assert_eq!(r.median_ms, Some(3.5));
        assert_eq!((r.min_ms, r.max_ms), (Some(1.0), Some(6.0)));
        assert_eq!((r.correct, r.max_abs_err), (Some(true), Some(2e-6)));
        assert_eq!(r.note.as_deref(), Some("out= (2 rounds); fresh (1 round)"));
    }

    #[test]
    fn one_wrong_round_makes_the_record_wrong_and_a_failure_drops_the_times() {
        let mut t = Tally::new(&record(SPARSILE, None, None), SPARSILE.into());
        t.times.push(1e-3);
        t.check(ok(0.0));
        t.check(reference::Check {
            correct: false,
            max_abs_err: 1.0,
        });
        t.check(ok(0.0));
        t.note("same".into());
        t.note("same".into());
        let r = t.finish(metrics::Cost {
            flops: 1.0,
            bytes: 1.0,
        });
        assert_eq!((r.correct, r.max_abs_err), (Some(false), Some(1.0)));
        assert_eq!(r.note.as_deref(), Some("same"));

        let mut t = Tally::new(&record(SPARSILE, None, None), "scipy".into());
        t.times.push(1e-3);
        t.check(ok(0.0));
        t.fail("failed: out of memory".into());
        assert!(!t.live);
        let r = t.finish(metrics::Cost {
            flops: 1.0,
            bytes: 1.0,
        });
        assert_eq!((r.median_ms, r.correct), (None, None));
        assert_eq!(r.note.as_deref(), Some("failed: out of memory"));
    }

    fn record(system: &str, median: Option<f64>, correct: Option<bool>) -> Record {
        Record {
            matrix: "a".into(),
            op: "spmm".into(),
            k: Some(8),
            system: system.into(),
            format: None,
            recipe: None,
            m: 1,
            n: 1,
            nnz: 1,
            threads: 1,
            median_ms: median,
            min_ms: median,
            max_ms: median,
            gflops: None,
            gbs: None,
            floor_ms: 1.0,
            pct_of_floor: None,
            speedup: None,
            best_peer: None,
            correct,
            max_abs_err: None,
            note: None,
            version: None,
            compile_ms: None,
            flops: 1.0,
            bytes: 1.0,
            bandwidth_gbs: 1.0,
            peak_gflops: 1.0,
        }
    }

    #[test]
    fn speedups_use_only_correct_peers() {
        let mut rs = vec![
            record(SPARSILE, Some(2.0), Some(true)),
            record("scipy", Some(8.0), Some(true)),
            record("mkl", Some(1.0), Some(false)),
            record("graphblas", Some(3.0), Some(true)),
            record("torch", None, None),
        ];
        set_speedups(&mut rs);
        assert_eq!(rs[0].speedup, Some(1.5));
        assert_eq!(rs[0].best_peer.as_deref(), Some("graphblas"));
        assert_eq!(rs[1].speedup, Some(4.0));
        assert_eq!(rs[2].speedup, None);
        assert_eq!(rs[4].speedup, None);
        // No speedup at all when Sparsile's own result is wrong.
        let mut rs = vec![
            record(SPARSILE, Some(2.0), Some(false)),
            record("scipy", Some(8.0), Some(true)),
        ];
        set_speedups(&mut rs);
        assert_eq!((rs[0].speedup, rs[1].speedup), (None, None));
    }
}
