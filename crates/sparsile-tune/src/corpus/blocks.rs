//! `blocks`: block-sparse matrices.
//!
//! The matrix is tiled by aligned `r x c` blocks (its dimensions are multiples of the
//! block size); every block is nonzero independently with probability `block_density`,
//! and inside a nonzero block every element is stored independently with probability
//! `block_fill` (1.0: dense blocks). Members cycle through square blocks of 2 to 32
//! and `1 x c` blocks of 4 to 32, and through block fills 1.0, 0.7, 0.5 and 0.3. The
//! number of nonzero blocks per block row is drawn log-uniformly between 1 and 16
//! (fewer where [`MAX_NNZ`](super::MAX_NNZ) requires). Square, about 2,000 to 150,000 rows at full
//! scale.
//!
//! ```
//! use sparsile_formats::MatrixStats;
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.05, per_family: 1 });
//! let m = all.iter().find(|m| m.family == "blocks").unwrap();
//! assert!(m.params.contains("block=4x4") && m.params.contains("block_fill=1.00"));
//! let s = MatrixStats::of(&m.coo).unwrap();
//! assert_eq!(s.blocks[0].r, 4);
//! assert_eq!(s.blocks[0].dense_block_fraction, 1.0);
//! ```

use super::{params, Gen, Member, Pattern, BUDGET};

const SHAPES: [(usize, usize); 8] = [
    (4, 4),
    (1, 16),
    (8, 8),
    (2, 2),
    (16, 16),
    (1, 4),
    (32, 32),
    (1, 32),
];
const FILLS: [f64; 4] = [1.0, 0.7, 0.5, 0.3];

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let (r, c) = SHAPES[k % SHAPES.len()];
    let fill = FILLS[(k + k / SHAPES.len()) % FILLS.len()];
    let size = g.dim(2_000.0, 150_000.0) as f64;
    let block_rows = ((size / r as f64).round() as usize).max(8usize.div_ceil(r));
    let block_cols = ((size / c as f64).round() as usize).max(8usize.div_ceil(c));
    let (rows, cols) = (block_rows * r, block_cols * c);
    let per_block_row = g.log_uniform(1.0, 16.0);
    let grid = block_rows as f64 * block_cols as f64;
    let per_block = (r * c) as f64 * fill;
    let density = (per_block_row / block_cols as f64)
        .min(1.0)
        .min(BUDGET / (grid * per_block));
    let mut nonzero_blocks = Vec::new();
    g.bernoulli(block_rows as u64 * block_cols as u64, density, |pos| {
        nonzero_blocks.push(pos)
    });
    let mut pat = Pattern::new(rows, cols);
    pat.keys
        .reserve((nonzero_blocks.len() as f64 * per_block) as usize);
    for &b in &nonzero_blocks {
        let (bi, bj) = (
            (b / block_cols as u64) as usize,
            (b % block_cols as u64) as usize,
        );
        let keys = &mut pat.keys;
        g.bernoulli((r * c) as u64, fill, |e| {
            let (i, j) = (bi * r + e as usize / c, bj * c + e as usize % c);
            keys.push(i as u64 * cols as u64 + j as u64);
        });
    }
    let params = params(&[
        ("rows", rows.to_string()),
        ("cols", cols.to_string()),
        ("block", format!("{r}x{c}")),
        ("block_fill", format!("{fill:.2}")),
        ("block_density", format!("{density:.3e}")),
    ]);
    Member {
        variant: format!("{r}x{c}-f{}", (fill * 100.0).round()),
        params,
        coo: pat.finish(g),
    }
}
