//! Gradient-boosted regression trees: the model behind the learned selector.
//!
//! The selector predicts, from a few dozen numeric features of an input and a
//! candidate, the candidate's log slowdown versus the best candidate. [`Gbt::fit`]
//! trains a least-squares boosted ensemble: it starts from the mean target and adds
//! `rounds` regression trees, each fitted to the current residuals on a random
//! subsample of the rows and scaled by the learning rate. Splits are exact and greedy
//! over the sorted values of every feature (datasets are small, up to ~50,000 rows).
//!
//! Preconditions: at least one row, at least one feature, every row of the same length,
//! one finite target per row, finite feature values; violations are [`GbtError`]s.
//! Postconditions: training is deterministic for a given [`GbtParams::seed`]; a model
//! survives a JSON round trip bit for bit (its floating-point numbers are written as
//! exact decimal text), so a shipped model predicts exactly what the trained one did.
//!
//! ```
//! use sparsile_tune::gbt::{Gbt, GbtParams};
//! // y = 1 when x0 > 0.5, else 0; x1 is noise.
//! let x: Vec<Vec<f64>> = (0..100).map(|i| vec![i as f64 / 100.0, (i * 7 % 13) as f64]).collect();
//! let y: Vec<f64> = x.iter().map(|r| if r[0] > 0.5 { 1.0 } else { 0.0 }).collect();
//! let model = Gbt::fit(&x, &y, &GbtParams::default()).unwrap();
//! assert!((model.predict(&[0.9, 3.0]).unwrap() - 1.0).abs() < 0.05);
//! assert!(model.predict(&[0.1, 3.0]).unwrap().abs() < 0.05);
//! assert!(model.feature_importance()[0] > 0.9);
//! assert!(model.predict(&[0.1]).is_err()); // wrong feature count
//! ```

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Training parameters of [`Gbt::fit`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GbtParams {
    /// Number of trees (0 gives a model predicting the mean target).
    pub rounds: usize,
    /// Maximum depth of a tree (at least 1; a tree has at most `2^max_depth` leaves).
    pub max_depth: usize,
    /// Shrinkage applied to every tree, in `(0, 1]`.
    pub learning_rate: f64,
    /// Minimum number of training rows in a leaf (at least 1).
    pub min_samples_leaf: usize,
    /// Fraction of the rows drawn (without replacement) to fit each tree, in `(0, 1]`.
    pub subsample: f64,
    /// Seed of the row subsampling.
    pub seed: u64,
}

impl Default for GbtParams {
    fn default() -> Self {
        GbtParams {
            rounds: 200,
            max_depth: 3,
            learning_rate: 0.1,
            min_samples_leaf: 3,
            subsample: 0.8,
            seed: 0,
        }
    }
}

/// A problem with training data, parameters, a prediction input or a loaded model.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GbtError {
    #[error("no training rows")]
    EmptyData,
    #[error("training rows have no features")]
    NoFeatures,
    #[error("row {row} has {found} features, expected {expected} (as in row 0)")]
    RaggedRow {
        row: usize,
        found: usize,
        expected: usize,
    },
    #[error("{rows} training rows but {targets} targets")]
    LengthMismatch { rows: usize, targets: usize },
    #[error("feature {feature} of training row {row} is not finite")]
    NonFiniteFeature { row: usize, feature: usize },
    #[error("target of training row {row} is not finite")]
    NonFiniteTarget { row: usize },
    #[error("bad parameter `{param}`: {reason}")]
    BadParam {
        param: &'static str,
        reason: &'static str,
    },
    #[error("input has {found} features, the model expects {expected}")]
    FeatureCount { expected: usize, found: usize },
    #[error("input feature {feature} is not finite")]
    NonFiniteInput { feature: usize },
    #[error("the prediction is not finite (the model's values overflow)")]
    NonFinitePrediction,
    #[error("corrupt model: tree {tree}, node {node}: {reason}")]
    CorruptModel {
        tree: usize,
        node: usize,
        reason: &'static str,
    },
}

/// One node of a tree. Nodes of a tree are stored in one vector, root first; the
/// children of a split always come after it. In a model file a split is the array
/// `[feature, "threshold", "gain", left, right]` and a leaf `["value"]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(from = "NodeText", into = "NodeText")]
pub enum Node {
    /// Rows with `x[feature] <= threshold` go to `left`, the others to `right`.
    Split {
        feature: usize,
        threshold: f64,
        /// The reduction of the squared error of the residuals made by this split.
        gain: f64,
        left: usize,
        right: usize,
    },
    /// The contribution of the tree (already scaled by the learning rate).
    Leaf { value: f64 },
}

/// An `f64` written exactly (see [`exact_f64`]).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Exact(#[serde(with = "exact_f64")] f64);

/// The compact text form of a [`Node`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum NodeText {
    Split(usize, Exact, Exact, usize, usize),
    Leaf([Exact; 1]),
}

impl From<NodeText> for Node {
    fn from(t: NodeText) -> Node {
        match t {
            NodeText::Split(feature, threshold, gain, left, right) => Node::Split {
                feature,
                threshold: threshold.0,
                gain: gain.0,
                left,
                right,
            },
            NodeText::Leaf([value]) => Node::Leaf { value: value.0 },
        }
    }
}

impl From<Node> for NodeText {
    fn from(n: Node) -> NodeText {
        match n {
            Node::Split {
                feature,
                threshold,
                gain,
                left,
                right,
            } => NodeText::Split(feature, Exact(threshold), Exact(gain), left, right),
            Node::Leaf { value } => NodeText::Leaf([Exact(value)]),
        }
    }
}

/// A trained ensemble of regression trees.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Gbt {
    #[serde(with = "exact_f64")]
    base: f64,
    trees: Vec<Vec<Node>>,
    n_features: usize,
}

impl Gbt {
    /// Trains a model on rows `x` (one feature vector per row) and targets `y`.
    pub fn fit(x: &[Vec<f64>], y: &[f64], params: &GbtParams) -> Result<Gbt, GbtError> {
        check_params(params)?;
        let n_features = check_data(x, y)?;
        let n = x.len();
        let mut base = y.iter().sum::<f64>() / n as f64;
        if !base.is_finite() {
            // The sum overflowed; this way of averaging cannot.
            base = y.iter().map(|&v| v / n as f64).sum::<f64>();
        }
        let mut trainer = Trainer::new(x, params, n_features);
        let mut pred = vec![base; n];
        let mut residual = vec![0.0; n];
        let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
        let mut trees = Vec::with_capacity(params.rounds);
        for _ in 0..params.rounds {
            for (r, (&t, &p)) in residual.iter_mut().zip(y.iter().zip(&pred)) {
                *r = t - p;
            }
            trainer.draw_sample(&mut rng, &residual);
            let tree = trainer.grow_tree();
            for (row, p) in x.iter().zip(pred.iter_mut()) {
                *p += eval_tree(&tree, row);
            }
            trees.push(tree);
        }
        Ok(Gbt {
            base,
            trees,
            n_features,
        })
    }

    /// Predicts the target of one row.
    pub fn predict(&self, x: &[f64]) -> Result<f64, GbtError> {
        if x.len() != self.n_features {
            return Err(GbtError::FeatureCount {
                expected: self.n_features,
                found: x.len(),
            });
        }
        if let Some(feature) = x.iter().position(|v| !v.is_finite()) {
            return Err(GbtError::NonFiniteInput { feature });
        }
        let mut sum = self.base;
        for (t, tree) in self.trees.iter().enumerate() {
            sum += checked_eval(tree, x, t)?;
        }
        if !sum.is_finite() {
            return Err(GbtError::NonFinitePrediction);
        }
        Ok(sum)
    }

    /// The number of features a row must have.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// The number of trees.
    pub fn n_trees(&self) -> usize {
        self.trees.len()
    }

    /// Total squared-error reduction of the splits on each feature, normalised to sum
    /// to 1 (all zeros when the model has no split).
    pub fn feature_importance(&self) -> Vec<f64> {
        let mut imp = vec![0.0; self.n_features];
        for node in self.trees.iter().flatten() {
            if let Node::Split { feature, gain, .. } = *node {
                if feature < imp.len() && gain.is_finite() && gain > 0.0 {
                    imp[feature] += gain;
                }
            }
        }
        let total: f64 = imp.iter().sum();
        if total > 0.0 {
            imp.iter_mut().for_each(|v| *v /= total);
        }
        imp
    }
}

fn check_params(p: &GbtParams) -> Result<(), GbtError> {
    let bad = |param, reason| Err(GbtError::BadParam { param, reason });
    if p.max_depth == 0 {
        return bad("max_depth", "must be at least 1");
    }
    if p.max_depth > 32 {
        return bad("max_depth", "must be at most 32");
    }
    if p.min_samples_leaf == 0 {
        return bad("min_samples_leaf", "must be at least 1");
    }
    if !(p.learning_rate > 0.0 && p.learning_rate <= 1.0) {
        return bad("learning_rate", "must lie in (0, 1]");
    }
    if !(p.subsample > 0.0 && p.subsample <= 1.0) {
        return bad("subsample", "must lie in (0, 1]");
    }
    Ok(())
}

/// Checks the training data and returns the number of features.
fn check_data(x: &[Vec<f64>], y: &[f64]) -> Result<usize, GbtError> {
    let first = x.first().ok_or(GbtError::EmptyData)?;
    let n_features = first.len();
    if n_features == 0 {
        return Err(GbtError::NoFeatures);
    }
    if x.len() != y.len() {
        return Err(GbtError::LengthMismatch {
            rows: x.len(),
            targets: y.len(),
        });
    }
    if x.len() > u32::MAX as usize {
        return Err(GbtError::BadParam {
            param: "x",
            reason: "too many rows",
        });
    }
    for (row, r) in x.iter().enumerate() {
        if r.len() != n_features {
            return Err(GbtError::RaggedRow {
                row,
                found: r.len(),
                expected: n_features,
            });
        }
        if let Some(feature) = r.iter().position(|v| !v.is_finite()) {
            return Err(GbtError::NonFiniteFeature { row, feature });
        }
    }
    if let Some(row) = y.iter().position(|v| !v.is_finite()) {
        return Err(GbtError::NonFiniteTarget { row });
    }
    Ok(n_features)
}

/// Evaluates a tree built by the trainer (well formed by construction).
fn eval_tree(tree: &[Node], x: &[f64]) -> f64 {
    let mut i = 0;
    loop {
        match tree[i] {
            Node::Leaf { value } => return value,
            Node::Split {
                feature,
                threshold,
                left,
                right,
                ..
            } => i = if x[feature] <= threshold { left } else { right },
        }
    }
}

/// Evaluates a tree of unknown origin, reporting malformed structure as an error.
fn checked_eval(tree: &[Node], x: &[f64], t: usize) -> Result<f64, GbtError> {
    let corrupt = |node, reason| GbtError::CorruptModel {
        tree: t,
        node,
        reason,
    };
    let mut i = 0;
    loop {
        match tree.get(i) {
            None => return Err(corrupt(i, "node index out of range")),
            Some(&Node::Leaf { value }) => return Ok(value),
            Some(&Node::Split {
                feature,
                threshold,
                left,
                right,
                ..
            }) => {
                let v = *x
                    .get(feature)
                    .ok_or_else(|| corrupt(i, "feature index out of range"))?;
                let next = if v <= threshold { left } else { right };
                // Children after their parent: every walk ends.
                if next <= i {
                    return Err(corrupt(i, "child does not follow its parent"));
                }
                i = next;
            }
        }
    }
}

/// Working state of training: every feature's row order, and per round the sampled
/// rows sorted by each feature, carrying their feature value and residual so that
/// split search reads memory sequentially.
struct Trainer<'a> {
    params: &'a GbtParams,
    n: usize,
    n_features: usize,
    /// `order[f * n..(f + 1) * n]`: all rows sorted by feature `f` (ties by row), and
    /// `order_x` the matching feature values.
    order: Vec<u32>,
    order_x: Vec<f64>,
    /// Sampled rows: `work[f * m..(f + 1) * m]` sorted by feature `f`; a node owns the
    /// same range `start..end` of every feature's segment.
    work: Vec<Entry>,
    m: usize,
    in_sample: Vec<bool>,
    goes_left: Vec<bool>,
    scratch: Vec<Entry>,
    shuffle: Vec<u32>,
}

/// A sampled row in one feature's sorted segment.
#[derive(Clone, Copy)]
struct Entry {
    row: u32,
    x: f64,
    residual: f64,
}

/// The best split of a node found so far.
struct Best {
    feature: usize,
    /// Entries `start..start + n_left` of the feature's segment go left.
    n_left: usize,
    threshold: f64,
    gain: f64,
}

impl<'a> Trainer<'a> {
    fn new(x: &[Vec<f64>], params: &'a GbtParams, n_features: usize) -> Trainer<'a> {
        let n = x.len();
        let mut order = Vec::with_capacity(n * n_features);
        let mut order_x = Vec::with_capacity(n * n_features);
        let mut idx: Vec<u32> = Vec::with_capacity(n);
        let mut col: Vec<f64> = Vec::with_capacity(n);
        for f in 0..n_features {
            col.clear();
            col.extend(x.iter().map(|row| row[f]));
            idx.clear();
            idx.extend(0..n as u32);
            idx.sort_by(|&a, &b| col[a as usize].total_cmp(&col[b as usize]).then(a.cmp(&b)));
            order.extend_from_slice(&idx);
            order_x.extend(idx.iter().map(|&r| col[r as usize]));
        }
        Trainer {
            params,
            n,
            n_features,
            order,
            order_x,
            work: Vec::with_capacity(n * n_features),
            m: 0,
            in_sample: vec![false; n],
            goes_left: vec![false; n],
            scratch: Vec::with_capacity(n),
            shuffle: (0..n as u32).collect(),
        }
    }

    /// Draws the rows of the next tree and sorts them, with their residuals, by every
    /// feature.
    fn draw_sample(&mut self, rng: &mut ChaCha8Rng, residual: &[f64]) {
        let n = self.n;
        let m = ((self.params.subsample * n as f64).round() as usize).clamp(1, n);
        if m == n {
            self.in_sample.iter_mut().for_each(|s| *s = true);
        } else {
            // Partial Fisher-Yates over a persistent permutation: deterministic.
            self.in_sample.iter_mut().for_each(|s| *s = false);
            for i in 0..m {
                let j = rng.random_range(i..n);
                self.shuffle.swap(i, j);
                self.in_sample[self.shuffle[i] as usize] = true;
            }
        }
        self.m = m;
        self.work.clear();
        let in_sample = &self.in_sample;
        for (&row, &x) in self.order.iter().zip(&self.order_x) {
            if in_sample[row as usize] {
                self.work.push(Entry {
                    row,
                    x,
                    residual: residual[row as usize],
                });
            }
        }
    }

    fn grow_tree(&mut self) -> Vec<Node> {
        let mut nodes = Vec::new();
        self.grow(0, self.m, 0, &mut nodes);
        nodes
    }

    /// Grows the node holding sample range `start..end`; returns its index.
    fn grow(&mut self, start: usize, end: usize, depth: usize, nodes: &mut Vec<Node>) -> usize {
        let me = nodes.len();
        let count = end - start;
        let sum: f64 = self.work[start..end].iter().map(|e| e.residual).sum();
        nodes.push(Node::Leaf {
            value: self.params.learning_rate * sum / count as f64,
        });
        if depth >= self.params.max_depth || count < 2 * self.params.min_samples_leaf {
            return me;
        }
        let Some(best) = self.best_split(start, end, sum) else {
            return me;
        };
        self.partition(&best, start, end);
        let mid = start + best.n_left;
        let left = self.grow(start, mid, depth + 1, nodes);
        let right = self.grow(mid, end, depth + 1, nodes);
        nodes[me] = Node::Split {
            feature: best.feature,
            threshold: best.threshold,
            gain: best.gain,
            left,
            right,
        };
        me
    }

    fn best_split(&self, start: usize, end: usize, sum: f64) -> Option<Best> {
        let count = end - start;
        let min_leaf = self.params.min_samples_leaf;
        let sum_sq: f64 = self.work[start..end]
            .iter()
            .map(|e| e.residual * e.residual)
            .sum();
        let parent = sum * sum / count as f64;
        // Gains below this are rounding noise (e.g. constant residuals).
        let min_gain = 1e-12 * sum_sq;
        let mut best: Option<Best> = None;
        let mut best_gain = min_gain;
        // Left sides of `min_leaf..=count - min_leaf` entries.
        let last = count - min_leaf;
        for f in 0..self.n_features {
            let seg = &self.work[f * self.m + start..f * self.m + end];
            let mut left_sum: f64 = seg[..min_leaf - 1].iter().map(|e| e.residual).sum();
            for n_left in min_leaf..=last {
                let (e, next) = (&seg[n_left - 1], &seg[n_left]);
                left_sum += e.residual;
                if e.x >= next.x {
                    continue;
                }
                let right_sum = sum - left_sum;
                let gain = left_sum * left_sum / n_left as f64
                    + right_sum * right_sum / (count - n_left) as f64
                    - parent;
                if gain > best_gain {
                    best_gain = gain;
                    let mut threshold = e.x + (next.x - e.x) / 2.0;
                    if threshold >= next.x {
                        threshold = e.x;
                    }
                    best = Some(Best {
                        feature: f,
                        n_left,
                        threshold,
                        gain,
                    });
                }
            }
        }
        best
    }

    /// Stably splits every feature's segment `start..end` into the entries going
    /// left, then those going right.
    fn partition(&mut self, best: &Best, start: usize, end: usize) {
        let m = self.m;
        let base = best.feature * m;
        for (i, e) in self.work[base + start..base + end].iter().enumerate() {
            self.goes_left[e.row as usize] = i < best.n_left;
        }
        for f in 0..self.n_features {
            let seg = &mut self.work[f * m + start..f * m + end];
            self.scratch.clear();
            let mut k = 0;
            for i in 0..seg.len() {
                let e = seg[i];
                if self.goes_left[e.row as usize] {
                    seg[k] = e;
                    k += 1;
                } else {
                    self.scratch.push(e);
                }
            }
            seg[k..].copy_from_slice(&self.scratch);
        }
    }
}

/// Serde for `f64` as exact decimal text (the shortest string that parses back to the
/// same bits), so a model round-trips through JSON without rounding. Reading also
/// accepts plain JSON numbers.
mod exact_f64 {
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:?}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        d.deserialize_any(F64Visitor)
    }

    struct F64Visitor;

    impl Visitor<'_> for F64Visitor {
        type Value = f64;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number or a string holding a decimal number")
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
            v.parse::<f64>()
                .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
        }
    }
}
