//! `embedding`: masks of pruned embedding tables and vocabulary projections.
//!
//! One dimension is a vocabulary (8,192 to 65,536 tokens at full scale), the other the
//! model width (128 to 1,024): far taller or wider than the square-ish weights of the
//! `pruned` family, with a dense operand of SpMV small enough to stay in the first-level
//! cache. Members cycle through three variants: `table` (vocabulary × width, weights
//! kept independently), `projection` (width × vocabulary, the output layer) and `zipf`
//! (a table whose rows are tokens in order of frequency: row `r` keeps weights with a
//! probability proportional to `1 / (r + 1)^a`, `a` in `[0.5, 1.1]`, scaled so the mean
//! matches the drawn density and capped at 1, as magnitude pruning leaves frequent
//! tokens more weights). Sparsity is drawn in `[0.5, 0.98]`; the vocabulary shrinks as
//! needed to stay below [`MAX_NNZ`](super::MAX_NNZ) nonzeros (the width never does).
//!
//! ```
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.05, per_family: 3 });
//! let m = all.iter().find(|m| m.name == "embedding-001-projection").unwrap();
//! assert!(m.coo.shape[1] > m.coo.shape[0]);
//! ```

use super::{params, Gen, Member, Pattern, BUDGET};

const VARIANTS: [&str; 3] = ["table", "projection", "zipf"];

/// Model widths at full scale.
const WIDTHS: [f64; 5] = [128.0, 256.0, 512.0, 768.0, 1_024.0];

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let variant = VARIANTS[k % VARIANTS.len()];
    let mut vocab = g.dim(8_192.0, 65_536.0);
    let full_width = WIDTHS[g.below(WIDTHS.len())];
    let width = g.scaled(full_width);
    let keep = 1.0 - g.uniform(0.5, 0.98);
    let expected = vocab as f64 * width as f64 * keep;
    if expected > BUDGET {
        vocab = ((vocab as f64 * BUDGET / expected) as usize).max(8);
    }
    let (rows, cols) = if variant == "projection" {
        (width, vocab)
    } else {
        (vocab, width)
    };
    let mut pat = Pattern::new(rows, cols);
    let c = cols as u64;
    let mut extra = Vec::new();
    if variant == "zipf" {
        let a = g.uniform(0.5, 1.1);
        let weights: Vec<f64> = (0..rows).map(|r| (r as f64 + 1.0).powf(-a)).collect();
        let mean = weights.iter().sum::<f64>() / rows as f64;
        for (r, w) in weights.iter().enumerate() {
            let p = (keep * w / mean).min(1.0);
            let keys = &mut pat.keys;
            g.bernoulli(c, p, |j| keys.push(r as u64 * c + j));
        }
        extra.push(("zipf", format!("{a:.2}")));
    } else {
        let keys = &mut pat.keys;
        g.bernoulli(rows as u64 * c, keep, |pos| keys.push(pos));
    }
    let mut pairs = vec![
        ("rows", rows.to_string()),
        ("cols", cols.to_string()),
        ("vocab", vocab.to_string()),
        ("width", width.to_string()),
        ("sparsity", format!("{:.3}", 1.0 - keep)),
    ];
    pairs.extend(extra);
    Member {
        variant: variant.to_string(),
        params: params(&pairs),
        coo: pat.finish(g),
    }
}
