//! `irregular`: corner cases that break assumptions about row lengths and shapes.
//!
//! Members cycle through eight variants:
//! - `empty-rows`: a given fraction of the rows (0.7, 0.3, 0.9, 0.1, 0.5 in turn) is
//!   empty, the others hold 1 to about 30 random entries;
//! - `arrowhead`: the first `h` rows and columns are full, plus the diagonal (`h = 1`
//!   the first time, so that one row holds about a third of the nonzeros);
//! - `tall` and `wide`: 8 to 64 times more rows than columns, or the reverse;
//! - `empty`: a matrix with no nonzeros;
//! - `single-row` and `single-col`: one row or one column, 1% to 50% filled;
//! - `huge-rows`: 2 to 5 rows filled 20% to 100% over a sparse uniform background.
//!
//! The long dimension has about 2,000 to 150,000 elements at full scale.
//!
//! ```
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.05, per_family: 8 });
//! let empty = all.iter().find(|m| m.name == "irregular-004-empty").unwrap();
//! assert_eq!(empty.coo.nnz(), 0);
//! ```

use super::{params, Gen, Member, Pattern, BUDGET, MAX_NNZ};

const EMPTY_FRACTIONS: [f64; 5] = [0.7, 0.3, 0.9, 0.1, 0.5];

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let round = k / 8;
    let (variant, pat, pairs) = match k % 8 {
        0 => {
            let n = g.dim(2_000.0, 150_000.0);
            let fraction = EMPTY_FRACTIONS[round % EMPTY_FRACTIONS.len()];
            let empty = (fraction * n as f64).round() as usize;
            let order = g.permutation(n);
            // Rows hold fewer than `2 * mean` entries.
            let room = MAX_NNZ as f64 / (2.0 * (n - empty).max(1) as f64);
            let mean = g.log_uniform(2.0, 16.0).min(room).max(1.0);
            let mut pat = Pattern::new(n, n);
            for &i in &order[empty..] {
                let len = 1 + g.below(((2.0 * mean) as usize - 1).max(1));
                for _ in 0..len {
                    let j = g.below(n);
                    pat.push(i, j);
                }
            }
            let pairs = vec![
                ("n", n.to_string()),
                ("empty_rows", empty.to_string()),
                ("mean_nonempty_row", format!("{mean:.1}")),
            ];
            ("empty-rows", pat, pairs)
        }
        1 => {
            let n = g.dim(2_000.0, 150_000.0);
            let h = if round == 0 { 1 } else { 1 + g.below(3) };
            let mut pat = Pattern::new(n, n);
            for i in 0..n {
                if i < h {
                    pat.keys
                        .extend((0..n as u64).map(|j| i as u64 * n as u64 + j));
                } else {
                    (0..h).for_each(|j| pat.push(i, j));
                    pat.push(i, i);
                }
            }
            (
                "arrowhead",
                pat,
                vec![("n", n.to_string()), ("h", h.to_string())],
            )
        }
        v @ (2 | 3) => {
            let long = g.dim(2_000.0, 150_000.0);
            let ratio = g.log_uniform(8.0, 64.0);
            let short = ((long as f64 / ratio).round() as usize).max(8);
            let (rows, cols) = if v == 2 { (long, short) } else { (short, long) };
            let degree = g
                .log_uniform(1.0, 256.0)
                .min(cols as f64 * 0.5)
                .min(BUDGET / rows as f64);
            let density = degree / cols as f64;
            let mut pat = Pattern::new(rows, cols);
            let keys = &mut pat.keys;
            g.bernoulli(rows as u64 * cols as u64, density, |pos| keys.push(pos));
            let pairs = vec![
                ("rows", rows.to_string()),
                ("cols", cols.to_string()),
                ("density", format!("{density:.3e}")),
            ];
            (if v == 2 { "tall" } else { "wide" }, pat, pairs)
        }
        4 => {
            let rows = g.dim(2_000.0, 150_000.0);
            let cols = g.dim(2_000.0, 150_000.0);
            let pairs = vec![("rows", rows.to_string()), ("cols", cols.to_string())];
            ("empty", Pattern::new(rows, cols), pairs)
        }
        v @ (5 | 6) => {
            let n = g.dim(2_000.0, 150_000.0);
            let density = g.uniform(0.01, 0.5);
            let (rows, cols) = if v == 5 { (1, n) } else { (n, 1) };
            let mut pat = Pattern::new(rows, cols);
            let keys = &mut pat.keys;
            g.bernoulli(n as u64, density, |pos| keys.push(pos));
            let pairs = vec![("n", n.to_string()), ("density", format!("{density:.3}"))];
            (if v == 5 { "single-row" } else { "single-col" }, pat, pairs)
        }
        _ => {
            let n = g.dim(2_000.0, 150_000.0);
            let huge = 2 + g.below(4);
            let fill = g.uniform(0.2, 1.0);
            let background = g
                .log_uniform(1.0, 8.0)
                .min(BUDGET / n as f64 - huge as f64)
                .max(0.0);
            let mut pat = Pattern::new(n, n);
            let keys = &mut pat.keys;
            g.bernoulli(n as u64 * n as u64, background / n as f64, |pos| {
                keys.push(pos)
            });
            for _ in 0..huge {
                let i = g.below(n) as u64;
                let keys = &mut pat.keys;
                g.bernoulli(n as u64, fill, |j| keys.push(i * n as u64 + j));
            }
            let pairs = vec![
                ("n", n.to_string()),
                ("background_row", format!("{background:.1}")),
                ("huge_rows", huge.to_string()),
                ("huge_fill", format!("{fill:.2}")),
            ];
            ("huge-rows", pat, pairs)
        }
    };
    Member {
        variant: variant.to_string(),
        params: params(&pairs),
        coo: pat.finish(g),
    }
}
