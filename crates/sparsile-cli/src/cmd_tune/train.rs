//! `sparsile tune train`: trains the selector on labels and scores it on held-out
//! corpus matrices.
//!
//! One matrix in five (by a hash of its name, so every operator of a matrix falls on the
//! same side) is held out; a model trained on the rest picks a candidate for each
//! held-out example, and the score of a pick is `best time / pick's time` (1 when it
//! picked the best, 0 when its pick failed). Reported beside it: the `default` recipe
//! in the matrix's own format, the static rule, and the best single candidate (the one
//! whose geometric-mean score over the held-out examples is highest). The shipped model
//! is then trained on every example, with the held-out scores recorded in it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use sparsile::tune::gbt::GbtParams;
use sparsile::tune::rule::rule;
use sparsile::tune::selector::{Example, Selector};
use sparsile::tune::space::Candidate;

use crate::output::{out, outln};
use crate::table::Table;

#[derive(clap::Args)]
pub struct TrainArgs {
    /// The labels (`sparsile tune label`); several files are read as one.
    #[arg(long, required = true, num_args = 1..)]
    pub labels: Vec<PathBuf>,
    /// Where the model goes.
    #[arg(long)]
    pub out: PathBuf,
    /// Trees per candidate model.
    #[arg(long, default_value_t = 50)]
    pub rounds: usize,
    #[arg(long, default_value_t = 3)]
    pub depth: usize,
    #[arg(long, default_value_t = 0.2)]
    pub learning_rate: f64,
    /// What made the labels (kept in the model file).
    #[arg(long, default_value = "")]
    pub corpus: String,
}

/// Scores of picks on examples (see the module docs).
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Scores {
    pub examples: usize,
    pub geomean: f64,
    pub min: f64,
    pub below_085: usize,
}

/// `best / pick` of each example, for picks by `choose`.
pub fn scores(examples: &[&Example], choose: impl Fn(&Example) -> Option<String>) -> Scores {
    let ratios: Vec<f64> = examples
        .iter()
        .map(|e| {
            let best = e
                .times
                .values()
                .flatten()
                .copied()
                .fold(f64::INFINITY, f64::min);
            match choose(e).and_then(|id| e.times.get(&id).copied().flatten()) {
                Some(t) if best.is_finite() && t > 0.0 => best / t,
                _ => 0.0,
            }
        })
        .collect();
    summarize(&ratios)
}

pub fn summarize(ratios: &[f64]) -> Scores {
    if ratios.is_empty() {
        return Scores::default();
    }
    let geomean =
        (ratios.iter().map(|r| r.max(1e-6).ln()).sum::<f64>() / ratios.len() as f64).exp();
    Scores {
        examples: ratios.len(),
        geomean,
        min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
        below_085: ratios.iter().filter(|r| **r < 0.85).count(),
    }
}

fn held_out(name: &str) -> bool {
    let matrix = name.split(' ').next().unwrap_or(name);
    sparsile::tune::target::fingerprint(&[matrix.as_bytes()])
        .bytes()
        .last()
        .is_some_and(|b| b % 5 == 0)
}

/// The candidate ids of an example in its own (first) format.
fn candidates(e: &Example) -> Vec<Candidate> {
    e.times
        .keys()
        .filter_map(|id| Candidate::from_id(id))
        .collect()
}

pub fn run(args: &TrainArgs) -> Result<()> {
    let mut examples = Vec::new();
    for path in &args.labels {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let e: Example = serde_json::from_str(line)
                .with_context(|| format!("{} line {}", path.display(), n + 1))?;
            examples.push(e);
        }
    }
    if examples.is_empty() {
        bail!("the labels files hold no examples");
    }
    let params = GbtParams {
        rounds: args.rounds,
        max_depth: args.depth,
        learning_rate: args.learning_rate,
        ..GbtParams::default()
    };
    let (test, train): (Vec<&Example>, Vec<&Example>) =
        examples.iter().partition(|e| held_out(&e.name));
    let train_owned: Vec<Example> = train.iter().map(|e| (*e).clone()).collect();
    let model = Selector::train(&train_owned, &params, BTreeMap::new())?;
    let pick = |e: &Example| {
        model
            .choose(e.op, &e.features, &candidates(e))
            .map(|c| c.id())
    };
    let selector = scores(&test, pick);
    let default = scores(&test, |e| {
        candidates(e)
            .into_iter()
            .find(|c| c.recipe == "default" && c.format == "csr")
            .map(|c| c.id())
    });
    let ruled = scores(&test, |e| Some(rule(e.op, &e.features, "csr", true).id()));
    // The best single candidate over the held-out examples.
    let mut ids: Vec<String> = test.iter().flat_map(|e| e.times.keys().cloned()).collect();
    ids.sort();
    ids.dedup();
    let (static_id, fixed) = ids
        .iter()
        .map(|id| (id.clone(), scores(&test, |_| Some(id.clone()))))
        .max_by(|a, b| a.1.geomean.total_cmp(&b.1.geomean))
        .unwrap_or_default();
    let mut t = Table::new(
        &[
            "choice",
            "held-out examples",
            "geomean of best",
            "min",
            "below 85%",
        ],
        &[false, true, true, true, true],
    );
    for (name, s) in [
        ("selector".to_string(), &selector),
        ("rule".to_string(), &ruled),
        (format!("best static ({static_id})"), &fixed),
        ("default".to_string(), &default),
    ] {
        t.row(vec![
            name,
            s.examples.to_string(),
            format!("{:.1}%", s.geomean * 100.0),
            format!("{:.1}%", s.min * 100.0),
            s.below_085.to_string(),
        ]);
    }
    out!("{}", t.render());
    let mut provenance = BTreeMap::new();
    provenance.insert("corpus".into(), args.corpus.clone());
    provenance.insert("target".into(), sparsile::tune::target::host());
    provenance.insert(
        "examples".into(),
        format!(
            "{} ({} held out for the scores)",
            examples.len(),
            test.len()
        ),
    );
    provenance.insert(
        "params".into(),
        format!(
            "rounds={} depth={} learning_rate={}",
            args.rounds, args.depth, args.learning_rate
        ),
    );
    let mut shipped = Selector::train(&examples, &params, provenance)?;
    shipped
        .scores
        .insert("held_out_geomean".into(), selector.geomean);
    shipped.scores.insert("held_out_min".into(), selector.min);
    shipped
        .scores
        .insert("held_out_examples".into(), selector.examples as f64);
    shipped.scores.insert("rule_geomean".into(), ruled.geomean);
    shipped
        .scores
        .insert("default_geomean".into(), default.geomean);
    shipped
        .scores
        .insert("best_static_geomean".into(), fixed.geomean);
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.out, shipped.to_json() + "\n")
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    outln!(
        "model written to {} ({} examples; trained on all of them)",
        args.out.display(),
        examples.len()
    );
    Ok(())
}
