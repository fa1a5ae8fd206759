//! A trace with `bound` replayed on inputs larger than the extent: refused with a named
//! error by the compiled kernel and by the flat interpreter, never run with the
//! iterations past the extent dropped (regression: bounded to K = 8, run with K = 9, the
//! ninth column of C silently stayed zero).

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::runtime::{interpret, FlatInterpError, InterpOptions};
use sparsile::transform::schedule::{LoopRef, Schedule};
use sparsile::{evaluate, RunOptions};
use support::{close, dense, have_compiler, matrix, rng};

const SPMM: &str =
    "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";

fn inputs(k: usize, seed: u64) -> HashMap<String, SparseTensor<'static>> {
    let mut r = rng(seed);
    let a = matrix("random", 30, 20, &mut r);
    let csr: Format = "csr".parse().unwrap();
    HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&a, &csr, DType::F64).unwrap(),
        ),
        ("B".to_string(), dense(&[20, k], DType::F64, &mut r)),
    ])
}

#[test]
fn a_bound_broken_by_larger_inputs_is_an_error_not_dropped_iterations() {
    let program = sparsile::compile_notation(SPMM).unwrap();
    let mut sch = Schedule::new(&program);
    sch.bound(&LoopRef::new("C", "k2_2"), 8).unwrap();
    let trace = sch.trace().clone();
    let lowered = sparsile::lower_program_with(program.clone(), &trace).unwrap();
    for k in [1, 5, 8, 9, 33] {
        let ins = inputs(k, 40 + k as u64);
        let options = InterpOptions {
            params: HashMap::from([("k".to_string(), k as i64)]),
            ..InterpOptions::default()
        };
        let flat = sparsile::runtime::flat_interp::run(&lowered.stage3, &program, &ins, &options);
        if k <= 8 {
            let want = interpret(&program, &ins, &options).unwrap();
            close(
                &flat.unwrap()["C"].to_dense_f64(),
                &want["C"].to_dense_f64(),
                1e-12,
                "flat interpreter",
            );
        } else {
            let e = flat.unwrap_err();
            assert!(
                matches!(&e, FlatInterpError::BoundExceeded { var, extent: 8, trip }
                    if var == "k2_2" && *trip == k as i64),
                "{e}"
            );
            assert_eq!(
                e.to_string(),
                format!("loop `k2_2` was bounded to 8 iterations by the schedule (`bound`), but these inputs give it {k}: bound it to at least {k}, or compile for these sizes")
            );
        }
    }
    if !have_compiler() {
        return;
    }
    let kernel = sparsile::compile_program_with(program, &trace).unwrap();
    for k in [8, 9, 64] {
        let ins = inputs(k, 7 + k as u64);
        let got = kernel.run(&ins, &RunOptions::default());
        if k <= 8 {
            let want = evaluate(SPMM, &ins).unwrap();
            close(
                &got.unwrap()["C"].to_dense_f64(),
                &want["C"].to_dense_f64(),
                1e-12,
                "compiled",
            );
        } else {
            let e = got.unwrap_err();
            let text = e.to_string();
            assert!(
                text.contains(&format!("bounded to 8 iterations by the schedule (`bound`), but these inputs give it {k}")),
                "{text}"
            );
            assert!(format!("{e:?}").contains("BoundExceeded"), "{e:?}");
        }
    }
}
