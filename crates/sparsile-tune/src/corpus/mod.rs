//! Seeded generators of sparse matrices for training the learned selector.
//!
//! The selector learns from measurements on a corpus of matrices that covers the
//! sparsity structures Sparsile meets: power-law graphs, uniform random, banded,
//! stencil meshes, block-sparse, pruned weights, attention masks, irregular corner cases,
//! irregular triangulated meshes and pruned embedding tables. Every matrix is generated
//! from a seed; none is real data.
//!
//! [`corpus`] returns `per_family` members of each family listed by [`families`].
//! Member `k` of a family is generated from its own random stream (derived from the
//! seed, the family and `k`), so it and its name (`<family>-<k>-<variant>`) do not
//! depend on `per_family`. Matrix sizes are drawn at full size and multiplied by
//! `scale`: a dimension of full size `s` becomes `max(8, round(s * scale))` (families
//! that need it round further, e.g. to a multiple of the block size or to a grid).
//! Per-row quantities (degrees, bandwidths, windows, block sizes) are not scaled, only
//! clamped to the scaled dimensions. At scale 1.0 matrices have about 2,000 to 150,000
//! rows (pruned weights, attention masks and vocabulary projections fewer) and, up to
//! scale 1.0, at most [`MAX_NNZ`] nonzeros.
//!
//! Postconditions: every matrix is a canonical 2-D [`CooTensor`] (coordinates in range,
//! sorted row-major, no duplicates) with values uniform in `[-1, 1]`; the output is a
//! pure function of the [`CorpusSpec`]. `scale` is clamped to `[0, MAX_SCALE]` (a NaN
//! scale gives the smallest matrices).
//!
//! ```
//! use sparsile_tune::corpus::{corpus, families, CorpusSpec};
//! let spec = CorpusSpec { seed: 1, scale: 0.02, per_family: 2 };
//! let matrices = corpus(&spec);
//! assert_eq!(matrices.len(), 2 * families().len());
//! assert!(matrices[0].name.starts_with("rmat-000-"));
//! let again = corpus(&spec);
//! assert!(matrices.iter().zip(&again).all(|(a, b)| a.name == b.name && a.coo == b.coo));
//! ```

mod attention;
mod banded;
mod blocks;
mod embedding;
mod irregular;
mod mesh;
mod powerlaw;
mod pruned;
mod rmat;
mod stencil;
mod uniform;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::CooTensor;

/// The most nonzeros a generated matrix has at scale 1.0 or below.
pub const MAX_NNZ: usize = 1_500_000;

/// The expected nonzeros that randomly filled matrices aim below, leaving room for
/// random fluctuation under [`MAX_NNZ`].
const BUDGET: f64 = MAX_NNZ as f64 * 0.98;

/// The largest accepted [`CorpusSpec::scale`].
pub const MAX_SCALE: f64 = 4.0;

/// One generated matrix.
#[derive(Debug, Clone)]
pub struct CorpusMatrix {
    /// Unique and stable: `<family>-<member index, 3 digits>-<variant>`.
    pub name: String,
    pub family: &'static str,
    /// The generator parameters as space-separated `key=value` pairs.
    pub params: String,
    pub coo: CooTensor,
}

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct CorpusSpec {
    pub seed: u64,
    /// 1.0 is full size; smaller values shrink every matrix (CI uses about 0.05).
    pub scale: f64,
    /// Members generated per family.
    pub per_family: usize,
}

/// The families: (name, one-line description), in the order [`corpus`] emits them.
pub fn families() -> &'static [(&'static str, &'static str)] {
    &FAMILIES
}

const FAMILIES: [(&str, &str); 11] = [
    ("rmat", "R-MAT (Kronecker) power-law graphs with varied quadrant probabilities, symmetric or directed"),
    ("powerlaw", "Chung-Lu graphs with power-law expected degrees (exponents 1.9 to 3), hubs with thousands of edges"),
    ("uniform", "uniform random (Erdos-Renyi) matrices at varied densities and aspect ratios"),
    ("banded", "banded matrices with varied lower/upper bandwidth and fill inside the band"),
    ("stencil", "2-D 5/9-point and 3-D 7/27-point stencil meshes, unpermuted or randomly permuted"),
    ("blocks", "block-sparse matrices with square (2 to 32) or 1xC blocks, dense to 30%-filled blocks"),
    ("pruned", "pruned-weight masks: unstructured, N:M, whole rows or columns, and block pruning"),
    ("attention", "attention masks: local, dilated or strided windows, BigBird-like blocks, causal windows"),
    ("irregular", "corner cases: empty rows, arrowheads, huge rows, tall and wide, empty, one row or column"),
    // A family's index seeds its members, so a new family goes at the end and leaves
    // the members of the others (and their labels) as they were.
    ("mesh", "irregular triangulated 2-D meshes (4 to 8 neighbours), numbered at random, by grid or by patches"),
    ("embedding", "pruned embedding tables and vocabulary projections: 8k to 64k tokens by a width of 128 to 1,024, tall or wide"),
];

type Generator = fn(usize, &mut Gen) -> Member;

const GENERATORS: [Generator; 11] = [
    rmat::generate,
    powerlaw::generate,
    uniform::generate,
    banded::generate,
    stencil::generate,
    blocks::generate,
    pruned::generate,
    attention::generate,
    irregular::generate,
    mesh::generate,
    embedding::generate,
];

/// Generates the corpus described by `spec`: family by family, members in order.
pub fn corpus(spec: &CorpusSpec) -> Vec<CorpusMatrix> {
    corpus_of(spec, |_| true)
}

/// The members of the families `keep` accepts (by name), the others not generated; each
/// member is the one [`corpus`] generates.
pub fn corpus_of(spec: &CorpusSpec, keep: impl Fn(&str) -> bool) -> Vec<CorpusMatrix> {
    let scale = spec.scale.clamp(0.0, MAX_SCALE);
    let mut out = Vec::with_capacity(spec.per_family.saturating_mul(FAMILIES.len()).min(4096));
    for (f, (&(family, _), generate)) in FAMILIES.iter().zip(GENERATORS).enumerate() {
        if !keep(family) {
            continue;
        }
        for k in 0..spec.per_family {
            let mut gen = Gen {
                rng: ChaCha8Rng::seed_from_u64(member_seed(spec.seed, f as u64, k as u64)),
                scale,
            };
            let m = generate(k, &mut gen);
            out.push(CorpusMatrix {
                name: format!("{family}-{k:03}-{}", m.variant),
                family,
                params: m.params,
                coo: m.coo,
            });
        }
    }
    out
}

/// What a family generator returns for one member.
struct Member {
    variant: String,
    params: String,
    coo: CooTensor,
}

/// The seed of one member's random stream (SplitMix64 finalisation of the mix).
fn member_seed(seed: u64, family: u64, k: u64) -> u64 {
    splitmix(seed ^ splitmix(family.wrapping_mul(0x1_0000_0001) ^ splitmix(k)))
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The random stream and scale of one member.
struct Gen {
    rng: ChaCha8Rng,
    scale: f64,
}

impl Gen {
    /// A full-size dimension drawn log-uniformly in `[lo, hi]`, then scaled.
    fn dim(&mut self, lo: f64, hi: f64) -> usize {
        let s = self.log_uniform(lo, hi);
        self.scaled(s)
    }

    /// `max(8, round(size * scale))`.
    fn scaled(&self, size: f64) -> usize {
        ((size * self.scale).round() as usize).max(8)
    }

    fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + self.rng.random::<f64>() * (hi.ln() - lo.ln())).exp()
    }

    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + self.rng.random::<f64>() * (hi - lo)
    }

    /// An index below `n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        self.rng.random_range(0..n)
    }

    /// Calls `f` with each position of `0..len` kept independently with probability
    /// `p`, in increasing order (geometric skipping when `p` is small).
    fn bernoulli(&mut self, len: u64, p: f64, mut f: impl FnMut(u64)) {
        if p >= 1.0 {
            (0..len).for_each(f);
        } else if p > 0.25 {
            for pos in 0..len {
                if self.rng.random::<f64>() < p {
                    f(pos);
                }
            }
        } else if p > 0.0 {
            let log_q = (-p).ln_1p();
            let mut pos = -1.0f64;
            loop {
                let u = 1.0 - self.rng.random::<f64>(); // (0, 1]
                pos += (u.ln() / log_q).floor() + 1.0;
                if pos >= len as f64 {
                    break;
                }
                f(pos as u64);
            }
        }
    }

    /// `k` distinct elements of `0..n` (`k <= n`), sorted.
    fn subset(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in 0..k.min(n) {
            let j = self.rng.random_range(i..n);
            p.swap(i, j);
        }
        p.truncate(k);
        p.sort_unstable();
        p
    }

    /// A uniformly random permutation of `0..n`.
    fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.rng.random_range(0..=i);
            p.swap(i, j);
        }
        p
    }
}

/// The coordinates of one matrix under construction, in any order and possibly with
/// duplicates; [`Pattern::finish`] makes it canonical.
struct Pattern {
    rows: usize,
    cols: usize,
    keys: Vec<u64>,
}

impl Pattern {
    fn new(rows: usize, cols: usize) -> Pattern {
        Pattern {
            rows,
            cols,
            keys: Vec::new(),
        }
    }

    /// Adds `(i, j)`; coordinates outside the shape are ignored.
    fn push(&mut self, i: usize, j: usize) {
        if i < self.rows && j < self.cols {
            self.keys.push(i as u64 * self.cols as u64 + j as u64);
        }
    }

    /// Sorts, removes duplicates and draws a value uniform in `[-1, 1]` per entry.
    fn finish(mut self, gen: &mut Gen) -> CooTensor {
        self.keys.sort_unstable();
        self.keys.dedup();
        let cols = self.cols.max(1) as u64;
        let mut coords = Vec::with_capacity(2 * self.keys.len());
        let mut values = Vec::with_capacity(self.keys.len());
        for &key in &self.keys {
            coords.push((key / cols) as usize);
            coords.push((key % cols) as usize);
            values.push(gen.rng.random_range(-1.0..=1.0));
        }
        CooTensor {
            shape: vec![self.rows, self.cols],
            coords,
            values,
        }
    }
}

/// Formats `key=value` pairs.
fn params(pairs: &[(&str, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}
