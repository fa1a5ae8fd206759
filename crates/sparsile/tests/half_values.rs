//! f16 and bf16 values on the CPU: SpMM, SpMV and SDDMM whose operands and outputs are
//! half precision, compiled by every CPU recipe, compared with the interpreter running
//! the same program in f32 on the same (already rounded) values.
//!
//! Tolerance: the compiled kernel loads the half values exactly, sums in f32 and rounds
//! once on store, so it may differ from the f32 reference by half a unit in the last
//! place of the result (2^-11 relative for f16, 2^-8 for bf16) plus f32 rounding. The
//! bound used is `u · |ref| + 1e-5` with `u` = 2^-10 (f16) or 2^-7 (bf16): tight
//! enough that sums kept in half precision (off by `u · sqrt(row length)` and more)
//! fail, which a bf16 row of 4096 ones shows plainly (a bf16 sum stops at 256).
//!
//! Recipes either compile a kernel that passes or refuse with a named error: sums into
//! a half output in place (`default`, the atomic adds of `hyb` and `daspmm`) are
//! refused by the C backend, and `AutoKernel` then runs `rowwise`.

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor, Values};
use sparsile::ir::DType;
use sparsile::{compile_recipe, evaluate, AutoKernel, CompileError, Kernel, RunOptions};
use support::{dense, have_compiler, matrix, rng};

const HALVES: [DType; 2] = [DType::F16, DType::BF16];

fn spmm(d: DType, fmt: &str) -> String {
    format!("tensor A: {d}[m, n] {fmt}\ntensor B: {d}[n, k]\ntensor C: {d}[m, k]\nC[i,k] = A[i,j] * B[j,k]\n")
}

fn sddmm(d: DType) -> String {
    format!("tensor A: {d}[m, n] csr\ntensor X: {d}[m, k]\ntensor Y: {d}[n, k]\ntensor C: {d}[m, n] csr\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n")
}

fn spmv(d: DType, fmt: &str) -> String {
    format!("tensor A: {d}[m, n] {fmt}\ntensor x: {d}[n]\ntensor y: {d}[m]\ny[i] = A[i,j] * x[j]\n")
}

/// The relative unit the comparison allows for `d` (twice the rounding of a result).
fn unit(d: DType) -> f64 {
    match d {
        DType::F16 => 2f64.powi(-10),
        _ => 2f64.powi(-7),
    }
}

/// `program` with every element type `d` replaced by f32.
fn as_f32(program: &str, d: DType) -> String {
    program.replace(&format!(": {d}["), ": f32[")
}

/// `t` with its values widened to f32 (exactly).
fn widened(t: &SparseTensor<'static>) -> SparseTensor<'static> {
    let v: Vec<f32> = t.values.to_f64_vec().iter().map(|&x| x as f32).collect();
    SparseTensor {
        structure: t.structure.clone(),
        values: Values::F32(v.into()),
    }
}

/// (operator, program, inputs) for one matrix shape, width and half type.
fn cases(
    d: DType,
    kind: &str,
    (m, n, k): (usize, usize, usize),
    seed: u64,
) -> Vec<(&'static str, String, HashMap<String, SparseTensor<'static>>)> {
    let mut g = rng(seed);
    let coo = matrix(kind, m, n, &mut g);
    let a = SparseTensor::from_coo_with(&coo, &Format::Csr, d).unwrap();
    vec![
        (
            "spmm",
            spmm(d, "csr"),
            HashMap::from([
                ("A".to_string(), a.clone()),
                ("B".to_string(), dense(&[n, k], d, &mut g)),
            ]),
        ),
        (
            "sddmm",
            sddmm(d),
            HashMap::from([
                ("A".to_string(), a.clone()),
                ("X".to_string(), dense(&[m, k], d, &mut g)),
                ("Y".to_string(), dense(&[n, k], d, &mut g)),
            ]),
        ),
        (
            "spmv",
            spmv(d, "csr"),
            HashMap::from([
                ("A".to_string(), a),
                ("x".to_string(), dense(&[n], d, &mut g)),
            ]),
        ),
    ]
}

/// Runs `kernel` with 1 and 2 threads and compares every output with the interpreter's
/// f32 run of the same program on the same values; the outputs keep type `d`.
fn check(
    kernel: &Kernel,
    program: &str,
    inputs: &HashMap<String, SparseTensor<'static>>,
    d: DType,
    what: &str,
) {
    let wide: HashMap<String, SparseTensor<'static>> = inputs
        .iter()
        .map(|(n, t)| (n.clone(), widened(t)))
        .collect();
    let expected =
        evaluate(&as_f32(program, d), &wide).unwrap_or_else(|e| panic!("{what}: interpreter: {e}"));
    for threads in [1, 2] {
        let got = kernel
            .run(
                inputs,
                &RunOptions {
                    threads: Some(threads),
                    parallelism: sparsile::Parallelism::Always,
                    ..RunOptions::default()
                },
            )
            .unwrap_or_else(|e| panic!("{what}: run: {e}"));
        for (name, t) in &expected {
            let g = &got[name];
            assert_eq!(g.values.dtype(), d, "{what}: {name} dtype");
            assert_eq!(g.shape(), t.shape(), "{what}: {name} shape");
            let (g, e) = (g.to_dense_f64(), t.to_dense_f64());
            for (i, (x, y)) in g.iter().zip(&e).enumerate() {
                assert!(
                    (x - y).abs() <= unit(d) * y.abs() + 1e-5,
                    "{what} ({threads} threads) {name}[{i}]: compiled {x} vs f32 {y}"
                );
            }
        }
    }
}

const SHAPES: [(&str, usize, usize); 4] = [
    ("random", 13, 11),
    ("empty", 7, 5),
    ("long_row", 9, 300),
    ("empty", 0, 4),
];

/// Compiles `spec` on each case and checks the kernel; returns the refusals' messages
/// (with the case).
fn run_spec(d: DType, spec: &str, ops: &[&str]) -> Vec<String> {
    let mut refused = Vec::new();
    for (s, (kind, m, n)) in SHAPES.into_iter().enumerate() {
        for k in [1, 7, 33] {
            for (op, program, inputs) in cases(d, kind, (m, n, k), s as u64 * 100 + k as u64) {
                if !ops.contains(&op) {
                    continue;
                }
                let what = format!("{d} {spec} {op} {kind} {m}x{n} k={k}");
                match compile_recipe(&program, &inputs, spec) {
                    Ok(kernel) => check(&kernel, &program, &inputs, d, &what),
                    Err(e) => refused.push(format!("{what}: {e}")),
                }
            }
        }
    }
    refused
}

/// Whether `e` is the C backend's refusal of a sum kept in half precision (in place or
/// by atomic adds).
fn half_sum_refusal(e: &str) -> bool {
    e.contains("is summed in place across loop") || e.contains("atomic adds go to f32/f64")
}

/// `rowwise` (with its vectorised sums, batched SDDMM dot products, prefetches and row
/// accumulators) computes every operator on f16 and bf16 values.
#[test]
fn rowwise_computes_every_operator_in_every_design() {
    if !have_compiler() {
        return;
    }
    let mut specs = vec!["rowwise".to_string()];
    for p in ["static", "dynamic", "balanced"] {
        specs.push(format!("rowwise:partition={p},prefetch=3"));
    }
    for extra in ["lanes=4", "batch=off", "reassociate=off", "scalar_sums=4"] {
        specs.push(format!("rowwise:{extra}"));
    }
    for d in HALVES {
        for spec in &specs {
            let refused = run_spec(d, spec, &["spmm", "sddmm", "spmv"]);
            assert!(refused.is_empty(), "{}", refused.join("\n"));
        }
    }
}

/// Recipes that sum into the output in place refuse half outputs by name: `default`
/// (every operator), `hyb` (atomic adds), every `daspmm` design, `rowwise` without its
/// row accumulator (`cache=off`, or `k=none`: an SpMM row of unknown width has none)
/// and SDDMM's split dot product (`dot=off`, partial sums added into the output);
/// whatever compiles is checked.
#[test]
fn recipes_that_sum_in_place_refuse_by_name() {
    if !have_compiler() {
        return;
    }
    let mut specs = vec![
        "default".to_string(),
        "hyb".into(),
        "hyb:c=2,k=2".into(),
        "rowwise:cache=off".into(),
        "rowwise:dot=off".into(),
        "rowwise:k=none".into(),
    ];
    for b in ["row", "nnz"] {
        for dn in ["row", "col"] {
            for r in ["seq", "par"] {
                specs.push(format!("daspmm:balance={b},dense={dn},reduce={r}"));
            }
        }
    }
    let mut outcomes = Vec::new();
    for d in HALVES {
        for spec in &specs {
            let ops: &[&str] = match spec.split(':').next().unwrap() {
                "daspmm" => &["spmm"],
                "hyb" => &["spmm", "spmv"],
                _ => &["spmm", "sddmm", "spmv"],
            };
            let refused = run_spec(d, spec, ops);
            for r in &refused {
                assert!(half_sum_refusal(r), "{r}");
            }
            outcomes.push(format!("{d} {spec}: {} refusals", refused.len()));
        }
    }
    eprintln!("{}", outcomes.join("\n"));
}

/// The C of a rowwise SpMM on f16: the row accumulator is an f32 local, the loads of
/// `A` and `B` convert, the store rounds.
#[test]
fn rowwise_spmm_sums_rows_in_f32() {
    if !have_compiler() {
        return;
    }
    let mut g = rng(3);
    let coo = matrix("random", 13, 11, &mut g);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F16).unwrap(),
        ),
        ("B".to_string(), dense(&[11, 33], DType::F16, &mut g)),
    ]);
    let program = spmm(DType::F16, "csr");
    let c = compile_recipe(&program, &inputs, "rowwise")
        .unwrap()
        .ir(sparsile::Stage::C);
    assert!(c.contains("float C_local["), "{c}");
    assert!(!c.contains("unsigned short C_local"), "{c}");
    assert!(c.contains("sparsile_f16_to_f32(B["), "{c}");
    assert!(c.contains("sparsile_f32_to_f16(C_local["), "{c}");
}

/// A bf16 row of 4096 ones sums to 4096 (a bf16 running sum would stop at 256); the
/// same row in f16 to 4096 as well (where an f16 running sum stops at 2048).
#[test]
fn one_huge_row_of_ones_sums_exactly() {
    if !have_compiler() {
        return;
    }
    let n = 4096;
    let t: Vec<(usize, usize, f64)> = (0..n).map(|j| (1, j, 1.0)).collect();
    let coo = sparsile::formats::CooTensor::from_triplets(vec![3, n], &t).unwrap();
    for d in HALVES {
        let a = SparseTensor::from_coo_with(&coo, &Format::Csr, d).unwrap();
        let ones = SparseTensor::dense_from_f64(&[n], &vec![1.0; n], d).unwrap();
        let wide = SparseTensor::dense_from_f64(&[n, 5], &vec![1.0; n * 5], d).unwrap();
        for (program, dense_name, operand) in
            [(spmv(d, "csr"), "x", ones), (spmm(d, "csr"), "B", wide)]
        {
            let inputs = HashMap::from([
                ("A".to_string(), a.clone()),
                (dense_name.to_string(), operand),
            ]);
            let kernel = AutoKernel::new(&program).unwrap();
            for threads in [1, 2] {
                let out = kernel
                    .run(
                        &inputs,
                        &RunOptions {
                            threads: Some(threads),
                            ..RunOptions::default()
                        },
                    )
                    .unwrap();
                let got = out.values().next().unwrap().to_dense_f64();
                let row = got.len() / 3;
                assert!(
                    got[row..2 * row].iter().all(|&x| x == n as f64),
                    "{d}: {:?}",
                    &got[row..2 * row]
                );
                assert!(got[..row].iter().chain(&got[2 * row..]).all(|&x| x == 0.0));
            }
        }
    }
}

/// `AutoKernel` runs half programs whatever its selection: a candidate that refuses
/// falls back to `rowwise`; an explicit recipe that refuses is an error.
#[test]
fn auto_falls_back_to_rowwise_and_explicit_recipes_refuse() {
    if !have_compiler() {
        return;
    }
    for d in HALVES {
        for (op, program, inputs) in cases(d, "long_row", (9, 300, 7), 5) {
            let auto = AutoKernel::new(&program).unwrap();
            let got = auto.run(&inputs, &RunOptions::default()).unwrap();
            assert!(got.values().all(|t| t.values.dtype() == d), "{d} {op}");
            let s = auto.last_selection().unwrap();
            assert!(
                s.candidate.recipe.starts_with("rowwise"),
                "{d} {op}: ran {} ({:?})",
                s.candidate,
                s.note
            );
            let explicit = AutoKernel::with_recipe(&program, "default").unwrap();
            let err = explicit.run(&inputs, &RunOptions::default()).unwrap_err();
            assert!(matches!(err, CompileError::Codegen(_)), "{err:?}");
            assert!(half_sum_refusal(&err.to_string()), "{err}");
        }
    }
}

/// f16/bf16 operands with an f32 output (mixed precision) run with every schedule,
/// `default` included: the sums are f32.
#[test]
fn half_operands_with_an_f32_output_run_the_default_schedule() {
    if !have_compiler() {
        return;
    }
    for d in HALVES {
        for (op, program, inputs) in cases(d, "random", (13, 11, 7), 9) {
            let mixed = program
                .replace("tensor C: ", "tensor C: MIX")
                .replace("tensor y: ", "tensor y: MIX");
            let mixed = mixed.replace(&format!("MIX{d}["), "f32[");
            let kernel = compile_recipe(&mixed, &inputs, "default")
                .unwrap_or_else(|e| panic!("{d} {op}: {e}"));
            let out = kernel.run(&inputs, &RunOptions::default()).unwrap();
            let wide: HashMap<String, SparseTensor<'static>> = inputs
                .iter()
                .map(|(n, t)| (n.clone(), widened(t)))
                .collect();
            let expected = evaluate(&as_f32(&program, d), &wide).unwrap();
            for (name, t) in &expected {
                assert_eq!(out[name].values.dtype(), DType::F32);
                support::close(
                    &out[name].to_dense_f64(),
                    &t.to_dense_f64(),
                    1e-5,
                    &format!("{d} {op}"),
                );
            }
        }
    }
}

/// Block formats: `rowwise`, `default` and `AutoKernel` on bsr operands of f16/bf16
/// values, SpMM and SpMV. `rowwise` computes on `bsr:1xC` (a block row is one row, summed
/// in f32 across its blocks) and refuses blocks of several rows, whose rows it accumulates
/// per block; `default` refuses; `AutoKernel` computes every shape.
#[test]
fn block_formats_compute_or_refuse_by_name() {
    if !have_compiler() {
        return;
    }
    let mut outcomes = Vec::new();
    for d in HALVES {
        for fmt in ["bsr:2x2", "bsr:1x4", "bsr:1x16"] {
            for (s, (kind, m, n)) in SHAPES.into_iter().enumerate() {
                let mut g = rng(s as u64 + 40);
                let coo = matrix(kind, m, n, &mut g);
                let a =
                    SparseTensor::from_coo_with(&coo, &fmt.parse::<Format>().unwrap(), d).unwrap();
                for k in [1, 7, 33] {
                    for (op, program, operand) in [
                        ("spmm", spmm(d, fmt), ("B", dense(&[n, k], d, &mut g))),
                        ("spmv", spmv(d, fmt), ("x", dense(&[n], d, &mut g))),
                    ] {
                        let inputs = HashMap::from([
                            ("A".to_string(), a.clone()),
                            (operand.0.to_string(), operand.1),
                        ]);
                        // Whatever the recipes do, AutoKernel computes it (bsr:2x2: with an
                        // f32 output rounded after).
                        let auto = AutoKernel::new(&program).unwrap();
                        let what = format!("{d} auto {op} {fmt} {kind} {m}x{n} k={k}");
                        let got = auto
                            .run(&inputs, &RunOptions::default())
                            .unwrap_or_else(|e| panic!("{what}: {e}"));
                        let wide: HashMap<String, SparseTensor<'static>> = inputs
                            .iter()
                            .map(|(n, t)| (n.clone(), widened(t)))
                            .collect();
                        let expected = evaluate(&as_f32(&program, d), &wide).unwrap();
                        for (name, t) in &expected {
                            assert_eq!(got[name].values.dtype(), d, "{what}");
                            for (x, y) in got[name].to_dense_f64().iter().zip(&t.to_dense_f64()) {
                                assert!(
                                    (x - y).abs() <= unit(d) * y.abs() + 1e-5,
                                    "{what}: {x} vs {y}"
                                );
                            }
                        }
                        for spec in ["rowwise", "default"] {
                            let what = format!("{d} {spec} {op} {fmt} {kind} {m}x{n} k={k}");
                            match compile_recipe(&program, &inputs, spec) {
                                Ok(kernel) => {
                                    check(&kernel, &program, &inputs, d, &what);
                                    outcomes.push(format!("{spec} {op} {fmt}: ok"));
                                }
                                Err(e) => {
                                    assert!(half_sum_refusal(&e.to_string()), "{what}: {e}");
                                    outcomes.push(format!("{spec} {op} {fmt}: refused"));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    outcomes.sort();
    outcomes.dedup();
    assert_eq!(
        outcomes,
        [
            "default spmm bsr:1x16: refused",
            "default spmm bsr:1x4: refused",
            "default spmm bsr:2x2: refused",
            "default spmv bsr:1x16: refused",
            "default spmv bsr:1x4: refused",
            "default spmv bsr:2x2: refused",
            "rowwise spmm bsr:1x16: ok",
            "rowwise spmm bsr:1x4: ok",
            "rowwise spmm bsr:2x2: refused",
            "rowwise spmv bsr:1x16: ok",
            "rowwise spmv bsr:1x4: ok",
            "rowwise spmv bsr:2x2: refused",
        ]
    );
}

/// A batched SpMM on f16/bf16: no CPU recipe keeps its rows in f32 locals (the batch
/// width is not fixed), so `AutoKernel` runs the program with an f32 output and rounds
/// it after the run; the result keeps its type.
#[test]
fn batched_spmm_runs_with_an_f32_output_rounded_after() {
    if !have_compiler() {
        return;
    }
    for d in HALVES {
        let program = format!("tensor A: {d}[m, n] csr\ntensor X: {d}[b, n, k]\ntensor Y: {d}[b, m, k]\nY[b,i,k] = A[i,j] * X[b,j,k]\n");
        for (s, (kind, m, n)) in SHAPES.into_iter().enumerate() {
            let mut g = rng(s as u64 + 70);
            let coo = matrix(kind, m, n, &mut g);
            let inputs = HashMap::from([
                (
                    "A".to_string(),
                    SparseTensor::from_coo_with(&coo, &Format::Csr, d).unwrap(),
                ),
                ("X".to_string(), dense(&[3, n, 7], d, &mut g)),
            ]);
            let what = format!("{d} batched {kind} {m}x{n}");
            assert!(
                compile_recipe(&program, &inputs, "rowwise").is_err(),
                "{what}"
            );
            let auto = AutoKernel::new(&program).unwrap();
            let wide: HashMap<String, SparseTensor<'static>> = inputs
                .iter()
                .map(|(n, t)| (n.clone(), widened(t)))
                .collect();
            let expected = evaluate(&as_f32(&program, d), &wide).unwrap();
            for threads in [1, 2] {
                let got = auto
                    .run(
                        &inputs,
                        &RunOptions {
                            threads: Some(threads),
                            ..RunOptions::default()
                        },
                    )
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(got["Y"].values.dtype(), d, "{what}");
                let (g, e) = (got["Y"].to_dense_f64(), expected["Y"].to_dense_f64());
                for (x, y) in g.iter().zip(&e) {
                    assert!(
                        (x - y).abs() <= unit(d) * y.abs() + 1e-5,
                        "{what}: {x} vs {y}"
                    );
                }
            }
            let note = auto.last_selection().unwrap().note.unwrap_or_default();
            assert!(note.contains("f32 outputs"), "{what}: {note}");
        }
    }
}
