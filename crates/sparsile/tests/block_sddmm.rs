//! SDDMM through `rowwise` on block formats (`bsr:RxC`, `dbsr:RxC`): the output starts
//! in a local at zero (no init pass over the output, `absorb_init` past the prefetches
//! of the block loop), block coordinates are read without range guards (a block format
//! stores no padding coordinate), and where a block's columns fill whole groups of 8
//! the generated C runs pairs of the block's rows as one register tile (AVX-512), with
//! the edge guards checked once per pair. Compiled kernels are compared with the
//! reference interpreter in f32 and f64, with 1 and 2 threads, on seeded random
//! matrices: empty rows, an empty matrix, one row holding nearly every column, sizes
//! that are not multiples of the block (the last block row and column run the guarded
//! loop), an odd number of rows per block (the last row runs alone), widths that do
//! not fill whole vectors (no tile) and several chunks of 8 columns per block.
//! Without a C compiler the compiled checks print that they skipped.

mod support;

use std::collections::HashMap;

use sparsile::formats::SparseTensor;
use sparsile::ir::DType;
use sparsile::{compile_recipe, Stage};
use support::{check_kernel, have_compiler, operands};

fn sddmm(dtype: DType, format: &str) -> String {
    let t = if dtype == DType::F32 { "f32" } else { "f64" };
    format!(
        "tensor A: {t}[m, n] {format}\ntensor X: {t}[m, k]\ntensor Y: {t}[n, k]\ntensor C: {t}[m, n] {format}\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n"
    )
}

fn inputs(
    kind: &str,
    (m, n, k): (usize, usize, usize),
    format: &str,
    dtype: DType,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    operands(
        kind,
        (m, n),
        format,
        dtype,
        seed,
        &[("X", &[m, k]), ("Y", &[n, k])],
    )
}

/// (kind, m, n): edges off the block sizes, one long row, empty.
const SHAPES: [(&str, usize, usize); 5] = [
    ("random", 16, 32),
    ("random", 37, 29),
    ("long_row", 11, 70),
    ("empty", 7, 5),
    ("empty", 0, 4),
];

#[test]
fn block_sddmm_matches_the_interpreter() {
    if !have_compiler() {
        return;
    }
    for dtype in [DType::F32, DType::F64] {
        let lanes = if dtype == DType::F32 { 8 } else { 4 };
        for format in ["bsr:8x8", "bsr:3x16", "bsr:16x16", "dbsr:8x8", "bsr:4x4"] {
            let program = sddmm(dtype, format);
            let (rows, cols) = format[format.find(':').unwrap() + 1..]
                .split_once('x')
                .map(|(r, c)| (r.parse::<usize>().unwrap(), c.parse::<usize>().unwrap()))
                .unwrap();
            for (s, (kind, m, n)) in SHAPES.into_iter().enumerate() {
                for k in [8usize, 12, 32, 40] {
                    let what = format!("{format} sddmm {dtype} {kind} {m}x{n} K={k}");
                    let inputs = inputs(kind, (m, n, k), format, dtype, 90 + s as u64 + k as u64);
                    let kernel = compile_recipe(&program, &inputs, "rowwise")
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let stage2 = kernel.ir(Stage::Stage2);
                    if format.starts_with("bsr") {
                        assert!(
                            !stage2.contains("block C.init"),
                            "{what}: init kept\n{stage2}"
                        );
                    }
                    assert!(
                        !stage2.contains("< A_JO_len"),
                        "{what}: a block guard\n{stage2}"
                    );
                    let tiled = kernel.ir(Stage::C).contains("SPARSILE_KEEP_VECTOR(tile_y)");
                    let expected = rows >= 2 && cols % 8 == 0 && k % lanes == 0;
                    assert_eq!(tiled, expected, "{what}\n{}", kernel.ir(Stage::C));
                    check_kernel(&kernel, &program, &inputs, dtype, &what);
                }
            }
        }
    }
}

#[test]
fn the_tile_checks_its_guards_once_per_pair_of_rows() {
    if !have_compiler() {
        return;
    }
    let program = sddmm(DType::F32, "bsr:8x16");
    let inputs = inputs("random", (37, 29, 32), "bsr:8x16", DType::F32, 7);
    let kernel = compile_recipe(&program, &inputs, "rowwise").unwrap();
    let c = kernel.ir(Stage::C);
    // Two rows by two chunks of 8 columns: 32 sums, each row's 16 results from two
    // transposed sums; the edge guards of the pair decide between the tile and the
    // plain loop; the 32-byte version runs the plain loop.
    assert!(c.contains("#if defined(__AVX512F__)"), "{c}");
    assert!(c.contains("sparsile_vf32 tile_s1_8 = {0}"), "{c}");
    assert!(c.contains("tile_s1_15 = tile_s1_15 + tile_x1"), "{c}");
    assert!(c.contains("if (tile_guards_hold) {"), "{c}");
    assert_eq!(c.matches("sparsile_tsum_f32(tile_s").count(), 4, "{c}");
    check_kernel(&kernel, &program, &inputs, DType::F32, "bsr:8x16 K=32");
    // Without batching there is nothing to tile.
    let off = compile_recipe(&program, &inputs, "rowwise:batch=off").unwrap();
    assert!(!off.ir(Stage::C).contains("tile_y"));
    check_kernel(&off, &program, &inputs, DType::F32, "bsr:8x16 batch=off");
}
