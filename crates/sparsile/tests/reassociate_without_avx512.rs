//! The unmasked branch of a `vectorized(reassociate, masked)` loop: SpMV through
//! `rowwise` compiled with `-mno-avx512f` (as for a target without AVX-512, where the
//! masked blocks' preprocessor condition is false) matches the reference interpreter on
//! the shapes of `reassociate.rs`'s ragged and random matrices. One test in its own
//! binary: it sets the compiler command (`CC`) for the whole process before any kernel
//! is compiled. Without a C compiler it prints that it skipped.

mod support;

use std::collections::HashMap;

use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::settings::Settings;
use sparsile::ir::DType;
use sparsile::{compile_recipe, Stage};
use support::{check_kernel, dense, have_compiler, rng};

#[test]
fn masked_loops_compile_and_match_without_avx512() {
    if !have_compiler() {
        return;
    }
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("CC", "cc -mno-avx512f");
    // The kernels compile with the masked blocks' condition false.
    let compiler = sparsile::runtime::jit::Compiler::detect(&Settings::from_env()).unwrap();
    assert!(
        !compiler.target().contains("#define __AVX512F__ "),
        "{}",
        compiler.target()
    );
    for dtype in [DType::F32, DType::F64] {
        let t = if dtype == DType::F32 { "f32" } else { "f64" };
        let program = format!(
            "tensor A: {t}[m, n] csr\ntensor x: {t}[n]\ntensor y: {t}[m]\ny[i] = A[i,j] * x[j]\n"
        );
        // Row i holds 5 * i non-zeros (0, 5, 10, …, 95): empty rows, short rows, rows
        // across the vector widths.
        let (m, n) = (20, 101);
        let mut triplets = Vec::new();
        for i in 0..m {
            for k in 0..5 * i {
                triplets.push((i, (i + 3 * k) % n, ((i * 7 + k) % 11) as f64 - 5.0));
            }
        }
        triplets.sort_by_key(|&(i, j, _)| (i, j));
        triplets.dedup_by_key(|&mut (i, j, _)| (i, j));
        let coo = CooTensor::from_triplets(vec![m, n], &triplets).unwrap();
        let mut g = rng(5);
        let inputs = HashMap::from([
            (
                "A".to_string(),
                SparseTensor::from_coo_with(&coo, &Format::Csr, dtype).unwrap(),
            ),
            ("x".to_string(), dense(&[n], dtype, &mut g)),
        ]);
        let kernel = compile_recipe(&program, &inputs, "rowwise").unwrap();
        assert!(kernel.ir(Stage::C).contains("_mm512_mask_add_"));
        check_kernel(
            &kernel,
            &program,
            &inputs,
            dtype,
            &format!("no AVX-512 {t}"),
        );
    }
}
