//! Tuning one operator on one matrix: the space, its ranking, the search, the records.
//!
//! The space of the operator ([`sparsile_tune::space`]) is ranked by the selector's
//! predicted slowdown when a model is available, else by the cost model's estimate
//! (coefficients fitted on the tuning database's earlier measurements of this machine);
//! the search measures it ([`sparsile_tune::search`]) with [`OpEvaluator`]; every
//! measured candidate goes to the tuning database, the best marked `best` twice: under
//! the key that allows other formats (the command line, the benchmark) and, best among
//! the input's own format, under the key that does not (the Python operators, which
//! keep a tensor's format).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::Serialize;
use sparsile_formats::SparseTensor;
use sparsile_ir::settings::Settings;
use sparsile_tune::cost::{rank_correlation, CostModel, Machine, Shape};
use sparsile_tune::db::Record;
use sparsile_tune::features::Features;
use sparsile_tune::op::{OpInfo, Operator};
use sparsile_tune::rule::{block_format, rule};
use sparsile_tune::search::{
    ranking, search, Outcome, Progress, SearchOptions, SearchResult, Strategy,
};
use sparsile_tune::space::{space, Candidate};
use sparsile_tune::target::host_isa;

use super::evaluate::{program_text, EvaluateError, OpEvaluator};
use super::pattern::pattern;
use super::select::{database, key, selector, Context};

/// How many tunings of this process wrote records: kernels forget choices made before.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The number of tunings in this process that wrote to the tuning database.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// What to tune.
#[derive(Debug, Clone)]
pub struct TuneRequest {
    pub op: Operator,
    pub width: usize,
    pub threads: usize,
    pub other_formats: bool,
    pub options: SearchOptions,
    /// The machine, for the cost model.
    pub machine: Machine,
    /// Whether to write the results to the tuning database.
    pub record: bool,
    pub seed: u64,
}

/// One candidate in the report.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateReport {
    pub candidate: String,
    pub estimate_ms: f64,
    pub predicted_slowdown: Option<f64>,
    pub measured: bool,
    pub median_ms: Option<f64>,
    pub compile_ms: Option<f64>,
    pub convert_ms: Option<f64>,
    pub failure: Option<String>,
}

/// What a tuning found.
#[derive(Debug, Clone, Serialize)]
pub struct TuneReport {
    pub op: Operator,
    pub width: usize,
    pub threads: usize,
    pub strategy: String,
    pub space_size: usize,
    pub space_version: u32,
    pub features: Vec<f64>,
    pub candidates: Vec<CandidateReport>,
    pub best: Option<String>,
    pub best_ms: Option<f64>,
    /// `default`'s median when measured.
    pub default_ms: Option<f64>,
    /// What the automatic choice picks without a database: the block rule's format where
    /// aligned blocks are nearly full, else the selector's prediction.
    pub selector_pick: Option<String>,
    /// The selector's pick and the candidates timed against it before the automatic
    /// choice settles ([`sparsile_tune::trial`]); empty when it needs no trial.
    pub selector_trial: Vec<String>,
    pub rule_pick: String,
    /// Spearman correlation of the cost estimates with the measured medians.
    pub cost_rank_correlation: Option<f64>,
    /// Spearman correlation of the predicted slowdowns with the measured medians.
    pub selector_rank_correlation: Option<f64>,
    pub features_ms: f64,
    pub model_ms: f64,
    pub compile_ms: f64,
    pub convert_ms: f64,
    pub measure_ms: f64,
    pub records_written: usize,
    pub warnings: Vec<String>,
    /// The STile strategy's decompositions (empty under other strategies).
    pub tiles: Vec<TileReport>,
    /// Calibrating and evaluating the tile model.
    pub tile_model_ms: f64,
}

impl TuneReport {
    /// The measured median of the candidate with id `id`.
    pub fn median_ms(&self, id: &str) -> Option<f64> {
        self.candidates
            .iter()
            .find(|c| c.candidate == id)
            .and_then(|c| c.median_ms)
    }

    /// The fastest measured tiles decomposition, with its median.
    pub fn fastest_tiles(&self) -> Option<(&TileReport, f64)> {
        self.tiles
            .iter()
            .filter_map(|t| Some((t, self.median_ms(&t.candidate.id())?)))
            .min_by(|x, y| x.1.total_cmp(&y.1))
    }

    /// The median of the fastest measured candidate that is not a tiles decomposition.
    pub fn fastest_single_ms(&self) -> Option<f64> {
        self.candidates
            .iter()
            .filter(|c| !self.tiles.iter().any(|t| t.candidate.id() == c.candidate))
            .filter_map(|c| c.median_ms)
            .min_by(f64::total_cmp)
    }
}

/// One decomposition the STile strategy measured.
#[derive(Debug, Clone, Serialize)]
pub struct TileReport {
    #[serde(serialize_with = "candidate_id")]
    pub candidate: Candidate,
    /// The decomposition rule, `tiles(r, c, cost, …)`.
    pub rule: String,
    /// `(side, tiles)` per level.
    pub tiles: Vec<(usize, usize)>,
    /// Non-zeros left to the scattered part.
    pub rest: usize,
    /// The tile model's estimate.
    pub estimate_ms: f64,
}

fn candidate_id<S: serde::Serializer>(c: &Candidate, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&c.id())
}

/// The decompositions the tile model keeps for `a` (see [`super::stile`]).
fn stile_candidates(
    a: &SparseTensor<'_>,
    p: &super::pattern::Pattern,
    req: &TuneRequest,
    settings: &Settings,
    ev: &mut OpEvaluator,
) -> Result<Vec<TileReport>, String> {
    // SpMV's square tiles lose to its row-vector blocks (`bsr:1xC`, in the space) on
    // every mask measured: a square tile's rows are summed one by one, without the
    // vector partial sums a row of 1 × C blocks keeps.
    if req.op != Operator::Spmm {
        return Err(format!(
            "the stile strategy adds no tiles for {}: square dense tiles pay for spmm only",
            req.op
        ));
    }
    let cal = super::stile::calibration(req.op, req.width, req.threads, a.dtype(), settings)
        .map_err(|e| e.to_string())?;
    // A scattered entry's cost is this matrix's own (its dense rows' reuse and row
    // lengths decide it); a tile's comes from the calibration.
    let csr = p.csr();
    let entry_ms = super::stile::entry_ms_on(ev, &csr).map_err(|e| e.to_string())?;
    Ok(super::stile::candidates(&csr, &p.format, &cal, entry_ms)
        .into_iter()
        .map(|(candidate, e, rule)| TileReport {
            candidate,
            rule: rule.to_string(),
            tiles: e.tiles,
            rest: e.rest,
            estimate_ms: e.cost * entry_ms,
        })
        .collect())
}

/// Why tuning could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("{0}")]
    Evaluate(#[from] EvaluateError),
    #[error("the sparse operand has no pattern to tune (dense, or not a matrix)")]
    NoPattern,
    #[error("{0}")]
    Db(#[from] sparsile_tune::db::DbError),
}

/// The cost model fitted on the database's records of this machine (defaults without).
pub fn fitted_cost_model(settings: &Settings, machine: &Machine) -> CostModel {
    let Some(db) = database(settings) else {
        return CostModel::default();
    };
    let Ok(records) = db.records() else {
        return CostModel::default();
    };
    let samples: Vec<(Operator, Candidate, f64, f64)> = records
        .iter()
        .filter(|r| r.key.target == sparsile_tune::target::host())
        .filter_map(|r| {
            let shape = r.shape.as_ref()?;
            let t = r.median_ms?;
            Some((
                shape.op,
                r.candidate.clone(),
                CostModel::roofline_ms(&r.candidate, shape, machine),
                t,
            ))
        })
        .collect();
    CostModel::fit(&samples)
}

/// Tunes `req.op` on `a` (see the module docs).
pub fn tune(
    a: &SparseTensor<'_>,
    req: &TuneRequest,
    progress: &mut dyn FnMut(Progress),
) -> Result<TuneReport, TuneError> {
    let settings = Settings::from_env();
    let t0 = Instant::now();
    let p = pattern(a).ok_or(TuneError::NoPattern)?;
    let features = Features::of(
        &p.csr(),
        req.op,
        req.width,
        req.threads,
        a.dtype().size_bytes(),
    );
    let mut shape = Shape::of(
        &p.csr(),
        req.op,
        req.width,
        a.dtype().size_bytes(),
        req.threads,
    );
    for (name, f) in [
        ("bsr:4x4", "fill_4x4"),
        ("bsr:8x8", "fill_8x8"),
        ("bsr:16x16", "fill_16x16"),
        ("bsr:1x16", "fill_1x16"),
        ("bsr:1x32", "fill_1x32"),
    ] {
        shape
            .block_fill
            .insert(name.to_string(), features.get(f).unwrap_or(1.0));
    }
    let features_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut candidates = space(req.op, &features, &p.format, req.other_formats);
    let mut ev = OpEvaluator::new(req.op, a, req.width, req.threads, req.seed)?;
    let n_space = candidates.len();
    let mut warnings = Vec::new();
    // The STile strategy adds the decompositions its tile model keeps.
    let t_tiles = Instant::now();
    let mut tiles: Vec<TileReport> = Vec::new();
    if matches!(req.options.strategy, Strategy::Stile { .. }) {
        match stile_candidates(a, &p, req, &settings, &mut ev) {
            Ok(found) => tiles = found,
            Err(e) => warnings.push(e),
        }
        for t in &tiles {
            if !candidates.contains(&t.candidate) {
                candidates.push(t.candidate.clone());
            }
        }
    }
    // The block rule's pick, which the automatic choice runs before consulting the
    // model, is measured even where the space leaves its format out (SpMV takes
    // `bsr:8x8` from an 8 × 8 fill of 30 %, the space from 35 %).
    let block_pick = block_format(req.op, &features, &p.format, req.other_formats, host_isa());
    if let Some(b) = &block_pick {
        if !candidates.contains(b) {
            candidates.push(b.clone());
        }
    }
    // So is the block format a trial times beside the selector's pick.
    if let Some(b) =
        sparsile_tune::trial::block_alternative(req.op, &features, &p.format, req.other_formats)
    {
        if !candidates.contains(&b) {
            candidates.push(b);
        }
    }
    let tile_model_ms = t_tiles.elapsed().as_secs_f64() * 1e3;
    let t1 = Instant::now();
    let cost = fitted_cost_model(&settings, &req.machine);
    let estimates: Vec<f64> = candidates
        .iter()
        .enumerate()
        .map(
            |(k, c)| match tiles.iter().find(|t| k >= n_space && t.candidate == *c) {
                Some(t) => t.estimate_ms,
                None => cost.estimate_ms(c, &shape, &req.machine),
            },
        )
        .collect();
    let sel = selector(&settings);
    let (predicted, selector_pick) = match &sel {
        Ok(s) => (
            s.predict(req.op, &features, &candidates),
            s.choose(req.op, &features, &candidates),
        ),
        Err(e) => {
            warnings.push(e.clone());
            (vec![None; candidates.len()], None)
        }
    };
    // The automatic choice without a database: a nearly full block structure decides the
    // format first (`block_format`, as `select` does), then the model, whose pick is
    // timed against its close predictions (as `select` lists them).
    let trial: Vec<Candidate> = match (&sel, &selector_pick) {
        (Ok(s), Some(pick)) if block_pick.is_none() && !settings.no_trial => {
            let list = sparsile_tune::trial::shortlist(
                s,
                req.op,
                &features,
                &candidates,
                pick,
                &p.format,
                req.other_formats,
            );
            if list.len() > 1 {
                list
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    };
    let selector_pick = block_pick.or(selector_pick);
    let model_ms = t1.elapsed().as_secs_f64() * 1e3;
    let rule_pick = rule(req.op, &features, &p.format, req.other_formats);
    // The pruned search measures the candidates predicted close to the best; without
    // the selector, the rule's pick is measured too.
    let slowdowns: Vec<Option<f64>> = predicted.iter().map(|x| x.map(f64::exp)).collect();
    let mut ranking = ranking(&slowdowns, &estimates);
    let mut must: Vec<Candidate> = match &selector_pick {
        Some(pick) => vec![pick.clone()],
        None => vec![rule_pick.clone()],
    };
    // The tiles are measured whatever the ranking of the space says.
    for r in ranking.iter_mut().skip(n_space) {
        *r = f64::INFINITY;
    }
    must.extend(candidates[n_space..].iter().cloned());
    let t2 = Instant::now();
    let result = search(
        &candidates,
        &ranking,
        &must,
        &mut ev,
        &req.options,
        progress,
    );
    let measure_ms = t2.elapsed().as_secs_f64() * 1e3;
    let report = report(
        req,
        &candidates,
        &estimates,
        &predicted,
        &result,
        &tiles,
        features.values.clone(),
        selector_pick,
        rule_pick,
        (features_ms, model_ms, measure_ms),
        warnings,
    );
    let mut report = report;
    report.tile_model_ms = tile_model_ms;
    report.selector_trial = trial.iter().map(Candidate::id).collect();
    if req.record {
        report.records_written = record(req, a, &p, &features, &result, &tiles, &shape, &settings)?;
        if report.records_written > 0 {
            GENERATION.fetch_add(1, Ordering::Relaxed);
        }
    }
    report.tiles = tiles;
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn report(
    req: &TuneRequest,
    candidates: &[Candidate],
    estimates: &[f64],
    predicted: &[Option<f64>],
    result: &SearchResult,
    tiles: &[TileReport],
    features: Vec<f64>,
    selector_pick: Option<Candidate>,
    rule_pick: Candidate,
    (features_ms, model_ms, measure_ms): (f64, f64, f64),
    warnings: Vec<String>,
) -> TuneReport {
    let rows: Vec<CandidateReport> = result
        .outcomes
        .iter()
        .enumerate()
        .map(|(k, o)| CandidateReport {
            candidate: o.candidate.id(),
            estimate_ms: estimates[k],
            predicted_slowdown: predicted[k].map(f64::exp),
            measured: o.measured,
            median_ms: o.median_ms(),
            compile_ms: o.prepared.as_ref().map(|p| p.compile_ms),
            convert_ms: o.prepared.as_ref().map(|p| p.convert_ms),
            failure: o.failure.clone(),
        })
        .collect();
    let measured: Vec<(f64, f64, Option<f64>)> = rows
        .iter()
        .filter_map(|r| {
            r.median_ms
                .map(|m| (r.estimate_ms, m, r.predicted_slowdown))
        })
        .collect();
    let est: Vec<f64> = measured.iter().map(|x| x.0).collect();
    let med: Vec<f64> = measured.iter().map(|x| x.1).collect();
    let pred: Vec<(f64, f64)> = measured
        .iter()
        .filter_map(|x| x.2.map(|p| (p, x.1)))
        .collect();
    let best = winner(result, tiles);
    TuneReport {
        op: req.op,
        width: req.width,
        threads: req.threads,
        strategy: req.options.strategy.name().to_string(),
        space_size: candidates.len(),
        space_version: sparsile_tune::space::SPACE_VERSION,
        features,
        best: best.map(|o| o.candidate.id()),
        best_ms: best.and_then(|o| o.median_ms()),
        default_ms: rows
            .iter()
            .find(|r| r.candidate.ends_with("/default"))
            .and_then(|r| r.median_ms),
        selector_pick: selector_pick.map(|c| c.id()),
        selector_trial: Vec::new(),
        rule_pick: rule_pick.id(),
        cost_rank_correlation: rank_correlation(&est, &med),
        selector_rank_correlation: rank_correlation(
            &pred.iter().map(|x| x.0).collect::<Vec<_>>(),
            &pred.iter().map(|x| x.1).collect::<Vec<_>>(),
        ),
        features_ms,
        model_ms,
        compile_ms: rows.iter().filter_map(|r| r.compile_ms).sum(),
        convert_ms: rows.iter().filter_map(|r| r.convert_ms).sum(),
        measure_ms,
        candidates: rows,
        records_written: 0,
        warnings,
        tiles: Vec::new(),
        tile_model_ms: 0.0,
    }
}

/// A tiles decomposition wins only when it is faster than the best single format by
/// more than this factor: within it, the single format (no parts to derive, one pass)
/// is kept, as a difference that small is within a measurement's spread.
pub const TILES_MARGIN: f64 = 1.02;

/// The candidate the search chose: the fastest, or the fastest single format when the
/// fastest is a tiles decomposition less than [`TILES_MARGIN`] faster.
fn winner<'a>(result: &'a SearchResult, tiles: &[TileReport]) -> Option<&'a Outcome> {
    winner_among(result, tiles, |_| true)
}

/// [`winner`] among the candidates `keep` accepts.
fn winner_among<'a>(
    result: &'a SearchResult,
    tiles: &[TileReport],
    keep: impl Fn(&Candidate) -> bool,
) -> Option<&'a Outcome> {
    let is_tiles = |o: &Outcome| tiles.iter().any(|t| t.candidate == o.candidate);
    let fastest = |tiled: Option<bool>| {
        result
            .outcomes
            .iter()
            .filter(|o| keep(&o.candidate) && tiled.is_none_or(|t| is_tiles(o) == t))
            .filter_map(|o| Some((o, o.median_ms()?)))
            .min_by(|x, y| x.1.total_cmp(&y.1))
    };
    let (best, best_ms) = fastest(None)?;
    if !is_tiles(best) {
        return Some(best);
    }
    match fastest(Some(false)) {
        Some((single, ms)) if ms <= best_ms * TILES_MARGIN => Some(single),
        _ => Some(best),
    }
}

/// Appends the measured candidates to the database (see the module docs); returns how
/// many records were written.
#[allow(clippy::too_many_arguments)]
fn record(
    req: &TuneRequest,
    a: &SparseTensor<'_>,
    p: &super::pattern::Pattern,
    features: &Features,
    result: &SearchResult,
    tiles: &[TileReport],
    shape: &Shape,
    settings: &Settings,
) -> Result<usize, TuneError> {
    let Some(db) = database(settings) else {
        return Ok(0);
    };
    let info = OpInfo {
        op: req.op,
        sparse: Some("A".into()),
        width: None,
    };
    let text = program_text(req.op, &p.format, a.dtype()).unwrap_or_default();
    let hash = sparsile_tune::target::fingerprint(&[text.as_bytes()]);
    let mut written = 0;
    let own = |c: &Candidate| c.format == p.format;
    let best_any = winner(result, tiles).map(|o| o.candidate.clone());
    let best_own = winner_among(result, tiles, own).map(|o| o.candidate.clone());
    let mut keys = vec![(req.other_formats, best_any)];
    if req.other_formats {
        keys.push((false, best_own));
    }
    for (other_formats, best) in keys {
        let ctx = Context {
            program: &hash,
            info: &info,
            threads: req.threads,
            other_formats,
        };
        let Some(k) = key(&ctx, settings, p, a, req.width) else {
            return Ok(written);
        };
        for o in result.outcomes.iter().filter(|o| o.measured) {
            if !other_formats && !own(&o.candidate) {
                continue;
            }
            let mut r = Record::new(
                k.clone(),
                req.op.name(),
                o.candidate.clone(),
                o.times_ms.clone(),
            );
            r.strategy = req.options.strategy.name().to_string();
            r.features = features.values.clone();
            r.failure = o.failure.clone();
            r.best = best.as_ref() == Some(&o.candidate);
            r.shape = Some(shape.clone());
            if let Some(prep) = &o.prepared {
                r.compile_ms = prep.compile_ms;
                r.convert_ms = prep.convert_ms;
                r.trace = prep.trace.clone();
            }
            db.append(&r)?;
            written += 1;
        }
    }
    Ok(written)
}

/// The default search settings of a strategy name (`select`, `pruned`, `exhaustive`,
/// `stile`, `stile-exhaustive`).
pub fn strategy(name: &str) -> Option<Strategy> {
    match name {
        "select" => Some(Strategy::Select),
        "pruned" => Some(Strategy::PRUNED),
        "exhaustive" => Some(Strategy::Exhaustive),
        "stile" => Some(Strategy::STILE),
        // The whole space beside the tiles: the best single format against the best
        // decomposition, measured together.
        "stile-exhaustive" => Some(Strategy::Stile {
            fraction: 1.0,
            within: f64::INFINITY,
        }),
        _ => None,
    }
}

/// Dense widths of `inputs`' operands, by operator, as [`tune`] wants them.
pub fn width_of(op: Operator, inputs: &HashMap<String, SparseTensor<'_>>) -> usize {
    let name = match op {
        Operator::Spmv => return 1,
        _ => "X",
    };
    inputs
        .get(name)
        .and_then(|t| t.shape().get(1).copied())
        .unwrap_or(1)
}
