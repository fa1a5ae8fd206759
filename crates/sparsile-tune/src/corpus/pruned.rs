//! `pruned`: masks of pruned neural-network weight matrices.
//!
//! Members cycle through five pruning styles: `iid` (unstructured, every weight kept
//! independently, like magnitude pruning of i.i.d. weights), `nm` (N:M, e.g. 2:4: in
//! every group of M consecutive columns of a row exactly N weights are kept), `rows`
//! and `cols` (whole rows or whole columns kept or pruned) and `block` (aligned
//! square blocks of 4 to 32 kept or pruned). Sparsity is drawn in `[0.5, 0.98]`
//! (N:M sets its own). Rows and columns are drawn independently between 256 and 4,096
//! at full scale, then both shrunk as needed to stay below [`MAX_NNZ`](super::MAX_NNZ)
//! nonzeros. Row, column and block pruning keep exactly the stated fraction of units.
//!
//! ```
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.05, per_family: 2 });
//! let m = all.iter().find(|m| m.name == "pruned-001-nm").unwrap();
//! assert!(m.params.contains("n:m="));
//! ```

use super::{params, Gen, Member, Pattern, BUDGET};

const STYLES: [&str; 5] = ["iid", "nm", "rows", "block", "cols"];
const NM: [(usize, usize); 6] = [(2, 4), (1, 4), (1, 8), (2, 8), (4, 8), (1, 2)];
const BLOCKS: [usize; 4] = [4, 8, 16, 32];

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let style = STYLES[k % STYLES.len()];
    let mut rows = g.dim(256.0, 4_096.0);
    let mut cols = g.dim(256.0, 4_096.0);
    let (nm, keep) = if style == "nm" {
        let (n, m) = NM[g.below(NM.len())];
        (Some((n, m)), n as f64 / m as f64)
    } else {
        (None, 1.0 - g.uniform(0.5, 0.98))
    };
    let expected = rows as f64 * cols as f64 * keep;
    if expected > BUDGET {
        let shrink = (BUDGET / expected).sqrt();
        rows = ((rows as f64 * shrink) as usize).max(8);
        cols = ((cols as f64 * shrink) as usize).max(8);
    }
    let mut pat = Pattern::new(rows, cols);
    let c = cols as u64;
    let mut extra = Vec::new();
    match style {
        "iid" => {
            let keys = &mut pat.keys;
            g.bernoulli(rows as u64 * c, keep, |pos| keys.push(pos));
        }
        "nm" => {
            let (n, m) = nm.unwrap_or((1, 2));
            let mut group: Vec<usize> = Vec::with_capacity(m);
            for i in 0..rows {
                for start in (0..cols).step_by(m) {
                    let len = m.min(cols - start);
                    group.clear();
                    group.extend(0..len);
                    // The first `n` of a partial shuffle: `n` distinct offsets.
                    for t in 0..n.min(len) {
                        let s = t + g.below(len - t);
                        group.swap(t, s);
                        pat.push(i, start + group[t]);
                    }
                }
            }
        }
        "rows" => {
            for i in g.subset(rows, (rows as f64 * keep).round() as usize) {
                pat.keys.extend((0..c).map(|j| i as u64 * c + j));
            }
        }
        "cols" => {
            let kept = g.subset(cols, (cols as f64 * keep).round() as usize);
            for i in 0..rows as u64 {
                pat.keys.extend(kept.iter().map(|&j| i * c + j as u64));
            }
        }
        _ => {
            let b = BLOCKS[g.below(BLOCKS.len())];
            let (br, bc) = (rows.div_ceil(b), cols.div_ceil(b));
            for pos in g.subset(br * bc, (br as f64 * bc as f64 * keep).round() as usize) {
                let (bi, bj) = (pos / bc, pos % bc);
                for i in bi * b..(bi + 1) * b {
                    for j in bj * b..(bj + 1) * b {
                        pat.push(i, j);
                    }
                }
            }
            extra.push(("block", format!("{b}x{b}")));
        }
    }
    let mut pairs = vec![
        ("rows", rows.to_string()),
        ("cols", cols.to_string()),
        ("style", style.to_string()),
        ("sparsity", format!("{:.3}", 1.0 - keep)),
    ];
    if let Some((n, m)) = nm {
        pairs.push(("n:m", format!("{n}:{m}")));
    }
    pairs.extend(extra);
    Member {
        variant: style.to_string(),
        params: params(&pairs),
        coo: pat.finish(g),
    }
}
