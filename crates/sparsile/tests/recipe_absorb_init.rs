//! The `rowwise` recipe starts SpMM and SpMV output rows at the init constant
//! (`absorb_init` after `cache_write`), so the init block is gone from the kernel; the
//! kernels match the interpreter on matrices with empty rows, no entries, one long row
//! and no rows, for widths 1, 5 and 32, with 1 and 2 threads. SDDMM's sparse output is
//! absorbed with the dot product; `dot=off` and `cache=off` keep their init block.

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::recipe::{self, RecipeContext};
use sparsile::transform::schedule::Step;
use sparsile::{compile_notation, compile_recipe};
use support::{check_kernel, dense, have_compiler, matrix, rng};

const SPMM: &str =
    "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
const SPMV: &str =
    "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n";
const SDDMM: &str = "tensor A: f32[m, n] csr\ntensor X: f32[m, k]\ntensor Y: f32[n, k]\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n";

fn steps(spec: &str, program: &str) -> Vec<Step> {
    let stage1 = compile_notation(program).unwrap();
    let context = RecipeContext {
        params: HashMap::from([("k".to_string(), 8)]),
    };
    recipe::trace(spec, &stage1, &context).unwrap().steps
}

fn absorbs(steps: &[Step]) -> bool {
    steps.iter().any(|s| matches!(s, Step::AbsorbInit { .. }))
}

#[test]
fn rowwise_absorbs_the_init_of_its_cached_outputs() {
    let spmm = steps("rowwise", SPMM);
    let at = spmm
        .iter()
        .position(
            |s| matches!(s, Step::AbsorbInit { block, buffer } if block == "C" && buffer == "C"),
        )
        .unwrap_or_else(|| panic!("{spmm:?}"));
    assert!(matches!(spmm[at - 1], Step::CacheWrite { .. }), "{spmm:?}");
    assert!(absorbs(&steps("rowwise", SPMV)));
    assert!(absorbs(&steps("rowwise:partition=static", SPMV)));
    // SDDMM's sparse output is cached per non-zero (the dot product) and absorbed too;
    // without the dot product it is not cached, so its init stays.
    assert!(absorbs(&steps("rowwise", SDDMM)));
    assert!(!absorbs(&steps("rowwise:dot=off", SDDMM)));
    let off = steps("rowwise:cache=off", SPMM);
    assert!(!absorbs(&off), "{off:?}");
    assert!(!off.iter().any(|s| matches!(s, Step::CacheWrite { .. })));
}

#[test]
fn absorbed_rowwise_kernels_match_the_interpreter() {
    if !have_compiler() {
        return;
    }
    let shapes = [
        ("random", 13, 11),
        ("empty", 7, 5),
        ("long_row", 9, 40),
        ("empty", 0, 4),
    ];
    for (s, (kind, m, n)) in shapes.into_iter().enumerate() {
        for k in [1, 5, 32] {
            let mut g = rng(400 + s as u64 * 10 + k as u64);
            let a =
                SparseTensor::from_coo_with(&matrix(kind, m, n, &mut g), &Format::Csr, DType::F32)
                    .unwrap();
            let spmm = HashMap::from([
                ("A".to_string(), a.clone()),
                ("B".to_string(), dense(&[n, k], DType::F32, &mut g)),
            ]);
            let spmv = HashMap::from([
                ("A".to_string(), a),
                ("x".to_string(), dense(&[n], DType::F32, &mut g)),
            ]);
            for (program, inputs, out) in [(SPMM, &spmm, "C"), (SPMV, &spmv, "y")] {
                for spec in ["rowwise", "rowwise:partition=dynamic,prefetch=0"] {
                    let what = format!("{spec} {out} {kind} {m}x{n} k={k}");
                    let kernel = compile_recipe(program, inputs, spec)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let stage2 = kernel.ir(sparsile::Stage::Stage2);
                    assert!(
                        !stage2.contains(&format!("block {out}.init")),
                        "{what}\n{stage2}"
                    );
                    assert!(
                        stage2.contains(&format!("{out}_local[")),
                        "{what}\n{stage2}"
                    );
                    check_kernel(&kernel, program, inputs, DType::F32, &what);
                }
            }
        }
    }
}

/// `run_into` reuses the previous outputs without clearing them (the program sets every
/// element), so a row the absorbed kernel failed to store — an empty one, whose value
/// is the init constant — would keep the previous call's value.
#[test]
fn reused_outputs_get_every_row_stored() {
    if !have_compiler() {
        return;
    }
    let (m, n, k) = (30, 20, 5);
    let mut g = rng(77);
    let csr = |kind: &str, g: &mut _| {
        SparseTensor::from_coo_with(&matrix(kind, m, n, g), &Format::Csr, DType::F32).unwrap()
    };
    let x = dense(&[n, k], DType::F32, &mut g);
    let v = dense(&[n], DType::F32, &mut g);
    for (program, dense_name, operand, out) in [(SPMM, "B", &x, "C"), (SPMV, "x", &v, "y")] {
        let inputs = |a: SparseTensor<'static>| {
            HashMap::from([
                ("A".to_string(), a),
                (dense_name.to_string(), operand.clone()),
            ])
        };
        let first = inputs(csr("long_row", &mut g));
        let kernel = compile_recipe(program, &first, "rowwise").unwrap();
        assert!(!kernel.ir(sparsile::Stage::Stage2).contains(".init"));
        let options = sparsile::RunOptions::default();
        let mut outs = kernel.run(&first, &options).unwrap();
        assert!(outs[out].to_dense_f64().iter().any(|v| *v != 0.0));
        for kind in ["random", "empty", "long_row", "random"] {
            let next = inputs(csr(kind, &mut g));
            kernel.run_into(&next, &mut outs, &options).unwrap();
            let want = sparsile::evaluate(program, &next).unwrap();
            support::close(
                &outs[out].to_dense_f64(),
                &want[out].to_dense_f64(),
                1e-4,
                &format!("{out} after a call on {kind} rows"),
            );
        }
    }
}
