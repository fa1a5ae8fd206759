//! Shared by the facade's compiled-kernel tests: seeded random matrices (with empty
//! rows, an empty matrix, one long row), dense operands, and the comparison of a
//! compiled kernel's outputs with the reference interpreter's.
//!
//! Tolerance: |compiled − interpreted| ≤ tol · (1 + |interpreted|) per element, with
//! tol = 1e-4 for f32 and 1e-10 for f64 (the interpreter accumulates in f64).

#![allow(dead_code)]

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::formats::{CooTensor, SparseTensor};
use sparsile::ir::settings::Settings;
use sparsile::ir::DType;
use sparsile::{evaluate, Kernel, RunOptions, Target};

/// A seeded generator.
pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

pub fn have_compiler() -> bool {
    match sparsile::runtime::jit::Compiler::detect(&Settings::from_env()) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipping compiled kernels: {e}");
            false
        }
    }
}

/// A random sparse matrix of the given kind.
pub fn matrix(kind: &str, m: usize, n: usize, rng: &mut ChaCha8Rng) -> CooTensor {
    let mut t = Vec::new();
    match kind {
        "empty" => {}
        "long_row" => {
            for j in 0..n {
                if rng.random_bool(0.9) {
                    t.push((m / 2, j, rng.random_range(-1.0..1.0)));
                }
            }
            for i in 0..m {
                if i != m / 2 && rng.random_bool(0.3) {
                    t.push((i, rng.random_range(0..n), rng.random_range(-1.0..1.0)));
                }
            }
        }
        _ => {
            for i in 0..m {
                // every third row empty
                if i % 3 == 1 {
                    continue;
                }
                for j in 0..n {
                    if rng.random_bool(0.25) {
                        t.push((i, j, rng.random_range(-1.0..1.0)));
                    }
                }
            }
        }
    }
    CooTensor::from_triplets(vec![m, n], &t).unwrap()
}

pub fn dense(shape: &[usize], dtype: DType, rng: &mut ChaCha8Rng) -> SparseTensor<'static> {
    let len: usize = shape.iter().product();
    let v: Vec<f64> = (0..len).map(|_| rng.random_range(-1.0..1.0)).collect();
    SparseTensor::dense_from_f64(shape, &v, dtype).unwrap()
}

/// A seeded `kind` matrix of `m x n` stored as `A` in `format`, and the dense operands
/// named and shaped by `dense`, drawn after it from the same generator.
pub fn operands(
    kind: &str,
    (m, n): (usize, usize),
    format: &str,
    dtype: DType,
    seed: u64,
    dense_shapes: &[(&str, &[usize])],
) -> HashMap<String, SparseTensor<'static>> {
    let mut g = rng(seed);
    let coo = matrix(kind, m, n, &mut g);
    let format: sparsile::formats::Format = format.parse().unwrap();
    let mut out = HashMap::from([(
        "A".to_string(),
        SparseTensor::from_coo_with(&coo, &format, dtype).unwrap(),
    )]);
    for (name, shape) in dense_shapes {
        out.insert(name.to_string(), dense(shape, dtype, &mut g));
    }
    out
}

pub fn close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{what}: element {k}: compiled {x} vs interpreted {y}"
        );
    }
}

/// Compares the f32 outputs `out` of `text` on `ins` with the reference interpreter's
/// (within 1e-4), naming `what` on a mismatch.
pub fn matches_interpreter(
    text: &str,
    ins: &HashMap<String, SparseTensor<'_>>,
    out: &sparsile::runtime::Outputs,
    what: &str,
) {
    let want = evaluate(text, ins).unwrap();
    for (name, t) in &want {
        close(
            &out[name].to_dense_f64(),
            &t.to_dense_f64(),
            1e-4,
            &format!("{what}: {name}"),
        );
    }
}

/// Runs `kernel` once with default options (a GPU kernel runs in the SIMT interpreter)
/// and compares each output with the reference interpreter's, shape and values within
/// `tol`. Where a GPU and NVRTC are present ([`gpu_here`]), the same function runs on
/// the GPU too (the kernel retargeted to `cuda`) and is held to the same comparison.
pub fn check_simt(
    kernel: &Kernel,
    program: &str,
    inputs: &HashMap<String, SparseTensor<'static>>,
    tol: f64,
    what: &str,
) {
    let got = kernel
        .run(inputs, &RunOptions::default())
        .unwrap_or_else(|e| panic!("{what}: SIMT run: {e}"));
    let expected = evaluate(program, inputs).unwrap_or_else(|e| panic!("{what}: interpreter: {e}"));
    let on_gpu = gpu_here().then(|| {
        let gpu = kernel
            .retarget(Target::Cuda)
            .unwrap_or_else(|e| panic!("{what}: GPU compile: {e}"));
        gpu.run(inputs, &RunOptions::default())
            .unwrap_or_else(|e| panic!("{what}: GPU run: {e}"))
    });
    for (name, t) in &expected {
        assert_eq!(got[name].shape(), t.shape(), "{what}: {name}");
        close(
            &got[name].to_dense_f64(),
            &t.to_dense_f64(),
            tol,
            &format!("{what}: {name}"),
        );
        if let Some(gpu) = &on_gpu {
            assert_eq!(gpu[name].shape(), t.shape(), "{what} on the GPU: {name}");
            close(
                &gpu[name].to_dense_f64(),
                &t.to_dense_f64(),
                tol,
                &format!("{what} on the GPU: {name}"),
            );
        }
    }
}

/// Whether a GPU (device 0, or `SPARSILE_CUDA_DEVICE`) and NVRTC are here; the first
/// call says which, or why the GPU runs are skipped.
pub fn gpu_here() -> bool {
    static HERE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HERE.get_or_init(|| {
        let settings = Settings::from_env();
        let device =
            match sparsile::runtime::cuda::CudaDevice::open(settings.cuda_device.unwrap_or(0)) {
                Ok(device) => device,
                Err(e) => {
                    println!("GPU runs skipped: {e}");
                    return false;
                }
            };
        match sparsile::runtime::cuda::Nvrtc::load(&settings) {
            Ok(nvrtc) => {
                println!(
                    "GPU runs on {} ({}), NVRTC {:?}",
                    device.name(),
                    device.compute_capability(),
                    nvrtc.version()
                );
                true
            }
            Err(e) => {
                // A GPU with no compiler: the GPU checks must not pass unnoticed.
                assert!(settings.nvrtc.is_none(), "SPARSILE_NVRTC is set: {e}");
                println!("GPU runs skipped on {}: {e}", device.name());
                false
            }
        }
    })
}

/// Runs `kernel` with 1 and 2 threads and compares every output with the interpreter.
pub fn check_kernel(
    kernel: &Kernel,
    program: &str,
    inputs: &HashMap<String, SparseTensor<'static>>,
    dtype: DType,
    what: &str,
) {
    let expected = evaluate(program, inputs).unwrap_or_else(|e| panic!("{what}: interpreter: {e}"));
    let tol = if dtype == DType::F32 { 1e-4 } else { 1e-10 };
    for threads in [1, 2] {
        let options = RunOptions {
            threads: Some(threads),
            parallelism: sparsile::Parallelism::Always,
            ..RunOptions::default()
        };
        let mut got = kernel
            .run(inputs, &options)
            .unwrap_or_else(|e| panic!("{what}: run: {e}"));
        let compare = |got: &sparsile::runtime::Outputs, how: &str| {
            for (name, t) in &expected {
                let g = &got[name];
                assert_eq!(g.shape(), t.shape(), "{what}: {name} shape");
                close(
                    &g.to_dense_f64(),
                    &t.to_dense_f64(),
                    tol,
                    &format!("{what} ({threads} threads, {how}) {name}"),
                );
            }
        };
        compare(&got, "fresh outputs");
        // Again into the same outputs filled with NaN: an output the kernel is trusted
        // to set in full before reading (fresh storage for it is not cleared either)
        // must not show any of them.
        for t in got.values_mut() {
            poison(&mut t.values);
        }
        kernel
            .run_into(inputs, &mut got, &options)
            .unwrap_or_else(|e| panic!("{what}: run_into: {e}"));
        compare(&got, "outputs reused after filling them with NaN");
    }
}

/// Sets every value to NaN.
pub fn poison(values: &mut sparsile::formats::Values<'_>) {
    use sparsile::formats::Values;
    match values {
        Values::F16(v) => v.to_mut().fill(half::f16::NAN),
        Values::BF16(v) => v.to_mut().fill(half::bf16::NAN),
        Values::F32(v) => v.to_mut().fill(f32::NAN),
        Values::F64(v) => v.to_mut().fill(f64::NAN),
    }
}

/// The operands of `op` (`A`, and `X`/`Y` or `x`) for the sparse `a` and width `k`, the
/// dense ones seeded by `seed`.
pub fn op_inputs(
    op: sparsile::tune::op::Operator,
    a: &SparseTensor<'static>,
    k: usize,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    let (m, n) = (a.shape()[0], a.shape()[1]);
    let mut g = rng(seed);
    let mut ins = HashMap::from([("A".to_string(), a.clone())]);
    match op {
        sparsile::tune::op::Operator::Spmm => {
            ins.insert("X".into(), dense(&[n, k], DType::F32, &mut g));
        }
        sparsile::tune::op::Operator::Sddmm => {
            ins.insert("X".into(), dense(&[m, k], DType::F32, &mut g));
            ins.insert("Y".into(), dense(&[n, k], DType::F32, &mut g));
        }
        _ => {
            ins.insert("x".into(), dense(&[n], DType::F32, &mut g));
        }
    }
    ins
}
