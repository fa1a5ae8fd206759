//! A timed trial of the selector's shortlist: the automatic choice's last step.
//!
//! The selector ranks near-tied variants of one recipe (`rowwise` with prefetching on or
//! off, with static or dynamic partitions) within a few percent of each other in its
//! predictions, while on a given input their times can differ by 15-25 %: its errors
//! there are not noise the model can learn away, they are input details its features
//! do not see (which columns a row's neighbours share, how the caches of this host
//! hold the gathered rows). So the choice does what a planner that measures (FFTW's
//! `FFTW_MEASURE`, cuDNN's benchmark mode) does, on a short list only: the selector's
//! pick and the candidates of the same format it predicts within [`TRIAL_WITHIN`] of
//! it, at most [`TRIAL_SIZE`] in all ([`shortlist`]), the pick without prefetching where
//! it prefetches gathered rows ([`prefetch_off`]: whether that pays depends on this
//! host's caches, which the selector trained on another host does not see), plus a
//! block format where the
//! operand's aligned blocks are half full (the block rule decides alone from
//! [`crate::rule::BLOCK_RULE_FILL`] up; between the two only a measurement tells:
//! [`block_alternative`]), ELL for SpMV where the rows are short and even
//! ([`ell_alternative`]), and partial output rows for SpMM where rows are long and the
//! width wide ([`long_row_alternative`]). Each runs once to warm up and then in rounds,
//! in an order that rotates from round to round, each turn runs that are not timed
//! (they pay for the switch from the candidate before and bring this one back to its
//! steady state) and then timed ones (a kernel of a few microseconds several times), and the fastest
//! median wins ([`settle`]); the pick keeps its place unless another is faster by more
//! than [`KEEP_MARGIN`], in those rounds and again in rounds of the two alone.
//!
//! The caller runs the candidates (the facade's `AutoKernel` on the caller's own
//! operands, the first time it sees an input; `sparsile bench` and `tune eval` on
//! theirs); this module decides which and when to stop.
//!
//! ```
//! use sparsile_tune::trial::settle;
//! // Three candidates whose runs take 10, 8 and 12 µs: the second wins.
//! let outcome = settle(3, |i| Some([10e-6, 8e-6, 12e-6][i]));
//! assert_eq!(outcome.winner, 1);
//! assert!(outcome.rounds >= 3);
//! ```

use crate::features::Features;
use crate::op::Operator;
use crate::selector::Selector;
use crate::space::Candidate;

/// The most candidates of the pick's format predicted close to it in a trial, the pick
/// included (before [`prefetch_off`] and [`block_alternative`]).
pub const TRIAL_SIZE: usize = 4;

/// The alternatives' predicted slowdowns are at most this many times the pick's.
pub const TRIAL_WITHIN: f64 = 1.3;

/// SpMM on a CSR operand whose aligned r×r blocks are at least this full (and below
/// the block rule's threshold) has `bsr:r×r` timed beside the shortlist.
pub const TRIAL_BLOCK_FILL: f64 = 0.45;

/// SpMV on an operand whose rows hold at most this many entries on average, the longest
/// at most [`TRIAL_ELL_SPREAD`] times the mean, has `ell/rowwise` timed beside the
/// shortlist ([`ell_alternative`]).
pub const TRIAL_ELL_ROW_LENGTH: f64 = 32.0;
pub const TRIAL_ELL_SPREAD: f64 = 1.1;

/// SpMM at a dense width of at least [`TRIAL_LONG_ROW_WIDTH`] on an operand whose rows
/// hold at least [`TRIAL_LONG_ROW_LENGTH`] entries on average has DA-SpMM's partial-row
/// design timed beside the shortlist ([`long_row_alternative`]).
pub const TRIAL_LONG_ROW_WIDTH: f64 = 128.0;
pub const TRIAL_LONG_ROW_LENGTH: f64 = 256.0;

/// Timed rounds at least and at most.
pub const MIN_ROUNDS: usize = 3;
pub const MAX_ROUNDS: usize = 9;

/// After [`MIN_ROUNDS`], rounds stop once the timed runs took this long in all
/// (seconds); a trial whose first round took [`LONG_ROUND_S`] stops after it.
pub const BUDGET_S: f64 = 0.05;
pub const LONG_ROUND_S: f64 = 1.0;

/// An alternative replaces the pick only when its median is faster by more than this
/// share of the pick's.
pub const KEEP_MARGIN: f64 = 0.03;

/// A candidate's turn in a round is this long at least (seconds, judged by the
/// fastest warm-up): a short kernel runs several times in a row, at most
/// [`MAX_RUNS_PER_TURN`], so that the medians of kernels of a few microseconds rest on
/// enough runs.
pub const TURN_S: f64 = 200e-6;
pub const MAX_RUNS_PER_TURN: usize = 32;

/// A turn of a kernel shorter than [`SWITCH_RUN_BELOW_S`] starts with untimed runs
/// that take this long in all (seconds; at least one, at most [`MAX_WARM_RUNS_PER_TURN`]).
/// A kernel of tens of microseconds, run right after another candidate, starts about
/// twice as slow as it runs in a loop and takes some 15 runs, half a millisecond, to
/// reach its steady speed (SpMV on pgpgiantcompo, 2 threads: 60-70 µs falling to
/// 23-25). With one untimed run per turn, the trial timed such kernels in that ramp, at
/// 50-75 µs, and ranked them by how fast they recover from a switch rather than by the
/// speed a caller's loop sees.
pub const TURN_WARM_S: f64 = 1e-3;
pub const MAX_WARM_RUNS_PER_TURN: usize = 128;

/// A turn starts with runs that are not timed ([`TURN_WARM_S`]) only while the fastest
/// warm-up is shorter than this (seconds). What the switch from the candidate before
/// costs is at most refilling the caches (32 MiB of last-level cache at 40 GB/s: under 1 ms); against a
/// run of 10 ms it is under a tenth, paid alike by every candidate's turn as the order
/// rotates, so a long kernel's turn is one timed run and its trial about half as long.
pub const SWITCH_RUN_BELOW_S: f64 = 10e-3;

/// The candidates to time for `pick` (first), chosen by `selector` among `candidates`
/// (the space for the input; `format` is the operand's, and `other_formats` whether it
/// may be stored otherwise). Just `[pick]` when nothing is close to it.
pub fn shortlist(
    selector: &Selector,
    op: Operator,
    features: &Features,
    candidates: &[Candidate],
    pick: &Candidate,
    format: &str,
    other_formats: bool,
) -> Vec<Candidate> {
    let predicted = selector.predict(op, features, candidates);
    let of_pick = candidates
        .iter()
        .zip(&predicted)
        .find(|(c, _)| *c == pick)
        .and_then(|(_, p)| *p);
    let mut list = vec![pick.clone()];
    if let Some(p0) = of_pick {
        let mut close: Vec<(f64, &Candidate)> = candidates
            .iter()
            .zip(&predicted)
            .filter_map(|(c, p)| p.map(|p| (p, c)))
            .filter(|(p, c)| *c != pick && c.format == pick.format && *p <= p0 + TRIAL_WITHIN.ln())
            .collect();
        close.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.id().cmp(&b.1.id())));
        list.extend(
            close
                .into_iter()
                .take(TRIAL_SIZE - 1)
                .map(|(_, c)| c.clone()),
        );
    }
    if let Some(p) = prefetch_off(op, pick, candidates) {
        if !list.contains(&p) {
            list.push(p);
        }
    }
    let alternatives = [
        block_alternative(op, features, format, other_formats),
        ell_alternative(op, features, candidates),
        long_row_alternative(op, features, pick, candidates),
    ];
    for b in alternatives.into_iter().flatten() {
        if !list.contains(&b) {
            list.push(b);
        }
    }
    list
}

/// DA-SpMM's row-balanced design with partial rows (`daspmm:balance=row,dense=row,
/// reduce=par`, of the pick's format) timed beside an SpMM pick at a width of at least
/// [`TRIAL_LONG_ROW_WIDTH`] on rows of [`TRIAL_LONG_ROW_LENGTH`] entries or more on
/// average, where the space has it. Four partial output rows per row break the chain of
/// multiply-adds into one row of the output that a `rowwise` row is, which pays on long
/// rows at wide widths: on pruned ResNet-50 and Transformer layers of 256-1,152 entries
/// per row at K = 128 it ran 1.14-1.27 times as fast as the fastest `rowwise` variant,
/// where the selector predicted it twice as slow (the corpus it was trained on has few
/// rows that long).
pub fn long_row_alternative(
    op: Operator,
    features: &Features,
    pick: &Candidate,
    candidates: &[Candidate],
) -> Option<Candidate> {
    if op != Operator::Spmm {
        return None;
    }
    let get = |name: &str| features.get(name).unwrap_or(0.0);
    let par = Candidate::new(&pick.format, "daspmm:balance=row,dense=row,reduce=par");
    (get("log2_width") >= TRIAL_LONG_ROW_WIDTH.log2()
        && get("row_length_mean") >= TRIAL_LONG_ROW_LENGTH
        && candidates.contains(&par))
    .then_some(par)
}

/// `ell/rowwise` timed beside an SpMV pick where every row holds nearly the same number
/// of entries, at most [`TRIAL_ELL_ROW_LENGTH`] (ELL pads no more than a few percent
/// there), and the space holds it. On such rows the CSR loop's bookkeeping per row
/// weighs on a handful of multiply-adds, which the fixed-width ELL loop does without:
/// cryg2500 (4.9 entries per row, the longest 5) ran SpMV 1.33× faster as ELL, cs4 and
/// a layer of 32 entries per row ran at parity, while ELL lost 10-45 % on every operand
/// whose rows were longer or less even. The selector, which predicts ELL's SpMV slower
/// on those it was trained on, cannot tell the first kind apart.
pub fn ell_alternative(
    op: Operator,
    features: &Features,
    candidates: &[Candidate],
) -> Option<Candidate> {
    if op != Operator::Spmv {
        return None;
    }
    let get = |name: &str| features.get(name).unwrap_or(f64::INFINITY);
    let ell = Candidate::new("ell", "rowwise");
    (get("row_length_max_over_mean") <= TRIAL_ELL_SPREAD
        && get("row_length_mean") <= TRIAL_ELL_ROW_LENGTH
        && candidates.contains(&ell))
    .then_some(ell)
}

/// `rowwise:prefetch=0` of the pick's format, timed beside a pick that prefetches the
/// dense rows SpMM or SDDMM gathers (every `rowwise` variant but that one), where the
/// space has it. Prefetching pays where the gathered rows miss the caches and costs
/// where they hit, so which is faster follows the size of this host's last-level cache,
/// a quantity no feature carries: on a host with 32 MiB of it, SpMM at K = 128 took
/// 0.75-0.9 of the time without prefetching on operands of a few MiB for which the
/// selector, trained on a host with 8 MiB, predicted prefetching faster.
pub fn prefetch_off(op: Operator, pick: &Candidate, candidates: &[Candidate]) -> Option<Candidate> {
    if !matches!(op, Operator::Spmm | Operator::Sddmm) {
        return None;
    }
    let name = pick.recipe.split(':').next().unwrap_or_default();
    let off = Candidate::new(&pick.format, "rowwise:prefetch=0");
    (name == "rowwise" && *pick != off && candidates.contains(&off)).then_some(off)
}

/// The block format timed beside the shortlist (see the module docs), if any.
pub fn block_alternative(
    op: Operator,
    features: &Features,
    format: &str,
    other_formats: bool,
) -> Option<Candidate> {
    if op != Operator::Spmm || !other_formats || format != "csr" {
        return None;
    }
    let get = |name: &str| features.get(name).unwrap_or(0.0);
    [("fill_8x8", "bsr:8x8"), ("fill_4x4", "bsr:4x4")]
        .iter()
        .find(|(f, _)| (TRIAL_BLOCK_FILL..crate::rule::BLOCK_RULE_FILL).contains(&get(f)))
        .map(|(_, b)| Candidate::new(*b, "rowwise"))
}

/// What a trial measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The index of the chosen candidate (0, the pick, when none ran).
    pub winner: usize,
    /// Each candidate's median run time over its timed runs (`None`: it failed to run).
    pub medians: Vec<Option<f64>>,
    /// Timed rounds.
    pub rounds: usize,
    /// Where another candidate beat the pick, the pick's and its medians in the rounds
    /// of the two alone that confirm it (`None` inside: it failed to run).
    pub duel: Option<[Option<f64>; 2]>,
}

/// Times `n` candidates through `time` (one run of candidate `i`, its time in seconds;
/// `None` when it cannot run, which drops it) and chooses one (see the module docs): one
/// warm-up run each, then rounds in which each candidate in turn runs untimed for
/// [`TURN_WARM_S`] (unless the fastest warm-up took [`SWITCH_RUN_BELOW_S`]) and then
/// timed until its timed runs of the turn took [`TURN_S`] (1 to [`MAX_RUNS_PER_TURN`]
/// runs); a candidate's median is over all its timed runs.
///
/// A candidate faster than the pick by more than [`KEEP_MARGIN`] replaces it only when
/// it is again in rounds of the two alone (the [`Outcome::duel`]). On this project's
/// hosts a spell of slow runs can fall on one candidate's turns more than on another's:
/// in one evaluation of 290 cases the trial replaced a right pick twice on medians 4-8 %
/// faster that the fresh turns measured 15-19 % slower (flickr's SDDMM at K = 32,
/// bcsstk13's SpMM at K = 32; four runs of the latter alone kept the pick every time).
pub fn settle(n: usize, mut time: impl FnMut(usize) -> Option<f64>) -> Outcome {
    let warm: Vec<Option<f64>> = (0..n).map(&mut time).collect();
    let mut alive: Vec<bool> = warm.iter().map(Option::is_some).collect();
    let fastest_warm = warm.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    let switch_run = fastest_warm < SWITCH_RUN_BELOW_S;
    let all: Vec<usize> = (0..n).collect();
    let (medians, rounds) = timed_rounds(&all, &mut time, &mut alive, switch_run);
    let fastest = medians
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.map(|m| (m, i)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let mut duel = None;
    let winner = match (fastest, medians.first().copied().flatten()) {
        (Some((m, i)), Some(m0)) if m < m0 * (1.0 - KEEP_MARGIN) => {
            // The challenger must beat the pick again in rounds of their own.
            let (again, _) = timed_rounds(&[0, i], &mut time, &mut alive, switch_run);
            duel = Some([again[0], again[i]]);
            match (again[0], again[i]) {
                (Some(a0), Some(a)) if a < a0 * (1.0 - KEEP_MARGIN) => i,
                (None, Some(_)) => i,
                _ => 0,
            }
        }
        (Some(_), Some(_)) => 0,
        (Some((_, i)), None) => i,
        (None, _) => alive.iter().position(|a| *a).unwrap_or(0),
    };
    Outcome {
        winner,
        medians,
        rounds,
        duel,
    }
}

/// Rounds over the candidates `ids` (see [`settle`]) until the budget or the cap, and
/// each candidate's median over them (`None` for one not in `ids`, one that failed, now
/// or before, and one with no timed run), with the number of rounds.
fn timed_rounds(
    ids: &[usize],
    time: &mut impl FnMut(usize) -> Option<f64>,
    alive: &mut [bool],
    switch_run: bool,
) -> (Vec<Option<f64>>, usize) {
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); alive.len()];
    let mut spent = 0.0;
    let mut rounds = 0;
    while rounds < MAX_ROUNDS && ids.iter().filter(|&&i| alive[i]).count() > 1 {
        for step in 0..ids.len() {
            let i = ids[(rounds + step) % ids.len()];
            // The turn starts with runs that are not timed: they pay for the switch
            // from the candidate before and bring this one back to its steady state.
            if switch_run && alive[i] {
                alive[i] = runs_for(time, i, TURN_WARM_S, MAX_WARM_RUNS_PER_TURN).is_some();
            }
            if alive[i] {
                match runs_for(time, i, TURN_S, MAX_RUNS_PER_TURN) {
                    Some(t) => {
                        spent += t.iter().sum::<f64>();
                        times[i].extend(t);
                    }
                    None => alive[i] = false,
                }
            }
        }
        rounds += 1;
        if (rounds >= MIN_ROUNDS && spent >= BUDGET_S) || (rounds == 1 && spent >= LONG_ROUND_S) {
            break;
        }
    }
    let medians = times
        .iter()
        .zip(alive.iter())
        .map(|(t, a)| (*a && !t.is_empty()).then(|| median(t)))
        .collect();
    (medians, rounds)
}

/// Runs candidate `i` until its runs took `seconds` in all (at least one run, at most
/// `cap`) and returns their times; `None` when a run failed.
fn runs_for(
    time: &mut impl FnMut(usize) -> Option<f64>,
    i: usize,
    seconds: f64,
    cap: usize,
) -> Option<Vec<f64>> {
    let mut runs = Vec::new();
    let mut sum = 0.0;
    while runs.is_empty() || (sum < seconds && runs.len() < cap) {
        let t = time(i)?;
        sum += t;
        runs.push(t);
    }
    Some(runs)
}

fn median(t: &[f64]) -> f64 {
    let mut t = t.to_vec();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pick_keeps_its_place_within_the_margin() {
        let o = settle(2, |i| Some([10e-6, 9.8e-6][i]));
        assert_eq!(o.winner, 0);
        let o = settle(2, |i| Some([10e-6, 9e-6][i]));
        assert_eq!(o.winner, 1);
    }

    #[test]
    fn medians_ignore_a_slow_outlier() {
        // Candidate 1 is faster but its first timed run is slowed 10×.
        let mut calls = [0usize; 2];
        let o = settle(2, |i| {
            calls[i] += 1;
            Some(match (i, calls[i]) {
                (1, 3) => 80e-6,
                (1, _) => 8e-6,
                _ => 10e-6,
            })
        });
        assert_eq!(o.winner, 1);
        assert_eq!(o.medians[1], Some(8e-6));
    }

    #[test]
    fn a_failing_candidate_is_dropped_and_one_alone_is_not_timed() {
        let mut runs = 0;
        let o = settle(3, |i| {
            runs += 1;
            (i == 2).then_some(1e-6)
        });
        assert_eq!(o.winner, 2);
        assert_eq!(o.rounds, 0);
        assert_eq!(runs, 3, "only the warm-ups ran");
        let o = settle(2, |_| None);
        assert_eq!((o.winner, o.medians), (0, vec![None, None]));
    }

    #[test]
    fn rounds_stop_at_the_budget_or_the_cap() {
        // Each run takes half the budget: the minimum number of rounds.
        let o = settle(2, |_| Some(BUDGET_S / 2.0));
        assert_eq!(o.rounds, MIN_ROUNDS);
        let o = settle(2, |_| Some(1e-6));
        assert_eq!(o.rounds, MAX_ROUNDS);
        let o = settle(2, |_| Some(LONG_ROUND_S));
        assert_eq!(o.rounds, 1);
    }

    #[test]
    fn only_short_kernels_pay_an_untimed_run_per_turn() {
        // Two candidates, MIN_ROUNDS rounds: a warm-up each, then per turn an untimed
        // and a timed run (short) or one timed run (long).
        for (t, per_turn) in [(1e-3, 2), (SWITCH_RUN_BELOW_S, 1)] {
            let mut runs = 0;
            let o = settle(2, |_| {
                runs += 1;
                Some(t)
            });
            assert!(o.rounds >= MIN_ROUNDS);
            assert_eq!(runs, 2 + o.rounds * 2 * per_turn, "run time {t}");
        }
    }

    #[test]
    fn a_short_kernel_runs_several_times_per_turn() {
        // Runs of 2^-16 s (15.3 µs; sums of them are exact): 66 untimed per turn
        // (1 ms), then 14 timed (200 µs); 430 µs of timed runs a round never reach
        // the budget.
        let t = 1.0 / 65536.0;
        let mut calls = 0;
        let o = settle(2, |_| {
            calls += 1;
            Some(t)
        });
        assert_eq!(o.rounds, MAX_ROUNDS);
        assert_eq!(calls, 2 + MAX_ROUNDS * 2 * (66 + 14));
        assert_eq!(o.medians, vec![Some(t), Some(t)]);
        // Runs of 1 µs: the untimed and the timed runs stop at their caps.
        let mut calls = 0;
        settle(2, |_| {
            calls += 1;
            Some(1e-6)
        });
        assert_eq!(
            calls,
            2 + MAX_ROUNDS * 2 * (MAX_WARM_RUNS_PER_TURN + MAX_RUNS_PER_TURN)
        );
        // 1 ms runs: one untimed and one timed per turn.
        let mut calls = 0;
        settle(2, |_| {
            calls += 1;
            Some(1e-3)
        });
        assert_eq!(calls, 2 + MAX_ROUNDS * 2 * 2);
    }

    #[test]
    fn the_untimed_runs_of_a_turn_are_not_counted() {
        // Each turn's first runs are slow (a switch from the other candidate); the
        // medians are the steady runs'.
        let mut last = usize::MAX;
        let mut since = 0;
        let o = settle(2, |i| {
            since = if i == last { since + 1 } else { 0 };
            last = i;
            let steady = [20e-6, 25e-6][i];
            Some(if since < 10 { 3.0 * steady } else { steady })
        });
        assert_eq!(o.winner, 0);
        assert_eq!(o.medians, vec![Some(20e-6), Some(25e-6)]);
    }

    #[test]
    fn a_candidate_failing_mid_trial_cannot_win() {
        let mut calls = [0usize; 2];
        let o = settle(2, |i| {
            calls[i] += 1;
            match (i, calls[i]) {
                (1, c) if c > 2 => None,
                (1, _) => Some(1e-6),
                _ => Some(10e-6),
            }
        });
        assert_eq!(o.winner, 0);
        assert_eq!(o.medians[1], None);
    }

    fn features(pairs: &[(&str, f64)]) -> Features {
        let mut values = vec![0.0; crate::features::FEATURE_NAMES.len()];
        for (name, v) in pairs {
            let k = crate::features::FEATURE_NAMES
                .iter()
                .position(|n| n == name)
                .unwrap();
            values[k] = *v;
        }
        Features { values }
    }

    #[test]
    fn the_shortlist_is_the_picks_format_predicted_close_to_it_best_first() {
        use std::collections::BTreeMap;
        let times: BTreeMap<String, Option<f64>> = [
            ("csr/rowwise", 1.0),
            ("csr/rowwise:prefetch=0", 1.2),
            ("csr/rowwise:partition=static", 1.1),
            ("csr/rowwise:partition=dynamic", 1.25),
            ("csr/default", 2.0),
            ("ell/rowwise", 1.05),
        ]
        .iter()
        .map(|(id, t)| (id.to_string(), Some(*t)))
        .collect();
        let examples: Vec<crate::selector::Example> = (0..8)
            .map(|k| crate::selector::Example {
                op: Operator::Spmm,
                name: format!("m{k}"),
                features: features(&[("log2_rows", k as f64)]),
                times: times.clone(),
            })
            .collect();
        let s = Selector::train(&examples, &Default::default(), BTreeMap::new()).unwrap();
        let candidates: Vec<Candidate> = times
            .keys()
            .map(|id| Candidate::from_id(id).unwrap())
            .collect();
        let f = features(&[("log2_rows", 3.0)]);
        let pick = s.choose(Operator::Spmm, &f, &candidates).unwrap();
        assert_eq!(pick.id(), "csr/rowwise");
        let ids: Vec<String> = shortlist(&s, Operator::Spmm, &f, &candidates, &pick, "csr", true)
            .iter()
            .map(Candidate::id)
            .collect();
        assert_eq!(
            ids,
            [
                "csr/rowwise",
                "csr/rowwise:partition=static",
                "csr/rowwise:prefetch=0",
                "csr/rowwise:partition=dynamic"
            ]
        );
        // A pick the selector has no model for is timed alone.
        let other = Candidate::new("csr", "daspmm");
        let list = shortlist(&s, Operator::Spmm, &f, &candidates, &other, "csr", true);
        assert_eq!(list, [other]);
    }

    #[test]
    fn a_prefetching_rowwise_pick_is_timed_against_its_prefetch_off_form() {
        let space: Vec<Candidate> = ["csr/rowwise", "csr/rowwise:prefetch=0", "csr/daspmm"]
            .iter()
            .map(|id| Candidate::from_id(id).unwrap())
            .collect();
        let off = Candidate::new("csr", "rowwise:prefetch=0");
        let pick = Candidate::new("csr", "rowwise:partition=static");
        assert_eq!(
            prefetch_off(Operator::Spmm, &pick, &space),
            Some(off.clone())
        );
        assert_eq!(
            prefetch_off(Operator::Sddmm, &pick, &space),
            Some(off.clone())
        );
        // Not for SpMV (no gathered rows), not for itself, another recipe or a format
        // whose space lacks it.
        assert_eq!(prefetch_off(Operator::Spmv, &pick, &space), None);
        assert_eq!(prefetch_off(Operator::Spmm, &off, &space), None);
        let da = Candidate::new("csr", "daspmm");
        assert_eq!(prefetch_off(Operator::Spmm, &da, &space), None);
        let ell = Candidate::new("ell", "rowwise");
        assert_eq!(prefetch_off(Operator::Spmm, &ell, &space), None);
    }

    #[test]
    fn half_full_blocks_are_timed_only_for_spmm_on_csr_that_may_convert() {
        let f = features(&[("fill_8x8", 0.5), ("fill_4x4", 0.6)]);
        let b = block_alternative(Operator::Spmm, &f, "csr", true);
        assert_eq!(b, Some(Candidate::new("bsr:8x8", "rowwise")));
        assert_eq!(block_alternative(Operator::Spmm, &f, "csr", false), None);
        assert_eq!(block_alternative(Operator::Spmv, &f, "csr", true), None);
        assert_eq!(block_alternative(Operator::Spmm, &f, "ell", true), None);
        // Full enough for the block rule alone, or too sparse: no trial.
        let full = features(&[("fill_8x8", 0.9), ("fill_4x4", 0.9)]);
        assert_eq!(block_alternative(Operator::Spmm, &full, "csr", true), None);
        let sparse = features(&[("fill_8x8", 0.2), ("fill_4x4", 0.47)]);
        assert_eq!(
            block_alternative(Operator::Spmm, &sparse, "csr", true),
            Some(Candidate::new("bsr:4x4", "rowwise"))
        );
    }

    #[test]
    fn ell_is_timed_for_spmv_on_short_even_rows_where_the_space_has_it() {
        let ell = Candidate::new("ell", "rowwise");
        let space = vec![Candidate::new("csr", "rowwise"), ell.clone()];
        let even = features(&[("row_length_mean", 4.9), ("row_length_max_over_mean", 1.01)]);
        assert_eq!(ell_alternative(Operator::Spmv, &even, &space), Some(ell));
        // Not for SpMM, nor where the space lacks it, the rows are long or uneven.
        assert_eq!(ell_alternative(Operator::Spmm, &even, &space), None);
        assert_eq!(ell_alternative(Operator::Spmv, &even, &space[..1]), None);
        let long = features(&[
            ("row_length_mean", 45.0),
            ("row_length_max_over_mean", 1.06),
        ]);
        assert_eq!(ell_alternative(Operator::Spmv, &long, &space), None);
        let uneven = features(&[("row_length_mean", 4.9), ("row_length_max_over_mean", 1.4)]);
        assert_eq!(ell_alternative(Operator::Spmv, &uneven, &space), None);
    }

    #[test]
    fn a_challenger_must_win_again_against_the_pick_alone() {
        // Candidate 1 is fast only in the trial's rounds (its warm-up, then 9 rounds of
        // 125 untimed and 25 timed runs of 8 µs), not after: it loses the rounds of the
        // two alone, and the pick stays.
        let mut calls = [0usize; 3];
        let o = settle(3, |i| {
            calls[i] += 1;
            Some(match i {
                1 if calls[1] <= 1 + MAX_ROUNDS * 150 => 8e-6,
                1 => 12e-6,
                2 => 11e-6,
                _ => 10e-6,
            })
        });
        assert_eq!(o.medians[1], Some(8e-6));
        assert_eq!(o.winner, 0);
        assert_eq!(o.duel, Some([Some(10e-6), Some(12e-6)]));
        // A challenger faster throughout wins both.
        let o = settle(3, |i| Some([10e-6, 8e-6, 11e-6][i]));
        assert_eq!(o.winner, 1);
        assert_eq!(o.duel, Some([Some(10e-6), Some(8e-6)]));
        // No challenger, no duel.
        let o = settle(2, |i| Some([10e-6, 9.9e-6][i]));
        assert_eq!((o.winner, o.duel), (0, None));
    }

    #[test]
    fn partial_rows_are_timed_for_wide_spmm_on_long_rows_where_the_space_has_them() {
        let pick = Candidate::new("csr", "rowwise:prefetch=0");
        let par = Candidate::new("csr", "daspmm:balance=row,dense=row,reduce=par");
        let space = vec![pick.clone(), par.clone()];
        let long = features(&[("row_length_mean", 1152.0), ("log2_width", 7.0)]);
        assert_eq!(
            long_row_alternative(Operator::Spmm, &long, &pick, &space),
            Some(par)
        );
        // Not for SDDMM, a narrow width, short rows, or a space without it.
        assert_eq!(
            long_row_alternative(Operator::Sddmm, &long, &pick, &space),
            None
        );
        let narrow = features(&[("row_length_mean", 1152.0), ("log2_width", 5.0)]);
        assert_eq!(
            long_row_alternative(Operator::Spmm, &narrow, &pick, &space),
            None
        );
        let short = features(&[("row_length_mean", 100.0), ("log2_width", 7.0)]);
        assert_eq!(
            long_row_alternative(Operator::Spmm, &short, &pick, &space),
            None
        );
        assert_eq!(
            long_row_alternative(Operator::Spmm, &long, &pick, &space[..1]),
            None
        );
    }
}
