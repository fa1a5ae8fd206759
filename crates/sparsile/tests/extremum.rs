//! `max=` / `min=` reductions and order-0 (scalar) outputs, end to end: the reference
//! interpreter and compiled kernels (1 and 2 threads, f32 and f64) against plain Rust
//! loops over the stored entries; a safe softmax of each row's stored values; every
//! recipe either matching the interpreter or refusing with an error; the text forms of
//! every stage parsing back.
//!
//! Max and min are exact, so results are compared for equality (infinities included);
//! the softmax and the sums are compared within the support module's tolerance.

mod support;

use std::collections::HashMap;

use sparsile::formats::decompose::DecomposeRule;
use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::loops::{GpuAxis, GpuDim};
use sparsile::ir::DType;
use sparsile::recipe::{compile_recipe_for, list};
use sparsile::transform::schedule::{
    LoopRef, ReductionStrategy, Schedule, ScheduleError, SplitTail,
};
use sparsile::{compile, evaluate, Parallelism, RunOptions, Stage, Target};
use support::{close, dense, have_compiler, matrix, rng};

/// [`close`], with infinities equal to themselves.
fn close_inf(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        if x.is_infinite() || y.is_infinite() {
            assert_eq!(x, y, "{what}: element {k}");
        } else {
            close(&[*x], &[*y], tol, &format!("{what}: element {k}"));
        }
    }
}

fn options(threads: usize) -> RunOptions {
    RunOptions {
        threads: Some(threads),
        parallelism: Parallelism::Always,
        ..RunOptions::default()
    }
}

/// The stored entries of a matrix, as `(row, col, value)`.
fn entries(t: &SparseTensor<'_>) -> Vec<(usize, usize, f64)> {
    let coo = t.to_coo().unwrap();
    (0..coo.nnz())
        .map(|e| (coo.coord(e)[0], coo.coord(e)[1], coo.values[e]))
        .collect()
}

/// Each row's largest (`max`) or smallest stored value; the identity on empty rows.
fn row_extremum(t: &SparseTensor<'_>, max: bool) -> Vec<f64> {
    let id = if max {
        f64::NEG_INFINITY
    } else {
        f64::INFINITY
    };
    let mut out = vec![id; t.shape()[0]];
    for (i, _, v) in entries(t) {
        out[i] = if max { out[i].max(v) } else { out[i].min(v) };
    }
    out
}

fn program(op: &str, dtype: &str) -> String {
    format!("tensor A: {dtype}[m, n] csr\ntensor M: {dtype}[m]\nM[i] {op}= A[i,j]\n")
}

fn csr(coo: &CooTensor, dtype: DType) -> SparseTensor<'static> {
    SparseTensor::from_coo_with(coo, &Format::Csr, dtype).unwrap()
}

fn inputs(a: SparseTensor<'static>) -> HashMap<String, SparseTensor<'static>> {
    HashMap::from([("A".to_string(), a)])
}

/// The interpreter and compiled kernels (1 and 2 threads) give `want` for output `M`.
fn check_all(text: &str, ins: &HashMap<String, SparseTensor<'_>>, want: &[f64], what: &str) {
    let got = evaluate(text, ins).unwrap()["M"].to_dense_f64();
    assert_eq!(got, want, "{what}: interpreter");
    if !have_compiler() {
        return;
    }
    let kernel = compile(text).unwrap();
    for threads in [1, 2] {
        let got = kernel.run(ins, &options(threads)).unwrap()["M"].to_dense_f64();
        assert_eq!(got, want, "{what}: compiled, {threads} threads");
    }
}

#[test]
fn row_max_and_min_match_the_stored_entries() {
    let mut r = rng(11);
    for (kind, m, n) in [
        ("random", 37, 53),
        ("empty", 13, 7),
        ("long_row", 9, 3001),
        ("random", 1, 1),
    ] {
        let coo = matrix(kind, m, n, &mut r);
        for dtype in [DType::F32, DType::F64] {
            let a = csr(&coo, dtype);
            for (op, max) in [("max", true), ("min", false)] {
                let want = row_extremum(&a, max);
                let text = program(op, &dtype.to_string());
                check_all(
                    &text,
                    &inputs(a.clone()),
                    &want,
                    &format!("{op} {dtype} {kind} {m}x{n}"),
                );
            }
        }
    }
}

#[test]
fn duplicates_and_unsorted_coordinates_are_summed_before_the_max() {
    // Unsorted, with (2, 1) three times and (0, 3) twice: the usual constructor sums them.
    let mut coo = CooTensor {
        shape: vec![5, 4],
        coords: vec![2, 1, 0, 3, 2, 1, 4, 0, 0, 3, 2, 1, 0, 0],
        values: vec![-1.0, 0.5, -2.0, -3.0, 0.75, -4.0, -0.25],
    };
    coo.sort_and_sum_duplicates();
    let a = csr(&coo, DType::F64);
    assert_eq!(row_extremum(&a, true)[2], -7.0);
    for (op, max) in [("max", true), ("min", false)] {
        let want = row_extremum(&a, max);
        check_all(&program(op, "f64"), &inputs(a.clone()), &want, op);
    }
}

#[test]
fn nan_entries_are_ignored_and_infinities_kept() {
    let coo = CooTensor::from_triplets(
        vec![4, 3],
        &[
            (0, 0, f64::NAN),
            (0, 2, -5.0),
            (1, 1, f64::NAN),
            (2, 0, f64::INFINITY),
            (2, 1, 1.0),
            (3, 2, f64::NEG_INFINITY),
        ],
    )
    .unwrap();
    let a = csr(&coo, DType::F64);
    // fmax/fmin: a NaN operand is ignored, so a row of NaN only keeps the identity.
    let want_max = [-5.0, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY];
    let want_min = [-5.0, f64::INFINITY, 1.0, f64::NEG_INFINITY];
    check_all(&program("max", "f64"), &inputs(a.clone()), &want_max, "max");
    check_all(&program("min", "f64"), &inputs(a), &want_min, "min");
}

#[test]
fn max_of_a_product_with_a_dense_vector() {
    let text =
        "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor M: f32[m]\nM[i] max= A[i,j] * x[j]\n";
    let mut r = rng(3);
    let coo = matrix("random", 29, 31, &mut r);
    let a = csr(&coo, DType::F32);
    let x = dense(&[31], DType::F32, &mut r);
    let xv = x.to_dense_f64();
    let mut want = vec![f64::NEG_INFINITY; 29];
    for (i, j, v) in entries(&a) {
        // The product rounds to f32 in the kernel; compare after the same rounding.
        want[i] = want[i].max(((v as f32) * (xv[j] as f32)) as f64);
    }
    let mut ins = inputs(a);
    ins.insert("x".into(), x);
    if have_compiler() {
        let kernel = compile(text).unwrap();
        for threads in [1, 2] {
            let got = kernel.run(&ins, &options(threads)).unwrap()["M"].to_dense_f64();
            assert_eq!(got, want, "{threads} threads");
        }
    }
    let got = evaluate(text, &ins).unwrap()["M"].to_dense_f64();
    close_inf(&got, &want, 1e-6, "interpreter");
}

const SOFTMAX: &str = "\
tensor A: f64[m, n] csr
tensor M: f64[m]
tensor E: f64[m, n] csr
tensor S: f64[m]
tensor P: f64[m, n] csr
tensor total: f64[]
M[i] max= A[i,j]
E[i,j] = A[i,j] / A[i,j] * exp(A[i,j] - M[i])
S[i] = E[i,j]
P[i,j] = E[i,j] / S[i]
total = P[i,j]
";

#[test]
fn a_safe_softmax_of_each_rows_stored_values() {
    // `A / A` is 1 on every stored (non-zero) entry: it gives `E` the pattern of `A`.
    let mut r = rng(7);
    for (kind, m, n) in [("random", 41, 23), ("empty", 5, 5), ("long_row", 7, 2500)] {
        let mut coo = matrix(kind, m, n, &mut r);
        // Large values: exp without the max subtracted would overflow.
        for v in &mut coo.values {
            *v *= 1000.0;
        }
        let a = csr(&coo, DType::F64);
        let mx = row_extremum(&a, true);
        let mut sums = vec![0.0; m];
        for (i, _, v) in entries(&a) {
            sums[i] += (v - mx[i]).exp();
        }
        let mut want = vec![0.0; m * n];
        for (i, j, v) in entries(&a) {
            want[i * n + j] = (v - mx[i]).exp() / sums[i];
        }
        let rows = mx.iter().filter(|v| v.is_finite()).count() as f64;
        let ins = inputs(a);
        let got = evaluate(SOFTMAX, &ins).unwrap();
        close(&got["P"].to_dense_f64(), &want, 1e-12, "interpreter");
        assert_eq!(got["M"].to_dense_f64(), mx);
        close(&got["total"].to_dense_f64(), &[rows], 1e-12, "total");
        if !have_compiler() {
            continue;
        }
        let kernel = compile(SOFTMAX).unwrap();
        for threads in [1, 2] {
            let out = kernel.run(&ins, &options(threads)).unwrap();
            close(&out["P"].to_dense_f64(), &want, 1e-12, kind);
            assert_eq!(out["M"].to_dense_f64(), mx, "{kind}");
            close(&out["total"].to_dense_f64(), &[rows], 1e-12, kind);
        }
    }
}

#[test]
fn scalar_outputs_sum_everything() {
    let mut r = rng(5);
    for kind in ["random", "empty", "long_row"] {
        let coo = matrix(kind, 33, 47, &mut r);
        let a = csr(&coo, DType::F64);
        let total: f64 = entries(&a).iter().map(|e| e.2).sum();
        let largest = entries(&a)
            .iter()
            .fold(f64::NEG_INFINITY, |m, e| m.max(e.2));
        let ins = inputs(a);
        for (text, want) in [
            (
                "tensor A: f64[m, n] csr\ntensor s: f64[]\ns = A[i,j]\n",
                total,
            ),
            (
                "tensor A: f64[m, n] csr\ntensor s: f64[]\ns[] max= A[i,j]\n",
                largest,
            ),
        ] {
            let got = evaluate(text, &ins).unwrap()["s"].to_dense_f64();
            close_inf(&got, &[want], 1e-12, text);
            if have_compiler() {
                let kernel = compile(text).unwrap();
                for threads in [1, 2] {
                    let out = kernel.run(&ins, &options(threads)).unwrap();
                    assert_eq!(out["s"].shape(), &[] as &[usize]);
                    close_inf(&out["s"].to_dense_f64(), &[want], 1e-12, text);
                }
            }
        }
    }
    // A dense dot product in f32.
    let text = "tensor x: f32[n]\ntensor y: f32[n]\ntensor s: f32[]\ns = x[i] * y[i]\n";
    let x = dense(&[1001], DType::F32, &mut r);
    let y = dense(&[1001], DType::F32, &mut r);
    let want: f64 = x
        .to_dense_f64()
        .iter()
        .zip(y.to_dense_f64())
        .map(|(a, b)| a * b)
        .sum();
    let ins = HashMap::from([("x".to_string(), x), ("y".to_string(), y)]);
    close(
        &evaluate(text, &ins).unwrap()["s"].to_dense_f64(),
        &[want],
        1e-6,
        "dot, interpreter",
    );
    if have_compiler() {
        let kernel = compile(text).unwrap();
        for threads in [1, 2] {
            let out = kernel.run(&ins, &options(threads)).unwrap();
            close(&out["s"].to_dense_f64(), &[want], 1e-4, "dot, compiled");
        }
    }
}

#[test]
fn every_stage_of_the_new_statements_parses_back() {
    for text in [
        program("max", "f32").as_str(),
        program("min", "f64").as_str(),
        SOFTMAX,
        "tensor A: f64[m, n] csr\ntensor idx: i64[m]\ntensor M: f64[k]\nM[idx[i]] min= A[i,j]\n",
        "tensor x: f32[n]\ntensor y: f32[n]\ntensor s: f32[]\ns = x[i] * y[i]\n",
        "tensor A: f64[m, n] csr\ntensor s: f64[]\ns max= A[i,j]\n",
    ] {
        let stage1 = sparsile::compile_notation(text).unwrap();
        let printed = stage1.to_string();
        let back: sparsile::ir::coord::Program = printed.parse().unwrap();
        assert_eq!(back.to_string(), printed, "stage I of {text}");
        let kernel = compile(text).unwrap();
        for stage in [Stage::Stage2, Stage::Stage3] {
            let printed = kernel.ir(stage);
            let back: sparsile::ir::loops::Func = printed.parse().unwrap();
            assert_eq!(back.to_string(), printed, "{stage:?} of {text}");
        }
    }
    let c = compile(&program("max", "f32")).unwrap().ir(Stage::C);
    assert!(c.contains("= -INFINITY;") && c.contains("fmaxf("), "{c}");
    let c = compile(&program("min", "f64")).unwrap().ir(Stage::C);
    assert!(c.contains("= INFINITY;") && c.contains("fmin("), "{c}");
}

/// Every recipe either refuses the row max (an error, no panic) or matches the
/// interpreter; returns the names of those that ran.
fn recipes_on(text: &str, ins: &HashMap<String, SparseTensor<'_>>) -> Vec<String> {
    let want = evaluate(text, ins).unwrap()["M"].to_dense_f64();
    let mut ran = Vec::new();
    let variants = [
        ("daspmm", "daspmm:balance=nnz,reduce=par"),
        ("daspmm", "daspmm:dense=col,reduce=par"),
        ("daspmm", "daspmm:balance=nnz,dense=col"),
        ("gpu_da", "gpu_da:balance=eb"),
        ("gpu_da", "gpu_da:reduce=pr"),
        ("gpu_da", "gpu_da:balance=eb,reduce=pr"),
        ("rowwise", "rowwise:cache=off,partition=dynamic"),
    ];
    let infos = list();
    let specs = infos
        .iter()
        .map(|i| (i, i.name.to_string()))
        .chain(variants.iter().map(|(name, spec)| {
            let info = infos.iter().find(|i| i.name == *name).unwrap();
            (info, spec.to_string())
        }));
    for (info, spec) in specs {
        let target = if info.gpu {
            Target::CudaSim
        } else {
            Target::Cpu
        };
        if !info.gpu && !have_compiler() {
            continue;
        }
        match compile_recipe_for(text, ins, &spec, target) {
            Ok(kernel) => {
                let got = kernel.run(ins, &options(2)).unwrap()["M"].to_dense_f64();
                assert_eq!(got, want, "recipe {spec}");
                ran.push(spec);
            }
            Err(e) => eprintln!("{spec} refuses: {e}"),
        }
    }
    ran
}

#[test]
fn recipes_run_the_row_max_correctly_or_refuse_it() {
    let mut r = rng(13);
    let coo = matrix("random", 45, 38, &mut r);
    let text =
        "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor M: f32[m]\nM[i] max= A[i,j] * x[j]\n";
    let mut ins = inputs(csr(&coo, DType::F32));
    ins.insert("x".into(), dense(&[38], DType::F32, &mut r));
    let ran = recipes_on(text, &ins);
    assert!(
        ran.iter().any(|r| r == "default") || !have_compiler(),
        "{ran:?}"
    );
    eprintln!("recipes that ran the row max: {ran:?}");
    // SpMM-shaped: the row-and-width recipes (daspmm, gpu_da, gpu_rowcache) apply.
    let text = "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor M: f32[m, k]\nM[i,c] max= A[i,j] * B[j,c]\n";
    for width in [5, 16] {
        let mut ins = inputs(csr(&coo, DType::F32));
        ins.insert("B".into(), dense(&[38, width], DType::F32, &mut r));
        let ran = recipes_on(text, &ins);
        assert!(
            ran.iter().any(|r| r == "default") || !have_compiler(),
            "{ran:?}"
        );
        eprintln!("recipes that ran the SpMM-shaped max at width {width}: {ran:?}");
    }
}

const ROW_MAX: &str =
    "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor M: f32[m]\nM[i] max= A[i,j] * x[j]\n";
const ALL_MAX: &str = "tensor A: f32[m, n] csr\ntensor s: f32[]\ns max= A[i,j]\n";

fn schedule(text: &str) -> Schedule {
    Schedule::new(&sparsile::compile_notation(text).unwrap())
}

#[test]
fn sum_only_transformations_refuse_a_max_reduction_by_name() {
    // The scalar's loops all update one element: no plain `parallel`, and no way to
    // combine partial results by `+`.
    let outer = LoopRef::new("s", "i");
    let err = schedule(ALL_MAX).parallel(&outer).unwrap_err();
    assert!(matches!(err, ScheduleError::LoopCarriedAccess(_)), "{err}");
    for strategy in [
        ReductionStrategy::Atomic,
        ReductionStrategy::PerThread { copies: 2 },
    ] {
        let err = schedule(ALL_MAX)
            .parallel_reduce(&outer, strategy)
            .unwrap_err();
        assert!(matches!(err, ScheduleError::NotAReduction { .. }), "{err}");
    }
    let err = schedule(ALL_MAX)
        .bind_atomic(&outer, GpuAxis::Block(GpuDim::X))
        .unwrap_err();
    assert!(matches!(err, ScheduleError::NotAReduction { .. }), "{err}");

    // rfactor's partial results are added back.
    let mut sch = schedule(ROW_MAX);
    let (o, i) = sch
        .split(&LoopRef::new("M", "j_p"), 4, SplitTail::InnerFixed)
        .unwrap();
    let err = sch.rfactor(&o, &i).unwrap_err();
    assert!(matches!(err, ScheduleError::NotAReduction { .. }), "{err}");

    // Reassociation (vector lanes, hoisted factors) is for sums into locals.
    let mut sch = schedule(ROW_MAX);
    sch.cache_write(&LoopRef::new("M", "i_2"), "M").unwrap();
    let nonzeros = LoopRef::new("M", "j_p");
    let err = sch.vectorize_reduction(&nonzeros, 1, false).unwrap_err();
    assert!(
        matches!(err, ScheduleError::NotReassociable { .. }),
        "{err}"
    );
    let err = sch.hoist_factor(&nonzeros).unwrap_err();
    assert!(
        matches!(err, ScheduleError::NotReassociable { .. }),
        "{err}"
    );
    let err = sch.batch_reduction(&LoopRef::new("M", "i_2")).unwrap_err();
    assert!(matches!(err, ScheduleError::NotBatchable { .. }), "{err}");

    // A decomposed operand's parts are summed.
    let err = schedule(ROW_MAX)
        .decompose_format("A", DecomposeRule::Hyb { c: 1, k: 2 })
        .unwrap_err();
    assert!(
        matches!(err, ScheduleError::NotAnAccumulation { .. }),
        "{err}"
    );
}

#[test]
fn row_parallel_cache_write_and_absorb_init_keep_a_max_reduction() {
    let mut sch = schedule(ROW_MAX);
    sch.cache_write(&LoopRef::new("M", "i_2"), "M").unwrap();
    sch.absorb_init("M", "M").unwrap();
    sch.parallel(&LoopRef::new("M", "i_2")).unwrap();
    let text = sch.func().unwrap().to_string();
    assert!(text.contains("M_local[0] = -inf"), "{text}");
    if !have_compiler() {
        return;
    }
    let mut r = rng(17);
    let coo = matrix("random", 40, 33, &mut r);
    let mut ins = inputs(csr(&coo, DType::F32));
    ins.insert("x".into(), dense(&[33], DType::F32, &mut r));
    let want = evaluate(ROW_MAX, &ins).unwrap()["M"].to_dense_f64();
    let ast = sparsile::notation::parse(ROW_MAX).unwrap();
    let kernel =
        sparsile::compile_program_with(sparsile::lower(&ast).unwrap(), sch.trace()).unwrap();
    for threads in [1, 2] {
        let got = kernel.run(&ins, &options(threads)).unwrap()["M"].to_dense_f64();
        close_inf(&got, &want, 1e-6, &format!("{threads} threads"));
    }
}

#[test]
fn the_automatic_choice_keeps_the_format_and_runs_a_max_reduction() {
    let mut r = rng(19);
    // Even rows of one length: the choice would store a sum's operand in ELL, whose
    // padding would take part in a max.
    let t: Vec<(usize, usize, f64)> = (0..64)
        .flat_map(|i| (0..4).map(move |k| (i, (i * 7 + k * 13) % 64, -1.0 - k as f64)))
        .collect();
    let coo = CooTensor::from_triplets(vec![64, 64], &t).unwrap();
    let mut ins = inputs(csr(&coo, DType::F32));
    ins.insert("x".into(), dense(&[64], DType::F32, &mut r));
    let selection = sparsile::auto::choose(ROW_MAX, &ins, 2, true).unwrap();
    assert_eq!(selection.op, sparsile::tune::op::Operator::Other);
    assert_eq!(selection.candidate.format, "csr", "{selection:?}");
    let gpu = sparsile::compile_notation(ROW_MAX).unwrap();
    assert_eq!(sparsile::auto::gpu_rule(&gpu), "gpu_rowwise");
    if !have_compiler() {
        return;
    }
    let want = evaluate(ROW_MAX, &ins).unwrap()["M"].to_dense_f64();
    let auto = sparsile::AutoKernel::new(ROW_MAX).unwrap();
    for threads in [1, 2] {
        let got = auto.run(&ins, &options(threads)).unwrap()["M"].to_dense_f64();
        close_inf(&got, &want, 1e-6, &format!("auto, {threads} threads"));
    }
}

#[test]
fn a_scalar_sum_runs_in_parallel_only_through_a_reduction() {
    let text = "tensor A: f64[m, n] csr\ntensor s: f64[]\ns = A[i,j]\n";
    let outer = LoopRef::new("s", "i");
    let err = schedule(text).parallel(&outer).unwrap_err();
    assert!(matches!(err, ScheduleError::LoopCarriedAccess(_)), "{err}");
    // The default schedule leaves the scalar's loops serial.
    let pos = compile(text).unwrap().ir(Stage::Stage2);
    assert!(!pos.contains("parallel"), "{pos}");
    if !have_compiler() {
        return;
    }
    let mut r = rng(23);
    let ins = inputs(csr(&matrix("long_row", 70, 90, &mut r), DType::F64));
    let want = evaluate(text, &ins).unwrap()["s"].to_dense_f64();
    for strategy in [
        ReductionStrategy::Atomic,
        ReductionStrategy::PerThread { copies: 3 },
    ] {
        let mut sch = schedule(text);
        sch.parallel_reduce(&outer, strategy).unwrap();
        let stage1 = sparsile::compile_notation(text).unwrap();
        let kernel = sparsile::compile_program_with(stage1, sch.trace()).unwrap();
        for threads in [1, 2] {
            let got = kernel.run(&ins, &options(threads)).unwrap()["s"].to_dense_f64();
            close(
                &got,
                &want,
                1e-12,
                &format!("{strategy:?}, {threads} threads"),
            );
        }
    }
}

#[test]
fn cache_write_shared_refuses_a_max_reduction() {
    // A row per block, the width over the lanes, each lane walking the row's non-zeros:
    // plain updates, which the primitive would zero in shared memory and add back.
    let text = "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor M: f32[m, k]\nM[i,c] max= A[i,j] * B[j,c]\n";
    let mut sch = schedule(text);
    let at = |var: &str| LoopRef::new("M", var);
    sch.bound(&at("c_2"), 32).unwrap();
    sch.reorder(&[at("c_2"), at("j_p")]).unwrap();
    sch.bind(&at("i_2"), GpuAxis::Block(GpuDim::X)).unwrap();
    sch.bind(&at("c_2"), GpuAxis::Thread(GpuDim::X)).unwrap();
    let err = sch.cache_write_shared(&at("i_2"), "M").unwrap_err();
    assert!(matches!(err, ScheduleError::CacheBuffer { .. }), "{err}");
    assert!(err.to_string().contains("+"), "{err}");
}
