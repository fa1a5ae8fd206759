//! Differential tests of the stage-I sparse schedules: SDDMM and SpMM over CSR, COO, BSR
//! and CSF, scheduled with `sparse_reorder` / `sparse_fuse` (fixed schedules and random
//! sequences of calls), run through the stage-I interpreter (on the original and the
//! scheduled program) and through `lower_iterations` → `flat_interp` (stage II) and
//! `lower_buffers` → `flat_interp` / the test executor (stage III), on seeded random
//! inputs with empty rows and empty matrices.

mod common;

use std::collections::HashMap;

use common::Pattern;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::notation::{ast::Dim, check, lower, parse};
use sparsile_formats::{CooTensor, SparseTensor};
use sparsile_ir::coord::{self, Program, Stmt};
use sparsile_runtime::{interpret, InterpOptions};
use sparsile_transform::schedule::{sparse_fuse, sparse_reorder, ScheduleError};

const SDDMM_CSR: &str = "tensor A: f64[m, n] csr\ntensor X: f64[m, k]\ntensor Y: f64[n, k]\ntensor C: f64[m, n] csr\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n";
const SPMM_CSR: &str =
    "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
const SPMM_COO: &str =
    "tensor A: f64[m, n] coo\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
const SDDMM_COO: &str = "tensor A: f64[m, n] coo\ntensor X: f64[m, k]\ntensor Y: f64[n, k]\ntensor C: f64[m, n] coo\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n";
const SPMM_BSR: &str = "tensor A: f64[m, n] bsr:2x2\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
const SDDMM_BSR: &str = "tensor A: f64[m, n] bsr:2x2\ntensor X: f64[m, k]\ntensor Y: f64[n, k]\ntensor C: f64[m, n] bsr:2x2\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n";
const SPMM_CSF: &str = "tensor A: f64[m, n, o] csf\ntensor B: f64[o, k]\ntensor C: f64[m, n, k]\nC[i,j,k] = A[i,j,l] * B[l,k]\n";

const SIZES: [(&str, usize); 4] = [("m", 7), ("n", 5), ("o", 4), ("k", 3)];

const PATTERNS: [Pattern; 3] = [
    Pattern::Random(0.4),
    Pattern::EmptyRows(0.5),
    Pattern::Empty,
];

/// A program from index notation and seeded random inputs for it.
fn setup(
    text: &str,
    sizes: &[(&str, usize)],
    pattern: Pattern,
    seed: u64,
) -> (
    Program,
    HashMap<String, SparseTensor<'static>>,
    InterpOptions,
) {
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
                Dim::Named(n) => sizes[n.as_str()],
                Dim::Const(c) => *c as usize,
            })
            .collect();
        let total: usize = shape.iter().product();
        let row_size = (total / shape[0].max(1)).max(1);
        let sparse = checked.is_sparse(t);
        let mut coo = CooTensor::empty(shape.clone());
        for flat in 0..total {
            let row = flat / row_size;
            let keep = match pattern {
                Pattern::Random(d) => rng.random::<f64>() < d,
                Pattern::EmptyRows(d) => row % 2 == 1 && rng.random::<f64>() < d,
                Pattern::Empty => false,
                Pattern::LongRow(d) => row == 0 || rng.random::<f64>() < d,
            };
            if sparse && !keep {
                continue;
            }
            let mut rest = flat;
            let mut c = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                c[d] = rest % shape[d];
                rest /= shape[d];
            }
            coo.coords.extend_from_slice(&c);
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
    (program, inputs, options)
}

/// Checks `scheduled` against `original` on the inputs: both interpreted alike, and the
/// scheduled program lowered and run at stages II and III (common::check_program).
fn compare(
    original: &Program,
    scheduled: &Program,
    label: &str,
    inputs: &HashMap<String, SparseTensor<'static>>,
    options: &InterpOptions,
    nonzero: bool,
) {
    coord::verify(scheduled).unwrap_or_else(|e| panic!("{label}: {e:?}\n{scheduled}"));
    // The text form round-trips.
    let text = scheduled.to_string();
    let reparsed: Program = text
        .parse()
        .unwrap_or_else(|e| panic!("{label}: {e}\n{text}"));
    assert_eq!(
        reparsed.to_string(),
        text,
        "{label}: print -> parse -> print"
    );
    let want = interpret(original, inputs, options).unwrap();
    let got = interpret(scheduled, inputs, options).unwrap();
    for (name, t) in &want {
        let (w, g) = (t.values.to_f64_vec(), got[name].values.to_f64_vec());
        assert_eq!(w.len(), g.len(), "{label}: {name}");
        for (a, b) in w.iter().zip(&g) {
            assert!(
                (a - b).abs() <= 1e-9 * (1.0 + a.abs()),
                "{label}: {name}\n{scheduled}"
            );
        }
    }
    common::check_program(scheduled, label, inputs, options, nonzero);
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Fixed schedules: (program, iteration, reorder or fuse, axes).
const FIXED: &[(&str, &str, bool, &[&str])] = &[
    (SDDMM_CSR, "C", false, &["I_m", "A_J"]),
    (SDDMM_CSR, "C", true, &["I_m", "I_k", "A_J"]),
    (SPMM_CSR, "C", false, &["I_m", "A_J"]),
    (SPMM_CSR, "C", true, &["I_m", "I_k", "A_J"]),
    (SPMM_COO, "C", false, &["A_I", "A_J"]),
    (SPMM_COO, "C", true, &["I_k", "A_I", "A_J"]),
    (SDDMM_COO, "C", false, &["A_I", "A_J"]),
    (SPMM_BSR, "C", false, &["A_IO", "A_JO"]),
    (
        SPMM_BSR,
        "C",
        true,
        &["A_IO", "A_II", "A_JO", "I_k", "A_JI"],
    ),
    (SDDMM_BSR, "C", false, &["A_IO", "A_JO"]),
    (SPMM_CSF, "C", false, &["I_m", "A_J", "A_K"]),
    (SPMM_CSF, "C", false, &["A_J", "A_K"]),
    (SPMM_CSF, "C", true, &["I_m", "A_J", "I_k", "A_K"]),
];

#[test]
fn fixed_schedules_match_the_interpreter() {
    for (c, &(text, iteration, reorder, axes)) in FIXED.iter().enumerate() {
        for (p, &pattern) in PATTERNS.iter().enumerate() {
            let seed = (c * 10 + p) as u64;
            let (program, inputs, options) = setup(text, &SIZES, pattern, seed);
            let scheduled = if reorder {
                sparse_reorder(&program, iteration, &names(axes))
            } else {
                sparse_fuse(&program, iteration, &names(axes))
            }
            .unwrap_or_else(|e| panic!("{e}\n{program}"));
            let label = format!("case {c} pattern {p}: {axes:?}\n{text}");
            let nonzero = !matches!(pattern, Pattern::Empty);
            compare(&program, &scheduled, &label, &inputs, &options, nonzero);
        }
    }
}

#[test]
fn fused_csr_single_row_and_wide_shapes() {
    for (s, sizes) in [
        [("m", 1), ("n", 9), ("o", 2), ("k", 2)],
        [("m", 9), ("n", 1), ("o", 2), ("k", 1)],
    ]
    .iter()
    .enumerate()
    {
        for text in [SDDMM_CSR, SPMM_CSR] {
            let (program, inputs, options) = setup(text, sizes, Pattern::Random(0.6), s as u64);
            let fused = sparse_fuse(&program, "C", &names(&["I_m", "A_J"])).unwrap();
            compare(&program, &fused, text, &inputs, &options, false);
        }
    }
}

/// The axis names of iteration `name`, in order.
fn iteration_axes(program: &Program, name: &str) -> Vec<String> {
    program
        .body
        .iter()
        .find_map(|s| match s {
            Stmt::Iteration(it) if it.name == name => Some(
                it.axes
                    .iter()
                    .map(|a| program.axes[a.axis].name.clone())
                    .collect(),
            ),
            _ => None,
        })
        .expect("the iteration")
}

#[test]
fn random_sequences_of_calls_match_the_interpreter() {
    let programs = [
        SDDMM_CSR, SPMM_CSR, SPMM_COO, SDDMM_COO, SPMM_BSR, SDDMM_BSR, SPMM_CSF,
    ];
    for seed in 0..28u64 {
        let text = programs[seed as usize % programs.len()];
        let pattern = PATTERNS[(seed as usize / programs.len()) % PATTERNS.len()];
        let (program, inputs, options) = setup(text, &SIZES, pattern, seed);
        let mut rng = ChaCha8Rng::seed_from_u64(1000 + seed);
        let mut scheduled = program.clone();
        let mut calls = Vec::new();
        for _ in 0..4 {
            let mut axes = iteration_axes(&scheduled, "C");
            let result = if rng.random::<bool>() {
                axes.shuffle(&mut rng);
                calls.push(format!("sparse_reorder({axes:?})"));
                sparse_reorder(&scheduled, "C", &axes)
            } else {
                let len = rng.random_range(2..=axes.len().min(3));
                let start = rng.random_range(0..=axes.len() - len);
                let group = axes[start..start + len].to_vec();
                calls.push(format!("sparse_fuse({group:?})"));
                sparse_fuse(&scheduled, "C", &group)
            };
            match result {
                Ok(p) => scheduled = p,
                Err(
                    ScheduleError::ChildBeforeParent { .. }
                    | ScheduleError::AlreadyFused { .. }
                    | ScheduleError::NotParentChain { .. },
                ) => {
                    calls.pop();
                }
                Err(e) => panic!("unexpected error {e}\n{scheduled}"),
            }
        }
        let label = format!("seed {seed}: {calls:?}\n{text}");
        let nonzero = !matches!(pattern, Pattern::Empty);
        compare(&program, &scheduled, &label, &inputs, &options, nonzero);
    }
}

/// Fused and reordered kernels compiled to C and run natively (1 and 3 threads) against
/// the interpreter; skipped when no C compiler runs.
#[test]
fn fused_kernels_compiled_natively_match_the_interpreter() {
    use sparsile_ir::settings::Settings;
    use sparsile_runtime::{CompiledKernel, KernelOptions};
    let cache = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Settings::from_env()
    };
    let cc = settings.cc.clone().unwrap_or_else(|| "cc".to_string());
    let runs = std::process::Command::new(cc.split_whitespace().next().unwrap_or("cc"))
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        eprintln!("skipped: no C compiler runs here");
        return;
    }
    for (c, &(text, iteration, reorder, axes)) in FIXED.iter().enumerate() {
        let (program, inputs, options) = setup(text, &SIZES, Pattern::EmptyRows(0.7), c as u64);
        let scheduled = if reorder {
            sparse_reorder(&program, iteration, &names(axes))
        } else {
            sparse_fuse(&program, iteration, &names(axes))
        }
        .unwrap();
        let want = interpret(&program, &inputs, &options).unwrap();
        let lowered = sparsile_transform::compile_to_flat(&scheduled).unwrap();
        let source = sparsile_codegen::emit_c(&lowered.stage3)
            .unwrap_or_else(|e| panic!("emit_c: {e}\n{}", lowered.stage3));
        let kernel = CompiledKernel::build(
            scheduled.clone(),
            lowered.stage3.clone(),
            source.code,
            &settings,
        )
        .unwrap_or_else(|e| panic!("build: {e}\n{}", lowered.stage3));
        for threads in [1, 3] {
            let got = kernel
                .run(
                    &inputs,
                    &KernelOptions {
                        params: options.params.clone(),
                        threads: Some(threads),
                        parallelism: sparsile_runtime::jit::Parallelism::Always,
                        ..KernelOptions::default()
                    },
                )
                .unwrap_or_else(|e| panic!("run: {e}\n{scheduled}"));
            for (name, t) in &want {
                let (w, g) = (t.values.to_f64_vec(), got[name].values.to_f64_vec());
                assert_eq!(w.len(), g.len(), "{name}\n{scheduled}");
                for (a, b) in w.iter().zip(&g) {
                    assert!(
                        (a - b).abs() <= 1e-9 * (1.0 + a.abs()),
                        "{threads} threads: {name}: native {b}, interpreter {a}\n{scheduled}"
                    );
                }
            }
        }
    }
}
