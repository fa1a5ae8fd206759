//! The 32-byte version of a `register_tiled` loop: BSR and CSR SpMM and BSR SpMV through `rowwise` compiled
//! with `-mno-avx512f` (as for a target without AVX-512, where the 64-byte version's
//! preprocessor condition is false) matches the reference interpreter, with sizes off
//! the block and widths off the tile's vectors. One test in its own binary: it sets the
//! compiler command (`CC`) for the whole process before any kernel is compiled. Without
//! a C compiler it prints that it skipped.

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::settings::Settings;
use sparsile::ir::DType;
use sparsile::{compile_recipe, Stage};
use support::{check_kernel, dense, have_compiler, matrix, rng};

#[test]
fn register_tiles_compile_and_match_without_avx512() {
    if !have_compiler() {
        return;
    }
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("CC", "cc -mno-avx512f");
    let compiler = sparsile::runtime::jit::Compiler::detect(&Settings::from_env()).unwrap();
    assert!(
        !compiler.target().contains("#define __AVX512F__ "),
        "{}",
        compiler.target()
    );
    for dtype in [DType::F32, DType::F64] {
        let t = if dtype == DType::F32 { "f32" } else { "f64" };
        for (format, (m, n, k)) in [
            ("bsr:8x4", (37, 29, 40)),
            ("bsr:4x4", (16, 9, 64)),
            ("csr", (23, 17, 136)),
        ] {
            let program = format!(
                "tensor A: {t}[m, n] {format}\ntensor B: {t}[n, k]\ntensor C: {t}[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
            );
            let mut g = rng(11);
            let coo = matrix("random", m, n, &mut g);
            let parsed: Format = format.parse().unwrap();
            let inputs = HashMap::from([
                (
                    "A".to_string(),
                    SparseTensor::from_coo_with(&coo, &parsed, dtype).unwrap(),
                ),
                ("B".to_string(), dense(&[n, k], dtype, &mut g)),
            ]);
            let kernel = compile_recipe(&program, &inputs, "rowwise").unwrap();
            assert!(kernel.ir(Stage::C).contains("sparsile_vstore_"));
            check_kernel(
                &kernel,
                &program,
                &inputs,
                dtype,
                &format!("{format} {dtype} K={k} without AVX-512"),
            );
        }
        // SpMV over blocks of several rows: a block row's partial sums in registers.
        for (format, (m, n)) in [("bsr:8x8", (37, 29)), ("bsr:4x16", (18, 40))] {
            let program = format!(
                "tensor A: {t}[m, n] {format}\ntensor x: {t}[n]\ntensor y: {t}[m]\ny[i] = A[i,j] * x[j]\n"
            );
            let mut g = rng(12);
            let coo = matrix("random", m, n, &mut g);
            let parsed: Format = format.parse().unwrap();
            let inputs = HashMap::from([
                (
                    "A".to_string(),
                    SparseTensor::from_coo_with(&coo, &parsed, dtype).unwrap(),
                ),
                ("x".to_string(), dense(&[n], dtype, &mut g)),
            ]);
            let kernel = compile_recipe(&program, &inputs, "rowwise").unwrap();
            assert!(kernel.ir(Stage::C).contains("tile_lane"));
            check_kernel(
                &kernel,
                &program,
                &inputs,
                dtype,
                &format!("spmv {format} {dtype} without AVX-512"),
            );
        }
    }
}
