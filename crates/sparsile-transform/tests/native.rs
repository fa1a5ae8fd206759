//! End to end on the CPU: index notation → `compile_to_flat` → C (`emit_c`) → the system
//! compiler → `CompiledKernel`, against the stage-I interpreter on seeded random inputs,
//! with one and several threads. Skipped (with a message) when no C compiler runs.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::notation::{check, lower, parse};
use sparsile_formats::{CooTensor, SparseTensor};
use sparsile_ir::settings::Settings;
use sparsile_runtime::{interpret, CompiledKernel, InterpOptions, KernelOptions};

fn compiler_available(settings: &Settings) -> bool {
    let cc = settings.cc.clone().unwrap_or_else(|| "cc".to_string());
    std::process::Command::new(cc.split_whitespace().next().unwrap_or("cc"))
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Compiles `text` natively and compares with the interpreter on random inputs.
fn native(text: &str, sizes: &[(&str, usize)], seed: u64, settings: &Settings) {
    let sizes: HashMap<&str, usize> = sizes.iter().copied().collect();
    let ast = parse(text).unwrap();
    let program = lower(&ast).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let checked = check(&ast).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut inputs: HashMap<String, SparseTensor<'static>> = HashMap::new();
    for (t, decl) in ast.tensors.iter().enumerate() {
        if checked.is_output[t] {
            continue;
        }
        let shape: Vec<usize> = decl
            .dims
            .iter()
            .map(|d| match d {
                sparsile::notation::ast::Dim::Named(n) => sizes[n.as_str()],
                sparsile::notation::ast::Dim::Const(c) => *c as usize,
            })
            .collect();
        let total: usize = shape.iter().product();
        let mut coo = CooTensor::empty(shape.clone());
        for flat in 0..total {
            // Every third leading index (row) is empty.
            let row = flat / (total / shape[0]).max(1);
            if checked.is_sparse(t) && (row % 3 == 2 || rng.random::<f64>() > 0.4) {
                continue;
            }
            let v = if decl.dtype.is_int() {
                let hi = sizes.values().copied().min().unwrap_or(1) as i64;
                rng.random_range(-1..=hi) as f64
            } else {
                rng.random_range(-8..=8) as f64 * 0.25
            };
            let mut rest = flat;
            let mut coord = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                coord[d] = rest % shape[d];
                rest /= shape[d];
            }
            coo.coords.extend_from_slice(&coord);
            coo.values.push(v);
        }
        let dtype = if decl.dtype.is_int() {
            sparsile_ir::DType::F64
        } else {
            decl.dtype
        };
        let tensor = SparseTensor::from_coo_with(&coo, &decl.format, dtype).unwrap();
        inputs.insert(decl.name.clone(), tensor);
    }
    let params: HashMap<String, i64> = program
        .params
        .values()
        .filter_map(|p| {
            sizes
                .get(p.name.as_str())
                .map(|&v| (p.name.clone(), v as i64))
        })
        .collect();
    let expected = interpret(
        &program,
        &inputs,
        &InterpOptions {
            params: params.clone(),
            ..InterpOptions::default()
        },
    )
    .unwrap();
    let lowered = sparsile_transform::compile_to_flat(&program).unwrap();
    let source = sparsile_codegen::emit_c(&lowered.stage3)
        .unwrap_or_else(|e| panic!("emit_c: {e}\n{}", lowered.stage3));
    let kernel = CompiledKernel::build(
        program.clone(),
        lowered.stage3.clone(),
        source.code,
        settings,
    )
    .unwrap_or_else(|e| panic!("build: {e}\n{}", lowered.stage3));
    let mut nonzero = false;
    for threads in [1, 3] {
        let got = kernel
            .run(
                &inputs,
                &KernelOptions {
                    params: params.clone(),
                    threads: Some(threads),
                    parallelism: sparsile_runtime::jit::Parallelism::Always,
                    ..KernelOptions::default()
                },
            )
            .unwrap_or_else(|e| panic!("run: {e}\n{text}"));
        for (name, want) in &expected {
            let want = want.values.to_f64_vec();
            let have = got[name].values.to_f64_vec();
            assert_eq!(have.len(), want.len(), "{name}\n{text}");
            let tol = if got[name].values.dtype() == sparsile_ir::DType::F32 {
                1e-4
            } else {
                1e-9
            };
            for (k, (h, w)) in have.iter().zip(&want).enumerate() {
                assert!(
                    (h - w).abs() <= tol * (1.0 + w.abs()),
                    "{threads} threads: {name}[{k}]: native {h}, interpreter {w}\n{text}\n{}",
                    lowered.stage3
                );
                nonzero |= *w != 0.0;
            }
        }
    }
    assert!(
        nonzero,
        "all outputs zero: the comparison could not fail\n{text}"
    );
}

#[test]
fn compiled_kernels_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Settings::from_env()
    };
    if !compiler_available(&settings) {
        eprintln!("skipped: no C compiler runs here");
        return;
    }
    let formats = [
        "csr",
        "csc",
        "coo",
        "dcsr",
        "bsr:2x2",
        "dbsr:2x3",
        "ell",
        "dia",
        "srbcrs:2x2",
        "ragged",
    ];
    for (s, f) in formats.iter().enumerate() {
        for dtype in ["f64", "f32"] {
            let spmm = format!(
                "tensor A: {dtype}[m, n] {f}\ntensor B: {dtype}[n, k]\ntensor C: {dtype}[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
            );
            native(&spmm, &[("m", 9), ("n", 7), ("k", 3)], s as u64, &settings);
        }
    }
    for f in ["csr", "bsr:2x2", "ell"] {
        let sddmm = format!(
            "tensor A: f64[m, n] {f}\ntensor X: f64[m, k]\ntensor Y: f64[k, n]\ntensor C: f64[m, n] {f}\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n"
        );
        native(&sddmm, &[("m", 7), ("n", 6), ("k", 3)], 30, &settings);
    }
    let others = [
        ("tensor B: f64[m, n, o] csf\ntensor C: f64[n, r]\ntensor D: f64[o, r]\ntensor A: f64[m, r]\nA[i,j] = B[i,k,l] * C[k,j] * D[l,j]\n", vec![("m", 5), ("n", 3), ("o", 4), ("r", 2)]),
        ("tensor B: f64[m, n, o] coo\ntensor c: f64[o]\ntensor Y: f64[m, n]\nY[i,j] = B[i,j,k] * c[k]\n", vec![("m", 5), ("n", 3), ("o", 4)]),
        ("tensor A: f64[r, m, n] csf\ntensor X: f64[n, k]\ntensor W: f64[r, k, l]\ntensor Y: f64[m, l]\nY[i,l] = A[r,i,j] * X[j,k] * W[r,k,l]\n", vec![("r", 3), ("m", 4), ("n", 5), ("k", 2), ("l", 3)]),
        ("tensor A: f64[m, n] csr\ntensor B: f64[b, n, k]\ntensor C: f64[b, m, k]\nC[t,i,k] = A[i,j] * B[t,j,k]\n", vec![("m", 4), ("n", 5), ("k", 3), ("b", 2)]),
        ("tensor X: f64[ins, cin]\ntensor nbr: i32[outs, offsets]\ntensor W: f64[offsets, cin, cout]\ntensor Y: f64[outs, cout]\nY[o,c] = X[nbr[o,r], d] * W[r,d,c]\n", vec![("ins", 6), ("cin", 2), ("outs", 4), ("offsets", 3), ("cout", 2)]),
        ("tensor A: f64[m, n] csr\ntensor idx: i32[m]\ntensor y: f64[m]\ny[i] = A[i, idx[i]]\n", vec![("m", 30), ("n", 5)]),
    ];
    for (k, (text, sizes)) in others.iter().enumerate() {
        native(text, sizes, 40 + k as u64, &settings);
    }
}

/// A stage-I program with a top-level store that searches (a serial `if 1 { ... }`
/// phase), nested iterations, and an iteration whose outer axis is a reduction.
#[test]
fn compiled_stage1_program_with_serial_phases() {
    let cache = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Settings::from_env()
    };
    if !compiler_available(&settings) {
        eprintln!("skipped: no C compiler runs here");
        return;
    }
    let text = "\
func nested(m, n, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JD = dense_fixed(n)
  buffer A: f64[I, J] input
  buffer x: f64[JD] input
  buffer y: f64[I] output
  buffer z: f64[JD] output
  y[1] = A[1, 2] + A[0, n - 1]
  iter rows over [I: S] as (i) {
    iter cols over [J: R] as (j) {
      y[i] = y[i] + A[i, j] * x[j]
    }
  }
  iter cols_t over [I: R, J: R] as (i, j) {
    z[j] = z[j] + A[i, j] * 2.0
  }
}
";
    let program: sparsile_ir::coord::Program = text.parse().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (m, n) = (8, 6);
    let mut triplets = Vec::new();
    for r in 0..m {
        for c in 0..n {
            if r == 1 && c == 2 || rng.random::<f64>() < 0.4 {
                triplets.push((r, c, rng.random_range(1..=8) as f64 * 0.5));
            }
        }
    }
    let a = CooTensor::from_triplets(vec![m, n], &triplets).unwrap();
    let xs: Vec<f64> = (0..n).map(|v| v as f64 - 1.5).collect();
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo(&a, &sparsile_formats::Format::Csr).unwrap(),
        ),
        (
            "x".to_string(),
            SparseTensor::dense_from_f64(&[n], &xs, sparsile_ir::DType::F64).unwrap(),
        ),
    ]);
    let expected = interpret(&program, &inputs, &InterpOptions::default()).unwrap();
    let lowered = sparsile_transform::compile_to_flat(&program).unwrap();
    let source = sparsile_codegen::emit_c(&lowered.stage3).unwrap();
    let kernel =
        CompiledKernel::build(program, lowered.stage3.clone(), source.code, &settings).unwrap();
    for threads in [1, 4] {
        let got = kernel
            .run(
                &inputs,
                &KernelOptions {
                    threads: Some(threads),
                    parallelism: sparsile_runtime::jit::Parallelism::Always,
                    ..KernelOptions::default()
                },
            )
            .unwrap();
        for (name, want) in &expected {
            let want = want.values.to_f64_vec();
            assert!(want.iter().any(|v| *v != 0.0), "{name}");
            assert_eq!(
                got[name].values.to_f64_vec(),
                want,
                "{name}, {threads} threads\n{}",
                lowered.stage3
            );
        }
    }
}
