//! Shared by the schedule tests: programs from index notation with seeded random inputs,
//! and the differential check of a scheduled stage-II function (through
//! `flat_interp`, and through `lower_buffers` + `flat_interp`) against the stage-I
//! interpreter.

#![allow(dead_code)]

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::notation::{check, lower, parse};
use sparsile_formats::{CooTensor, SparseTensor};
use sparsile_ir::coord::Program;
use sparsile_ir::loops::{verify, Func};
use sparsile_runtime::{interpret, InterpOptions};

/// A program with inputs to run it on.
pub struct Case {
    pub text: String,
    pub program: Program,
    pub inputs: HashMap<String, SparseTensor<'static>>,
    pub options: InterpOptions,
}

/// SpMM `C = A * B` with `A` in `format`.
pub fn spmm(format: &str) -> String {
    format!("tensor A: f64[m, n] {format}\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n")
}

/// SpMV `y = A * x` with `A` in `format`.
pub fn spmv(format: &str) -> String {
    format!(
        "tensor A: f64[m, n] {format}\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n"
    )
}

/// SDDMM `C = A ∘ (X * Y)` with `A` and `C` in `format`.
pub fn sddmm(format: &str) -> String {
    format!("tensor A: f64[m, n] {format}\ntensor X: f64[m, k]\ntensor Y: f64[k, n]\ntensor C: f64[m, n] {format}\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n")
}

/// Builds the program of `text` and random inputs: sparse entries kept with probability
/// `density`, every third row of a sparse input empty.
pub fn case(text: &str, sizes: &[(&str, usize)], density: f64, seed: u64) -> Case {
    let sizes: HashMap<&str, usize> = sizes.iter().copied().collect();
    let ast = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let program = lower(&ast).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let checked = check(&ast).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut inputs = HashMap::new();
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
        let row_size = total / shape[0].max(1);
        let sparse = checked.is_sparse(t);
        let mut coo = CooTensor::empty(shape.clone());
        for flat in 0..total {
            let row = flat / row_size.max(1);
            if sparse && (row % 3 == 1 || rng.random::<f64>() >= density) {
                continue;
            }
            let mut rest = flat;
            let mut coord = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                coord[d] = rest % shape[d];
                rest /= shape[d];
            }
            coo.coords.extend_from_slice(&coord);
            coo.values.push(rng.random_range(-8..=8) as f64 * 0.25);
        }
        let tensor = SparseTensor::from_coo_with(&coo, &decl.format, decl.dtype)
            .unwrap_or_else(|e| panic!("{}: {e}", decl.name));
        inputs.insert(decl.name.clone(), tensor);
    }
    let options = InterpOptions {
        params: program
            .params
            .values()
            .filter_map(|p| {
                sizes
                    .get(p.name.as_str())
                    .map(|&v| (p.name.clone(), v as i64))
            })
            .collect(),
        ..InterpOptions::default()
    };
    Case {
        text: text.to_string(),
        program,
        inputs,
        options,
    }
}

/// Runs `stage2` (a schedule of `case.program`) and its `lower_buffers` form with
/// `flat_interp` and compares every output with the stage-I interpreter's. Both
/// functions must verify.
pub fn check_func(case: &Case, stage2: &Func) {
    if let Err(errors) = verify(stage2) {
        panic!("stage II does not verify: {errors:?}\n{stage2}");
    }
    let stage3 = sparsile_transform::lower_buffers(stage2)
        .unwrap_or_else(|e| panic!("lower_buffers: {e}\n{stage2}"));
    if let Err(errors) = verify(&stage3) {
        panic!("stage III does not verify: {errors:?}\n{stage3}");
    }
    let expected = interpret(&case.program, &case.inputs, &case.options)
        .unwrap_or_else(|e| panic!("interpreter: {e}\n{}", case.program));
    let nonzero = expected
        .values()
        .any(|t| t.values.to_f64_vec().iter().any(|v| *v != 0.0));
    assert!(
        nonzero,
        "every output is zero: the test could not fail\n{}",
        case.text
    );
    for (label, func) in [("stage II", stage2), ("stage III", &stage3)] {
        let got =
            sparsile_runtime::flat_interp::run(func, &case.program, &case.inputs, &case.options)
                .unwrap_or_else(|e| panic!("{label}: {e}\n{func}"));
        for (name, tensor) in &expected {
            let want = tensor.values.to_f64_vec();
            let have = got[name].values.to_f64_vec();
            assert_eq!(
                have.len(),
                want.len(),
                "{label}: {name}: value count\n{func}"
            );
            for (k, (h, w)) in have.iter().zip(&want).enumerate() {
                assert!(
                    (h - w).abs() <= 1e-9 * (1.0 + w.abs()),
                    "{label}: {name}[{k}]: scheduled {h}, interpreter {w}\n{}\n{func}",
                    case.text
                );
            }
        }
    }
}
