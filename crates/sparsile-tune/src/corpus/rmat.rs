//! `rmat`: R-MAT (recursive Kronecker) power-law graphs.
//!
//! Each edge descends `ceil(log2 n)` levels of the adjacency matrix, choosing at every
//! level the top-left, top-right, bottom-left or bottom-right quadrant with
//! probabilities `a, b, c, d`; edges outside `n x n` are redrawn and duplicates merge.
//! Members alternate between directed and symmetric (every edge stored both ways) and
//! cycle through four quadrant settings, from the Graph500 one to milder skews; vertex
//! labels are randomly permuted in about half of them. Square, `n` from about 2,000 to
//! 150,000 at full scale, 4 to 24 edges per vertex.
//!
//! ```
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.05, per_family: 2 });
//! let sym = all.iter().find(|m| m.name == "rmat-001-g500-sym").unwrap();
//! assert!(sym.params.contains("symmetric=true"));
//! assert_eq!(sym.coo.shape[0], sym.coo.shape[1]);
//! ```

use super::{params, Gen, Member, Pattern, MAX_NNZ};
use rand::Rng;

/// (name, a, b, c, d).
const QUADRANTS: [(&str, f64, f64, f64, f64); 4] = [
    ("g500", 0.57, 0.19, 0.19, 0.05),
    ("heavy-d", 0.45, 0.15, 0.15, 0.25),
    ("skewed", 0.65, 0.10, 0.15, 0.10),
    ("mild", 0.40, 0.25, 0.20, 0.15),
];

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let symmetric = k % 2 == 1;
    let (qname, a, b, c, d) = QUADRANTS[(k / 2) % QUADRANTS.len()];
    let n = g.dim(2_000.0, 150_000.0);
    let degree = g.log_uniform(4.0, 24.0);
    let permuted = g.rng.random_bool(0.5);
    let per_edge = if symmetric { 2 } else { 1 };
    let edges = ((n as f64 * degree) as usize / per_edge).clamp(1, MAX_NNZ / per_edge);
    let levels = n.next_power_of_two().trailing_zeros();
    let to_u16 = |p: f64| (p * 65_536.0).round() as u32;
    let (ta, tab, tabc) = (to_u16(a), to_u16(a + b), to_u16(a + b + c));
    let perm: Vec<usize> = if permuted {
        g.permutation(n)
    } else {
        (0..n).collect()
    };
    let mut pat = Pattern::new(n, n);
    pat.keys.reserve(edges * per_edge);
    let mut drawn = 0;
    // Each draw lands inside with probability at least 1/4.
    for _ in 0..edges.saturating_mul(16) {
        if drawn == edges {
            break;
        }
        let (mut i, mut j) = (0usize, 0usize);
        let mut bits = 0u64;
        for level in 0..levels {
            if level % 4 == 0 {
                bits = g.rng.random();
            }
            let u = (bits & 0xFFFF) as u32;
            bits >>= 16;
            i <<= 1;
            j <<= 1;
            if u < ta {
            } else if u < tab {
                j |= 1;
            } else if u < tabc {
                i |= 1;
            } else {
                i |= 1;
                j |= 1;
            }
        }
        if i < n && j < n {
            pat.push(perm[i], perm[j]);
            if symmetric {
                pat.push(perm[j], perm[i]);
            }
            drawn += 1;
        }
    }
    let variant = format!("{qname}-{}", if symmetric { "sym" } else { "dir" });
    let params = params(&[
        ("n", n.to_string()),
        ("a", format!("{a:.2}")),
        ("b", format!("{b:.2}")),
        ("c", format!("{c:.2}")),
        ("d", format!("{d:.2}")),
        ("edges", edges.to_string()),
        ("symmetric", symmetric.to_string()),
        ("permuted", permuted.to_string()),
    ]);
    Member {
        variant,
        params,
        coo: pat.finish(g),
    }
}
