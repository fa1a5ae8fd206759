//! Shared pieces of the tests of the primitives that need loop-IR features
//! (`parallel_with`, `cache_write`, reduction strategies): CSR inputs with chosen row
//! shapes, and a runner that checks a scheduled program against the stage-I interpreter
//! on stage II, stage III and natively (1 and 3 threads) when a C compiler runs.

#![allow(dead_code)]

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::coord::Program;
use sparsile_ir::loops::verify;
use sparsile_ir::settings::Settings;
use sparsile_runtime::{interpret, CompiledKernel, InterpOptions, KernelOptions, Outputs};
use sparsile_transform::schedule::{Schedule, Trace};

/// How the rows of a random sparse matrix are filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Each entry with probability 0.4; every third row empty.
    Random,
    /// Row 1 full, the others with probability 0.1.
    OneHugeRow,
    /// No entries at all.
    Empty,
}

pub const ALL_ROWS: [Rows; 3] = [Rows::Random, Rows::OneHugeRow, Rows::Empty];

pub fn sparse(m: usize, n: usize, rows: Rows, rng: &mut ChaCha8Rng) -> CooTensor {
    let mut coo = CooTensor::empty(vec![m, n]);
    for i in 0..m {
        for j in 0..n {
            let keep = match rows {
                Rows::Random => i % 3 != 2 && rng.random::<f64>() < 0.4,
                Rows::OneHugeRow => i == 1 || rng.random::<f64>() < 0.1,
                Rows::Empty => false,
            };
            if keep {
                coo.coords.extend_from_slice(&[i, j]);
                coo.values.push(rng.random_range(-8..=8) as f64 * 0.25);
            }
        }
    }
    coo
}

pub fn dense(shape: Vec<usize>, rng: &mut ChaCha8Rng) -> CooTensor {
    let total: usize = shape.iter().product();
    let mut coo = CooTensor::empty(shape.clone());
    for flat in 0..total {
        let mut rest = flat;
        let mut coord = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            coord[d] = rest % shape[d];
            rest /= shape[d];
        }
        coo.coords.extend_from_slice(&coord);
        coo.values.push(rng.random_range(-8..=8) as f64 * 0.25);
    }
    coo
}

/// One test case: a program, its inputs and parameter values.
pub struct Case {
    pub program: Program,
    pub inputs: HashMap<String, SparseTensor<'static>>,
    pub params: HashMap<String, i64>,
    pub label: String,
}

/// SpMM `C[i,k] = A[i,j] * B[j,k]`, A CSR m×n, f64.
pub fn spmm(m: usize, n: usize, k: usize, rows: Rows, seed: u64) -> Case {
    let text = "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = sparse(m, n, rows, &mut rng);
    let b = dense(vec![n, k], &mut rng);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo(&a, &Format::Csr).unwrap(),
        ),
        (
            "B".to_string(),
            SparseTensor::from_coo(&b, &Format::Dense).unwrap(),
        ),
    ]);
    Case {
        program: sparsile::compile_notation(text).unwrap(),
        inputs,
        params: HashMap::from([
            ("m".to_string(), m as i64),
            ("n".to_string(), n as i64),
            ("k".to_string(), k as i64),
        ]),
        label: format!("spmm m={m} n={n} k={k} {rows:?} seed {seed}"),
    }
}

/// SpMV `y[i] = A[i,j] * x[j]`, A CSR m×n, f64.
pub fn spmv(m: usize, n: usize, rows: Rows, seed: u64) -> Case {
    let text =
        "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n";
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = sparse(m, n, rows, &mut rng);
    let x = dense(vec![n], &mut rng);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo(&a, &Format::Csr).unwrap(),
        ),
        (
            "x".to_string(),
            SparseTensor::from_coo(&x, &Format::Dense).unwrap(),
        ),
    ]);
    Case {
        program: sparsile::compile_notation(text).unwrap(),
        inputs,
        params: HashMap::from([("m".to_string(), m as i64), ("n".to_string(), n as i64)]),
        label: format!("spmv m={m} n={n} {rows:?} seed {seed}"),
    }
}

/// SpMV `y[i] = A[i,j] * x[j]` with A stored as `bsr:RxC`, f64.
pub fn spmv_bsr(m: usize, n: usize, (r, c): (usize, usize), rows: Rows, seed: u64) -> Case {
    let format = format!("bsr:{r}x{c}");
    let text = format!(
        "tensor A: f64[m, n] {format}\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = sparse(m, n, rows, &mut rng);
    let x = dense(vec![n], &mut rng);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo(&a, &format.parse().unwrap()).unwrap(),
        ),
        (
            "x".to_string(),
            SparseTensor::from_coo(&x, &Format::Dense).unwrap(),
        ),
    ]);
    Case {
        program: sparsile::compile_notation(&text).unwrap(),
        inputs,
        params: HashMap::from([("m".to_string(), m as i64), ("n".to_string(), n as i64)]),
        label: format!("spmv {format} m={m} n={n} {rows:?} seed {seed}"),
    }
}

/// SpMM `C[i,k] = A[i,j] * B[j,k]` with A stored as `bsr:RxC`, f64.
pub fn spmm_bsr(
    m: usize,
    n: usize,
    k: usize,
    (r, c): (usize, usize),
    rows: Rows,
    seed: u64,
) -> Case {
    let format = format!("bsr:{r}x{c}");
    let text = format!(
        "tensor A: f64[m, n] {format}\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = sparse(m, n, rows, &mut rng);
    let b = dense(vec![n, k], &mut rng);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo(&a, &format.parse().unwrap()).unwrap(),
        ),
        (
            "B".to_string(),
            SparseTensor::from_coo(&b, &Format::Dense).unwrap(),
        ),
    ]);
    Case {
        program: sparsile::compile_notation(&text).unwrap(),
        inputs,
        params: HashMap::from([
            ("m".to_string(), m as i64),
            ("n".to_string(), n as i64),
            ("k".to_string(), k as i64),
        ]),
        label: format!("spmm {format} m={m} n={n} k={k} {rows:?} seed {seed}"),
    }
}

fn compare(label: &str, expected: &Outputs, got: &Outputs, context: &dyn Fn() -> String) {
    for (name, want) in expected {
        let want = want.values.to_f64_vec();
        let have = got[name].values.to_f64_vec();
        assert_eq!(have.len(), want.len(), "{label}: {name}\n{}", context());
        for (k, (h, w)) in have.iter().zip(&want).enumerate() {
            assert!(
                (h - w).abs() <= 1e-9 * (1.0 + w.abs()),
                "{label}: {name}[{k}]: got {h}, interpreter {w}\n{}",
                context()
            );
        }
    }
}

pub fn native_settings(cache: &std::path::Path) -> Option<Settings> {
    let settings = Settings {
        cache_dir: Some(cache.to_path_buf()),
        ..Settings::from_env()
    };
    let cc = settings.cc.clone().unwrap_or_else(|| "cc".to_string());
    let runs = std::process::Command::new(cc.split_whitespace().next().unwrap_or("cc"))
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        eprintln!("skipped native runs: no C compiler runs here");
    }
    runs.then_some(settings)
}

/// Checks `sch` (scheduled from `case.program`) against the interpreter everywhere, and
/// that its trace survives JSON and replays to the same IR.
pub fn check(case: &Case, sch: &Schedule, native: Option<&Settings>) {
    let options = InterpOptions {
        params: case.params.clone(),
        ..InterpOptions::default()
    };
    let expected = interpret(&case.program, &case.inputs, &options).unwrap();
    let stage2 = sch.func().expect("scheduled").clone();
    verify(&stage2).unwrap();
    let context = || format!("{}\ntrace {}\n{stage2}", case.label, sch.trace().to_json());
    let trace = Trace::from_json(&sch.trace().to_json()).unwrap();
    let replayed = trace.replay(&case.program).unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        stage2.to_string(),
        "replay\n{}",
        context()
    );
    let stage3 = sch.clone().finish().unwrap().stage3;
    verify(&stage3).unwrap();
    for (label, func) in [("stage II", &stage2), ("stage III", &stage3)] {
        let got = sparsile_runtime::flat_interp::run(func, &case.program, &case.inputs, &options)
            .unwrap_or_else(|e| panic!("{label}: {e}\n{}", context()));
        compare(label, &expected, &got, &context);
    }
    let Some(settings) = native else { return };
    let source =
        sparsile_codegen::emit_c(&stage3).unwrap_or_else(|e| panic!("emit_c: {e}\n{}", context()));
    let kernel = CompiledKernel::build(
        case.program.clone(),
        stage3.clone(),
        source.code.clone(),
        settings,
    )
    .unwrap_or_else(|e| panic!("build: {e}\n{}\n{}", context(), source.code));
    for threads in [1, 3] {
        let got = kernel
            .run(
                &case.inputs,
                &KernelOptions {
                    params: case.params.clone(),
                    threads: Some(threads),
                    parallelism: sparsile_runtime::jit::Parallelism::Always,
                    ..KernelOptions::default()
                },
            )
            .unwrap_or_else(|e| panic!("run: {e}\n{}", context()));
        compare(
            &format!("native, {threads} threads"),
            &expected,
            &got,
            &context,
        );
    }
}

/// SDDMM `C[i,j] = A[i,j] * X[i,k] * Y[k,j]`, A and C CSR m×n, f64.
pub fn sddmm(m: usize, n: usize, k: usize, rows: Rows, seed: u64) -> Case {
    let text = "tensor A: f64[m, n] csr\ntensor X: f64[m, k]\ntensor Y: f64[k, n]\ntensor C: f64[m, n] csr\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n";
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = sparse(m, n, rows, &mut rng);
    let x = dense(vec![m, k], &mut rng);
    let y = dense(vec![k, n], &mut rng);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo(&a, &Format::Csr).unwrap(),
        ),
        (
            "X".to_string(),
            SparseTensor::from_coo(&x, &Format::Dense).unwrap(),
        ),
        (
            "Y".to_string(),
            SparseTensor::from_coo(&y, &Format::Dense).unwrap(),
        ),
    ]);
    Case {
        program: sparsile::compile_notation(text).unwrap(),
        inputs,
        params: HashMap::from([
            ("m".to_string(), m as i64),
            ("n".to_string(), n as i64),
            ("k".to_string(), k as i64),
        ]),
        label: format!("sddmm m={m} n={n} k={k} {rows:?} seed {seed}"),
    }
}

/// The variables of the loops of `block` whose upper bound is the parameter `param`.
pub fn loops_to(func: &sparsile_ir::loops::Func, block: &str, param: &str) -> Vec<String> {
    use sparsile_ir::loops::{Expr, Stmt};
    fn walk(func: &sparsile_ir::loops::Func, stmts: &[Stmt], param: &str, out: &mut Vec<String>) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    if matches!(&f.hi, Expr::Param(p) if func.params[*p].name == param) {
                        out.push(func.vars[f.var].name.clone());
                    }
                    walk(func, &f.body, param, out);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(func, then_body, param, out);
                    walk(func, else_body, param, out);
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    for s in &func.body {
        if let Stmt::Block { name, body, .. } = s {
            if name == block {
                walk(func, body, param, &mut out);
            }
        }
    }
    out
}
