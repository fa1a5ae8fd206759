//! `sparsile tune --op … --k … --matrix …`: one search per (matrix, operator, width),
//! a table of its candidates, the choice and the time split; results go to the tuning
//! database (unless `--no-record`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use sparsile::auto::tune::{strategy, tune, TuneReport, TuneRequest};
use sparsile::formats::decompose::DecomposeRule;
use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::tune::search::SearchOptions;

use super::{machine, op_specs, OpSpec};
use crate::output::outln;
use crate::table::{duration, Table};

#[derive(clap::Args, Default)]
pub struct MeasureArgs {
    /// Operators: spmm, sddmm, spmv (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub op: Vec<String>,
    /// Dense widths K of SpMM and SDDMM (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "32,128")]
    pub k: Vec<usize>,
    /// Matrix Market or .spt files (repeatable).
    #[arg(long)]
    pub matrix: Vec<PathBuf>,
    /// select (no measurement), pruned (the candidates predicted within 1.2 times the
    /// best prediction, at most a fifth of the space), exhaustive, stile (pruned plus
    /// the decompositions into dense tiles and scattered entries that the calibrated
    /// tile model keeps; spmm) or stile-exhaustive (the whole space and the
    /// decompositions).
    #[arg(long, default_value = "pruned")]
    pub strategy: String,
    /// No new measuring round starts after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub budget: Option<f64>,
    /// Threads of the kernels (default: SPARSILE_NUM_THREADS or every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Rounds over the candidates (medians pool every round).
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Timed runs per candidate and round.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Untimed runs before each candidate's timed ones.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Only candidates in the matrix's own format (no conversion).
    #[arg(long)]
    pub keep_format: bool,
    /// Do not write the results to the tuning database.
    #[arg(long)]
    pub no_record: bool,
    /// Seed of the random dense operands.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the reports as JSON.
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
    /// With the stile strategies: write a PNG of the fastest tiles decomposition per
    /// matrix and operator into this folder (which non-zeros went to which tiles).
    #[arg(long, value_name = "DIR")]
    pub picture: Option<PathBuf>,
}

/// The request for one operator spec under `args`.
pub fn request(args: &MeasureArgs, spec: OpSpec, threads: usize) -> Result<TuneRequest> {
    let Some(s) = strategy(&args.strategy) else {
        bail!(
            "--strategy must be select, pruned, exhaustive, stile or stile-exhaustive, got `{}`",
            args.strategy
        );
    };
    Ok(TuneRequest {
        op: spec.op,
        width: spec.width,
        threads,
        other_formats: !args.keep_format,
        options: SearchOptions {
            strategy: s,
            rounds: args.rounds.max(1),
            warmup: args.warmup,
            repeat: args.repeat.max(1),
            budget: args.budget.map(Duration::from_secs_f64),
            ..SearchOptions::default()
        },
        machine: machine(threads),
        record: !args.no_record,
        seed: args.seed,
    })
}

pub fn run(args: &MeasureArgs) -> Result<()> {
    if args.matrix.is_empty() {
        bail!("give --matrix FILE (or a subcommand: corpus, label, train, eval)");
    }
    if args.op.is_empty() {
        bail!("give --op spmm, sddmm or spmv (comma-separated)");
    }
    let mut specs = Vec::new();
    for op in &args.op {
        if op == "spmv" {
            specs.extend(op_specs("spmv")?);
        } else {
            for k in &args.k {
                specs.extend(op_specs(&format!("{op}:{k}"))?);
            }
        }
    }
    specs.dedup();
    let threads = args.threads.unwrap_or_else(|| {
        sparsile_runtime::jit::default_threads(&sparsile_ir::settings::Settings::from_env())
    });
    let mut reports = Vec::new();
    for path in &args.matrix {
        let loaded = crate::load::read(path)?;
        let a = loaded
            .to_tensor(&Format::Csr, DType::F32)
            .with_context(|| format!("{} as csr", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        for &spec in &specs {
            let req = request(args, spec, threads)?;
            let bar = crate::progress::bar(args.json.is_none(), 1);
            let report = tune(&a, &req, &mut |p| {
                bar.set_length(p.total as u64);
                bar.set_position(p.done as u64);
                bar.set_message(format!("{name} {} {}", spec.label(), p.candidate));
            })
            .with_context(|| format!("tuning {name} {}", spec.label()))?;
            bar.finish_and_clear();
            print_report(&name, spec, &report);
            if let Some(dir) = &args.picture {
                picture(dir, &name, spec, &a, &report)?;
            }
            reports.push(serde_json::json!({ "matrix": name, "report": report }));
        }
    }
    if let Some(out) = &args.json {
        std::fs::write(out, serde_json::to_string_pretty(&reports)? + "\n")
            .with_context(|| format!("cannot write {}", out.display()))?;
    }
    Ok(())
}

fn ms(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.4}"))
}

/// The table of one search and its summary lines.
pub fn print_report(name: &str, spec: OpSpec, r: &TuneReport) {
    outln!(
        "{name} {}: {} of {} candidates measured ({}, space version {}), {} threads",
        spec.label(),
        r.candidates.iter().filter(|c| c.measured).count(),
        r.space_size,
        r.strategy,
        r.space_version,
        r.threads
    );
    let mut t = Table::new(
        &[
            "candidate",
            "estimate ms",
            "predicted",
            "measured ms",
            "vs best",
            "status",
        ],
        &[false, true, true, true, true, false],
    );
    let mut rows: Vec<_> = r.candidates.iter().collect();
    rows.sort_by(|a, b| {
        let key = |c: &&sparsile::auto::tune::CandidateReport| c.median_ms.unwrap_or(f64::INFINITY);
        key(a)
            .total_cmp(&key(b))
            .then(a.estimate_ms.total_cmp(&b.estimate_ms))
    });
    for c in rows {
        let vs = match (c.median_ms, r.best_ms) {
            (Some(m), Some(b)) => format!("{:.2}x", m / b),
            _ => "-".into(),
        };
        let status = match (&c.failure, c.measured) {
            (Some(f), _) => format!("failed: {}", f.lines().next().unwrap_or("")),
            (None, true) => {
                if Some(&c.candidate) == r.best.as_ref() {
                    "best".into()
                } else {
                    "ok".into()
                }
            }
            (None, false) => "not measured".into(),
        };
        t.row(vec![
            c.candidate.clone(),
            format!("{:.4}", c.estimate_ms),
            c.predicted_slowdown
                .map_or("-".into(), |p| format!("{p:.2}x")),
            ms(c.median_ms),
            vs,
            status,
        ]);
    }
    crate::output::out!("{}", t.render());
    let over = |x: Option<f64>| match (x, r.best_ms) {
        (Some(x), Some(b)) => format!("{:.2}x", x / b),
        _ => "-".into(),
    };
    let pick_ms = r
        .selector_pick
        .as_ref()
        .and_then(|p| r.candidates.iter().find(|c| &c.candidate == p))
        .and_then(|c| c.median_ms);
    outln!(
        "choice: {} ({} ms); over default {}; over the selector's pick ({}) {}; rule's pick {}",
        r.best.as_deref().unwrap_or("none"),
        ms(r.best_ms),
        over(r.default_ms),
        r.selector_pick.as_deref().unwrap_or("none"),
        over(pick_ms),
        r.rule_pick
    );
    outln!(
        "time: features {}, model {}, compile {}, convert {}, measure {}; cost-model rank correlation {}; {} records written",
        duration(r.features_ms / 1e3),
        duration(r.model_ms / 1e3),
        duration(r.compile_ms / 1e3),
        duration(r.convert_ms / 1e3),
        duration(r.measure_ms / 1e3),
        r.cost_rank_correlation.map_or("-".into(), |c| format!("{c:.2}")),
        r.records_written
    );
    print_tiles(r);
    for w in &r.warnings {
        outln!("note: {w}");
    }
}

/// The STile strategy's decompositions and the best of them against the best single
/// format measured.
fn print_tiles(r: &TuneReport) {
    if r.strategy != "stile" {
        return;
    }
    for t in &r.tiles {
        let levels: Vec<String> = t
            .tiles
            .iter()
            .map(|(side, n)| format!("{n} of {side}x{side}"))
            .collect();
        outln!(
            "tiles {}: {}, {} scattered non-zeros; estimate {:.4} ms, measured {} ms",
            t.candidate.id(),
            levels.join(", "),
            t.rest,
            t.estimate_ms,
            ms(r.median_ms(&t.candidate.id()))
        );
    }
    let tiles_best = r.fastest_tiles().map(|t| t.1);
    let single_best = r.fastest_single_ms();
    match (tiles_best, single_best) {
        (Some(t), Some(s)) => outln!(
            "tiles: best decomposition {} ms, best single format {} ms: {:.2}x; tile model {}",
            ms(Some(t)),
            ms(Some(s)),
            s / t,
            duration(r.tile_model_ms / 1e3)
        ),
        _ => outln!(
            "tiles: no decomposition measured (the tile model predicts none faster than CSR); tile model {}",
            duration(r.tile_model_ms / 1e3)
        ),
    }
}

/// Writes the picture of the fastest measured tiles decomposition of `report`.
fn picture(
    dir: &Path,
    name: &str,
    spec: OpSpec,
    a: &SparseTensor<'_>,
    report: &TuneReport,
) -> Result<()> {
    let fastest = report.fastest_tiles();
    let Some((tiles, _)) = fastest else {
        outln!(
            "picture: no tiles decomposition was measured for {name} {}",
            spec.label()
        );
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let stem = name.trim_end_matches(".gz").trim_end_matches(".mtx");
    let op = spec.label().replace(" K=", "-k").to_lowercase();
    let path = dir.join(format!("{stem}-{op}.png"));
    let rule: DecomposeRule = tiles.rule.parse()?;
    let legend = super::picture::write(a, &rule, &path)?;
    outln!(
        "picture: {} ({}; {legend})",
        path.display(),
        tiles.candidate.id()
    );
    Ok(())
}
