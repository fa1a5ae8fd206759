//! The training corpus: determinism, validity, naming, scaling and the structural
//! properties each family claims.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use sparsile_formats::stats::BLOCK_SIZES;
use sparsile_formats::MatrixStats;
use sparsile_tune::corpus::{corpus, corpus_of, families, CorpusMatrix, CorpusSpec, MAX_NNZ};

fn spec(seed: u64, scale: f64, per_family: usize) -> CorpusSpec {
    CorpusSpec {
        seed,
        scale,
        per_family,
    }
}

/// The value of `key` in a member's `key=value` parameters.
fn param<'a>(m: &'a CorpusMatrix, key: &str) -> &'a str {
    m.params
        .split(' ')
        .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("{}: no parameter `{key}` in `{}`", m.name, m.params))
}

fn num(m: &CorpusMatrix, key: &str) -> usize {
    param(m, key).parse().unwrap()
}

/// Checks that a matrix is canonical with values in [-1, 1].
fn check_canonical(m: &CorpusMatrix) {
    let coo = &m.coo;
    assert_eq!(coo.shape.len(), 2, "{}", m.name);
    assert_eq!(coo.coords.len(), 2 * coo.values.len(), "{}", m.name);
    assert!(coo.nnz() <= MAX_NNZ, "{}: {} nonzeros", m.name, coo.nnz());
    coo.check_ranges()
        .unwrap_or_else(|e| panic!("{}: {e}", m.name));
    for e in 1..coo.nnz() {
        assert!(
            coo.coord(e - 1) < coo.coord(e),
            "{}: entries {} and {e} not strictly increasing",
            m.name,
            e - 1
        );
    }
    for &v in &coo.values {
        assert!(
            v.is_finite() && (-1.0..=1.0).contains(&v),
            "{}: {v}",
            m.name
        );
    }
}

fn stats(m: &CorpusMatrix) -> MatrixStats {
    MatrixStats::of(&m.coo).unwrap_or_else(|e| panic!("{}: {e}", m.name))
}

fn row_lengths(m: &CorpusMatrix) -> Vec<usize> {
    let mut len = vec![0; m.coo.shape[0]];
    for e in 0..m.coo.nnz() {
        len[m.coo.coords[2 * e]] += 1;
    }
    len
}

fn of_family<'a>(all: &'a [CorpusMatrix], family: &str) -> Vec<&'a CorpusMatrix> {
    all.iter().filter(|m| m.family == family).collect()
}

#[test]
fn same_spec_gives_the_same_corpus() {
    let a = corpus(&spec(7, 0.05, 3));
    let b = corpus(&spec(7, 0.05, 3));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            (&x.name, x.family, &x.params),
            (&y.name, y.family, &y.params)
        );
        assert_eq!(x.coo, y.coo, "{}", x.name);
    }
    let c = corpus(&spec(8, 0.05, 3));
    let differing = a.iter().zip(&c).filter(|(x, y)| x.coo != y.coo).count();
    // Only the empty matrices may coincide across seeds.
    assert!(
        differing >= a.len() - 3,
        "{differing} of {} differ",
        a.len()
    );
}

#[test]
fn every_family_has_per_family_members_in_order() {
    let all = corpus(&spec(1, 0.05, 5));
    assert_eq!(all.len(), 5 * families().len());
    for (f, (family, description)) in families().iter().enumerate() {
        assert!(!description.is_empty());
        let members = &all[5 * f..5 * (f + 1)];
        for (k, m) in members.iter().enumerate() {
            assert_eq!(m.family, *family);
            assert!(
                m.name.starts_with(&format!("{family}-{k:03}-")),
                "{}",
                m.name
            );
        }
    }
    assert!(corpus(&spec(1, 0.05, 0)).is_empty());
}

#[test]
fn every_matrix_is_canonical_and_has_statistics() {
    for m in corpus(&spec(2, 0.05, 8)) {
        check_canonical(&m);
        let s = stats(&m);
        assert_eq!(
            (s.rows, s.cols, s.nnz),
            (m.coo.shape[0], m.coo.shape[1], m.coo.nnz())
        );
        assert!(!m.params.is_empty());
    }
}

#[test]
fn names_are_unique_and_stable() {
    let all = corpus(&spec(3, 0.05, 10));
    let names: HashSet<&str> = all.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names.len(), all.len());
    // Member k does not depend on how many members are asked for.
    let few = corpus(&spec(3, 0.05, 2));
    for m in &few {
        let same = all.iter().find(|a| a.name == m.name).unwrap();
        assert_eq!(same.coo, m.coo, "{}", m.name);
        assert_eq!(same.params, m.params);
    }
}

#[test]
fn sizes_shrink_with_scale() {
    let small = corpus(&spec(4, 0.05, 8));
    let large = corpus(&spec(4, 0.2, 8));
    let (mut rows_small, mut rows_large) = (0, 0);
    for (s, l) in small.iter().zip(&large) {
        assert_eq!(s.name, l.name);
        assert!(s.coo.shape[0] <= l.coo.shape[0], "{}", s.name);
        assert!(s.coo.shape[1] <= l.coo.shape[1], "{}", s.name);
        if s.coo.shape[0] > 1 {
            assert!(s.coo.shape[0] >= 8, "{}", s.name);
        }
        rows_small += s.coo.shape[0];
        rows_large += l.coo.shape[0];
    }
    assert!(
        rows_large as f64 > 3.0 * rows_small as f64,
        "{rows_small} vs {rows_large}"
    );
    let total = |c: &[CorpusMatrix]| c.iter().map(|m| m.coo.nnz()).sum::<usize>();
    assert!(total(&large) > 3 * total(&small));
}

#[test]
fn out_of_range_scales_are_clamped() {
    for scale in [0.0, -1.0, f64::NAN] {
        for m in corpus(&spec(5, scale, 2)) {
            check_canonical(&m);
            assert!(m.coo.shape.iter().all(|&d| d <= 64), "{}", m.name);
        }
    }
}

#[test]
fn graph_families_have_hubs() {
    let all = corpus(&spec(6, 0.05, 8));
    // Chung-Lu power laws are heavier-tailed than the mildest R-MAT settings.
    for (family, ratio) in [("powerlaw", 5.0), ("rmat", 3.0)] {
        for m in of_family(&all, family) {
            let s = stats(m);
            assert!(
                s.row_length_max as f64 > ratio * s.row_length_mean,
                "{}: max {} mean {:.1}",
                m.name,
                s.row_length_max,
                s.row_length_mean
            );
            let symmetric = param(m, "symmetric") == "true";
            assert_eq!(s.structurally_symmetric, Some(symmetric), "{}", m.name);
        }
    }
}

#[test]
fn uniform_rows_are_binomial() {
    for m in of_family(&corpus(&spec(7, 0.05, 8)), "uniform") {
        let s = stats(m);
        let mean = s.row_length_mean;
        assert!(
            (s.row_length_max as f64) <= mean + 8.0 * mean.sqrt() + 8.0,
            "{}: max {} mean {mean:.2}",
            m.name,
            s.row_length_max
        );
        match m.name.rsplit('-').next().unwrap() {
            "tall" => assert!(s.rows > s.cols),
            "wide" => assert!(s.rows < s.cols),
            _ => assert_eq!(s.rows, s.cols),
        }
    }
}

#[test]
fn banded_matrices_stay_in_their_band() {
    for m in of_family(&corpus(&spec(8, 0.05, 8)), "banded") {
        let (lower, upper) = (num(m, "lower"), num(m, "upper"));
        for e in 0..m.coo.nnz() {
            let (i, j) = (m.coo.coords[2 * e], m.coo.coords[2 * e + 1]);
            assert!(j + lower >= i && j <= i + upper, "{}: ({i}, {j})", m.name);
        }
        let s = stats(m);
        assert_eq!(s.empty_rows, 0, "{}", m.name);
        if param(m, "fill") == "1.00" {
            let n = s.rows;
            let full: usize = (0..n)
                .map(|i| (i + upper).min(n - 1) + 1 - i.saturating_sub(lower))
                .sum();
            assert_eq!(s.nnz, full, "{}", m.name);
        }
    }
}

#[test]
fn stencils_have_their_point_counts() {
    for m in of_family(&corpus(&spec(9, 0.05, 8)), "stencil") {
        let s = stats(m);
        let points: usize = param(m, "stencil")[2..].parse().unwrap();
        let grid: usize = param(m, "grid")
            .split('x')
            .map(|d| d.parse::<usize>().unwrap())
            .product();
        assert_eq!(s.rows, grid);
        assert_eq!(s.row_length_max, points, "{}", m.name);
        let permutation = param(m, "permutation");
        let symmetric = s.structurally_symmetric == Some(true);
        assert_eq!(symmetric, permutation != "rowcol", "{}", m.name);
        if permutation == "none" {
            assert!(s.bandwidth < s.rows / 2, "{}", m.name);
        }
    }
}

#[test]
fn full_blocks_are_dense_at_their_block_size() {
    let all = corpus(&spec(10, 0.05, 16));
    let mut checked = 0;
    for m in of_family(&all, "blocks") {
        let (r, c) = param(m, "block").split_once('x').unwrap();
        let (r, c): (usize, usize) = (r.parse().unwrap(), c.parse().unwrap());
        let s = stats(m);
        assert_eq!((s.rows % r, s.cols % c), (0, 0), "{}", m.name);
        let fill: f64 = param(m, "block_fill").parse().unwrap();
        if r == c && BLOCK_SIZES.contains(&r) {
            let b = s.blocks.iter().find(|b| b.r == r).unwrap();
            if fill == 1.0 {
                assert!(b.dense_block_fraction > 0.999, "{}: {b:?}", m.name);
                checked += 1;
            } else {
                assert!(b.dense_block_fraction < 0.5, "{}: {b:?}", m.name);
                assert!((b.fill_ratio - fill).abs() < 0.1, "{}: {b:?}", m.name);
            }
        }
    }
    assert!(checked >= 2, "only {checked} full-block members");
}

#[test]
fn pruned_masks_follow_their_style() {
    for m in of_family(&corpus(&spec(11, 0.05, 10)), "pruned") {
        let (rows, cols) = (m.coo.shape[0], m.coo.shape[1]);
        assert!(
            (8..=205).contains(&rows) && (8..=205).contains(&cols),
            "{}",
            m.name
        );
        let lengths = row_lengths(m);
        match param(m, "style") {
            "rows" => assert!(lengths.iter().all(|&l| l == 0 || l == cols), "{}", m.name),
            "cols" => assert!(lengths.windows(2).all(|w| w[0] == w[1]), "{}", m.name),
            "nm" => {
                let (n, mm) = param(m, "n:m").split_once(':').unwrap();
                let (n, mm): (usize, usize) = (n.parse().unwrap(), mm.parse().unwrap());
                let mut groups = BTreeMap::new();
                for e in 0..m.coo.nnz() {
                    let (i, j) = (m.coo.coords[2 * e], m.coo.coords[2 * e + 1]);
                    *groups.entry((i, j / mm)).or_insert(0) += 1;
                }
                for ((_, g), count) in groups {
                    assert_eq!(count, n.min(cols - g * mm), "{}", m.name);
                }
                assert_eq!(
                    m.coo.nnz(),
                    rows * (0..cols)
                        .step_by(mm)
                        .map(|s| n.min(cols - s))
                        .sum::<usize>()
                );
            }
            "iid" | "block" => {
                let sparsity: f64 = param(m, "sparsity").parse().unwrap();
                assert!((0.5..=0.98).contains(&sparsity), "{}", m.name);
                let measured = 1.0 - stats(m).density;
                assert!((measured - sparsity).abs() < 0.25, "{}: {measured}", m.name);
            }
            other => panic!("{}: unknown style {other}", m.name),
        }
    }
}

#[test]
fn attention_masks_follow_their_pattern() {
    for m in of_family(&corpus(&spec(12, 0.05, 8)), "attention") {
        let s = stats(m);
        let seq = num(m, "seq");
        assert_eq!((s.rows, s.cols), (seq, seq), "{}", m.name);
        let variant = m.name.rsplit('-').next().unwrap();
        let above = (0..m.coo.nnz()).any(|e| m.coo.coords[2 * e + 1] > m.coo.coords[2 * e]);
        match variant {
            "causal" => assert!(!above, "{}", m.name),
            "strided" => {
                assert!(!above, "{}", m.name);
                let st = num(m, "stride");
                assert!(st.is_power_of_two(), "{}: stride {st}", m.name);
                // The previous `st` keys, and every `st`-th key before them.
                assert!((0..m.coo.nnz()).all(|e| {
                    let d = m.coo.coords[2 * e] - m.coo.coords[2 * e + 1];
                    d < st || d % st == 0
                }));
            }
            "local" => {
                assert_eq!(s.bandwidth, num(m, "window").min(seq - 1), "{}", m.name);
                assert_eq!(s.structurally_symmetric, Some(true));
            }
            "bigbird" => assert_eq!(s.empty_rows, 0, "{}", m.name),
            "dilated" => {
                let d = num(m, "dilation");
                assert!((0..m.coo.nnz())
                    .all(|e| m.coo.coords[2 * e].abs_diff(m.coo.coords[2 * e + 1]) % d == 0));
            }
            other => panic!("{}: unknown pattern {other}", m.name),
        }
    }
}

#[test]
fn irregular_matrices_cover_the_corner_cases() {
    let all = corpus(&spec(13, 0.05, 8));
    let irregular = of_family(&all, "irregular");
    let mut seen = HashSet::new();
    for m in &irregular {
        let s = stats(m);
        if s.rows > 0 && s.empty_rows * 2 >= s.rows && s.nnz > 0 {
            seen.insert("half the rows empty");
        }
        if s.nnz > 0 && s.row_length_max * 4 >= s.nnz && s.rows > 1 {
            seen.insert("one row holds a quarter");
        }
        if s.nnz == 0 {
            seen.insert("no nonzeros");
        }
        if s.rows == 1 && s.nnz > 0 {
            seen.insert("single row");
        }
        if s.cols == 1 && s.nnz > 0 {
            seen.insert("single column");
        }
        if s.rows >= 8 * s.cols && s.cols > 1 {
            seen.insert("tall");
        }
        if s.cols >= 8 * s.rows && s.rows > 1 {
            seen.insert("wide");
        }
    }
    assert_eq!(seen.len(), 7, "seen only {seen:?}");
}

/// Generates the full-size corpus, checks it and prints its size and generation time
/// (run with `--ignored`; a timing is a measurement, not an assertion).
#[test]
#[ignore]
fn full_scale_corpus() {
    let start = Instant::now();
    let all = corpus(&spec(0, 1.0, 8));
    let elapsed = start.elapsed();
    let total: usize = all.iter().map(|m| m.coo.nnz()).sum();
    println!(
        "full corpus: {} matrices, {total} nonzeros, generated in {elapsed:.2?}",
        all.len()
    );
    for (family, _) in families() {
        let members = of_family(&all, family);
        let nnz: Vec<usize> = members.iter().map(|m| m.coo.nnz()).collect();
        let rows: Vec<usize> = members.iter().map(|m| m.coo.shape[0]).collect();
        println!("{family:>10}: rows {rows:?}\n{:>10}  nnz  {nnz:?}", "");
    }
    for m in &all {
        check_canonical(m);
        stats(m);
    }
    // At full size the hubs of power-law graphs hold thousands of edges.
    let hub = of_family(&all, "powerlaw")
        .iter()
        .map(|m| stats(m).row_length_max)
        .max()
        .unwrap();
    println!("largest power-law hub: {hub} nonzeros");
    assert!(hub >= 2_000);
    let start = Instant::now();
    let small = corpus(&spec(0, 0.05, 8));
    println!(
        "scale 0.05: {} nonzeros, generated in {:.2?}",
        small.iter().map(|m| m.coo.nnz()).sum::<usize>(),
        start.elapsed()
    );
}

#[test]
fn a_chosen_family_is_the_corpus_members_of_that_family() {
    let s = spec(5, 0.05, 3);
    let all = corpus(&s);
    let some = corpus_of(&s, |f| f == "attention" || f == "mesh");
    let expected: Vec<&CorpusMatrix> = all
        .iter()
        .filter(|m| m.family == "attention" || m.family == "mesh")
        .collect();
    assert_eq!(some.len(), 6);
    assert_eq!(some.len(), expected.len());
    for (a, b) in some.iter().zip(expected) {
        assert_eq!((&a.name, &a.coo), (&b.name, &b.coo));
    }
    assert!(corpus_of(&s, |_| false).is_empty());
}

#[test]
fn embedding_masks_are_tall_or_wide_and_follow_their_variant() {
    let all = corpus(&spec(13, 0.05, 9));
    let members = of_family(&all, "embedding");
    assert_eq!(members.len(), 9);
    for m in members {
        let (rows, cols) = (m.coo.shape[0], m.coo.shape[1]);
        let (vocab, width) = (num(m, "vocab"), num(m, "width"));
        // At scale 0.05: a vocabulary of 410 to 3,277 tokens, a width of 8 to 51.
        assert!((400..=3_300).contains(&vocab), "{}: vocab {vocab}", m.name);
        assert!((8..=52).contains(&width), "{}: width {width}", m.name);
        let variant = m.name.rsplit('-').next().unwrap();
        if variant == "projection" {
            assert_eq!((rows, cols), (width, vocab), "{}", m.name);
        } else {
            assert_eq!((rows, cols), (vocab, width), "{}", m.name);
        }
        let sparsity: f64 = param(m, "sparsity").parse().unwrap();
        assert!((0.5..=0.98).contains(&sparsity), "{}", m.name);
        let lengths = row_lengths(m);
        if variant == "zipf" {
            // Frequent tokens (the first rows) keep more weights than rare ones.
            let quarter = rows / 4;
            let head: usize = lengths[..quarter].iter().sum();
            let tail: usize = lengths[rows - quarter..].iter().sum();
            assert!(head > tail, "{}: head {head}, tail {tail}", m.name);
        } else {
            let measured = 1.0 - stats(m).density;
            assert!((measured - sparsity).abs() < 0.05, "{}: {measured}", m.name);
        }
    }
}
