//! A short vectorized loop whose loads are guarded (the last block column of a block
//! format reaching past the matrix's edge reads `x` under a `select`) is kept a loop in
//! the C (`SPARSILE_NO_FULL_UNROLL`), so GCC vectorizes it with masked loads instead of
//! unrolling it completely into scalar code. Checked on the C text and against the
//! reference interpreter, on sizes that do and do not divide by the block.
//! Without a C compiler the compiled checks print that they skipped.

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::{compile_recipe, Stage};
use support::{check_kernel, dense, have_compiler, matrix, rng};

#[test]
fn guarded_vector_loops_stay_loops_and_match_the_interpreter() {
    if !have_compiler() {
        return;
    }
    for (format, guarded) in [("bsr:1x16", true), ("bsr:1x32", true), ("csr", false)] {
        let program = format!(
            "tensor A: f32[m, n] {format}\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n"
        );
        for (s, (kind, m, n)) in [("random", 40, 64), ("random", 37, 29), ("long_row", 9, 70)]
            .into_iter()
            .enumerate()
        {
            let what = format!("{format} spmv {kind} {m}x{n}");
            let mut g = rng(200 + s as u64);
            let coo = matrix(kind, m, n, &mut g);
            let f: Format = format.parse().unwrap();
            let inputs = HashMap::from([
                (
                    "A".to_string(),
                    SparseTensor::from_coo_with(&coo, &f, DType::F32).unwrap(),
                ),
                ("x".to_string(), dense(&[n], DType::F32, &mut g)),
            ]);
            let kernel = compile_recipe(&program, &inputs, "rowwise")
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let c = kernel.ir(Stage::C);
            assert_eq!(
                c.contains("    SPARSILE_NO_FULL_UNROLL\n"),
                guarded,
                "{what}\n{c}"
            );
            check_kernel(&kernel, &program, &inputs, DType::F32, &what);
        }
    }
}
