//! SpMM through the `rowwise` recipe on block formats (`bsr:RxC`, `dbsr:RxC`) and CSR,
//! whose loop over a block row's blocks (a CSR row's non-zeros) is `register_tiled`: a
//! tile of the output (the output row) held in vector registers across the row. Compiled kernels are compared with the reference
//! interpreter on seeded random matrices — empty rows, an empty matrix, one row holding
//! nearly every column, sizes that are not multiples of the block (the last block row
//! runs the plain loop, the last block column reads `B` under its guard), widths that
//! are not multiples of the tile's vectors (the rest of the width runs the plain loop)
//! or narrower than one vector, and several groups of rows per block (16-row blocks) —
//! in f32 and f64, with 1 and 2 threads. The generated C holds the tile in both the
//! AVX-512 and the 32-byte version; `register_tiled_without_avx512.rs` runs the latter.
//! Without a C compiler the compiled checks print that they skipped.

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::{compile_recipe, Stage};
use support::{check_kernel, dense, have_compiler, matrix, operands, rng};

fn spmm(dtype: DType, format: &str) -> String {
    let t = if dtype == DType::F32 { "f32" } else { "f64" };
    format!(
        "tensor A: {t}[m, n] {format}\ntensor B: {t}[n, k]\ntensor C: {t}[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
    )
}

fn inputs(
    kind: &str,
    (m, n, k): (usize, usize, usize),
    format: &str,
    dtype: DType,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    operands(kind, (m, n), format, dtype, seed, &[("B", &[n, k])])
}

/// Compiles `program` with `recipe`, checks that a loop is `register_tiled` and compares
/// the kernel with the interpreter.
fn check_tiled(
    program: &str,
    inputs: &HashMap<String, SparseTensor<'static>>,
    recipe: &str,
    dtype: DType,
    what: &str,
) {
    let kernel = compile_recipe(program, inputs, recipe).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        kernel.ir(Stage::Stage2).contains("register_tiled {"),
        "{what}:\n{}",
        kernel.ir(Stage::Stage2)
    );
    check_kernel(&kernel, program, inputs, dtype, what);
}

/// (kind, m, n, k): edges off the block sizes, widths around the vector widths (8 and
/// 12: narrower than a 64-byte vector of f32, the 32-byte chunks and their rest).
const SHAPES: [(&str, usize, usize, usize); 9] = [
    ("random", 37, 29, 64),
    ("random", 23, 17, 8),
    ("random", 19, 26, 12),
    ("random", 16, 32, 32),
    ("random", 21, 19, 40),
    ("random", 9, 13, 5),
    ("long_row", 11, 70, 48),
    ("empty", 7, 5, 32),
    ("empty", 0, 4, 32),
];

#[test]
fn block_spmm_holds_the_tile_and_matches_the_interpreter() {
    if !have_compiler() {
        return;
    }
    for dtype in [DType::F32, DType::F64] {
        for format in ["bsr:4x4", "bsr:8x2", "bsr:16x8", "bsr:1x8", "dbsr:4x4"] {
            let program = spmm(dtype, format);
            for (s, (kind, m, n, k)) in SHAPES.into_iter().enumerate() {
                let what = format!("{format} spmm {dtype} {kind} {m}x{n} K={k}");
                let inputs = inputs(kind, (m, n, k), format, dtype, 60 + s as u64);
                check_tiled(&program, &inputs, "rowwise", dtype, &what);
            }
        }
    }
}

#[test]
fn the_c_holds_the_tile_in_registers_in_both_versions() {
    if !have_compiler() {
        return;
    }
    let program = spmm(DType::F32, "bsr:8x4");
    let inputs = inputs("random", (37, 29, 64), "bsr:8x4", DType::F32, 3);
    let kernel = compile_recipe(&program, &inputs, "rowwise").unwrap();
    let c = kernel.ir(Stage::C);
    // AVX-512: 8 rows x 2 vectors of 16 lanes; otherwise 4 rows x 2 vectors of 8 lanes
    // (the 8 rows in two groups).
    assert!(c.contains("#if defined(__AVX512F__)"), "{c}");
    assert!(c.contains("sparsile_zf32 tile_7_1;"), "{c}");
    assert!(c.contains("sparsile_vf32 tile_3_1;"), "{c}");
    assert!(!c.contains("sparsile_vf32 tile_4_0;"), "{c}");
    assert!(c.contains("tile_7_1 = tile_7_1 + tile_a * tile_b1;"), "{c}");
    assert!(c.contains("sparsile_zstore_f32(&C["), "{c}");
    // The last block row (37 is not a multiple of 8) runs the plain loop.
    assert!(c.contains("if (tile_rows_ok) {"), "{c}");
    // A width narrower than a 64-byte vector: 32-byte tiles of 8 rows with AVX-512 (4
    // rows without it), not the plain loop.
    let narrow = inputs_k8();
    let c8 = compile_recipe(&program, &narrow, "rowwise").unwrap();
    let c8 = c8.ir(Stage::C);
    assert!(c8.contains("sparsile_vf32 tile_7_0;"), "{c8}");
    assert!(!c8.contains("sparsile_zf32 tile_"), "{c8}");
    let off = compile_recipe(&program, &inputs, "rowwise:tile=off").unwrap();
    assert!(!off.ir(Stage::Stage2).contains("register_tiled"));
    assert!(!off.ir(Stage::C).contains("tile_"));
    check_kernel(&off, &program, &inputs, DType::F32, "rowwise:tile=off");
}

/// SpMM operands of `bsr:8x4` with `K = 8`.
fn inputs_k8() -> HashMap<String, SparseTensor<'static>> {
    inputs("random", (37, 29, 8), "bsr:8x4", DType::F32, 4)
}

/// A CSR row of SpMM holds its output row in registers across its non-zeros, in
/// passes of up to eight vectors (`K = 128` in f32: two passes of 64 on AVX2, of 128 with
/// AVX-512), then passes of fewer vectors for the rest (`K = 72`: 64 + 8), then the plain
/// loop for what is narrower than a vector; with the row cached (`cache=on`) and not
/// (`cache=off`), with and without prefetches.
#[test]
fn csr_spmm_holds_the_row_in_registers_and_matches_the_interpreter() {
    if !have_compiler() {
        return;
    }
    let shapes = [
        ("random", 37, 29, 128),
        ("random", 23, 17, 72),
        ("random", 19, 26, 136),
        ("random", 9, 13, 5),
        ("long_row", 11, 70, 128),
        ("long_row", 5, 40, 44),
        ("empty", 7, 5, 64),
        ("empty", 0, 4, 128),
    ];
    for dtype in [DType::F32, DType::F64] {
        let program = spmm(dtype, "csr");
        for recipe in ["rowwise", "rowwise:cache=off", "rowwise:prefetch=0"] {
            for (s, (kind, m, n, k)) in shapes.into_iter().enumerate() {
                let what = format!("csr spmm {dtype} {recipe} {kind} {m}x{n} K={k}");
                let inputs = inputs(kind, (m, n, k), "csr", dtype, 80 + s as u64);
                check_tiled(&program, &inputs, recipe, dtype, &what);
            }
        }
    }
    // The C at K = 128 in f32: eight accumulators per pass in both versions.
    let inputs = inputs("random", (37, 29, 128), "csr", DType::F32, 7);
    let kernel = compile_recipe(&spmm(DType::F32, "csr"), &inputs, "rowwise").unwrap();
    let c = kernel.ir(Stage::C);
    assert!(c.contains("sparsile_zf32 tile_0_7;"), "{c}");
    assert!(c.contains("sparsile_vf32 tile_0_7;"), "{c}");
    assert!(!c.contains("tile_0_8"), "{c}");
    let off = compile_recipe(&spmm(DType::F32, "csr"), &inputs, "rowwise:tile=off").unwrap();
    assert!(!off.ir(Stage::Stage2).contains("register_tiled"));
    check_kernel(
        &off,
        &spmm(DType::F32, "csr"),
        &inputs,
        DType::F32,
        "csr tile=off",
    );
}

#[test]
fn sddmm_is_left_untiled() {
    if !have_compiler() {
        return;
    }
    let sddmm = "tensor A: f32[m, n] bsr:4x4\ntensor X: f32[m, k]\ntensor Y: f32[n, k]\ntensor C: f32[m, n] bsr:4x4\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n";
    let mut g = rng(5);
    let coo = matrix("random", 13, 17, &mut g);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&coo, &"bsr:4x4".parse().unwrap(), DType::F32).unwrap(),
        ),
        ("X".to_string(), dense(&[13, 32], DType::F32, &mut g)),
        ("Y".to_string(), dense(&[17, 32], DType::F32, &mut g)),
    ]);
    let kernel = compile_recipe(sddmm, &inputs, "rowwise").unwrap();
    assert!(!kernel.ir(Stage::Stage2).contains("register_tiled"));
    check_kernel(&kernel, sddmm, &inputs, DType::F32, "sddmm bsr:4x4");
}

#[test]
fn nearly_full_blocks_choose_a_block_format_or_say_so() {
    // 64 x 64 in full 16 x 16 blocks on the diagonal.
    let mut triplets = Vec::new();
    for i in 0..64 {
        for j in (i / 16 * 16)..(i / 16 * 16 + 16) {
            triplets.push((i, j, 1.0 + (i * 7 + j) as f64 % 3.0));
        }
    }
    let coo = sparsile::formats::CooTensor::from_triplets(vec![64, 64], &triplets).unwrap();
    let mut g = rng(6);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap(),
        ),
        ("B".to_string(), dense(&[64, 32], DType::F32, &mut g)),
    ]);
    let program = spmm(DType::F32, "csr");
    // Formats may change: the block format, chosen by the rule before the selector.
    let s = sparsile::auto::choose(&program, &inputs, 2, true).unwrap();
    assert_eq!(s.candidate.id(), "bsr:8x8/rowwise");
    assert_eq!(s.source, sparsile::auto::Source::Rule);
    // The operand keeps its format: CSR runs, and the note says how to get blocks.
    let s = sparsile::auto::choose(&program, &inputs, 2, false).unwrap();
    assert_eq!(s.candidate.format, "csr");
    let note = s.note.unwrap_or_default();
    assert!(note.contains("format=\"bsr:8x8\""), "{note}");
}
