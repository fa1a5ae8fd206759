//! The `rowwise` recipe on matrices stored as `bsr:1xC` (one-row blocks of `C`
//! columns): in SpMV each block column keeps its partial sum across all the blocks of a
//! row (`rfactor` over the row's blocks, the columns vectorised), in SpMM the output row
//! of a block row is accumulated in a local array (`cache_write`), and SDDMM is
//! scheduled as on CSR. Compiled kernels are compared with the reference
//! interpreter on seeded random matrices — empty rows, an empty matrix, one row holding
//! nearly every column, widths that are not multiples of `C` — in f32 and f64, with 1
//! and 2 threads. Without a C compiler the compiled checks print that they skipped.

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::{compile_recipe, Stage};
use support::{check_kernel, dense, have_compiler, matrix, rng};

fn ty(dtype: DType) -> &'static str {
    if dtype == DType::F32 {
        "f32"
    } else {
        "f64"
    }
}

const SHAPES: [(&str, usize, usize); 5] = [
    ("random", 13, 37),
    ("empty", 7, 5),
    ("empty", 0, 4),
    ("long_row", 9, 130),
    ("random", 4, 64),
];

fn sparse_input(
    kind: &str,
    m: usize,
    n: usize,
    format: &str,
    dtype: DType,
    seed: u64,
) -> (SparseTensor<'static>, rand_chacha::ChaCha8Rng) {
    let mut g = rng(seed);
    let coo = matrix(kind, m, n, &mut g);
    let format: Format = format.parse().unwrap();
    (
        SparseTensor::from_coo_with(&coo, &format, dtype).unwrap(),
        g,
    )
}

/// SpMV over `format` in `dtype`.
fn spmv_program(dtype: DType, format: &str) -> String {
    format!(
        "tensor A: {t}[m, n] {format}\ntensor x: {t}[n]\ntensor y: {t}[m]\ny[i] = A[i,j] * x[j]\n",
        t = ty(dtype)
    )
}

/// SpMV's operands: a seeded `kind` matrix in `format` and a random `x`.
fn spmv_inputs(
    (kind, m, n): (&str, usize, usize),
    format: &str,
    dtype: DType,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    let (a, mut g) = sparse_input(kind, m, n, format, dtype, seed);
    HashMap::from([
        ("A".to_string(), a),
        ("x".to_string(), dense(&[n], dtype, &mut g)),
    ])
}

#[test]
fn spmv_sums_each_block_column_across_the_row() {
    if !have_compiler() {
        return;
    }
    for dtype in [DType::F32, DType::F64] {
        for c in [4, 16, 32] {
            let format = format!("bsr:1x{c}");
            let program = spmv_program(dtype, &format);
            for (s, (kind, m, n)) in SHAPES.into_iter().enumerate() {
                let inputs = spmv_inputs((kind, m, n), &format, dtype, 60 + s as u64);
                let what = format!("rowwise spmv {dtype} {format} {kind} {m}x{n}");
                let kernel = compile_recipe(&program, &inputs, "rowwise")
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let stage2 = kernel.ir(Stage::Stage2);
                // The partial sums are zeroed before the row's blocks, not in them.
                assert!(
                    stage2.contains(&format!(
                        "for r in 0..{c} {{\n        y_partial[r] = 0.0\n      }}\n      for jo_p in"
                    )),
                    "{what}:\n{stage2}"
                );
                assert!(
                    stage2.contains(&format!("for ji in 0..{c} vectorized")),
                    "{what}:\n{stage2}"
                );
                check_kernel(&kernel, &program, &inputs, dtype, &what);
            }
        }
    }
}

#[test]
fn spmm_and_sddmm_on_one_row_blocks_match_the_interpreter() {
    if !have_compiler() {
        return;
    }
    let format = "bsr:1x8";
    let spmm = format!(
        "tensor A: f32[m, n] {format}\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
    );
    let sddmm = format!(
        "tensor A: f32[m, n] {format}\ntensor X: f32[m, k]\ntensor Y: f32[n, k]\ntensor C: f32[m, n] {format}\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n"
    );
    for (s, (kind, m, n)) in SHAPES.into_iter().enumerate() {
        for k in [5, 32] {
            let (a, mut g) = sparse_input(kind, m, n, format, DType::F32, 80 + s as u64);
            let spmm_inputs = HashMap::from([
                ("A".to_string(), a.clone()),
                ("B".to_string(), dense(&[n, k], DType::F32, &mut g)),
            ]);
            let sddmm_inputs = HashMap::from([
                ("A".to_string(), a),
                ("X".to_string(), dense(&[m, k], DType::F32, &mut g)),
                ("Y".to_string(), dense(&[n, k], DType::F32, &mut g)),
            ]);
            for (op, program, inputs) in [
                ("spmm", &spmm, &spmm_inputs),
                ("sddmm", &sddmm, &sddmm_inputs),
            ] {
                let what = format!("rowwise {op} {format} {kind} {m}x{n} k={k}");
                let kernel = compile_recipe(program, inputs, "rowwise")
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                if op == "spmm" {
                    // The output row of a one-row block is cached (`cache_write`).
                    let stage2 = kernel.ir(Stage::Stage2);
                    assert!(
                        stage2.contains("C_local[C_in1] = C[io * 1 + 0, C_in1]"),
                        "{what}:\n{stage2}"
                    );
                }
                check_kernel(&kernel, program, inputs, DType::F32, &what);
            }
        }
    }
}

#[test]
fn spmv_on_blocks_of_several_rows_holds_the_block_row_in_registers() {
    // `y[io * R + ii] += A[io, jo_p, ii, ji] * x[jo * C + ji]`: one row of partial sums
    // per block row (`rfactor` over the row's blocks, `R × C` sums), held in vector
    // registers across the blocks (`register_tile`); the matrix's last block row and
    // block column are padded where `m` and `n` are not multiples of the block.
    if !have_compiler() {
        return;
    }
    for dtype in [DType::F32, DType::F64] {
        for format in ["bsr:2x8", "bsr:8x8", "bsr:4x4", "bsr:3x16", "dbsr:4x8"] {
            let program = spmv_program(dtype, format);
            for (s, (kind, m, n)) in SHAPES.into_iter().enumerate() {
                let inputs = spmv_inputs((kind, m, n), format, dtype, 90 + s as u64);
                let what = format!("rowwise spmv {dtype} {format} {kind} {m}x{n}");
                let kernel = compile_recipe(&program, &inputs, "rowwise")
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let stage2 = kernel.ir(Stage::Stage2);
                assert!(
                    stage2.contains("y_partial[ii * "),
                    "{what}: partial sums per row and column\n{stage2}"
                );
                assert!(stage2.contains(" register_tiled {"), "{what}:\n{stage2}");
                check_kernel(&kernel, &program, &inputs, dtype, &what);
            }
        }
    }
}

#[test]
fn spmv_block_row_tile_is_vector_code_with_a_lane_path_for_the_edge() {
    // `bsr:8x8` in f32, in 32-byte vectors (both versions: a 64-byte vector is wider
    // than the block): one vector per row of the block, eight rows at a time, and the
    // block on the right edge lane by lane.
    if !have_compiler() {
        return;
    }
    let program = spmv_program(DType::F32, "bsr:8x8");
    let inputs = spmv_inputs(("random", 21, 30), "bsr:8x8", DType::F32, 7);
    let kernel = compile_recipe(&program, &inputs, "rowwise").unwrap();
    let narrow = kernel.ir(Stage::C);
    assert!(narrow.contains("sparsile_vf32 tile_7_0;"), "{narrow}");
    assert!(
        narrow.contains("tile_0_0 = tile_0_0 + sparsile_vload_f32(&A["),
        "{narrow}"
    );
    assert!(narrow.contains("tile_0_0[tile_lane] += "), "{narrow}");
    check_kernel(&kernel, &program, &inputs, DType::F32, "bsr:8x8 21x30");
}
