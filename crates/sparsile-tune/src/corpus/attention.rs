//! `attention`: sparse attention masks over a sequence (square, sequence length from
//! 512 to 8,192 at full scale).
//!
//! Members cycle through four patterns:
//! - `local`: query `i` attends keys `i - w ..= i + w` (`w` from 16 to 256);
//! - `dilated` / `strided` (alternating): keys `i + t * d` for `|t| <= h` (dilation
//!   `d` of 2, 4 or 8), or the causal strided pattern of sparse transformers (the
//!   previous `s` keys and every `s`-th key before them, `s` a power of two about the
//!   square root of the length);
//! - `bigbird`: blocks of `b` tokens (16, 32 or 64) attending their own and
//!   neighbouring blocks, 1 or 2 global blocks (full rows and columns) and 1 to 3
//!   random blocks per block row;
//! - `causal`: query `i` attends keys `i - w + 1 ..= i` (`w` from 16 to 512).
//!
//! Windows are clamped to the sequence and narrowed to keep at most [`MAX_NNZ`]
//! nonzeros.
//!
//! ```
//! use sparsile_formats::MatrixStats;
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.05, per_family: 4 });
//! let m = all.iter().find(|m| m.name == "attention-003-causal").unwrap();
//! let s = MatrixStats::of(&m.coo).unwrap();
//! assert_eq!(s.row_length_min, 1); // the first query sees only itself
//! ```

use super::{params, Gen, Member, Pattern, MAX_NNZ};

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let len = g.dim(512.0, 8_192.0);
    let budget = MAX_NNZ / len; // nonzeros per row
    let mut pat = Pattern::new(len, len);
    let (variant, mut pairs) = match k % 4 {
        0 => {
            let w = (g.log_uniform(16.0, 256.0).round() as usize)
                .min(budget.saturating_sub(1) / 2)
                .min(len - 1);
            for i in 0..len {
                for j in i.saturating_sub(w)..=(i + w).min(len - 1) {
                    pat.push(i, j);
                }
            }
            ("local", vec![("window", w.to_string())])
        }
        1 if (k / 4).is_multiple_of(2) => {
            let d = [2, 4, 8][g.below(3)];
            let h = (g.log_uniform(8.0, 64.0).round() as usize)
                .min(budget.saturating_sub(1) / 2)
                .min((len - 1) / d);
            for i in 0..len {
                for t in 0..=2 * h {
                    if let Some(j) = (i + t * d).checked_sub(h * d) {
                        pat.push(i, j);
                    }
                }
            }
            (
                "dilated",
                vec![("dilation", d.to_string()), ("reach", h.to_string())],
            )
        }
        1 => {
            // A power of two near `sqrt(len)`, as sparse transformers choose it (`l = 64`
            // at 4,096 tokens): with `s` a multiple of the block side, the strided keys
            // of a block's rows share one block column, which decides what block formats
            // gain (a stride drawn from all integers almost never is one).
            let pow2 = |x: f64| 1usize << x.log2().round().clamp(1.0, 30.0) as u32;
            let mut s = pow2((len as f64).sqrt() * g.uniform(0.5, 2.0)).min(len);
            // At most `len * s + len^2 / (2 s)` nonzeros, least at `s = sqrt(len / 2)`.
            let bound = |s: usize| len * s + len * len / (2 * s);
            let best = pow2((len as f64 / 2.0).sqrt()).min(len);
            while bound(s) > MAX_NNZ && s != best {
                s = if s > best { s / 2 } else { s * 2 };
            }
            for i in 0..len {
                for j in (i + 1).saturating_sub(s)..=i {
                    pat.push(i, j);
                }
                let mut j = i;
                while j >= s {
                    j -= s;
                    pat.push(i, j);
                }
            }
            ("strided", vec![("stride", s.to_string())])
        }
        2 => {
            let global = 1 + g.below(2);
            let random = 1 + g.below(3);
            let mut b = [16, 32, 64][g.below(3)];
            while b > 8 && (len + b) * b * (3 + random + 2 * global) > MAX_NNZ {
                b /= 2;
            }
            let nb = len.div_ceil(b);
            let block = |bi: usize, bj: usize, pat: &mut Pattern| {
                for i in bi * b..(bi + 1) * b {
                    for j in bj * b..(bj + 1) * b {
                        pat.push(i, j);
                    }
                }
            };
            for bi in 0..nb {
                let mut cols: Vec<usize> = (bi.saturating_sub(1)..=(bi + 1).min(nb - 1)).collect();
                cols.extend(0..global.min(nb));
                cols.extend((0..random).map(|_| g.below(nb)));
                if bi < global {
                    cols.extend(0..nb);
                }
                cols.sort_unstable();
                cols.dedup();
                for bj in cols {
                    block(bi, bj, &mut pat);
                }
            }
            (
                "bigbird",
                vec![
                    ("block", b.to_string()),
                    ("global_blocks", global.to_string()),
                    ("random_blocks", random.to_string()),
                ],
            )
        }
        _ => {
            let w = (g.log_uniform(16.0, 512.0).round() as usize)
                .min(budget)
                .clamp(1, len);
            for i in 0..len {
                for j in (i + 1).saturating_sub(w)..=i {
                    pat.push(i, j);
                }
            }
            ("causal", vec![("window", w.to_string())])
        }
    };
    pairs.insert(0, ("seq", len.to_string()));
    Member {
        variant: variant.to_string(),
        params: params(&pairs),
        coo: pat.finish(g),
    }
}
