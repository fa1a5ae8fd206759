//! Compiled kernels end to end with hand-written C implementing the kernel ABI and
//! hand-built stage-III functions: SpMV over CSR against the interpreter on seeded
//! random matrices and several thread counts, phase order, phase failures, the launcher's
//! chunking, compile-cache reporting, integer buffers, structure arrays of outputs, and
//! sharing a kernel between threads (argument checks are in `jit_args.rs`). Tests print
//! that they skipped when no C compiler runs.

mod common;
mod jit_support;

use std::collections::HashMap;

use common::*;
use jit_support::*;
use sparsile_formats::Format;
use sparsile_ir::coord::{BinaryOp, BufferRole, Param, Program};
use sparsile_ir::loops::{BufferKind, Expr as LExpr, Func, Stage};
use sparsile_ir::settings::Settings;
use sparsile_ir::DType;
use sparsile_runtime::jit::{CacheOutcome, JitError, Launcher, CHUNKS_PER_THREAD, MAX_THREADS};
use sparsile_runtime::{
    interpret, CompiledKernel, InterpError, InterpOptions, KernelError, KernelOptions,
};

#[test]
fn spmv_matches_the_interpreter() {
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("spmv_matches_the_interpreter", dir.path()) else {
        return;
    };
    for (dtype, ctype, tol) in [(DType::F64, "double", 1e-12), (DType::F32, "float", 1e-5)] {
        let kernel = CompiledKernel::build_with(
            spmv_program(dtype),
            spmv_func(dtype),
            spmv_source(ctype, false, false),
            &cache,
            4,
        )
        .unwrap();
        for (seed, m, n) in [(1, 37, 23), (2, 1, 5), (3, 200, 64), (4, 0, 3), (5, 9, 1)] {
            let (a, x) = random_case(seed, m, n);
            let ins = inputs(&a, &x, dtype);
            let want = interpret(kernel.program(), &ins, &InterpOptions::default()).unwrap();
            for threads in [1, 2, 3, 8] {
                let opts = KernelOptions {
                    threads: Some(threads),
                    parallelism: sparsile_runtime::jit::Parallelism::Always,
                    ..KernelOptions::default()
                };
                let got = kernel.run(&ins, &opts).unwrap();
                assert_eq!(got.len(), 1);
                let (gy, wy) = (&got["y"], &want["y"]);
                assert_eq!(gy.dtype(), dtype);
                assert_eq!(gy.shape(), wy.shape());
                assert_eq!(gy.format(), wy.format());
                assert_close_rel(&gy.values.to_f64_vec(), &wy.values.to_f64_vec(), tol);
            }
        }
    }
}

#[test]
fn phases_run_in_order_and_failures_name_the_phase() {
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("phases_run_in_order", dir.path()) else {
        return;
    };
    let build = |fail| {
        CompiledKernel::build_with(
            spmv_program(DType::F64),
            spmv_func(DType::F64),
            spmv_source("double", true, fail),
            &cache,
            3,
        )
        .unwrap()
    };
    let (a, x) = random_case(11, 50, 17);
    let ins = inputs(&a, &x, DType::F64);
    let want = interpret(&spmv_program(DType::F64), &ins, &InterpOptions::default()).unwrap();
    let doubled: Vec<f64> = want["y"]
        .values
        .to_f64_vec()
        .iter()
        .map(|v| 2.0 * v)
        .collect();
    let got = build(false).run(&ins, &KernelOptions::default()).unwrap();
    assert_close_rel(&got["y"].values.to_f64_vec(), &doubled, 1e-12);

    let err = build(true)
        .run(&ins, &KernelOptions::default())
        .unwrap_err();
    assert!(
        matches!(
            err,
            KernelError::Jit(JitError::PhaseFailed {
                phase: 1,
                code: 7,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("phase 1 failed with code 7"),
        "{err}"
    );
}

#[test]
fn compile_info_reports_misses_then_hits() {
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("compile_info_reports", dir.path()) else {
        return;
    };
    let build = || {
        CompiledKernel::build_with(
            spmv_program(DType::F64),
            spmv_func(DType::F64),
            spmv_source("double", false, false),
            &cache,
            2,
        )
        .unwrap()
    };
    let first = build();
    assert_eq!(first.compile_info().outcome, CacheOutcome::Miss);
    let second = build();
    assert_eq!(second.compile_info().outcome, CacheOutcome::Hit);
    assert_eq!(second.compile_info().object, first.compile_info().object);
    assert!(first.compile_info().object.is_file());
    assert_eq!(first.source(), spmv_source("double", false, false));
}

#[test]
fn launcher_chunks_cover_every_work_item_once() {
    for threads in [1, 2, 3, 7] {
        let l = Launcher::new(Some(threads), &Settings::default()).unwrap();
        assert_eq!(l.threads(), threads);
        for extent in [0i64, 1, 2, 5, 27, 28, 29, 1000] {
            let chunks = l.chunks(extent);
            let per = CHUNKS_PER_THREAD * threads;
            assert!(chunks.len() <= per);
            assert_eq!(chunks.len() as i64, extent.min(per as i64));
            let mut next = 0;
            for &(b, e) in &chunks {
                assert_eq!(b, next);
                assert!(e > b, "chunks are not empty");
                next = e;
            }
            assert_eq!(next, extent);
        }
    }
    assert!(matches!(
        Launcher::new(Some(0), &Settings::default()),
        Err(JitError::ZeroThreads)
    ));
    assert!(matches!(
        Launcher::new(Some(MAX_THREADS + 1), &Settings::default()),
        Err(JitError::TooManyThreads { .. })
    ));
    let from_settings = Settings {
        num_threads: Some(5),
        ..Settings::default()
    };
    assert_eq!(Launcher::new(None, &from_settings).unwrap().threads(), 5);
}

/// `C[i] = B[eid[i]]`, `D[i] = 2 * eid[i]` with an i32 index map `eid` (out-of-range
/// entries read 0) and an i32 output `D`.
fn gather_program() -> Program {
    let mut b = Builder::new("gather");
    let (m, e) = (b.param("m"), b.param("e"));
    let i = b.dense("I", m);
    let ea = b.dense("E", e);
    let eid = b.buf_t("eid", DType::I32, &[i], BufferRole::Input);
    let src = b.buf("B", &[ea], BufferRole::Input);
    let c = b.buf("C", &[i], BufferRole::Output);
    let d = b.buf_t("D", DType::I32, &[i], BufferRole::Output);
    let vi = b.var("i", i);
    let s = b.iter(
        "g",
        &[(vi, S)],
        vec![],
        vec![
            st(c, vec![v(vi)], ld(src, vec![ld(eid, vec![v(vi)])])),
            st(d, vec![v(vi)], mul(int(2), ld(eid, vec![v(vi)]))),
        ],
    );
    b.p.body.push(s);
    b.p
}

fn gather_func() -> Func {
    let mut f = Func::new("gather", Stage::Flat);
    let m = f.params.push(Param { name: "m".into() });
    let e = f.params.push(Param { name: "e".into() });
    for (name, dtype, len, role) in [
        ("eid", DType::I32, m, BufferRole::Input),
        ("B", DType::F64, e, BufferRole::Input),
        ("C", DType::F64, m, BufferRole::Output),
        ("D", DType::I32, m, BufferRole::Output),
    ] {
        f.buffers.push(flat(
            name,
            dtype,
            LExpr::Param(len),
            BufferKind::Values,
            role,
        ));
    }
    f
}

const GATHER_C: &str = r#"#include <stdint.h>
int64_t sparsile_abi_version(void) { return 3; }
int64_t sparsile_phase_partition(int64_t ph) { (void)ph; return 0; }
int32_t sparsile_phase_bounds(int64_t ph, void *const *buffers, const int64_t *params, int64_t n, int64_t *bounds) { (void)ph; (void)buffers; (void)params; (void)n; (void)bounds; return 1; }
int64_t sparsile_phase_work(int64_t ph, void *const *buffers, const int64_t *params) { (void)ph; (void)buffers; (void)params; return -1; }
int64_t sparsile_num_phases(void) { return 1; }
int64_t sparsile_phase_extent(int64_t ph, void *const *buffers, const int64_t *params) {
    (void)ph; (void)buffers; return params[0];
}
int32_t sparsile_phase_run(int64_t ph, void *const *buffers, const int64_t *params,
                           int64_t begin, int64_t end) {
    const int32_t *eid = (const int32_t *)buffers[0];
    const double *b = (const double *)buffers[1];
    double *c = (double *)buffers[2];
    int32_t *d = (int32_t *)buffers[3];
    (void)ph;
    for (int64_t i = begin; i < end; ++i) {
        int64_t k = eid[i];
        c[i] = (k >= 0 && k < params[1]) ? b[k] : 0.0;
        d[i] = 2 * eid[i];
    }
    return 0;
}
"#;

#[test]
fn integer_buffers_are_converted_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("integer_buffers", dir.path()) else {
        return;
    };
    let kernel =
        CompiledKernel::build_with(gather_program(), gather_func(), GATHER_C.into(), &cache, 2)
            .unwrap();
    let ins = HashMap::from([
        (
            "eid".to_string(),
            dense_tensor(&[6], vec![2.0, 0.0, -1.0, 3.0, 7.0, 1.0]),
        ),
        (
            "B".to_string(),
            dense_tensor(&[4], vec![10.0, 20.0, 30.0, 40.0]),
        ),
    ]);
    let want = interpret(kernel.program(), &ins, &InterpOptions::default()).unwrap();
    let got = kernel.run(&ins, &KernelOptions::default()).unwrap();
    for name in ["C", "D"] {
        assert_eq!(
            got[name].dtype(),
            DType::F64,
            "integer outputs come back as f64"
        );
        assert_eq!(
            got[name].values.to_f64_vec(),
            want[name].values.to_f64_vec(),
            "{name}"
        );
    }
    assert_eq!(
        got["C"].values.to_f64_vec(),
        vec![30.0, 10.0, 0.0, 40.0, 0.0, 20.0]
    );

    let bad = HashMap::from([
        ("eid".to_string(), dense_tensor(&[2], vec![0.0, 0.5])),
        (
            "B".to_string(),
            dense_tensor(&[4], vec![10.0, 20.0, 30.0, 40.0]),
        ),
    ]);
    let err = kernel.run(&bad, &KernelOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            KernelError::Bind(InterpError::NotAnInteger { offset: 1, .. })
        ),
        "{err:?}"
    );
}

#[test]
fn building_without_a_compiler_is_a_clear_error() {
    let settings = Settings {
        cc: Some("sparsile-no-such-cc-0x5eed".into()),
        ..Settings::default()
    };
    let err = CompiledKernel::build(
        spmv_program(DType::F64),
        spmv_func(DType::F64),
        spmv_source("double", false, false),
        &settings,
    )
    .unwrap_err();
    assert!(
        matches!(err, KernelError::Jit(JitError::NoCompiler { .. })),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("the interpreter still works"),
        "{err}"
    );
}

#[test]
fn compiled_kernels_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CompiledKernel>();
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("compiled_kernels_can_be_shared", dir.path()) else {
        return;
    };
    let kernel = build(&cache, spmv_func(DType::F64)).unwrap();
    let (a, x) = random_case(41, 64, 16);
    let ins = inputs(&a, &x, DType::F64);
    let want = interpret(kernel.program(), &ins, &InterpOptions::default()).unwrap();
    std::thread::scope(|s| {
        for t in 1..=4 {
            let (kernel, ins, want) = (&kernel, &ins, &want);
            s.spawn(move || {
                let opts = KernelOptions {
                    threads: Some(t),
                    parallelism: sparsile_runtime::jit::Parallelism::Always,
                    ..KernelOptions::default()
                };
                let got = kernel.run(ins, &opts).unwrap();
                assert_close_rel(
                    &got["y"].values.to_f64_vec(),
                    &want["y"].values.to_f64_vec(),
                    1e-12,
                );
            });
        }
    });
}

#[test]
fn a_cached_object_that_does_not_load_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("a_cached_object_that_does_not_load", dir.path()) else {
        return;
    };
    let source = spmv_source("double", false, false);
    let object = cache.object_path(&source);
    std::fs::create_dir_all(object.parent().unwrap()).unwrap();
    std::fs::write(&object, b"not an object").unwrap();
    let kernel = build(&cache, spmv_func(DType::F64)).unwrap();
    assert_eq!(kernel.compile_info().outcome, CacheOutcome::Miss);
    assert_eq!(kernel.compile_info().object, object);
    let (a, x) = random_case(51, 10, 10);
    let ins = inputs(&a, &x, DType::F64);
    let want = interpret(kernel.program(), &ins, &InterpOptions::default()).unwrap();
    let got = kernel.run(&ins, &KernelOptions::default()).unwrap();
    assert_close_rel(
        &got["y"].values.to_f64_vec(),
        &want["y"].values.to_f64_vec(),
        1e-12,
    );
}

/// `C[i, j] = A[i, j] * x[j]` with `C` over `A`'s axes: the output shares `A`'s
/// structure, and the function reads the structure arrays through `C`.
fn scale_program() -> Program {
    let mut b = Builder::new("scale");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    let jd = b.dense("JD", n);
    let a = b.buf("A", &[i, j], BufferRole::Input);
    let x = b.buf("x", &[jd], BufferRole::Input);
    let c = b.buf("C", &[i, j], BufferRole::Output);
    let (vi, vj) = (b.var("i", i), b.var("j", j));
    let it = b.iter(
        "scale",
        &[(vi, S), (vj, S)],
        vec![],
        vec![st(
            c,
            vec![v(vi), v(vj)],
            mul(ld(a, vec![v(vi), v(vj)]), ld(x, vec![v(vj)])),
        )],
    );
    b.p.body.push(it);
    b.p
}

fn scale_func() -> Func {
    let mut f = Func::new("scale", Stage::Flat);
    let m = f.params.push(Param { name: "m".into() });
    let n = f.params.push(Param { name: "n".into() });
    let nnz = f.params.push(Param { name: "nnz".into() });
    let p = LExpr::Param;
    let (inp, out) = (BufferRole::Input, BufferRole::Output);
    f.buffers
        .push(flat("A", DType::F64, p(nnz), BufferKind::Values, inp));
    f.buffers
        .push(flat("x", DType::F64, p(n), BufferKind::Values, inp));
    f.buffers
        .push(flat("C", DType::F64, p(nnz), BufferKind::Values, out));
    let tensor = "C".to_string();
    let indptr = BufferKind::Indptr {
        tensor: tensor.clone(),
        axis: 1,
    };
    let m1 = LExpr::binary(BinaryOp::Add, p(m), LExpr::Int(1));
    f.buffers
        .push(flat("C_1_indptr", DType::I32, m1, indptr, inp));
    let indices = BufferKind::Indices { tensor, axis: 1 };
    f.buffers
        .push(flat("C_1_indices", DType::I32, p(nnz), indices, inp));
    f
}

const SCALE_C: &str = r#"#include <stdint.h>
int64_t sparsile_abi_version(void) { return 3; }
int64_t sparsile_phase_partition(int64_t ph) { (void)ph; return 0; }
int32_t sparsile_phase_bounds(int64_t ph, void *const *buffers, const int64_t *params, int64_t n, int64_t *bounds) { (void)ph; (void)buffers; (void)params; (void)n; (void)bounds; return 1; }
int64_t sparsile_phase_work(int64_t ph, void *const *buffers, const int64_t *params) { (void)ph; (void)buffers; (void)params; return -1; }
int64_t sparsile_num_phases(void) { return 1; }
int64_t sparsile_phase_extent(int64_t ph, void *const *buffers, const int64_t *params) {
    (void)ph; (void)buffers; return params[0];
}
int32_t sparsile_phase_run(int64_t ph, void *const *buffers, const int64_t *params,
                           int64_t begin, int64_t end) {
    const double *a = (const double *)buffers[0];
    const double *x = (const double *)buffers[1];
    double *c = (double *)buffers[2];
    const int32_t *indptr = (const int32_t *)buffers[3];
    const int32_t *indices = (const int32_t *)buffers[4];
    (void)ph; (void)params;
    for (int64_t i = begin; i < end; ++i)
        for (int32_t p = indptr[i]; p < indptr[i + 1]; ++p) c[p] = a[p] * x[indices[p]];
    return 0;
}
"#;

#[test]
fn structure_arrays_of_outputs_are_bound() {
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("structure_arrays_of_outputs", dir.path()) else {
        return;
    };
    let kernel =
        CompiledKernel::build_with(scale_program(), scale_func(), SCALE_C.into(), &cache, 3)
            .unwrap();
    let (a, x) = random_case(61, 40, 12);
    let ins = inputs(&a, &x, DType::F64);
    let want = interpret(kernel.program(), &ins, &InterpOptions::default()).unwrap();
    let got = kernel.run(&ins, &KernelOptions::default()).unwrap();
    assert_eq!(got["C"].format(), &Format::Csr);
    assert_eq!(got["C"].structure.axes, want["C"].structure.axes);
    assert_close_rel(
        &got["C"].values.to_f64_vec(),
        &want["C"].values.to_f64_vec(),
        1e-12,
    );

    // A caller-supplied output structure is used, and returned as the same Arc.
    let given = std::sync::Arc::new(ins["A"].structure.as_ref().clone().into_owned());
    let opts = KernelOptions {
        output_structures: HashMap::from([("C".to_string(), given.clone())]),
        ..KernelOptions::default()
    };
    let got = kernel.run(&ins, &opts).unwrap();
    assert!(std::sync::Arc::ptr_eq(&got["C"].structure, &given));
    assert_close_rel(
        &got["C"].values.to_f64_vec(),
        &want["C"].values.to_f64_vec(),
        1e-12,
    );
    let bad = KernelOptions {
        output_structures: HashMap::from([("A".to_string(), given)]),
        ..KernelOptions::default()
    };
    let err = kernel.run(&ins, &bad).unwrap_err();
    assert!(
        matches!(
            err,
            KernelError::Bind(InterpError::UnknownOutputStructure { .. })
        ),
        "{err:?}"
    );
}

#[test]
fn run_into_overwrites_matching_outputs_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("run_into_overwrites", dir.path()) else {
        return;
    };
    let kernel = CompiledKernel::build_with(
        spmv_program(DType::F64),
        spmv_func(DType::F64),
        spmv_source("double", false, false),
        &cache,
        2,
    )
    .unwrap();
    let values_ptr = |outs: &sparsile_runtime::Outputs| match &outs["y"].values {
        sparsile_formats::Values::F64(v) => v.as_ptr() as usize,
        other => panic!("y is {:?}", other.dtype()),
    };
    for threads in [1, 2] {
        let opts = KernelOptions {
            threads: Some(threads),
            parallelism: sparsile_runtime::jit::Parallelism::Always,
            ..KernelOptions::default()
        };
        // Large enough for the parallel zeroing path.
        let (a, x) = random_case(21, 70_000, 40);
        let ins = inputs(&a, &x, DType::F64);
        let want = interpret(kernel.program(), &ins, &InterpOptions::default()).unwrap();
        let mut outs = kernel.run(&ins, &opts).unwrap();
        let first = values_ptr(&outs);
        for _ in 0..3 {
            kernel.run_into(&ins, &mut outs, &opts).unwrap();
            assert_eq!(values_ptr(&outs), first, "the output storage is reused");
            assert_close_rel(
                &outs["y"].values.to_f64_vec(),
                &want["y"].values.to_f64_vec(),
                1e-12,
            );
        }
        // A different number of rows does not fit: a fresh output replaces it.
        let (a2, x2) = random_case(22, 33, 40);
        let ins2 = inputs(&a2, &x2, DType::F64);
        let want2 = interpret(kernel.program(), &ins2, &InterpOptions::default()).unwrap();
        kernel.run_into(&ins2, &mut outs, &opts).unwrap();
        assert_eq!(outs["y"].shape(), want2["y"].shape());
        assert_close_rel(
            &outs["y"].values.to_f64_vec(),
            &want2["y"].values.to_f64_vec(),
            1e-12,
        );
        // Unrelated entries are left alone; an empty map is filled.
        let mut fresh = sparsile_runtime::Outputs::new();
        fresh.insert("other".into(), outs["y"].clone());
        kernel.run_into(&ins, &mut fresh, &opts).unwrap();
        assert!(fresh.contains_key("other"));
        assert_close_rel(
            &fresh["y"].values.to_f64_vec(),
            &want["y"].values.to_f64_vec(),
            1e-12,
        );
    }
}
