//! Out buffers: outputs written into the caller's memory (`RunOptions::out`) equal the
//! interpreter's results whatever the memory held before, for the compiled kernel and the
//! automatic choice (f32 and a half-precision output, which may run widened), and
//! mismatched buffers are refused by name.

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::runtime::OutBuffer;
use sparsile::{compile, evaluate, AutoKernel, RunOptions};
use support::{close, dense, have_compiler, matrix, rng};

const SPMM: &str =
    "tensor A: f32[m, n] csr\ntensor X: f32[n, k]\ntensor Y: f32[m, k]\nY[i,k] = A[i,j] * X[j,k]\n";

fn inputs(
    kind: &str,
    m: usize,
    n: usize,
    k: usize,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    let mut r = rng(seed);
    let coo = matrix(kind, m, n, &mut r);
    let a = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap();
    HashMap::from([
        ("A".to_string(), a),
        ("X".to_string(), dense(&[n, k], DType::F32, &mut r)),
    ])
}

fn options(y: &mut [f32], threads: usize) -> RunOptions {
    let mut options = RunOptions {
        threads: Some(threads),
        ..RunOptions::default()
    };
    // SAFETY: `y` outlives the run and nothing else touches it meanwhile.
    let b = unsafe { OutBuffer::new(y.as_mut_ptr().cast(), y.len(), DType::F32) };
    options.out.insert("Y".to_string(), b);
    options
}

#[test]
fn the_kernel_and_the_automatic_choice_write_into_out_buffers() {
    if !have_compiler() {
        return;
    }
    let kernel = compile(SPMM).unwrap();
    let auto = AutoKernel::new(SPMM).unwrap();
    for (seed, (kind, m, n, k)) in [
        ("random", 37, 23, 5),
        ("empty", 9, 4, 3),
        ("long_row", 5, 300, 17),
    ]
    .into_iter()
    .enumerate()
    {
        let ins = inputs(kind, m, n, k, seed as u64);
        let want = evaluate(SPMM, &ins).unwrap()["Y"].to_dense_f64();
        for threads in [1, 2] {
            for auto_choice in [false, true] {
                let mut y = vec![f32::NAN; m * k]; // stale contents must not survive
                let mut outputs = sparsile::runtime::Outputs::new();
                let opts = options(&mut y, threads);
                if auto_choice {
                    auto.run_into(&ins, &mut outputs, &opts).unwrap();
                } else {
                    kernel.run_into(&ins, &mut outputs, &opts).unwrap();
                }
                assert!(
                    !outputs.contains_key("Y"),
                    "an output written in place is not returned"
                );
                let got: Vec<f64> = y.iter().map(|&v| f64::from(v)).collect();
                close(
                    &got,
                    &want,
                    1e-5,
                    &format!("{kind}, {threads} threads, auto {auto_choice}"),
                );
            }
        }
    }
}

#[test]
fn a_half_precision_output_through_the_automatic_choice() {
    if !have_compiler() {
        return;
    }
    // Batched SpMM on f16 runs widened (f32 output rounded after the run): the out
    // buffer must still receive the rounded result.
    let program = "tensor A: f16[m, n] csr\ntensor X: f16[b, n, k]\ntensor Y: f16[b, m, k]\nY[b,i,k] = A[i,j] * X[b,j,k]\n";
    let mut r = rng(3);
    let coo = matrix("random", 11, 7, &mut r);
    let a = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F16).unwrap();
    let ins = HashMap::from([
        ("A".to_string(), a),
        ("X".to_string(), dense(&[2, 7, 3], DType::F16, &mut r)),
    ]);
    let auto = AutoKernel::new(program).unwrap();
    let want = auto.run(&ins, &RunOptions::default()).unwrap()["Y"].to_dense_f64();
    let mut y = vec![half::f16::from_f32(9.0); 2 * 11 * 3];
    let mut options = RunOptions::default();
    // SAFETY: `y` outlives the run and nothing else touches it meanwhile.
    let b = unsafe { OutBuffer::new(y.as_mut_ptr().cast(), y.len(), DType::F16) };
    options.out.insert("Y".to_string(), b);
    let mut outputs = sparsile::runtime::Outputs::new();
    auto.run_into(&ins, &mut outputs, &options).unwrap();
    let got: Vec<f64> = y.iter().map(|v| f64::from(v.to_f32())).collect();
    close(&got, &want, 0.0, "f16 batched SpMM into an out buffer");
}

#[test]
fn mismatched_out_buffers_are_refused_by_name() {
    if !have_compiler() {
        return;
    }
    let kernel = compile(SPMM).unwrap();
    let ins = inputs("random", 8, 6, 4, 1);
    let mut short = vec![0.0f32; 8 * 4 - 1];
    let err = kernel
        .run_into(
            &ins,
            &mut sparsile::runtime::Outputs::new(),
            &options(&mut short, 1),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "out buffer for `Y`: it takes 32 values of f32, the given memory holds 31 of f32"
        ),
        "{err}"
    );
    let mut wide = vec![0.0f64; 32];
    let mut opts = RunOptions::default();
    // SAFETY: `wide` outlives the run (which refuses it before writing).
    opts.out.insert("Y".into(), unsafe {
        OutBuffer::new(wide.as_mut_ptr().cast(), 32, DType::F64)
    });
    let err = kernel
        .run_into(&ins, &mut sparsile::runtime::Outputs::new(), &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("32 of f64"), "{err}");
    let mut y = vec![0.0f32; 32];
    let mut opts = options(&mut y, 1);
    let b = opts.out.remove("Y").unwrap();
    opts.out.insert("X".into(), b);
    let err = kernel
        .run_into(&ins, &mut sparsile::runtime::Outputs::new(), &opts)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("out buffer for `X`: the program has no output of that name"),
        "{err}"
    );
}

#[test]
fn out_buffers_are_for_the_cpu_target() {
    let kernel = AutoKernel::with_target(SPMM, "auto", sparsile::Target::CudaSim).unwrap();
    let ins = inputs("random", 8, 6, 4, 2);
    let mut y = vec![0.0f32; 32];
    let err = kernel
        .run_into(
            &ins,
            &mut sparsile::runtime::Outputs::new(),
            &options(&mut y, 1),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("out buffers are taken by the cpu target only"),
        "{err}"
    );
}
