//! Helpers of the SIMT interpreter's tests: GPU kernels in the text IR (the `.flat` files
//! of this folder) next to their stage-I programs (`.sir`), seeded inputs, and the
//! comparison with the stage-I interpreter.
#![allow(dead_code)]

use std::borrow::Cow;
use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::validate::CheckOptions;
use sparsile_formats::{CooTensor, Format, IndexArray, SparseTensor, Values};
use sparsile_ir::coord::Program;
use sparsile_ir::loops::{Func, Stage};
use sparsile_ir::DType;
use sparsile_runtime::simt::{self, SimtOptions};
use sparsile_runtime::{interpret, InterpOptions, Outputs};

pub type Inputs = HashMap<String, SparseTensor<'static>>;

/// The seeds every differential test runs with: the results must not depend on them.
pub const SEEDS: [u64; 3] = [0, 1, 0x5eed];

/// Relative tolerance against the stage-I interpreter (f32 outputs; the interpreter sums
/// in f64 in another order).
pub const TOL: f64 = 1e-4;

/// The stage-I program and the stage-III GPU function, the latter verified.
pub fn parse(sir: &str, flat: &str) -> (Program, Func) {
    let p: Program = sir.parse().unwrap_or_else(|e| panic!("{e}"));
    let f: Func = flat.parse().unwrap_or_else(|e| panic!("{e}"));
    sparsile_ir::loops::verify_stage(&f, Stage::Flat).unwrap_or_else(|e| {
        panic!(
            "{}",
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    (p, f)
}

pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A value in [-1, 1), never 0.
pub fn nonzero(r: &mut ChaCha8Rng) -> f64 {
    let x: f64 = r.random_range(-1.0..1.0);
    if x == 0.0 {
        0.5
    } else {
        x
    }
}

/// A dense f32 tensor of random values.
pub fn dense(r: &mut ChaCha8Rng, shape: &[usize]) -> SparseTensor<'static> {
    let values: Vec<f64> = (0..shape.iter().product()).map(|_| nonzero(r)).collect();
    SparseTensor::dense_from_f64(shape, &values, DType::F32).unwrap()
}

/// A canonical `m x n` matrix whose row `i` has `len(i)` entries at random columns.
pub fn rows(r: &mut ChaCha8Rng, m: usize, n: usize, len: impl Fn(usize) -> usize) -> CooTensor {
    let mut coo = CooTensor::empty(vec![m, n]);
    for i in 0..m {
        let mut cols: Vec<usize> = (0..n).collect();
        for c in 0..len(i).min(n) {
            let pick = r.random_range(c..n);
            cols.swap(c, pick);
        }
        let mut chosen = cols[..len(i).min(n)].to_vec();
        chosen.sort_unstable();
        for j in chosen {
            coo.coords.extend([i, j]);
            coo.values.push(nonzero(r));
        }
    }
    coo
}

/// A matrix given to the COO constructor with unsorted and duplicate coordinates
/// (duplicates summed), in canonical form.
pub fn from_unsorted_duplicates(r: &mut ChaCha8Rng) -> CooTensor {
    let entries = [
        (3, 1),
        (0, 4),
        (3, 1),
        (1, 0),
        (0, 2),
        (4, 5),
        (2, 5),
        (0, 4),
        (2, 0),
    ];
    let rows: Vec<i32> = entries.iter().map(|e| e.0).collect();
    let cols: Vec<i32> = entries.iter().map(|e| e.1).collect();
    let values: Vec<f32> = entries.iter().map(|_| nonzero(r) as f32).collect();
    let t = SparseTensor::from_coo_arrays(
        &[5, 6],
        vec![
            IndexArray::I32(Cow::Owned(rows)),
            IndexArray::I32(Cow::Owned(cols)),
        ],
        Values::F32(Cow::Owned(values)),
        CheckOptions {
            sort_indices: true,
            sum_duplicates: true,
        },
    )
    .unwrap();
    let coo = t.to_coo().unwrap();
    assert_eq!(coo.nnz(), 7, "two duplicates summed");
    coo
}

/// The matrices every kernel runs on: random, empty rows, no rows, no entries, a row
/// longer than a block and a warp, sizes that divide no block size, and one built from
/// unsorted duplicate coordinates.
pub fn matrices(seed: u64) -> Vec<(&'static str, CooTensor)> {
    let mut r = rng(seed);
    vec![
        ("random 7x9", random(&mut r, 7, 9, 0.3)),
        (
            "empty rows",
            rows(&mut r, 9, 6, |i| if i % 3 == 1 { 0 } else { 2 }),
        ),
        ("no rows", CooTensor::empty(vec![0, 5])),
        ("no entries", CooTensor::empty(vec![4, 3])),
        (
            "one long row",
            rows(&mut r, 6, 300, |i| if i == 2 { 280 } else { i % 2 }),
        ),
        ("odd sizes 37x11", random(&mut r, 37, 11, 0.25)),
        ("unsorted duplicates", from_unsorted_duplicates(&mut r)),
    ]
}

fn random(r: &mut ChaCha8Rng, m: usize, n: usize, density: f64) -> CooTensor {
    let mut coo = CooTensor::empty(vec![m, n]);
    for i in 0..m {
        for j in 0..n {
            if r.random_bool(density) {
                coo.coords.extend([i, j]);
                coo.values.push(nonzero(r));
            }
        }
    }
    coo
}

pub fn csr(coo: &CooTensor) -> SparseTensor<'static> {
    SparseTensor::from_coo_with(coo, &Format::Csr, DType::F32).unwrap()
}

/// Runs `f` with the SIMT interpreter under `seed`, panicking with the error message.
pub fn simt_run(
    f: &Func,
    p: &Program,
    inputs: &Inputs,
    opts: &InterpOptions,
    seed: u64,
) -> Outputs {
    let simt = SimtOptions {
        seed,
        verify_func: true,
    };
    simt::run_with(f, p, inputs, opts, &simt).unwrap_or_else(|e| panic!("seed {seed}: {e}"))
}

/// Runs `f` under every seed and compares output `name` with the stage-I interpreter;
/// with `exact_across_seeds`, every seed must give the same bits.
pub fn check(
    f: &Func,
    p: &Program,
    inputs: &Inputs,
    opts: &InterpOptions,
    name: &str,
    exact_across_seeds: bool,
    what: &str,
) {
    let want = interpret(p, inputs, opts).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut first: Option<Outputs> = None;
    for seed in SEEDS {
        let got = simt_run(f, p, inputs, opts, seed);
        let what = format!("{what}, seed {seed}");
        assert_eq!(
            got[name].structure, want[name].structure,
            "{what}: structure"
        );
        assert_close(
            &got[name].values.to_f64_vec(),
            &want[name].values.to_f64_vec(),
            &what,
        );
        if exact_across_seeds {
            if let Some(first) = &first {
                assert_eq!(
                    got[name].values, first[name].values,
                    "{what}: differs by seed"
                );
            }
        }
        first.get_or_insert(got);
    }
}

pub fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= TOL * w.abs().max(1.0),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}
