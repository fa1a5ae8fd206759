//! `decompose_format` and `horizontal_fuse` checked against the stage-I interpreter on
//! the original program: SpMM and SpMV with `A` decomposed by hyb(c, k), by nested dense
//! tiles and the rest (`tiles(…)`, `blocks(…)`) and converted to DBSR, SR-BCRS, ELL and
//! CSR (one-rule conversions), on seeded random matrices with
//! empty rows, an empty matrix, one huge row, and sizes that divide neither `c` nor the
//! bucket widths. The scheduled stage-I program runs on the interpreter (which derives
//! the parts from `A`), and its stage-II and stage-III forms (after `horizontal_fuse` of
//! the parts for hyb) on `flat_interp`, with the parts derived from `A`.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::decompose::{DecomposeRule, TileLevel};
use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::coord::{Program, Stmt};
use sparsile_ir::loops::Func;
use sparsile_runtime::interp::derived::derive_inputs;
use sparsile_runtime::{interpret, InterpOptions};
use sparsile_transform::schedule::Schedule;

const SPMM: &str =
    "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
const SPMV: &str =
    "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n";

/// The shape of a random sparse matrix.
#[derive(Clone, Copy, Debug)]
enum Pattern {
    /// Entries kept with probability `density`, every third row empty.
    Random(f64),
    /// No entries at all.
    Empty,
    /// Row 1 (row 0 of a one-row matrix) full, the others sparse.
    HugeRow,
}

fn matrix(m: usize, n: usize, pattern: Pattern, rng: &mut ChaCha8Rng) -> CooTensor {
    let mut triplets = Vec::new();
    for i in 0..m {
        for j in 0..n {
            let keep = match pattern {
                Pattern::Random(d) => i % 3 != 1 && rng.random::<f64>() < d,
                Pattern::Empty => false,
                Pattern::HugeRow => i == 1.min(m - 1) || rng.random::<f64>() < 0.1,
            };
            if keep {
                triplets.push((i, j, rng.random_range(-8..=8) as f64 * 0.25 + 0.125));
            }
        }
    }
    CooTensor::from_triplets(vec![m, n], &triplets).unwrap()
}

fn dense(shape: &[usize], rng: &mut ChaCha8Rng) -> SparseTensor<'static> {
    let total: usize = shape.iter().product();
    let values: Vec<f64> = (0..total)
        .map(|_| rng.random_range(-8..=8) as f64 * 0.5)
        .collect();
    SparseTensor::dense_from_f64(shape, &values, sparsile_ir::DType::F64).unwrap()
}

fn inputs(
    text: &str,
    m: usize,
    n: usize,
    pattern: Pattern,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = SparseTensor::from_coo(&matrix(m, n, pattern, &mut rng), &Format::Csr).unwrap();
    let mut map = HashMap::from([("A".to_string(), a)]);
    if text == SPMM {
        map.insert("B".to_string(), dense(&[n, 5], &mut rng));
    } else {
        map.insert("x".to_string(), dense(&[n], &mut rng));
    }
    map
}

fn params(program: &Program, m: usize, n: usize) -> HashMap<String, i64> {
    [("m", m), ("n", n), ("k", 5)]
        .into_iter()
        .filter(|(p, _)| program.param_by_name(p).is_some())
        .map(|(p, v)| (p.to_string(), v as i64))
        .collect()
}

fn block_names(func: &Func) -> Vec<String> {
    func.body
        .iter()
        .filter_map(|s| match s {
            sparsile_ir::loops::Stmt::Block { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// A block of a decomposition part: `<iteration>_p<N>`.
fn is_part_block(name: &str) -> bool {
    name.rsplit_once("_p")
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn close(have: &[f64], want: &[f64], what: &str) {
    assert_eq!(have.len(), want.len(), "{what}: value count");
    for (k, (h, w)) in have.iter().zip(want).enumerate() {
        assert!(
            (h - w).abs() <= 1e-9 * (1.0 + w.abs()),
            "{what}[{k}]: got {h}, expected {w}"
        );
    }
}

/// Decomposes `A` by `rule`, fuses the parts horizontally when there are several, and
/// checks every stage against the interpreter on the original program.
fn check(text: &str, rule: DecomposeRule, m: usize, n: usize, pattern: Pattern, seed: u64) {
    let what = format!("{rule} on {m}x{n} {pattern:?} (seed {seed})");
    let program = sparsile::compile_notation(text).unwrap();
    let inputs = inputs(text, m, n, pattern, seed);
    let options = InterpOptions {
        params: params(&program, m, n),
        ..InterpOptions::default()
    };
    let expected = interpret(&program, &inputs, &options).unwrap();
    let out = if text == SPMM { "C" } else { "y" };
    let want = expected[out].to_dense_f64();
    if !matches!(pattern, Pattern::Empty) {
        assert!(
            want.iter().any(|v| *v != 0.0),
            "{what}: a zero result cannot fail"
        );
    }

    let mut sch = Schedule::new(&program);
    sch.decompose_format("A", rule.clone())
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let scheduled = sch.program().clone();
    assert_eq!(scheduled.derived.len(), rule.num_parts(), "{what}");
    let got = interpret(&scheduled, &inputs, &options).unwrap_or_else(|e| {
        panic!("{what}: interpreter on the decomposed program: {e}\n{scheduled}")
    });
    close(&got[out].to_dense_f64(), &want, &format!("{what}: stage I"));

    // Stage II: fuse the part blocks (every block after the init block).
    sch.func_or_lower().unwrap();
    let parts: Vec<String> = block_names(sch.func().unwrap())
        .into_iter()
        .filter(|b| is_part_block(b))
        .collect();
    assert_eq!(parts.len(), rule.num_parts(), "{what}: {parts:?}");
    if parts.len() > 1 {
        sch.horizontal_fuse(&parts)
            .unwrap_or_else(|e| panic!("{what}: {e}\n{}", sch.func().unwrap()));
    }
    let stage2 = sch.func().unwrap().clone();
    let stage3 = sparsile_transform::lower_buffers(&stage2).unwrap();
    let mut all: HashMap<String, SparseTensor<'_>> =
        inputs.iter().map(|(k, t)| (k.clone(), t.view())).collect();
    all.extend(derive_inputs(&scheduled, &inputs, None).unwrap());
    for (label, func) in [("stage II", &stage2), ("stage III", &stage3)] {
        let got = sparsile_runtime::flat_interp::run(func, &scheduled, &all, &options)
            .unwrap_or_else(|e| panic!("{what}: {label}: {e}\n{func}"));
        close(&got[out].to_dense_f64(), &want, &format!("{what}: {label}"));
    }

    // The trace replays to the identical program and function.
    let json = sch.trace().to_json();
    let replayed = sparsile_transform::Trace::from_json(&json)
        .unwrap()
        .replay(&program)
        .unwrap();
    assert_eq!(
        replayed.program(),
        sch.program(),
        "{what}: replayed program"
    );
    assert_eq!(
        replayed.func().unwrap().to_string(),
        stage2.to_string(),
        "{what}: replayed function"
    );
    // One init iteration plus one per part.
    let iterations = scheduled
        .body
        .iter()
        .filter(|s| matches!(s, Stmt::Iteration(_)))
        .count();
    assert_eq!(iterations, rule.num_parts() + 1, "{what}");
}

fn hyb(c: usize, k: u32) -> DecomposeRule {
    DecomposeRule::Hyb { c, k }
}

fn convert(format: &str) -> DecomposeRule {
    DecomposeRule::Convert {
        format: format.to_string(),
    }
}

#[test]
fn hyb_spmm_matches_the_interpreter() {
    let mut seed = 1;
    for (c, k) in [(1, 0), (1, 2), (2, 1), (3, 2), (1, 5)] {
        for (m, n) in [(7, 11), (13, 5), (1, 9)] {
            for pattern in [Pattern::Random(0.4), Pattern::HugeRow] {
                check(SPMM, hyb(c, k), m, n, pattern, seed);
                seed += 1;
            }
        }
    }
}

#[test]
fn hyb_spmv_matches_the_interpreter() {
    for (seed, (c, k)) in [(1, 1), (2, 3), (4, 0)].into_iter().enumerate() {
        check(SPMV, hyb(c, k), 17, 23, Pattern::HugeRow, seed as u64);
        check(
            SPMV,
            hyb(c, k),
            9,
            6,
            Pattern::Random(0.5),
            seed as u64 + 10,
        );
    }
}

fn tiles(levels: &[(usize, usize, u32)]) -> DecomposeRule {
    DecomposeRule::Tiles {
        levels: levels
            .iter()
            .map(|&(r, c, cost)| TileLevel { r, c, cost })
            .collect(),
    }
}

#[test]
fn tiles_and_blocks_match_the_interpreter() {
    let rules = [
        tiles(&[(4, 4, 3), (2, 2, 2)]),
        tiles(&[(6, 4, 4), (3, 2, 1), (1, 1, 1)]),
        tiles(&[(8, 8, 64)]),
        DecomposeRule::Blocks {
            r: 3,
            c: 2,
            fill: 50,
        },
    ];
    let mut seed = 40;
    for rule in rules {
        for (m, n) in [(13, 11), (5, 17), (1, 9)] {
            for pattern in [Pattern::Random(0.5), Pattern::HugeRow] {
                check(SPMM, rule.clone(), m, n, pattern, seed);
                check(SPMV, rule.clone(), m, n, pattern, seed + 1);
                seed += 2;
            }
        }
    }
    check(SPMM, tiles(&[(4, 4, 2)]), 6, 7, Pattern::Empty, 3);
}

#[test]
fn empty_matrix_decomposes_to_empty_parts() {
    check(SPMM, hyb(2, 2), 6, 7, Pattern::Empty, 3);
    check(SPMM, convert("dbsr:2x2"), 6, 7, Pattern::Empty, 3);
}

#[test]
fn dbsr_conversion_matches_the_interpreter() {
    for (seed, (m, n)) in [(8, 8), (7, 9), (10, 3)].into_iter().enumerate() {
        check(
            SPMM,
            convert("dbsr:2x2"),
            m,
            n,
            Pattern::Random(0.3),
            seed as u64,
        );
        check(
            SPMM,
            convert("dbsr:3x2"),
            m,
            n,
            Pattern::HugeRow,
            seed as u64 + 5,
        );
    }
}

#[test]
fn srbcrs_conversion_matches_the_interpreter() {
    for (seed, (m, n)) in [(8, 8), (7, 9), (10, 3)].into_iter().enumerate() {
        check(
            SPMM,
            convert("srbcrs:2x2"),
            m,
            n,
            Pattern::Random(0.3),
            seed as u64,
        );
        check(
            SPMM,
            convert("srbcrs:4x3"),
            m,
            n,
            Pattern::HugeRow,
            seed as u64 + 5,
        );
    }
}

#[test]
fn ell_and_csr_conversions_match_the_interpreter() {
    check(SPMM, convert("ell"), 9, 7, Pattern::HugeRow, 21);
    check(SPMV, convert("csr"), 9, 7, Pattern::Random(0.4), 22);
    check(SPMM, convert("coo"), 9, 7, Pattern::Random(0.4), 23);
}

/// RGMS `Y[o, c] = Σ_r Σ_i Σ_d M[r, o, i] * X[i, d] * W[r, d, c]` with `M` (relation ×
/// output × input, CSF) decomposed by a 3-D hyb: one bucketed ELL per relation.
fn check_rgms(c: usize, k: u32, seed: u64) {
    let (rels, outs, ins, ci, co) = (3usize, 11usize, 9usize, 2usize, 3usize);
    let text = "tensor M: f64[kk, outs, ins] csf\ntensor X: f64[ins, ci]\ntensor W: f64[kk, ci, co]\ntensor Y: f64[outs, co]\nY[o,c] = M[r,o,i] * X[i,d] * W[r,d,c]\n";
    let program = sparsile::compile_notation(text).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut coo = CooTensor::empty(vec![rels, outs, ins]);
    for r in 0..rels {
        for o in 0..outs {
            for i in 0..ins {
                // Relation 1 has one long row; every third output row is empty.
                let keep = if r == 1 && o == 2 {
                    true
                } else {
                    o % 3 != 0 && rng.random::<f64>() < 0.3
                };
                if keep {
                    coo.coords.extend([r, o, i]);
                    coo.values
                        .push(rng.random_range(-4..=4) as f64 * 0.5 + 0.25);
                }
            }
        }
    }
    let m = SparseTensor::from_coo(&coo, &Format::Csf).unwrap();
    let inputs = HashMap::from([
        ("M".to_string(), m),
        ("X".to_string(), dense(&[ins, ci], &mut rng)),
        ("W".to_string(), dense(&[rels, ci, co], &mut rng)),
    ]);
    let options = InterpOptions::default();
    let want = interpret(&program, &inputs, &options).unwrap()["Y"].to_dense_f64();
    assert!(want.iter().any(|v| *v != 0.0));
    let mut sch = Schedule::new(&program);
    sch.decompose_format("M", hyb(c, k))
        .unwrap_or_else(|e| panic!("{e}\n{program}"));
    let scheduled = sch.program().clone();
    let got = interpret(&scheduled, &inputs, &options).unwrap()["Y"].to_dense_f64();
    close(&got, &want, "rgms stage I");
    sch.func_or_lower().unwrap();
    let parts: Vec<String> = block_names(sch.func().unwrap())
        .into_iter()
        .filter(|b| is_part_block(b))
        .collect();
    if parts.len() > 1 {
        sch.horizontal_fuse(&parts).unwrap();
    }
    let stage2 = sch.func().unwrap().clone();
    let stage3 = sparsile_transform::lower_buffers(&stage2).unwrap();
    let mut all: HashMap<String, SparseTensor<'_>> =
        inputs.iter().map(|(k, t)| (k.clone(), t.view())).collect();
    all.extend(derive_inputs(&scheduled, &inputs, None).unwrap());
    for (label, func) in [("stage II", &stage2), ("stage III", &stage3)] {
        let got = sparsile_runtime::flat_interp::run(func, &scheduled, &all, &options)
            .unwrap_or_else(|e| panic!("{label}: {e}\n{func}"));
        close(&got["Y"].to_dense_f64(), &want, &format!("rgms {label}"));
    }
}

#[test]
fn rgms_with_a_3d_hyb_matches_the_interpreter() {
    check_rgms(1, 2, 1);
    check_rgms(2, 1, 2);
    check_rgms(1, 0, 3);
}
