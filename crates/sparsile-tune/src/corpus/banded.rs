//! `banded`: banded matrices with varied bandwidth and fill inside the band.
//!
//! Row `i` may hold columns `i - lower ..= i + upper`; the diagonal is always stored
//! and every other element of the band independently with probability `fill`. Members
//! cycle through symmetric bands (`lower == upper`), lower-heavy bands
//! (`upper = lower / 4`) and upper bands (`lower = 0`), and through fills 1.0, 0.5,
//! 0.2, 0.8 and 0.1; the bandwidth is drawn log-uniformly between 1 and 400 (narrowed
//! to stay below [`MAX_NNZ`](super::MAX_NNZ) nonzeros). Square, `n` from about 2,000 to 150,000 at
//! full scale.
//!
//! ```
//! use sparsile_formats::MatrixStats;
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.05, per_family: 1 });
//! let m = all.iter().find(|m| m.family == "banded").unwrap();
//! let s = MatrixStats::of(&m.coo).unwrap();
//! assert_eq!(s.empty_rows, 0); // the diagonal is full
//! ```

use super::{params, Gen, Member, Pattern, BUDGET};

const SHAPES: [&str; 3] = ["sym", "lower", "upper"];
const FILLS: [f64; 5] = [1.0, 0.5, 0.2, 0.8, 0.1];

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let shape = SHAPES[k % SHAPES.len()];
    let fill = FILLS[k % FILLS.len()];
    let n = g.dim(2_000.0, 150_000.0);
    let band = g.log_uniform(1.0, 400.0).round() as usize;
    let (mut lower, mut upper) = match shape {
        "sym" => (band, band),
        "lower" => (band, band / 4),
        _ => (0, band),
    };
    // Expected nonzeros: n * (1 + (lower + upper) * fill).
    let off_diagonal = (BUDGET / n as f64 - 1.0).max(0.0) / fill;
    if (lower + upper) as f64 > off_diagonal {
        let shrink = off_diagonal / (lower + upper) as f64;
        lower = (lower as f64 * shrink) as usize;
        upper = (upper as f64 * shrink) as usize;
    }
    lower = lower.min(n - 1);
    upper = upper.min(n - 1);
    let mut pat = Pattern::new(n, n);
    for i in 0..n {
        let lo = i.saturating_sub(lower);
        let hi = (i + upper).min(n - 1);
        pat.push(i, i);
        let keys = &mut pat.keys;
        let row = i as u64 * n as u64;
        g.bernoulli((hi - lo + 1) as u64, fill, |t| {
            keys.push(row + lo as u64 + t);
        });
    }
    let params = params(&[
        ("n", n.to_string()),
        ("lower", lower.to_string()),
        ("upper", upper.to_string()),
        ("fill", format!("{fill:.2}")),
    ]);
    Member {
        variant: format!("{shape}-f{}", (fill * 100.0).round()),
        params,
        coo: pat.finish(g),
    }
}
