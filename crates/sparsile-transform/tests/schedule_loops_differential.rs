//! Differential tests of `parallel`, `vectorize`, `unroll` and `bound`: SpMV, SpMM and
//! SDDMM from index notation over CSR, BSR and ELL, lowered to stage II, scheduled by a
//! seeded random sequence of calls on random loops (the refused calls are skipped, so
//! every accepted one is exercised), then run by `flat_interp` on stage II and on stage
//! III (after `lower_buffers`) and, when a C compiler runs, natively with one and three
//! threads — all against the stage-I interpreter on seeded random inputs with empty
//! rows and sizes the block sizes do not divide.

use std::collections::HashMap;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::notation::{check, lower, parse};
use sparsile_formats::{CooTensor, SparseTensor};
use sparsile_ir::coord::Program;
use sparsile_ir::loops::{verify, Expr, ForKind, Func, Stmt};
use sparsile_ir::settings::Settings;
use sparsile_runtime::{interpret, CompiledKernel, InterpOptions, KernelOptions, Outputs};
use sparsile_transform::schedule::bound::bound;
use sparsile_transform::schedule::parallel::parallel;
use sparsile_transform::schedule::unroll::unroll;
use sparsile_transform::schedule::vectorize::vectorize;
use sparsile_transform::schedule::LoopRef;
use sparsile_transform::{lower_buffers, lower_iterations};

/// Every loop of `func` with its bounds, block by block.
fn loops(func: &Func) -> Vec<(LoopRef, Expr, Expr)> {
    fn walk(func: &Func, stmts: &[Stmt], block: &str, out: &mut Vec<(LoopRef, Expr, Expr)>) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    out.push((
                        LoopRef {
                            block: block.to_string(),
                            var: func.vars[f.var].name.clone(),
                        },
                        f.lo.clone(),
                        f.hi.clone(),
                    ));
                    walk(func, &f.body, block, out);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(func, then_body, block, out);
                    walk(func, else_body, block, out);
                }
                Stmt::Block { name, body, .. } => walk(func, body, name, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(func, &func.body, "", &mut out);
    out
}

/// Random inputs for `text`: each stored entry with probability 0.5, odd rows empty.
fn inputs(
    text: &str,
    sizes: &HashMap<&str, usize>,
    rng: &mut ChaCha8Rng,
) -> (Program, HashMap<String, SparseTensor<'static>>) {
    let ast = parse(text).unwrap();
    let program = lower(&ast).unwrap();
    let checked = check(&ast).unwrap();
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
        let row_size = (total / shape[0].max(1)).max(1);
        let mut coo = CooTensor::empty(shape.clone());
        for flat in 0..total {
            let row = flat / row_size;
            if checked.is_sparse(t) && (row % 3 == 1 || rng.random::<f64>() > 0.5) {
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
        let tensor = SparseTensor::from_coo_with(&coo, &decl.format, decl.dtype).unwrap();
        inputs.insert(decl.name.clone(), tensor);
    }
    (program, inputs)
}

/// Applies a random sequence of schedule calls; returns the function and the calls made.
fn random_schedule(
    mut func: Func,
    sizes: &HashMap<&str, usize>,
    rng: &mut ChaCha8Rng,
) -> (Func, Vec<String>) {
    let mut calls = Vec::new();
    for _ in 0..8 {
        let mut all = loops(&func);
        all.shuffle(rng);
        let Some((target, lo, hi)) = all.into_iter().next() else {
            break;
        };
        let (name, result) = match rng.random_range(0..4) {
            0 => ("parallel", parallel(&func, &target)),
            1 => ("vectorize", vectorize(&func, &target)),
            2 => ("unroll", unroll(&func, &target)),
            _ => {
                // Only a true promise: the extent is at least the trip count.
                let trip = match (&lo, &hi) {
                    (Expr::Int(0), Expr::Param(p)) => sizes.get(func.params[*p].name.as_str()),
                    _ => None,
                };
                let Some(&trip) = trip else { continue };
                let extent = trip as i64 + rng.random_range(0..3);
                ("bound", bound(&func, &target, extent))
            }
        };
        if let Ok(next) = result {
            verify(&next).unwrap_or_else(|e| panic!("{name} {target:?}: {e:?}\n{next}"));
            calls.push(format!("{name}({}, {})", target.block, target.var));
            func = next;
        }
    }
    (func, calls)
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

fn compiler_available(settings: &Settings) -> bool {
    let cc = settings.cc.clone().unwrap_or_else(|| "cc".to_string());
    std::process::Command::new(cc.split_whitespace().next().unwrap_or("cc"))
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Counts of loop kinds over all runs, to check the random schedules did something.
#[derive(Default)]
struct Kinds(HashMap<ForKind, usize>);

fn count_kinds(func: &Func, kinds: &mut Kinds) {
    fn walk(stmts: &[Stmt], kinds: &mut Kinds) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    *kinds.0.entry(f.kind).or_default() += 1;
                    walk(&f.body, kinds);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(then_body, kinds);
                    walk(else_body, kinds);
                }
                Stmt::Block { body, .. } => walk(body, kinds),
                _ => {}
            }
        }
    }
    walk(&func.body, kinds);
}

#[test]
fn random_loop_schedules_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Settings::from_env()
    };
    let native = compiler_available(&settings);
    if !native {
        eprintln!("skipped native runs: no C compiler runs here");
    }
    let mut kinds = Kinds::default();
    let mut bounded = 0;
    let formats = ["csr", "bsr:2x2", "ell"];
    for (f, format) in formats.iter().enumerate() {
        let kernels = [
            format!("tensor A: f64[m, n] {format}\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n"),
            format!("tensor A: f64[m, n] {format}\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
            format!("tensor A: f64[m, n] {format}\ntensor X: f64[m, k]\ntensor Y: f64[k, n]\ntensor C: f64[m, n] {format}\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n"),
        ];
        for (kk, text) in kernels.iter().enumerate() {
            for round in 0..4u64 {
                let seed = (f as u64 * 100) + kk as u64 * 10 + round;
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let sizes: HashMap<&str, usize> = [
                    ("m", rng.random_range(1..10)),
                    ("n", rng.random_range(1..9)),
                    ("k", rng.random_range(1..6)),
                ]
                .into_iter()
                .collect();
                let (program, inputs) = inputs(text, &sizes, &mut rng);
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
                let expected = interpret(&program, &inputs, &options).unwrap();
                let stage2 = lower_iterations(&program).unwrap();
                let (stage2, calls) = random_schedule(stage2, &sizes, &mut rng);
                bounded += calls.iter().filter(|c| c.starts_with("bound")).count();
                count_kinds(&stage2, &mut kinds);
                let stage3 = lower_buffers(&stage2).unwrap();
                verify(&stage3).unwrap();
                let context =
                    || format!("seed {seed}, {sizes:?}, calls {calls:?}\n{text}\n{stage2}");
                for (label, func) in [("stage II", &stage2), ("stage III", &stage3)] {
                    let got = sparsile_runtime::flat_interp::run(func, &program, &inputs, &options)
                        .unwrap_or_else(|e| panic!("{label}: {e}\n{}", context()));
                    compare(label, &expected, &got, &context);
                }
                if native {
                    let source = sparsile_codegen::emit_c(&stage3)
                        .unwrap_or_else(|e| panic!("emit_c: {e}\n{}", context()));
                    let kernel = CompiledKernel::build(
                        program.clone(),
                        stage3.clone(),
                        source.code,
                        &settings,
                    )
                    .unwrap_or_else(|e| panic!("build: {e}\n{}", context()));
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
                            .unwrap_or_else(|e| panic!("run: {e}\n{}", context()));
                        compare(
                            &format!("native, {threads} threads"),
                            &expected,
                            &got,
                            &context,
                        );
                    }
                }
            }
        }
    }
    for kind in ForKind::ALL {
        assert!(
            kinds.0.get(&kind).copied().unwrap_or(0) > 0,
            "no {} loop in any random schedule",
            kind.name()
        );
    }
    assert!(bounded > 0, "no bound call in any random schedule");
}
