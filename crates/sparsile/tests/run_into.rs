//! `Kernel::run_into`: repeated calls overwrite the previous outputs in place and give
//! the interpreter's results — for a scatter into a dense output whose pattern changes
//! between calls, for outputs that no longer fit (replaced), and for a stage-I program
//! that does not initialise its output (the reused storage must then be cleared).

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor, Values};
use sparsile::ir::DType;
use sparsile::{compile, evaluate, RunOptions};
use support::{close, dense, have_compiler, matrix, rng};

fn values_ptr(t: &SparseTensor<'_>) -> usize {
    match &t.values {
        Values::F64(v) => v.as_ptr() as usize,
        Values::F32(v) => v.as_ptr() as usize,
        _ => 0,
    }
}

#[test]
fn a_scatter_into_a_dense_output_is_cleared_between_calls() {
    if !have_compiler() {
        return;
    }
    // Only A's stored positions of C are written: the rest must read 0 on every call,
    // whatever the previous call left there.
    let program = "tensor A: f64[m, n] csr\ntensor C: f64[m, n]\nC[i,j] = A[i,j] * 3\n";
    let kernel = compile(program).unwrap();
    let mut r = rng(5);
    let csr: Format = "csr".parse().unwrap();
    let mut outputs = None;
    for (call, kind) in ["random", "long_row", "random", "empty"].iter().enumerate() {
        // Big enough (300 x 400 = 120 000 values) for the parallel clearing path.
        let coo = matrix(kind, 300, 400, &mut r);
        let a = SparseTensor::from_coo_with(&coo, &csr, DType::F64).unwrap();
        let inputs = HashMap::from([("A".to_string(), a)]);
        let want = evaluate(program, &inputs).unwrap();
        for threads in [1, 2] {
            let options = RunOptions {
                threads: Some(threads),
                parallelism: sparsile::Parallelism::Always,
                ..RunOptions::default()
            };
            let outs = match outputs.as_mut() {
                None => outputs.insert(kernel.run(&inputs, &options).unwrap()),
                Some(outs) => {
                    let before = values_ptr(&outs["C"]);
                    kernel.run_into(&inputs, outs, &options).unwrap();
                    assert_eq!(values_ptr(&outs["C"]), before, "call {call}: C is reused");
                    outs
                }
            };
            close(
                &outs["C"].to_dense_f64(),
                &want["C"].to_dense_f64(),
                1e-12,
                &format!("call {call} ({kind}), {threads} threads"),
            );
        }
    }
}

#[test]
fn spmm_outputs_are_reused_and_refitted() {
    if !have_compiler() {
        return;
    }
    let program = "tensor A: f32[m, n] csr\ntensor X: f32[n, k]\ntensor Y: f32[m, k]\nY[i,c] = A[i,j] * X[j,c]\n";
    let kernel = compile(program).unwrap();
    let mut r = rng(9);
    let csr: Format = "csr".parse().unwrap();
    let options = RunOptions::default();
    let mut outs = sparsile::runtime::Outputs::new();
    let mut last = None;
    for (m, n, k) in [
        (40, 30, 5),
        (40, 30, 5),
        (17, 30, 5),
        (17, 30, 8),
        (0, 3, 2),
    ] {
        let coo = matrix("random", m, n, &mut r);
        let a = SparseTensor::from_coo_with(&coo, &csr, DType::F32).unwrap();
        let x = dense(&[n, k], DType::F32, &mut r);
        let inputs = HashMap::from([("A".to_string(), a), ("X".to_string(), x)]);
        let want = evaluate(program, &inputs).unwrap();
        let before = outs.get("Y").map(values_ptr);
        kernel.run_into(&inputs, &mut outs, &options).unwrap();
        let shape = (m, k);
        if last == Some(shape) && m * k > 0 {
            assert_eq!(
                before,
                Some(values_ptr(&outs["Y"])),
                "same shape: same storage"
            );
        }
        last = Some(shape);
        assert_eq!(outs["Y"].shape(), want["Y"].shape(), "{m}x{k}");
        close(
            &outs["Y"].to_dense_f64(),
            &want["Y"].to_dense_f64(),
            1e-4,
            &format!("{m}x{n} k={k}"),
        );
    }
}

#[test]
fn an_output_the_program_does_not_initialise_is_cleared_first() {
    if !have_compiler() {
        return;
    }
    // Stage I without an init: y starts at zero by the semantics, so reused storage
    // must be cleared before each call or the sums would grow.
    let stage1 = "func main(m, n, nnz_A) {\n  axis I_m = dense_fixed(m)\n  axis A_J = sparse_variable(I_m, n, nnz=nnz_A, idx=i32, nopad)\n  axis I_n = dense_fixed(n)\n  buffer A: f64[I_m, A_J] input\n  buffer x: f64[I_n] input\n  buffer y: f64[I_m] output\n  iter y over [I_m: S, A_J: R] as (i, j) {\n    y[i] = y[i] + A[i, j] * x[j]\n  }\n}\n";
    let program: sparsile::ir::coord::Program = stage1.parse().unwrap();
    let kernel = sparsile::compile_program(program.clone()).unwrap();
    let mut r = rng(3);
    let csr: Format = "csr".parse().unwrap();
    let coo = matrix("random", 90_000, 50, &mut r);
    let a = SparseTensor::from_coo_with(&coo, &csr, DType::F64).unwrap();
    let x = dense(&[50], DType::F64, &mut r);
    let inputs = HashMap::from([("A".to_string(), a), ("x".to_string(), x)]);
    let want = sparsile::runtime::interpret(&program, &inputs, &Default::default()).unwrap();
    for threads in [1, 2] {
        let options = RunOptions {
            threads: Some(threads),
            parallelism: sparsile::Parallelism::Always,
            ..RunOptions::default()
        };
        let mut outs = kernel.run(&inputs, &options).unwrap();
        for call in 0..3 {
            let before = values_ptr(&outs["y"]);
            kernel.run_into(&inputs, &mut outs, &options).unwrap();
            assert_eq!(values_ptr(&outs["y"]), before);
            close(
                &outs["y"].to_dense_f64(),
                &want["y"].to_dense_f64(),
                1e-10,
                &format!("call {call}, {threads} threads"),
            );
        }
    }
}
