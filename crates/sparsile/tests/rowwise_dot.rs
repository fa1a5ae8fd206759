//! SDDMM through `rowwise`, whose reduction over `k` becomes a dot product: the output
//! element accumulates in a local started at zero (`absorb_init` on the sparse output,
//! so the init pass is gone), the sparse value multiplies once after the sum
//! (`hoist_factor`), and the sum is an explicit vector reduction. Compared with the
//! reference interpreter in f32 and f64, with 1 and 2 threads, on seeded random
//! matrices with empty rows, an empty matrix and one long row, for widths below, at and
//! around the vector block (1, 7, 8, 12, 16, 23, 32, 64). The non-zeros of a row run in
//! groups whose dot products are summed together (`batch_reduction`, the default
//! `batch=on`) where the width fills whole vectors (the C then calls `sparsile_tsum_*`),
//! and one by one with `batch=off`. The recorded trace names the steps.
//! Without a C compiler the compiled checks print that they skipped.

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::recipe::{self, RecipeContext};
use sparsile::transform::schedule::Step;
use sparsile::{compile_notation, compile_recipe, Stage};
use support::{check_kernel, dense, have_compiler, matrix, rng};

fn sddmm(dtype: DType) -> String {
    let t = if dtype == DType::F32 { "f32" } else { "f64" };
    format!(
        "tensor A: {t}[m, n] csr\ntensor X: {t}[m, k]\ntensor Y: {t}[n, k]\ntensor C: {t}[m, n] csr\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n"
    )
}

#[test]
fn the_dot_product_schedule_matches_the_interpreter() {
    if !have_compiler() {
        return;
    }
    for dtype in [DType::F32, DType::F64] {
        let program = sddmm(dtype);
        for (s, (kind, m, n)) in [("random", 23, 19), ("empty", 5, 4), ("long_row", 9, 70)]
            .into_iter()
            .enumerate()
        {
            for k in [1usize, 7, 8, 12, 16, 23, 32, 64] {
                let mut g = rng(s as u64 * 31 + k as u64);
                let coo = matrix(kind, m, n, &mut g);
                let a = SparseTensor::from_coo_with(&coo, &Format::Csr, dtype).unwrap();
                let inputs = HashMap::from([
                    ("A".to_string(), a),
                    ("X".to_string(), dense(&[m, k], dtype, &mut g)),
                    ("Y".to_string(), dense(&[n, k], dtype, &mut g)),
                ]);
                for spec in ["rowwise", "rowwise:batch=off", "rowwise:prefetch=0"] {
                    let what = format!("sddmm {dtype} {kind} {m}x{n} k={k} {spec}");
                    let kernel = compile_recipe(&program, &inputs, spec)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let stage2 = kernel.ir(Stage::Stage2);
                    assert!(
                        !stage2.contains("block C.init"),
                        "{what}: init kept\n{stage2}"
                    );
                    assert!(
                        stage2.contains("vectorized(reassociate)"),
                        "{what}\n{stage2}"
                    );
                    let batched = spec != "rowwise:batch=off";
                    assert_eq!(stage2.contains(" batched {"), batched, "{what}\n{stage2}");
                    let lanes = if dtype == DType::F32 { 8 } else { 4 };
                    let grouped = kernel.ir(Stage::C).contains("sparsile_tsum_");
                    assert_eq!(grouped, batched && k % lanes == 0, "{what}");
                    check_kernel(&kernel, &program, &inputs, dtype, &what);
                }
            }
        }
    }
}

#[test]
fn the_trace_records_the_dot_product_steps() {
    let stage1 = compile_notation(&sddmm(DType::F32)).unwrap();
    let context = RecipeContext {
        params: HashMap::from([("k".to_string(), 32)]),
    };
    let trace = recipe::trace("rowwise", &stage1, &context).unwrap();
    let names: Vec<&str> = trace.steps.iter().map(Step::primitive).collect();
    for step in [
        "cache_write",
        "absorb_init",
        "hoist_factor",
        "vectorize_reduction",
        "batch_reduction",
    ] {
        assert!(names.contains(&step), "{step} missing from {names:?}");
    }
    // Without a known width the dot product still applies (over `0..k`).
    let open = recipe::trace("rowwise:k=none", &stage1, &context).unwrap();
    assert!(
        open.steps.iter().any(|s| s.primitive() == "hoist_factor"),
        "{open:?}"
    );
    // dot=off keeps the split into lanes.
    let off = recipe::trace("rowwise:dot=off", &stage1, &context).unwrap();
    let names: Vec<&str> = off.steps.iter().map(Step::primitive).collect();
    assert!(
        names.contains(&"rfactor") && !names.contains(&"hoist_factor"),
        "{names:?}"
    );
}
