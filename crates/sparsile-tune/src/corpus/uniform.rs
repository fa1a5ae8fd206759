//! `uniform`: uniform random (Erdos-Renyi) matrices.
//!
//! Every element is stored independently with the same probability, so row lengths
//! are binomial around the mean. Members cycle through square, square, tall (a quarter
//! as many columns) and wide (four times as many columns) shapes; the mean row length
//! is drawn log-uniformly between 0.5 and 64 (at most half of a row, and below
//! [`MAX_NNZ`](super::MAX_NNZ) nonzeros in all). Rows from about 2,000 to 150,000 at full scale.
//!
//! ```
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.05, per_family: 4 });
//! let tall = all.iter().find(|m| m.name == "uniform-002-tall").unwrap();
//! assert!(tall.coo.shape[0] > tall.coo.shape[1]);
//! ```

use super::{params, Gen, Member, Pattern, BUDGET};

/// (name, columns per row).
const SHAPES: [(&str, f64); 4] = [
    ("square", 1.0),
    ("square", 1.0),
    ("tall", 0.25),
    ("wide", 4.0),
];

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let (shape, aspect) = SHAPES[k % SHAPES.len()];
    let rows = g.dim(2_000.0, 150_000.0);
    let cols = ((rows as f64 * aspect).round() as usize).max(8);
    let degree = g.log_uniform(0.5, 64.0);
    let elements = rows as f64 * cols as f64;
    let density = (degree / cols as f64).min(0.5).min(BUDGET / elements);
    let mut pat = Pattern::new(rows, cols);
    // Row-major positions are exactly the pattern's keys.
    let keys = &mut pat.keys;
    g.bernoulli(rows as u64 * cols as u64, density, |pos| keys.push(pos));
    let params = params(&[
        ("rows", rows.to_string()),
        ("cols", cols.to_string()),
        ("density", format!("{density:.3e}")),
    ]);
    Member {
        variant: shape.to_string(),
        params,
        coo: pat.finish(g),
    }
}
