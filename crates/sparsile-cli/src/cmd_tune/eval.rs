//! `sparsile tune eval`: the selector against exhaustive measurement on real matrices
//! (none of which it was trained on).
//!
//! For every (matrix, operator): an exhaustive search (every candidate, rounds measured
//! in turn, close calls measured again), then the score of each way of choosing, as
//! `best time / chosen candidate's time`: the selector, the static rule, `default` in
//! the matrix's format, the best single candidate over all cases, and the pruned
//! search (which measures the best-ranked 20% of the space plus the rule's, the
//! selector's and default's picks, and keeps the fastest: computed from the same
//! measurements).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use sparsile::auto::tune::{tune, TuneReport};
use sparsile::formats::Format;
use sparsile::ir::DType;

use super::measure::{request, MeasureArgs};
use super::op_specs;
use super::train::summarize;
use crate::output::{out, outln};
use crate::table::Table;

#[derive(clap::Args)]
pub struct EvalArgs {
    /// Matrix Market files (repeatable).
    #[arg(long)]
    pub matrix: Vec<PathBuf>,
    /// Operators and widths.
    #[arg(long, default_value = "spmm:32,spmm:128,sddmm:32,sddmm:128,spmv")]
    pub ops: String,
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Write every case's scores and search as JSON.
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
}

/// The pruned search's result, from an exhaustive one's measurements.
fn pruned(r: &TuneReport) -> (Option<f64>, usize) {
    let n = r.candidates.len();
    let mut order: Vec<usize> = (0..n).collect();
    // As the search ranks: by predicted slowdown when the selector predicts, else by
    // the cost estimate.
    let predicts = r.candidates.iter().any(|c| c.predicted_slowdown.is_some());
    let rank = |k: usize| {
        let c = &r.candidates[k];
        if predicts {
            c.predicted_slowdown.unwrap_or(f64::INFINITY)
        } else {
            c.estimate_ms
        }
    };
    order.sort_by(|&a, &b| rank(a).total_cmp(&rank(b)));
    let take = ((n as f64 * 0.2).ceil() as usize).max(3);
    let mut pick: Vec<usize> = order.into_iter().take(take).collect();
    for must in [Some(&r.rule_pick), r.selector_pick.as_ref()]
        .into_iter()
        .flatten()
    {
        if let Some(k) = r.candidates.iter().position(|c| &c.candidate == must) {
            pick.push(k);
        }
    }
    if let Some(k) = r
        .candidates
        .iter()
        .position(|c| c.candidate == "csr/default")
    {
        pick.push(k);
    }
    pick.sort_unstable();
    pick.dedup();
    let best = pick
        .iter()
        .filter_map(|&k| r.candidates[k].median_ms)
        .fold(f64::INFINITY, f64::min);
    (best.is_finite().then_some(best), pick.len())
}

fn time_of(r: &TuneReport, id: &str) -> Option<f64> {
    r.candidates
        .iter()
        .find(|c| c.candidate == id)
        .and_then(|c| c.median_ms)
}

pub fn run(args: &EvalArgs) -> Result<()> {
    if args.matrix.is_empty() {
        bail!("give --matrix FILE (repeatable): real matrices the selector was not trained on");
    }
    let specs = op_specs(&args.ops)?;
    let threads = args.threads.unwrap_or_else(|| {
        sparsile_runtime::jit::default_threads(&sparsile_ir::settings::Settings::from_env())
    });
    let measure = MeasureArgs {
        strategy: "exhaustive".into(),
        rounds: args.rounds,
        repeat: args.repeat,
        warmup: args.warmup,
        no_record: true,
        ..MeasureArgs::default()
    };
    let bar = crate::progress::bar(true, (args.matrix.len() * specs.len()) as u64);
    let mut cases: Vec<(String, TuneReport)> = Vec::new();
    for path in &args.matrix {
        let a = crate::load::read(path)?
            .to_tensor(&Format::Csr, DType::F32)
            .with_context(|| format!("{} as csr", path.display()))?;
        let name = path
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .split('.')
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .unwrap_or_default();
        for &spec in &specs {
            bar.set_message(format!("{name} {}", spec.label()));
            let req = request(&measure, spec, threads)?;
            let r =
                tune(&a, &req, &mut |_| {}).with_context(|| format!("{name} {}", spec.label()))?;
            cases.push((format!("{name} {}", spec.label()), r));
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    // The best single candidate: highest geometric-mean score over all cases.
    let mut ids: Vec<String> = cases
        .iter()
        .flat_map(|(_, r)| r.candidates.iter().map(|c| c.candidate.clone()))
        .collect();
    ids.sort();
    ids.dedup();
    let score = |r: &TuneReport, t: Option<f64>| match (r.best_ms, t) {
        (Some(b), Some(t)) if t > 0.0 => b / t,
        _ => 0.0,
    };
    let static_id = ids
        .iter()
        .max_by(|a, b| {
            let g = |id: &str| {
                summarize(
                    &cases
                        .iter()
                        .map(|(_, r)| score(r, time_of(r, id)))
                        .collect::<Vec<_>>(),
                )
                .geomean
            };
            g(a).total_cmp(&g(b))
        })
        .cloned()
        .unwrap_or_default();
    let mut t = Table::new(
        &[
            "case",
            "best",
            "best ms",
            "selector",
            "rule",
            "default",
            "static",
            "pruned",
            "pruned measured",
        ],
        &[false, false, true, true, true, true, true, true, true],
    );
    let mut cols: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut measured_fraction = Vec::new();
    let mut rows_json = Vec::new();
    for (name, r) in &cases {
        let sel = score(r, r.selector_pick.as_deref().and_then(|p| time_of(r, p)));
        let rul = score(r, time_of(r, &r.rule_pick));
        let def = score(r, r.default_ms);
        let fix = score(r, time_of(r, &static_id));
        let (pb, pn) = pruned(r);
        let pru = score(r, pb);
        measured_fraction.push(pn as f64 / r.space_size.max(1) as f64);
        for (k, v) in [
            ("selector", sel),
            ("rule", rul),
            ("default", def),
            ("static", fix),
            ("pruned", pru),
        ] {
            cols.entry(k).or_default().push(v);
        }
        let pct = |x: f64| format!("{:.0}%", x * 100.0);
        t.row(vec![
            name.clone(),
            r.best.clone().unwrap_or_default(),
            r.best_ms.map_or("-".into(), |b| format!("{b:.4}")),
            pct(sel),
            pct(rul),
            pct(def),
            pct(fix),
            pct(pru),
            format!("{pn}/{}", r.space_size),
        ]);
        rows_json.push(serde_json::json!({
            "case": name, "selector": sel, "rule": rul, "default": def, "static": fix,
            "pruned": pru, "pruned_measured": pn, "report": r,
        }));
    }
    out!("{}", t.render());
    let mut s = Table::new(
        &["choice", "geomean of best", "min", "cases below 85%"],
        &[false, true, true, true],
    );
    for (k, v) in &cols {
        let sc = summarize(v);
        let label = if *k == "static" {
            format!("static ({static_id})")
        } else {
            k.to_string()
        };
        s.row(vec![
            label,
            format!("{:.1}%", sc.geomean * 100.0),
            format!("{:.1}%", sc.min * 100.0),
            sc.below_085.to_string(),
        ]);
    }
    out!("{}", s.render());
    let mean_fraction =
        measured_fraction.iter().sum::<f64>() / measured_fraction.len().max(1) as f64;
    outln!(
        "{} cases; the pruned search measured {:.0}% of the candidates on average",
        cases.len(),
        mean_fraction * 100.0
    );
    if let Some(out) = &args.json {
        std::fs::write(out, serde_json::to_string_pretty(&rows_json)? + "\n")
            .with_context(|| format!("cannot write {}", out.display()))?;
    }
    Ok(())
}
