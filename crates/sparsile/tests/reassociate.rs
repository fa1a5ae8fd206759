//! SpMV through the `rowwise` recipe, whose loop over a row's non-zeros is
//! `vectorized(reassociate)`: compiled and compared with the reference interpreter with a
//! relative tolerance (the partial sums change the rounding) on seeded random matrices —
//! empty rows, an empty matrix, one row holding most non-zeros (1000+), row lengths
//! that are not multiples of 8 or 16 — in f32 and f64, with 1 and 2 threads, with the
//! scalar part in order or split into 3 or 4 partial sums (`scalar_sums`), and with the
//! whole row in masked vector blocks (`masked`, the default; on AVX-512 hosts) or not.
//! The generated C sums long rows in lanes, `reassociate=off` leaves them out, and the
//! masked blocks sit under a preprocessor condition beside the unmasked code, which
//! `reassociate_without_avx512.rs` runs.
//! Without a C compiler the compiled checks print that they skipped.

mod support;

use std::collections::HashMap;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::{compile_recipe, Stage};
use support::{check_kernel, dense, have_compiler, rng};

fn spmv(dtype: DType) -> String {
    let t = if dtype == DType::F32 { "f32" } else { "f64" };
    format!("tensor A: {t}[m, n] csr\ntensor x: {t}[n]\ntensor y: {t}[m]\ny[i] = A[i,j] * x[j]\n")
}

/// A matrix of `kind` (see the module docs).
fn matrix(kind: &str, m: usize, n: usize, g: &mut ChaCha8Rng) -> CooTensor {
    let mut t = Vec::new();
    let row = |i: usize, len: usize, g: &mut ChaCha8Rng, t: &mut Vec<(usize, usize, f64)>| {
        let start = g.random_range(0..n);
        for k in 0..len.min(n) {
            t.push((i, (start + k * 7) % n, g.random_range(-1.0..1.0)));
        }
    };
    match kind {
        "empty" => {}
        // Every third row empty, the others of up to 40 non-zeros.
        "random" => {
            for i in 0..m {
                if i % 3 != 1 {
                    let len = g.random_range(1..41);
                    row(i, len, g, &mut t);
                }
            }
        }
        // One row of nearly all columns, the others short.
        "one_long_row" => {
            for i in 0..m {
                let len = if i == m / 3 {
                    n - 3
                } else {
                    g.random_range(0..5)
                };
                row(i, len, g, &mut t);
            }
        }
        // Row i has 7 * i + 1 non-zeros (1, 8, 15, 22, …): around every vector width.
        _ => {
            for i in 0..m {
                row(i, 7 * i + 1, g, &mut t);
            }
        }
    }
    // Columns repeat for long rows with a stride sharing a factor with n: keep the first.
    t.sort_by_key(|&(i, j, _)| (i, j));
    t.dedup_by_key(|&mut (i, j, _)| (i, j));
    CooTensor::from_triplets(vec![m, n], &t).unwrap()
}

fn inputs(
    kind: &str,
    m: usize,
    n: usize,
    dtype: DType,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    let mut g = rng(seed);
    let coo = matrix(kind, m, n, &mut g);
    HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&coo, &Format::Csr, dtype).unwrap(),
        ),
        ("x".to_string(), dense(&[n], dtype, &mut g)),
    ])
}

const SHAPES: [(&str, usize, usize); 6] = [
    ("random", 29, 53),
    ("empty", 7, 5),
    ("empty", 0, 4),
    ("one_long_row", 23, 1203),
    ("one_long_row", 5, 2000),
    ("ragged", 19, 211),
];

#[test]
fn rowwise_spmv_matches_the_interpreter() {
    if !have_compiler() {
        return;
    }
    for dtype in [DType::F32, DType::F64] {
        let program = spmv(dtype);
        for (s, (kind, m, n)) in SHAPES.into_iter().enumerate() {
            let inputs = inputs(kind, m, n, dtype, 40 + s as u64);
            for (recipe, kind_text) in [
                ("rowwise", "vectorized(reassociate, masked) {"),
                ("rowwise:masked=off", "vectorized(reassociate) {"),
                (
                    "rowwise:scalar_sums=4",
                    "vectorized(reassociate, scalar_sums=4, masked) {",
                ),
                (
                    "rowwise:scalar_sums=3,masked=off",
                    "vectorized(reassociate, scalar_sums=3) {",
                ),
            ] {
                let what = format!("{recipe} spmv {dtype} {kind} {m}x{n}");
                let kernel = compile_recipe(&program, &inputs, recipe)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let stage2 = kernel.ir(Stage::Stage2);
                assert!(stage2.contains(kind_text), "{what}:\n{stage2}");
                check_kernel(&kernel, &program, &inputs, dtype, &what);
            }
        }
    }
}

#[test]
fn the_c_sums_long_rows_in_register_lanes() {
    if !have_compiler() {
        return;
    }
    let program = spmv(DType::F32);
    let inputs = inputs("random", 29, 53, DType::F32, 7);
    let kernel = compile_recipe(&program, &inputs, "rowwise:masked=off").unwrap();
    let c = kernel.ir(Stage::C);
    assert!(!c.contains("_mm512"), "{c}");
    assert!(c.contains("float y_local_acc_lanes[16];"), "{c}");
    assert!(c.contains("float y_local_acc = y_local[0];"), "{c}");
    assert!(
        c.contains("y_local_acc = y_local_acc + A[j_p] * x[j];"),
        "{c}"
    );
    assert!(c.contains("y_local[0] = y_local_acc;"), "{c}");
    let off = compile_recipe(&program, &inputs, "rowwise:reassociate=off").unwrap();
    let c = off.ir(Stage::C);
    assert!(!c.contains("_lanes"), "{c}");
    assert!(!off.ir(Stage::Stage2).contains("vectorized(reassociate)"));
    check_kernel(
        &off,
        &program,
        &inputs,
        DType::F32,
        "rowwise:reassociate=off",
    );
}

#[test]
fn masked_rows_are_vector_blocks_beside_the_unmasked_code() {
    if !have_compiler() {
        return;
    }
    let program = spmv(DType::F64);
    let inputs = inputs("ragged", 19, 211, DType::F64, 8);
    let kernel = compile_recipe(&program, &inputs, "rowwise").unwrap();
    let c = kernel.ir(Stage::C);
    // Eight f64 lanes per block (four in the last one of a short row), the gather's
    // indices loaded as 32-bit lanes; the unmasked code stays for targets without AVX-512.
    assert!(
        c.contains("#if defined(__AVX512F__) && defined(__AVX512VL__)"),
        "{c}"
    );
    assert!(c.contains("_mm512_mask_i32gather_pd("), "{c}");
    assert!(c.contains("_mm256_maskz_loadu_epi32("), "{c}");
    assert!(c.contains("_mm256_mmask_i32gather_pd("), "{c}");
    assert!(c.contains("_mm_maskz_loadu_epi32("), "{c}");
    assert!(c.contains("#else"), "{c}");
    assert!(c.contains("double y_local_acc_lanes[16];"), "{c}");
    check_kernel(&kernel, &program, &inputs, DType::F64, "rowwise masked f64");
}

#[test]
fn a_compound_row_expression_is_masked_too() {
    if !have_compiler() {
        return;
    }
    // Every load is contiguous or gathered, so the whole addend runs in masked lanes.
    let program = "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * A[i,j] * x[j] + x[j]\n";
    let inputs = inputs("random", 29, 53, DType::F32, 9);
    let kernel = compile_recipe(program, &inputs, "rowwise").unwrap();
    assert!(kernel.ir(Stage::C).contains("_mm512_mask_add_ps"));
    check_kernel(
        &kernel,
        program,
        &inputs,
        DType::F32,
        "rowwise masked A*A*x + x",
    );
}
