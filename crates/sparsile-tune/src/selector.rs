//! The learned selector: picks a candidate from an input's features without measuring.
//!
//! For every operator and candidate of the space, a gradient-boosted regression model
//! ([`crate::gbt`]) predicts the candidate's slowdown against the best candidate
//! (`ln(time / best time)`) from the input's features ([`crate::features`]). The
//! selector evaluates the models of the candidates in the input's space and picks the
//! lowest prediction. The models are trained by `sparsile tune train` on a corpus the
//! project generates ([`crate::corpus`]), labelled by exhaustive measurement on the
//! machine it ships for, and stored in a versioned JSON file; a file whose feature list
//! or space version does not match this build is refused with a message saying so, and
//! the caller falls back to the static rule.
//!
//! Labels hold for the machine they were measured on, and the widest vector instructions
//! the host has change which kernels win (AVX-512's masked gathers and 64-byte register
//! tiles are not there on an AVX2 host, so SpMV's and block SpMM's candidates rank
//! differently). The build therefore carries one model per vector instruction set
//! ([`crate::target::isa_class`]), and [`Selector::embedded_for`] takes the one whose
//! labels were measured on a host of the same class as this one, else the widest one of a
//! narrower class, else (a host of no shipped class, such as AArch64) the narrowest one.
//!
//! ```
//! use sparsile_tune::selector::{Selector, SelectorError};
//! let err = Selector::from_json("{\"format_version\": 2, \"space_version\": 9999, \"feature_names\": [], \"ops\": {}}").unwrap_err();
//! assert!(matches!(err, SelectorError::SpaceVersion { .. }));
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::features::{Features, FEATURE_NAMES};
use crate::gbt::{Gbt, GbtParams};
use crate::op::Operator;
use crate::space::{Candidate, SPACE_VERSION};
use crate::target::{isa_class, ISA_CLASSES};

/// The version of the model file layout.
pub const FORMAT_VERSION: u32 = 2;

/// The slowdown label of a candidate that failed (it never wins).
pub const FAILED_LOG_SLOWDOWN: f64 = 5.0;

/// The model files embedded in this build: (file name, text), one per vector
/// instruction set they were labelled on (their `provenance.target`).
const EMBEDDED: &[(&str, &str)] = &[
    ("selector.json", include_str!("../model/selector.json")),
    (
        "selector-avx2.json",
        include_str!("../model/selector-avx2.json"),
    ),
];

/// The vector class of a model file's `provenance.target` (empty when it has none).
fn provenance_class(provenance: &BTreeMap<String, String>) -> String {
    provenance
        .get("target")
        .map(|t| isa_class(t))
        .unwrap_or_default()
}

/// A trained selector (the model file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selector {
    pub format_version: u32,
    pub space_version: u32,
    pub feature_names: Vec<String>,
    /// How the training corpus was made, and on what machine.
    #[serde(default)]
    pub provenance: BTreeMap<String, String>,
    /// Held-out scores recorded at training time.
    #[serde(default)]
    pub scores: BTreeMap<String, f64>,
    /// Per operator name, per candidate id, the model of its log slowdown.
    pub ops: BTreeMap<String, BTreeMap<String, Gbt>>,
}

/// Why a model file is refused.
#[derive(Debug, thiserror::Error)]
pub enum SelectorError {
    #[error("selector model: not valid JSON of a model file: {0}")]
    Json(String),
    #[error("selector model: file format version {found}, this build reads {expected}")]
    FormatVersion { found: u32, expected: u32 },
    #[error("selector model: trained for candidate space version {found}, this build's space is version {expected}; retrain it (`sparsile tune train`)")]
    SpaceVersion { found: u32, expected: u32 },
    #[error("selector model: its features ({found}) are not this build's ({expected}); retrain it (`sparsile tune train`)")]
    Features { found: String, expected: String },
    #[error("selector model: {0}")]
    Training(String),
}

/// One training example: an input's features and the measured median per candidate id
/// (`None`: the candidate failed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    pub op: Operator,
    pub name: String,
    pub features: Features,
    pub times: BTreeMap<String, Option<f64>>,
}

impl Example {
    /// The label of each candidate: `ln(time / best)`, [`FAILED_LOG_SLOWDOWN`] if failed.
    pub fn labels(&self) -> BTreeMap<String, f64> {
        let best = self
            .times
            .values()
            .flatten()
            .copied()
            .fold(f64::INFINITY, f64::min);
        self.times
            .iter()
            .map(|(id, t)| {
                let y = match t {
                    Some(t) if best.is_finite() && best > 0.0 => (t / best).ln(),
                    _ => FAILED_LOG_SLOWDOWN,
                };
                (id.clone(), y.min(FAILED_LOG_SLOWDOWN))
            })
            .collect()
    }

    /// The best measured candidate id.
    pub fn best(&self) -> Option<&str> {
        self.times
            .iter()
            .filter_map(|(id, t)| t.map(|t| (id, t)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(id, _)| id.as_str())
    }
}

impl Selector {
    /// Reads and checks a model file.
    pub fn from_json(text: &str) -> Result<Selector, SelectorError> {
        let s: Selector =
            serde_json::from_str(text).map_err(|e| SelectorError::Json(e.to_string()))?;
        if s.format_version != FORMAT_VERSION {
            return Err(SelectorError::FormatVersion {
                found: s.format_version,
                expected: FORMAT_VERSION,
            });
        }
        if s.space_version != SPACE_VERSION {
            return Err(SelectorError::SpaceVersion {
                found: s.space_version,
                expected: SPACE_VERSION,
            });
        }
        let expected: Vec<String> = FEATURE_NAMES.iter().map(|s| s.to_string()).collect();
        if s.feature_names != expected {
            return Err(SelectorError::Features {
                found: s.feature_names.join(","),
                expected: expected.join(","),
            });
        }
        Ok(s)
    }

    /// The vector instruction set class its labels were measured on ([`isa_class`] of
    /// `provenance.target`; empty when the file does not say).
    pub fn isa_class(&self) -> String {
        provenance_class(&self.provenance)
    }

    /// The shipped model for a host whose target string is `host` (see the module
    /// docs): the one labelled on the same class; else the widest one of a class the host
    /// can run (an AVX2 model on an AVX-512 host); else the narrowest one shipped (an
    /// AArch64 host gets the AVX2 model). With its file name. `None` when the build ships
    /// no model.
    pub fn embedded_for(host: &str) -> Option<(&'static str, Result<Selector, SelectorError>)> {
        // Only the provenance is read to choose (the trees are skipped), then the chosen
        // file alone is parsed.
        #[derive(Deserialize)]
        struct Head {
            #[serde(default)]
            provenance: BTreeMap<String, String>,
        }
        let classes: Vec<String> = EMBEDDED
            .iter()
            .map(|(_, text)| {
                serde_json::from_str::<Head>(text)
                    .map(|h| provenance_class(&h.provenance))
                    .unwrap_or_default()
            })
            .collect();
        let class = isa_class(host);
        let find = |c: &str| classes.iter().position(|k| k == c);
        let at = find(&class)
            .or_else(|| {
                ISA_CLASSES
                    .iter()
                    .skip_while(|c| **c != class)
                    .find_map(|c| find(c))
            })
            .or_else(|| ISA_CLASSES.iter().rev().find_map(|c| find(c)))
            .unwrap_or(0);
        EMBEDDED
            .get(at)
            .map(|(name, text)| (*name, Selector::from_json(text)))
    }

    /// The shipped model for this host ([`Selector::embedded_for`] of
    /// [`crate::target::host`]).
    pub fn embedded() -> Option<(&'static str, Result<Selector, SelectorError>)> {
        Selector::embedded_for(&crate::target::host())
    }

    /// The model file as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a selector always serialises")
    }

    /// Trains one model per (operator, candidate) on `examples`.
    pub fn train(
        examples: &[Example],
        params: &GbtParams,
        provenance: BTreeMap<String, String>,
    ) -> Result<Selector, SelectorError> {
        let mut ops: BTreeMap<String, BTreeMap<String, Gbt>> = BTreeMap::new();
        let mut by_op: BTreeMap<Operator, Vec<&Example>> = BTreeMap::new();
        for e in examples {
            by_op.entry(e.op).or_default().push(e);
        }
        for (op, exs) in by_op {
            let mut per: BTreeMap<String, (Vec<Vec<f64>>, Vec<f64>)> = BTreeMap::new();
            for e in &exs {
                for (id, y) in e.labels() {
                    let slot = per.entry(id).or_default();
                    slot.0.push(e.features.values.clone());
                    slot.1.push(y);
                }
            }
            let mut models = BTreeMap::new();
            for (id, (x, y)) in per {
                if x.len() < 2 {
                    continue;
                }
                let m = Gbt::fit(&x, &y, params)
                    .map_err(|e| SelectorError::Training(format!("{op} {id}: {e}")))?;
                models.insert(id, m);
            }
            ops.insert(op.name().to_string(), models);
        }
        Ok(Selector {
            format_version: FORMAT_VERSION,
            space_version: SPACE_VERSION,
            feature_names: FEATURE_NAMES.iter().map(|s| s.to_string()).collect(),
            provenance,
            scores: BTreeMap::new(),
            ops,
        })
    }

    /// The predicted log slowdown of each of `candidates` that has a model.
    pub fn predict(
        &self,
        op: Operator,
        features: &Features,
        candidates: &[Candidate],
    ) -> Vec<Option<f64>> {
        let models = self.ops.get(op.name());
        candidates
            .iter()
            .map(|c| {
                models
                    .and_then(|m| m.get(&c.id()))
                    .and_then(|m| m.predict(&features.values).ok())
            })
            .collect()
    }

    /// The candidate with the lowest predicted slowdown among `candidates`, if any has
    /// a model.
    pub fn choose(
        &self,
        op: Operator,
        features: &Features,
        candidates: &[Candidate],
    ) -> Option<Candidate> {
        self.predict(op, features, candidates)
            .into_iter()
            .zip(candidates)
            .filter_map(|(p, c)| p.map(|p| (p, c)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, c)| c.clone())
    }
}
