//! `powerlaw`: Chung-Lu graphs with power-law expected degrees.
//!
//! Vertex `v` (before a random relabelling) has weight `(v + 1)^(-1 / (gamma - 1))`;
//! each edge picks both endpoints with probability proportional to weight, so expected
//! degrees follow a power law with exponent `gamma` and the heaviest vertices become
//! hubs with thousands of edges at full scale. Members alternate between directed
//! (rows and columns relabelled independently, so out- and in-hubs differ) and
//! symmetric, and cycle through exponents 2.1, 2.5, 3.0 and 1.9. Square, `n` from
//! about 2,000 to 150,000 at full scale, 4 to 20 nonzeros per row on average.
//!
//! ```
//! use sparsile_formats::MatrixStats;
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.2, per_family: 1 });
//! let m = all.iter().find(|m| m.family == "powerlaw").unwrap();
//! let s = MatrixStats::of(&m.coo).unwrap();
//! assert!(s.row_length_max as f64 > 10.0 * s.row_length_mean);
//! ```

use super::{params, Gen, Member, Pattern, MAX_NNZ};
use rand::Rng;

const EXPONENTS: [f64; 4] = [2.1, 2.5, 3.0, 1.9];

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let symmetric = k % 2 == 1;
    let gamma = EXPONENTS[(k / 2) % EXPONENTS.len()];
    let n = g.dim(2_000.0, 150_000.0);
    let degree = g.log_uniform(4.0, 20.0);
    let per_edge = if symmetric { 2 } else { 1 };
    let edges = ((n as f64 * degree) as usize / per_edge).clamp(1, MAX_NNZ / per_edge);
    let alpha = 1.0 / (gamma - 1.0);
    let mut total = 0.0;
    let cumulative: Vec<f64> = (0..n)
        .map(|v| {
            total += ((v + 1) as f64).powf(-alpha);
            total
        })
        .collect();
    let rows = g.permutation(n);
    let cols = if symmetric {
        rows.clone()
    } else {
        g.permutation(n)
    };
    let mut pat = Pattern::new(n, n);
    pat.keys.reserve(edges * per_edge);
    for _ in 0..edges {
        let u = draw(g, &cumulative, total);
        let v = draw(g, &cumulative, total);
        pat.push(rows[u], cols[v]);
        if symmetric {
            pat.push(rows[v], cols[u]);
        }
    }
    let variant = format!(
        "g{}-{}",
        (gamma * 10.0).round(),
        if symmetric { "sym" } else { "dir" }
    );
    let params = params(&[
        ("n", n.to_string()),
        ("gamma", format!("{gamma:.1}")),
        ("edges", edges.to_string()),
        ("symmetric", symmetric.to_string()),
    ]);
    Member {
        variant,
        params,
        coo: pat.finish(g),
    }
}

/// A vertex drawn with probability proportional to its weight.
fn draw(g: &mut Gen, cumulative: &[f64], total: f64) -> usize {
    let u = g.rng.random::<f64>() * total;
    cumulative
        .partition_point(|&c| c <= u)
        .min(cumulative.len() - 1)
}
