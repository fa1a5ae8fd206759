//! Measuring candidates: the search strategies over an [`Evaluator`].
//!
//! The evaluator (implemented by the facade, which has the compiler) prepares a
//! candidate — converts the operand, compiles, checks the result once against the f64
//! reference — and times it. The search measures every selected candidate once per
//! round, in an order rotated each round so that a slow spell of a shared machine falls
//! on every candidate, pools the rounds, then measures the candidates within
//! [`SearchOptions::close`] of the best for extra rounds, and so the unsteady ones
//! (a median above [`UNSTEADY`] times the candidate's fastest run: a stall of the
//! machine hit most of its runs). Before the rounds, each candidate runs once: one
//! slower than [`SearchOptions::slow_cut`] times the fastest so far runs once more, and
//! when that run is as slow it keeps those times and is not measured further. A candidate that fails to
//! prepare (refused by the program, not compiling, answering wrongly) or to run is kept
//! with its reason and never measured again; it never stops the search.
//!
//! Strategies: `exhaustive` measures the whole space; `pruned` measures the candidates
//! the ranking (the selector's predicted slowdowns, or the cost model's estimates) puts
//! close to its first, at most a fraction of the space ([`pruned_choice`]), plus the
//! candidates that must be seen; `select` measures nothing.
//!
//! ```
//! use sparsile_tune::search::{search, Evaluator, Prepared, SearchOptions, Strategy};
//! use sparsile_tune::space::Candidate;
//! struct Fake;
//! impl Evaluator for Fake {
//!     fn prepare(&mut self, c: &Candidate) -> Result<Prepared, String> {
//!         if c.recipe == "broken" { Err("does not apply".into()) } else { Ok(Prepared::default()) }
//!     }
//!     fn time(&mut self, c: &Candidate, _w: usize, repeat: usize) -> Result<Vec<f64>, String> {
//!         Ok(vec![if c.recipe == "fast" { 1.0 } else { 2.0 }; repeat])
//!     }
//! }
//! let cands = vec![Candidate::new("csr", "slow"), Candidate::new("csr", "fast"), Candidate::new("csr", "broken")];
//! let r = search(&cands, &[0.0, 0.0, 0.0], &[], &mut Fake, &SearchOptions::default(), &mut |_| {});
//! assert_eq!(r.best().unwrap().candidate.recipe, "fast");
//! assert_eq!(r.outcomes[2].failure.as_deref(), Some("does not apply"));
//! ```

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::db::median;
use crate::space::Candidate;

/// A candidate whose median is this many times its fastest run is measured again.
pub const UNSTEADY: f64 = 1.5;

/// What preparing a candidate cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    pub compile_ms: f64,
    pub convert_ms: f64,
    /// The trace its recipe recorded.
    pub trace: Option<serde_json::Value>,
}

/// Prepares and times candidates (see the module docs).
pub trait Evaluator {
    /// Converts, compiles and checks `c`; the reason when it cannot run.
    fn prepare(&mut self, c: &Candidate) -> Result<Prepared, String>;
    /// `repeat` kernel times of a prepared `c` in milliseconds, after `warmup` runs.
    fn time(&mut self, c: &Candidate, warmup: usize, repeat: usize) -> Result<Vec<f64>, String>;
}

/// How to search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    Exhaustive,
    /// Measure the candidates ranked within `within` times the first's ranking value,
    /// best ranked first, at most `fraction` of the space (at least two): see
    /// [`pruned_choice`].
    Pruned {
        fraction: f64,
        within: f64,
    },
    Select,
    /// Measure what the pruned strategy measures plus the candidates that must be seen:
    /// the STile search's decompositions, which the caller adds to the space (see
    /// [`crate::stile`]).
    Stile {
        fraction: f64,
        within: f64,
    },
}

impl Strategy {
    /// The pruned strategy as `sparsile tune --strategy pruned` runs it: at most a fifth
    /// of the space, the candidates predicted within 1.2 times the best prediction
    /// (the ratio STile keeps candidates within in its local search).
    pub const PRUNED: Strategy = Strategy::Pruned {
        fraction: 0.2,
        within: 1.2,
    };

    /// The STile strategy: the pruned choice of the space beside the searched tiles.
    pub const STILE: Strategy = Strategy::Stile {
        fraction: 0.2,
        within: 1.2,
    };

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Exhaustive => "exhaustive",
            Strategy::Pruned { .. } => "pruned",
            Strategy::Select => "select",
            Strategy::Stile { .. } => "stile",
        }
    }

    /// The candidates (indices, sorted) this strategy measures, given the ranking and
    /// the candidates that must be seen: all of them, none, or [`pruned_choice`]'s.
    pub fn chosen(self, ranking: &[f64], must: &[usize]) -> Vec<usize> {
        match self {
            Strategy::Exhaustive => (0..ranking.len()).collect(),
            Strategy::Select => Vec::new(),
            Strategy::Pruned { fraction, within } | Strategy::Stile { fraction, within } => {
                pruned_choice(ranking, must, fraction, within)
            }
        }
    }
}

/// Measurement settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    pub strategy: Strategy,
    pub rounds: usize,
    pub warmup: usize,
    pub repeat: usize,
    /// Candidates whose median is within this factor of the best get `extra_rounds`.
    pub close: f64,
    pub extra_rounds: usize,
    /// No new round starts after this much time (the first always runs).
    pub budget: Option<Duration>,
    /// A candidate whose first run takes more than this many times the fastest first
    /// run so far is timed no further (its one time is kept): it cannot win, and slow
    /// designs can be a hundred times slower than the best.
    pub slow_cut: f64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            strategy: Strategy::Exhaustive,
            rounds: 2,
            warmup: 2,
            repeat: 5,
            close: 1.03,
            extra_rounds: 2,
            budget: None,
            slow_cut: 8.0,
        }
    }
}

/// One candidate's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub candidate: Candidate,
    pub prepared: Option<Prepared>,
    pub times_ms: Vec<f64>,
    pub failure: Option<String>,
    /// Whether the strategy measured it.
    pub measured: bool,
    /// The ranking value it had (cost estimate or predicted slowdown).
    pub rank_value: f64,
}

impl Outcome {
    pub fn median_ms(&self) -> Option<f64> {
        if self.failure.is_some() {
            return None;
        }
        median(&self.times_ms)
    }
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    pub outcomes: Vec<Outcome>,
    pub elapsed_ms: f64,
}

impl SearchResult {
    /// The measured candidate with the lowest median.
    pub fn best(&self) -> Option<&Outcome> {
        self.outcomes
            .iter()
            .filter(|o| o.median_ms().is_some())
            .min_by(|a, b| a.median_ms().unwrap().total_cmp(&b.median_ms().unwrap()))
    }

    /// How many candidates were measured.
    pub fn measured(&self) -> usize {
        self.outcomes.iter().filter(|o| o.measured).count()
    }
}

/// A progress event: `done` of `total` measurements, on `candidate`.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    pub done: usize,
    pub total: usize,
    pub candidate: &'a Candidate,
}

/// The candidates (indices) a pruned search measures: in the order of `ranking` (a
/// positive predicted cost per candidate, lower first; `NaN` or infinite: not ranked),
/// the first, then each next one whose value is at most `within` times the first's,
/// until `fraction` of the space (rounded down, at least two) is taken; then `must`.
/// Sorted.
///
/// A confident ranking (one candidate predicted well ahead) measures one candidate; a
/// ranking that sees several close ones measures those, up to the cap. The cap is at
/// least two because a fifth of the smallest spaces (SDDMM's 8 to 11 candidates) rounds
/// down to the model's pick alone, which leaves nothing to search where its prediction
/// is close to another's: replayed on the search medians of three evaluations of the
/// real matrices (290 cases each), the pruned choice's geometric mean rose from 95.2-96.2 %
/// to 96.7-97.3 %, measuring 19.7 % of the candidates instead of 15.2 %.
///
/// ```
/// use sparsile_tune::search::pruned_choice;
/// // 10 candidates: a cap of 2; the second is within 1.2 times the first, so taken.
/// let r = [3.0, 1.0, 1.1, 5.0, 1.15, 9.0, 9.0, 9.0, 9.0, f64::NAN];
/// assert_eq!(pruned_choice(&r, &[], 0.2, 1.2), vec![1, 2]);
/// assert_eq!(pruned_choice(&r, &[7], 0.2, 1.05), vec![1, 7]);
/// // 8 candidates: a fifth rounds down to 1, the cap is 2.
/// assert_eq!(pruned_choice(&r[..8], &[], 0.2, 1.2), vec![1, 2]);
/// ```
pub fn pruned_choice(ranking: &[f64], must: &[usize], fraction: f64, within: f64) -> Vec<usize> {
    let cap = ((ranking.len() as f64 * fraction).floor() as usize).max(2);
    let mut order: Vec<usize> = (0..ranking.len())
        .filter(|&k| ranking[k].is_finite())
        .collect();
    order.sort_by(|&a, &b| ranking[a].total_cmp(&ranking[b]));
    let mut pick: Vec<usize> = Vec::new();
    if let Some(&first) = order.first() {
        let limit = ranking[first] * within;
        pick.extend(
            order
                .iter()
                .copied()
                .take(cap)
                .take_while(|&k| ranking[k] <= limit),
        );
    }
    for &m in must {
        if m < ranking.len() && !pick.contains(&m) {
            pick.push(m);
        }
    }
    pick.sort_unstable();
    pick
}

/// What the pruned strategy ranks candidates by: the selector's predicted slowdowns
/// where it predicts any (a candidate it has no prediction for last), else the cost
/// model's estimates.
///
/// ```
/// use sparsile_tune::search::ranking;
/// assert_eq!(ranking(&[Some(1.5), None], &[2.0, 1.0]), vec![1.5, f64::INFINITY]);
/// assert_eq!(ranking(&[None, None], &[2.0, 1.0]), vec![2.0, 1.0]);
/// ```
pub fn ranking(predicted_slowdown: &[Option<f64>], estimates: &[f64]) -> Vec<f64> {
    if predicted_slowdown.iter().any(Option::is_some) {
        predicted_slowdown
            .iter()
            .map(|x| x.unwrap_or(f64::INFINITY))
            .collect()
    } else {
        estimates.to_vec()
    }
}

/// Searches `candidates` (see the module docs). `ranking[k]` is the predicted cost of
/// candidate `k` for the pruned strategy ([`pruned_choice`]); `must` are measured
/// whatever the ranking.
pub fn search(
    candidates: &[Candidate],
    ranking: &[f64],
    must: &[Candidate],
    ev: &mut dyn Evaluator,
    options: &SearchOptions,
    progress: &mut dyn FnMut(Progress),
) -> SearchResult {
    let start = Instant::now();
    let must: Vec<usize> = must
        .iter()
        .filter_map(|m| candidates.iter().position(|c| c == m))
        .collect();
    let mut ranks = ranking.to_vec();
    ranks.resize(candidates.len(), f64::NAN);
    let mut chosen = options.strategy.chosen(&ranks, &must);
    let mut outcomes: Vec<Outcome> = candidates
        .iter()
        .enumerate()
        .map(|(k, c)| Outcome {
            candidate: c.clone(),
            prepared: None,
            times_ms: Vec::new(),
            failure: None,
            measured: chosen.contains(&k),
            rank_value: ranking.get(k).copied().unwrap_or(f64::NAN),
        })
        .collect();
    let total = chosen.len() * (options.rounds.max(1) + 1);
    let mut done = 0usize;
    for &k in &chosen {
        progress(Progress {
            done,
            total,
            candidate: &candidates[k],
        });
        match ev.prepare(&candidates[k]) {
            Ok(p) => outcomes[k].prepared = Some(p),
            Err(e) => outcomes[k].failure = Some(e),
        }
        done += 1;
    }
    chosen.retain(|&k| outcomes[k].failure.is_none());
    // A first run of each: the hopelessly slow stop here.
    let mut fastest = f64::INFINITY;
    let mut slow: Vec<usize> = Vec::new();
    for &k in &chosen {
        // One run may fall in a stall of a shared machine: a candidate is cut only when
        // a second run is as slow.
        let mut runs = Vec::new();
        for _ in 0..2 {
            match ev.time(&candidates[k], 0, 1) {
                Ok(t) => runs.extend(t),
                Err(e) => {
                    outcomes[k].failure = Some(e);
                    break;
                }
            }
            if runs.iter().copied().fold(f64::INFINITY, f64::min) <= fastest * options.slow_cut {
                break;
            }
        }
        if outcomes[k].failure.is_some() {
            continue;
        }
        let first = runs.iter().copied().fold(f64::INFINITY, f64::min);
        if first > fastest * options.slow_cut {
            outcomes[k].times_ms.extend(runs);
            slow.push(k);
        }
        fastest = fastest.min(first);
    }
    chosen.retain(|k| outcomes[*k].failure.is_none() && !slow.contains(k));
    let mut run_round =
        |round: usize, which: &[usize], outcomes: &mut Vec<Outcome>, done: &mut usize| {
            let n = which.len().max(1);
            for step in 0..which.len() {
                let k = which[(step + round) % n];
                progress(Progress {
                    done: *done,
                    total,
                    candidate: &candidates[k],
                });
                if outcomes[k].failure.is_none() {
                    match ev.time(&candidates[k], options.warmup, options.repeat) {
                        Ok(t) => outcomes[k].times_ms.extend(t),
                        Err(e) => outcomes[k].failure = Some(e),
                    }
                }
                *done += 1;
            }
        };
    for round in 0..options.rounds.max(1) {
        if round > 0 && options.budget.is_some_and(|b| start.elapsed() > b) {
            break;
        }
        run_round(round, &chosen, &mut outcomes, &mut done);
    }
    // Close calls: measure the candidates near the best again.
    let best = outcomes
        .iter()
        .filter_map(Outcome::median_ms)
        .fold(f64::INFINITY, f64::min);
    let close: Vec<usize> = chosen
        .iter()
        .copied()
        .filter(|&k| {
            outcomes[k]
                .median_ms()
                .is_some_and(|m| m <= best * options.close)
        })
        .collect();
    // Unsteady candidates: a median far above the candidate's own fastest run means a
    // stall of the machine hit most of its runs; measure it again unless it is far
    // behind anyway.
    let unsteady: Vec<usize> = chosen
        .iter()
        .copied()
        .filter(|&k| !close.contains(&k))
        .filter(|&k| {
            let o = &outcomes[k];
            let min = o.times_ms.iter().copied().fold(f64::INFINITY, f64::min);
            o.median_ms()
                .is_some_and(|m| m > UNSTEADY * min && min <= best * 2.0)
        })
        .collect();
    let again: Vec<usize> = if close.len() > 1 {
        close.iter().chain(&unsteady).copied().collect()
    } else {
        unsteady
    };
    if !again.is_empty() {
        for round in 0..options.extra_rounds {
            if options.budget.is_some_and(|b| start.elapsed() > b) {
                break;
            }
            run_round(round, &again, &mut outcomes, &mut done);
        }
    }
    SearchResult {
        outcomes,
        elapsed_ms: start.elapsed().as_secs_f64() * 1e3,
    }
}
