//! A vectorized loop whose `select`s test a condition that its iterations do not change
//! (the sentinel column of an ELL slot or a `hyb` bucket, `j < n`) is unswitched on it
//! in the C: the loop runs without the `select`s where the condition holds, and a
//! padding slot skips the stores that would only add zero. Checked on the C text and
//! against the reference interpreter, with padding (rows of different lengths, an empty
//! row, one long row), widths that do not divide the vector, f32 and f64.
//! Without a C compiler the compiled checks print that they skipped.

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::{compile_recipe, Stage};
use support::{check_kernel, dense, have_compiler, matrix, rng};

#[test]
fn padded_slots_unswitch_and_match_the_interpreter() {
    if !have_compiler() {
        return;
    }
    let mut seed = 300;
    for dtype in [DType::F32, DType::F64] {
        let ty = dtype.name();
        for (op, width) in [("spmm", 20), ("spmm", 128), ("spmv", 0)] {
            for (format, recipe) in [("ell", "rowwise"), ("csr", "hyb:c=1,k=2")] {
                let program = if op == "spmm" {
                    format!(
                        "tensor A: {ty}[m, n] {format}\ntensor B: {ty}[n, k]\ntensor C: {ty}[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
                    )
                } else {
                    format!(
                        "tensor A: {ty}[m, n] {format}\ntensor x: {ty}[n]\ntensor y: {ty}[m]\ny[i] = A[i,j] * x[j]\n"
                    )
                };
                for (kind, m, n) in [("random", 37, 29), ("long_row", 9, 70), ("empty", 5, 3)] {
                    seed += 1;
                    let what = format!("{format} {recipe} {op} {ty} {kind} {m}x{n} k={width}");
                    let mut g = rng(seed);
                    let coo = matrix(kind, m, n, &mut g);
                    let f: Format = format.parse().unwrap();
                    let dense_operand = if op == "spmm" {
                        ("B".to_string(), dense(&[n, width], dtype, &mut g))
                    } else {
                        ("x".to_string(), dense(&[n], dtype, &mut g))
                    };
                    let inputs = HashMap::from([
                        (
                            "A".to_string(),
                            SparseTensor::from_coo_with(&coo, &f, dtype).unwrap(),
                        ),
                        dense_operand,
                    ]);
                    let kernel = compile_recipe(&program, &inputs, recipe)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let c = kernel.ir(Stage::C);
                    if format == "ell" && op == "spmm" {
                        // The update runs unguarded under the slot's test, with no
                        // second copy for the padding, in the output row held in
                        // registers (`register_tiled`).
                        assert!(c.contains("if ((j < n)) {"), "{what}\n{c}");
                        assert!(!c.contains("(j < n ? "), "{what}\n{c}");
                        assert!(!c.contains("(j < n)) ? "), "{what}\n{c}");
                        assert!(c.contains("tile_0_0 = tile_0_0 + tile_a"), "{what}\n{c}");
                    }
                    check_kernel(&kernel, &program, &inputs, dtype, &what);
                }
            }
        }
    }
}
