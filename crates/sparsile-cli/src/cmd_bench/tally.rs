//! What each system measured on one case over the rounds ([`Tally`]), and the speedups
//! between the case's records ([`set_speedups`]).
//!
//! A case has one Sparsile record per recipe measured (one on the CPU; on a GPU one per
//! GPU recipe with `--recipes`) and one record per peer. Speedups come from the medians
//! of correct results only: a Sparsile record's is the best peer's median over its own,
//! a peer's is its median over the best Sparsile record's.

use crate::cmd_bench::metrics::{self, summarize};
use crate::cmd_bench::record::{Record, SPARSILE};
use crate::cmd_bench::reference;

/// What one system measured over the rounds of a case.
pub struct Tally {
    pub record: Record,
    pub times: Vec<f64>,
    /// False once the system failed or lacks the operation: later rounds skip it.
    pub live: bool,
    /// Each distinct note, with how many rounds gave it.
    notes: Vec<(String, usize)>,
}

impl Tally {
    /// A tally of `system` on the case of `base`; a peer's record has no format, recipe
    /// or version of Sparsile's.
    pub fn new(base: &Record, system: String) -> Tally {
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
    pub fn check(&mut self, check: reference::Check) {
        let r = &mut self.record;
        r.correct = Some(r.correct.unwrap_or(true) && check.correct);
        r.max_abs_err = Some(r.max_abs_err.unwrap_or(0.0).max(check.max_abs_err));
    }

    pub fn note(&mut self, note: String) {
        match self.notes.iter_mut().find(|(n, _)| *n == note) {
            Some((_, count)) => *count += 1,
            None => self.notes.push((note, 1)),
        }
    }

    /// A failure (or a missing operation): no times are reported, and later rounds
    /// skip the system.
    pub fn fail(&mut self, note: String) {
        self.live = false;
        self.times.clear();
        self.record.correct = None;
        self.record.max_abs_err = None;
        self.note(note);
    }

    /// The record, with the statistics of every round's times (`rounds` in all).
    pub fn finish(mut self, cost: metrics::Cost, rounds: usize) -> Record {
        if !self.times.is_empty() {
            let (med, min, max) = summarize(&self.times);
            self.record.set_times(med, min, max, cost);
            self.record.times_ms = self.times.iter().map(|t| t * 1e3).collect();
        }
        // Notes that not every round gave (MKL's faster variant) say in how many.
        let text: Vec<String> = match self.notes.as_slice() {
            [(n, _)] => vec![n.clone()],
            all => all
                .iter()
                .map(|(n, c)| match *c {
                    c if c >= rounds => n.clone(),
                    1 => format!("{n} (1 round)"),
                    c => format!("{n} ({c} rounds)"),
                })
                .collect(),
        };
        if !text.is_empty() {
            let joined = text.join("; ");
            // A note set on the record itself (how Sparsile's recipe was chosen) leads.
            self.record.note = Some(match self.record.note.take() {
                Some(lead) => format!("{lead}; {joined}"),
                None => joined,
            });
        }
        self.record
    }
}

/// The median of a record whose result was correct.
fn correct_median(r: &Record) -> Option<f64> {
    r.median_ms.filter(|_| r.correct == Some(true))
}

/// Fills `speedup` (and Sparsile's `best_peer`) of one case's records from the medians
/// of correct results (see the module docs).
pub fn set_speedups(records: &mut [Record]) {
    let best_ours = records
        .iter()
        .filter(|r| r.system == SPARSILE)
        .filter_map(correct_median)
        .min_by(f64::total_cmp);
    let Some(best_ours) = best_ours else {
        return;
    };
    let mut best_peer: Option<(f64, String)> = None;
    for r in records.iter_mut().filter(|r| r.system != SPARSILE) {
        if let Some(t) = correct_median(r) {
            r.speedup = Some(t / best_ours);
            if best_peer.as_ref().is_none_or(|(b, _)| t < *b) {
                best_peer = Some((t, r.system.clone()));
            }
        }
    }
    let Some((t, name)) = best_peer else {
        return;
    };
    for r in records.iter_mut().filter(|r| r.system == SPARSILE) {
        if let Some(ours) = correct_median(r) {
            r.speedup = Some(t / ours);
            r.best_peer = Some(name.clone());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

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
        let r = t.finish(cost, 3);
        // The median of all six runs, the extremes of all rounds, the largest error.
        assert_eq!(r.median_ms, Some(3.5));
        assert_eq!((r.min_ms, r.max_ms), (Some(1.0), Some(6.0)));
        assert_eq!((r.correct, r.max_abs_err), (Some(true), Some(2e-6)));
        assert_eq!(r.note.as_deref(), Some("out= (2 rounds); fresh (1 round)"));
        // Every run, in the order it ran.
        assert_eq!(r.times_ms, vec![3.0, 1.0, 2.0, 5.0, 4.0, 6.0]);
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
        let r = t.finish(
            metrics::Cost {
                flops: 1.0,
                bytes: 1.0,
            },
            3,
        );
        assert_eq!((r.correct, r.max_abs_err), (Some(false), Some(1.0)));
        assert_eq!(r.note.as_deref(), Some("same"));

        let mut t = Tally::new(&record(SPARSILE, None, None), "scipy".into());
        t.times.push(1e-3);
        t.check(ok(0.0));
        t.fail("failed: out of memory".into());
        assert!(!t.live);
        let r = t.finish(
            metrics::Cost {
                flops: 1.0,
                bytes: 1.0,
            },
            3,
        );
        assert_eq!((r.median_ms, r.correct), (None, None));
        assert_eq!(r.note.as_deref(), Some("failed: out of memory"));

        // A note on the record itself comes first; notes of every round need no count.
        let mut t = Tally::new(&record(SPARSILE, None, None), SPARSILE.into());
        t.record.note = Some("chosen by the GPU rule".into());
        for _ in 0..2 {
            t.note("not GPU times".into());
        }
        t.note("once".into());
        let cost = metrics::Cost {
            flops: 1.0,
            bytes: 1.0,
        };
        let r = t.finish(cost, 2);
        assert_eq!(
            r.note.as_deref(),
            Some("chosen by the GPU rule; not GPU times; once (1 round)")
        );
    }

    /// A record of `system` with a median time (ms) and a check.
    pub(crate) fn record(system: &str, median: Option<f64>, correct: Option<bool>) -> Record {
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
            target: None,
            device: None,
            preprocess_ms: None,
            times_ms: Vec::new(),
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

    #[test]
    fn several_sparsile_recipes_each_get_a_speedup_and_peers_are_against_the_best() {
        let mut rs = vec![
            record(SPARSILE, Some(4.0), Some(true)),
            record(SPARSILE, Some(2.0), Some(true)),
            record(SPARSILE, Some(1.0), Some(false)),
            record("cusparse", Some(3.0), Some(true)),
            record("torch", Some(6.0), Some(true)),
        ];
        set_speedups(&mut rs);
        assert_eq!(rs[0].speedup, Some(0.75));
        assert_eq!(rs[1].speedup, Some(1.5));
        assert_eq!(rs[1].best_peer.as_deref(), Some("cusparse"));
        assert_eq!((rs[2].speedup, rs[2].best_peer.as_deref()), (None, None));
        // Peers against the fastest correct recipe (2.0 ms), not the wrong one.
        assert_eq!(rs[3].speedup, Some(1.5));
        assert_eq!(rs[4].speedup, Some(3.0));
    }
}
