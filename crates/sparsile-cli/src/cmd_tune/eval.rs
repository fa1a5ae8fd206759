//! `sparsile tune eval`: the selector against exhaustive measurement on real matrices
//! (none of which it was trained on).
//!
//! For every (matrix, operator): an exhaustive search (every candidate, rounds measured
//! in turn, close calls measured again), then the picks of each way of choosing — the
//! automatic choice (`selector`: the block rule, which stores an operand whose aligned
//! blocks are nearly full in a block format, else the selector's pick settled by a
//! fresh timed trial of its short list, as a first call runs it:
//! [`sparsile::tune::trial`]), the selector's pick untimed (`model`), the static rule,
//! `default` in the matrix's format, one static candidate for every input (`--static`),
//! and the pruned search (which measures the candidates
//! the selector predicts within 1.2 times its best prediction, at most a fifth of the
//! space, and keeps the fastest: taken from the same measurements) — are measured again
//! against the exhaustive search's best, in `--remeasure × --repeat` fresh turns (and in
//! as many more, with the best, for a pick whose score is more than 10 % from 100 %
//! either way: a far call is measured again). In a turn every candidate runs its warm-up
//! and then one timed call, in an order that rotates from turn to turn, so a pick and the
//! best are timed within milliseconds of each other. A pick's score is the median over
//! the turns of `best's time / pick's time` in the same turn: on a host whose speed
//! drifts by periods of a second or more, comparing medians of separate rounds lets a
//! slow period that falls on one candidate's round move a near-tie by tens of percent,
//! while a slow period falls on both calls of a turn alike. The fresh turns also remove
//! the search's bias (the fastest of many noisy medians is often a lucky run), so a pick
//! tied with the best scores about 100% (a little above or below it by noise).
//! The scores from the search's own measurements are reported beside them. The JSON
//! records, per pick, the share of its fresh runs' pool jobs that no worker joined
//! (`fresh_alone`): a slow fresh median with a share near 0 was slowed by the machine,
//! not by a call that ran on one thread.
//!
//! The best single candidate over all cases, from the search's measurements, is
//! reported as `static (oracle)`: a hindsight choice no static default could know.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use sparsile::auto::tune::{tune, TuneReport};
use sparsile::formats::Format;
use sparsile::ir::DType;
use sparsile::tune::search::{ranking, Strategy};

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
    /// Threads of the kernels (default: SPARSILE_NUM_THREADS or every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Rounds of the exhaustive search over the candidates (medians pool every round).
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Timed runs per candidate and round.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Untimed runs before each candidate's timed ones.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Write every case's scores and search as JSON.
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
    /// The one candidate a static default would run on every input.
    #[arg(long = "static", default_value = "csr/rowwise:partition=static")]
    pub static_pick: String,
    /// Fresh rounds in which the picks and the search's best are measured again,
    /// interleaved (0: score from the search's measurements only).
    #[arg(long, default_value_t = 3)]
    pub remeasure: usize,
}

/// The picks of one case that are measured again, by the name of the way of choosing.
const CHOICES: [&str; 6] = ["selector", "model", "rule", "default", "static", "pruned"];

/// The picks of one case prepared for measuring again: converted, compiled and checked
/// once (a candidate that fails now is left out, and its pick scores 0).
struct Remeasure {
    ev: sparsile::auto::evaluate::OpEvaluator,
    ready: Vec<(String, sparsile::tune::space::Candidate)>,
    warmup: usize,
}

impl Remeasure {
    fn new(
        a: &sparsile::formats::SparseTensor<'_>,
        req: &sparsile::auto::tune::TuneRequest,
        ids: &[String],
    ) -> Result<Self> {
        use sparsile::tune::search::Evaluator;
        use sparsile::tune::space::Candidate;
        let mut ev =
            sparsile::auto::evaluate::OpEvaluator::new(req.op, a, req.width, req.threads, req.seed)
                .context("measuring the picks again")?;
        let ready = ids
            .iter()
            .filter_map(|id| Some((id.clone(), Candidate::from_id(id)?)))
            .filter(|(_, c)| ev.prepare(c).is_ok())
            .collect();
        Ok(Remeasure {
            ev,
            ready,
            warmup: req.options.warmup,
        })
    }

    /// Per prepared candidate, the share of its timed runs' pool jobs that no worker
    /// joined (and calls that found the pool busy), where it had any.
    fn alone_shares(&self) -> BTreeMap<String, f64> {
        self.ready
            .iter()
            .filter_map(|(id, c)| {
                let p = self.ev.pool_stats_of(c)?;
                let calls = p.jobs + p.contended;
                (calls > 0).then(|| (id.clone(), p.alone() as f64 / calls as f64))
            })
            .collect()
    }

    /// `turns` turns over the prepared candidates among `ids` (see the module docs):
    /// each one's time per turn added to `times`, and for every candidate but `best`,
    /// `best's time / its time` of each turn in which both ran added to `ratios`.
    fn turns(
        &mut self,
        best: &str,
        ids: &[String],
        turns: usize,
        times: &mut BTreeMap<String, Vec<f64>>,
        ratios: &mut BTreeMap<String, Vec<f64>>,
    ) {
        use sparsile::tune::search::Evaluator;
        let order: Vec<usize> = (0..self.ready.len())
            .filter(|&k| ids.contains(&self.ready[k].0))
            .collect();
        for turn in 0..turns {
            let mut now: BTreeMap<&str, f64> = BTreeMap::new();
            for step in 0..order.len() {
                let (id, c) = &self.ready[order[(turn + step) % order.len()]];
                if let Ok(t) = self.ev.time(c, self.warmup, 1) {
                    if let Some(&t) = t.first() {
                        times.entry(id.clone()).or_default().push(t);
                        now.insert(id, t);
                    }
                }
            }
            let Some(&b) = now.get(best) else { continue };
            for (id, &t) in &now {
                if *id != best && t > 0.0 {
                    ratios.entry(id.to_string()).or_default().push(b / t);
                }
            }
        }
    }
}

/// The median of each candidate's times.
fn medians(times: &BTreeMap<String, Vec<f64>>) -> BTreeMap<String, f64> {
    times
        .iter()
        .filter(|(_, t)| !t.is_empty())
        .map(|(id, t)| {
            let mut t = t.clone();
            t.sort_by(f64::total_cmp);
            (id.clone(), t[t.len() / 2])
        })
        .collect()
}

/// A fresh score this far from 1 (either way) has its pick and the best measured in as
/// many turns again: measuring again only the picks that look slow would bias the
/// scores up.
const FAR_CALL: f64 = 0.1;

/// The picks among `ids` whose fresh score (`scores`: best's time over theirs) is more
/// than [`FAR_CALL`] from 1.
fn far_calls(scores: &BTreeMap<String, f64>, ids: &[String]) -> Vec<String> {
    ids.iter()
        .filter(|id| {
            scores
                .get(*id)
                .is_some_and(|&s| s > 0.0 && (s - 1.0).abs() > FAR_CALL)
        })
        .cloned()
        .collect()
}

/// The pruned search's result, from an exhaustive one's measurements: the candidates
/// [`Strategy::PRUNED`] measures, ranked and chosen as `tune` ranks and chooses them.
fn pruned(r: &TuneReport) -> (Option<f64>, Option<String>, usize) {
    // Ranked as `tune` ranks; the selector's pick (the rule's without a selector)
    // measured whatever the ranking.
    let slowdowns: Vec<Option<f64>> = r.candidates.iter().map(|c| c.predicted_slowdown).collect();
    let estimates: Vec<f64> = r.candidates.iter().map(|c| c.estimate_ms).collect();
    let ranking = ranking(&slowdowns, &estimates);
    let must_id = r.selector_pick.as_ref().unwrap_or(&r.rule_pick);
    let must: Vec<usize> = r
        .candidates
        .iter()
        .position(|c| &c.candidate == must_id)
        .into_iter()
        .collect();
    let pick = Strategy::PRUNED.chosen(&ranking, &must);
    let best = pick
        .iter()
        .filter_map(|&k| r.candidates[k].median_ms.map(|t| (t, k)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    (
        best.map(|b| b.0),
        best.map(|b| r.candidates[b.1].candidate.clone()),
        pick.len(),
    )
}

/// A trial's winner and each timed candidate's median in milliseconds.
type Trialled = (String, BTreeMap<String, Option<f64>>);

/// The automatic choice's trial of the selector's short list (`r.selector_trial`) on
/// `a`, run as the choice runs it on a first call ([`sparsile::tune::trial::settle`]):
/// the winner, with each candidate's median in milliseconds. `None` without a trial.
fn trial(
    a: &sparsile::formats::SparseTensor<'_>,
    req: &sparsile::auto::tune::TuneRequest,
    r: &TuneReport,
) -> Result<Option<Trialled>> {
    use sparsile::tune::search::Evaluator;
    use sparsile::tune::space::Candidate;
    if r.selector_trial.is_empty() {
        return Ok(None);
    }
    let mut ev =
        sparsile::auto::evaluate::OpEvaluator::new(req.op, a, req.width, req.threads, req.seed)
            .context("the selector's trial")?;
    let ready: Vec<Candidate> = r
        .selector_trial
        .iter()
        .filter_map(|id| Candidate::from_id(id))
        .filter(|c| ev.prepare(c).is_ok())
        .collect();
    let outcome = sparsile::tune::trial::settle(ready.len(), |i| {
        let t = ev.time(&ready[i], 0, 1).ok()?;
        t.first().map(|ms| ms / 1e3)
    });
    let medians = ready
        .iter()
        .zip(&outcome.medians)
        .map(|(c, m)| (c.id(), m.map(|s| s * 1e3)))
        .collect();
    Ok(ready.get(outcome.winner).map(|c| (c.id(), medians)))
}

/// The candidate each way of choosing picks in `r` (see [`CHOICES`]): the automatic
/// choice (`selector`: the trial's winner `settled`, else the selector's pick), the
/// selector's pick untimed (`model`), and the baselines.
fn picks(
    r: &TuneReport,
    static_pick: &str,
    settled: Option<&str>,
) -> Vec<(&'static str, Option<String>)> {
    let default = r
        .candidates
        .iter()
        .find(|c| c.candidate.ends_with("/default"))
        .map(|c| c.candidate.clone());
    vec![
        (
            "selector",
            settled.map(str::to_string).or(r.selector_pick.clone()),
        ),
        ("model", r.selector_pick.clone()),
        ("rule", Some(r.rule_pick.clone())),
        ("default", default),
        ("static", Some(static_pick.to_string())),
        ("pruned", pruned(r).1),
    ]
}

fn time_of(r: &TuneReport, id: &str) -> Option<f64> {
    r.candidates
        .iter()
        .find(|c| c.candidate == id)
        .and_then(|c| c.median_ms)
}

/// What the fresh turns of one case measured.
#[derive(Default)]
struct Fresh {
    /// Each pick's median time.
    ms: BTreeMap<String, f64>,
    /// Each pick's score: the median over the turns of the best's time over its own
    /// (1 for the best).
    scores: BTreeMap<String, f64>,
    /// Per pick but the best, the best's time over its own in each turn.
    ratios: BTreeMap<String, Vec<f64>>,
    /// Per pick, the share of its fresh runs' pool jobs that no worker joined (ran on
    /// the calling thread alone).
    alone: BTreeMap<String, f64>,
}

/// One (matrix, operator) of the evaluation.
struct Case {
    name: String,
    /// The exhaustive search.
    report: TuneReport,
    /// The trial's winner and medians (ms), where the choice has a trial.
    trial: Option<Trialled>,
    fresh: Fresh,
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
    if sparsile::tune::space::Candidate::from_id(&args.static_pick).is_none() {
        bail!(
            "--static must name a candidate as FORMAT/RECIPE, got `{}`",
            args.static_pick
        );
    }
    let mut cases: Vec<Case> = Vec::new();
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
            let settled =
                trial(&a, &req, &r).with_context(|| format!("{name} {}", spec.label()))?;
            let winner = settled.as_ref().map(|t| t.0.as_str());
            let fresh = if args.remeasure > 0 {
                let mut ids: Vec<String> = picks(&r, &args.static_pick, winner)
                    .into_iter()
                    .filter_map(|(_, id)| id)
                    .chain(r.best.clone())
                    .collect();
                ids.sort();
                ids.dedup();
                let mut picks = Remeasure::new(&a, &req, &ids)
                    .with_context(|| format!("{name} {}", spec.label()))?;
                let (mut times, mut ratios) = (BTreeMap::new(), BTreeMap::new());
                let turns = args.remeasure * args.repeat.max(1);
                if let Some(best) = r.best.clone() {
                    picks.turns(&best, &ids, turns, &mut times, &mut ratios);
                    let far = far_calls(&medians(&ratios), &ids);
                    if !far.is_empty() {
                        let again: Vec<String> = std::iter::once(best.clone()).chain(far).collect();
                        picks.turns(&best, &again, turns, &mut times, &mut ratios);
                    }
                    let mut scores = medians(&ratios);
                    if times.contains_key(&best) {
                        scores.insert(best, 1.0);
                    }
                    Fresh {
                        ms: medians(&times),
                        scores,
                        ratios,
                        alone: picks.alone_shares(),
                    }
                } else {
                    Fresh::default()
                }
            } else {
                Fresh::default()
            };
            cases.push(Case {
                name: format!("{name} {}", spec.label()),
                report: r,
                trial: settled,
                fresh,
            });
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    // The best single candidate: highest geometric-mean score over all cases.
    let mut ids: Vec<String> = cases
        .iter()
        .flat_map(|c| c.report.candidates.iter().map(|c| c.candidate.clone()))
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
                        .map(|c| score(&c.report, time_of(&c.report, id)))
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
            "model",
            "rule",
            "default",
            "static",
            "pruned",
            "pruned measured",
        ],
        &[false, false, true, true, true, true, true, true, true, true],
    );
    // Scores in fresh rounds (`fresh`) and from the search's measurements (`search`).
    let mut fresh_cols: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut search_cols: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut measured_fraction = Vec::new();
    let mut rows_json = Vec::new();
    for Case {
        name,
        report: r,
        trial,
        fresh,
    } in &cases
    {
        let settled = trial.as_ref().map(|t| t.0.as_str());
        let (pruned_ms, _, pn) = pruned(r);
        measured_fraction.push(pn as f64 / r.space_size.max(1) as f64);
        let search = [
            (
                "selector".to_string(),
                score(
                    r,
                    settled
                        .or(r.selector_pick.as_deref())
                        .and_then(|p| time_of(r, p)),
                ),
            ),
            (
                "model".to_string(),
                score(r, r.selector_pick.as_deref().and_then(|p| time_of(r, p))),
            ),
            ("rule".to_string(), score(r, time_of(r, &r.rule_pick))),
            ("default".to_string(), score(r, r.default_ms)),
            (
                format!("static (oracle: {static_id})"),
                score(r, time_of(r, &static_id)),
            ),
            ("pruned".to_string(), score(r, pruned_ms)),
        ];
        for (k, v) in &search {
            search_cols.entry(k.clone()).or_default().push(*v);
        }
        // Scores from the fresh turns, or from the search's own medians.
        let best_fresh = r.best.as_deref().and_then(|b| fresh.ms.get(b).copied());
        let case_picks = picks(r, &args.static_pick, settled);
        let mut scores = BTreeMap::new();
        for (choice, pick) in &case_picks {
            let s = match pick.as_deref() {
                Some(p) if args.remeasure > 0 => fresh.scores.get(p).copied().unwrap_or(0.0),
                Some(p) => score(r, time_of(r, p)),
                None => 0.0,
            };
            fresh_cols.entry(*choice).or_default().push(s);
            scores.insert(*choice, s);
        }
        let pct = |x: f64| format!("{:.0}%", x * 100.0);
        let mut row = vec![
            name.clone(),
            r.best.clone().unwrap_or_default(),
            best_fresh
                .or(r.best_ms)
                .map_or("-".into(), |b| format!("{b:.4}")),
        ];
        row.extend(CHOICES.iter().map(|c| pct(scores[c])));
        row.push(format!("{pn}/{}", r.space_size));
        t.row(row);
        rows_json.push(serde_json::json!({
            "case": name,
            "scores": scores,
            "search_scores": search.iter().map(|(k, v)| (k.clone(), *v)).collect::<BTreeMap<_, _>>(),
            "fresh_ms": fresh.ms,
            "fresh_ratios": fresh.ratios,
            "fresh_alone": fresh.alone,
            "trial_ms": trial.as_ref().map(|t| &t.1),
            "picks": case_picks.into_iter().collect::<BTreeMap<_, _>>(),
            "pruned_measured": pn,
            "report": r,
        }));
    }
    out!("{}", t.render());
    let mut s = Table::new(
        &[
            "choice",
            "measured",
            "geomean of best",
            "min",
            "cases below 85%",
        ],
        &[false, false, true, true, true],
    );
    let mut summary_row = |label: String, measured: &str, v: &[f64]| {
        let sc = summarize(v);
        s.row(vec![
            label,
            measured.to_string(),
            format!("{:.1}%", sc.geomean * 100.0),
            format!("{:.1}%", sc.min * 100.0),
            sc.below_085.to_string(),
        ]);
    };
    let again = if args.remeasure == 0 {
        "in the search"
    } else {
        "again"
    };
    for c in CHOICES {
        let label = if c == "static" {
            format!("static ({})", args.static_pick)
        } else {
            c.to_string()
        };
        summary_row(label, again, &fresh_cols[c]);
    }
    if args.remeasure > 0 {
        for (k, v) in &search_cols {
            summary_row(k.clone(), "in the search", v);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn far_calls_are_the_picks_more_than_ten_percent_from_the_best_either_way() {
        let scores = map(&[("best", 1.0), ("slow", 0.7), ("close", 0.95), ("fast", 1.2)]);
        let ids: Vec<String> = ["best", "slow", "close", "fast", "gone"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(far_calls(&scores, &ids), ["slow", "fast"]);
        assert!(far_calls(&BTreeMap::new(), &ids).is_empty());
    }

    #[test]
    fn medians_take_the_middle_of_every_candidates_times() {
        let times: BTreeMap<String, Vec<f64>> = [
            ("a".to_string(), vec![3.0, 1.0, 2.0]),
            ("b".to_string(), vec![4.0, 1.0]),
            ("c".to_string(), vec![]),
        ]
        .into_iter()
        .collect();
        assert_eq!(medians(&times), map(&[("a", 2.0), ("b", 4.0)]));
    }
}
