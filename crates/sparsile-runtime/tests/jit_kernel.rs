//! Compiled kernels end to end with hand-written C implementing the kernel ABI and
//! hand-built stage-III functions: SpMV over CSR against the interpreter on seeded
//! random matrices and several thread counts, phase order, phase failures, the launcher's
//! chunking, compile-cache reporting, and argument-check errors. Tests print that they
//! skipped when no C compiler runs.

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::*;
use sparsile_formats::{CooTensor, Format, SparseTensor, Values};
use sparsile_ir::coord::{BinaryOp, BufferRole, Param, Program};
use sparsile_ir::loops::{Buffer, BufferKind, BufferLayout, Expr as LExpr, Func, Stage};
use sparsile_ir::settings::Settings;
use sparsile_ir::{DType, IndexType, Span};
use sparsile_runtime::jit::{Cache, CacheOutcome, Compiler, JitError, Launcher};
use sparsile_runtime::{
    interpret, CompiledKernel, InterpError, InterpOptions, KernelError, KernelOptions,
};

fn cache_or_skip(test: &str, dir: &Path) -> Option<Cache> {
    let settings = Settings {
        cache_dir: Some(dir.to_path_buf()),
        ..Settings::from_env()
    };
    match Compiler::detect(&settings) {
        Ok(c) => Some(Cache::with_compiler(dir.to_path_buf(), c)),
        Err(e) => {
            eprintln!("{test}: skipped, no C compiler: {e}");
            None
        }
    }
}

/// `y[i] = sum_j A[i, j] * x[j]`, A in CSR with i32 indices, all of `dtype`.
fn spmv_program(dtype: DType) -> Program {
    let mut b = Builder::new("spmv");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    let jd = b.dense("JD", n);
    let a = b.buf_t("A", dtype, &[i, j], BufferRole::Input);
    let x = b.buf_t("x", dtype, &[jd], BufferRole::Input);
    let y = b.buf_t("y", dtype, &[i], BufferRole::Output);
    let (vi, vj) = (b.var("i", i), b.var("j", j));
    let it = b.iter(
        "spmv",
        &[(vi, S), (vj, R)],
        vec![st(y, vec![v(vi)], sparsile_ir::coord::Expr::Float(0.0))],
        vec![acc(
            y,
            vec![v(vi)],
            mul(ld(a, vec![v(vi), v(vj)]), ld(x, vec![v(vj)])),
        )],
    );
    b.p.body.push(it);
    b.p
}

fn flat(name: &str, dtype: DType, len: LExpr, kind: BufferKind, role: BufferRole) -> Buffer {
    Buffer {
        name: name.into(),
        dtype,
        layout: BufferLayout::Flat(len),
        role,
        kind,
        span: Span::default(),
    }
}

/// The stage-III signature of [`spmv_program`]: buffers `A, x, y, A_1_indptr,
/// A_1_indices`, params `m, n, nnz` (the body is in the hand-written C).
fn spmv_func(dtype: DType) -> Func {
    let mut f = Func::new("spmv", Stage::Flat);
    let m = f.params.push(Param { name: "m".into() });
    let n = f.params.push(Param { name: "n".into() });
    let nnz = f.params.push(Param { name: "nnz".into() });
    let p = LExpr::Param;
    let arr = |tensor: &str| (tensor.to_string(), 1usize);
    f.buffers.push(flat(
        "A",
        dtype,
        p(nnz),
        BufferKind::Values,
        BufferRole::Input,
    ));
    f.buffers.push(flat(
        "x",
        dtype,
        p(n),
        BufferKind::Values,
        BufferRole::Input,
    ));
    f.buffers.push(flat(
        "y",
        dtype,
        p(m),
        BufferKind::Values,
        BufferRole::Output,
    ));
    let (tensor, axis) = arr("A");
    f.buffers.push(flat(
        "A_1_indptr",
        DType::I32,
        LExpr::binary(BinaryOp::Add, p(m), LExpr::Int(1)),
        BufferKind::Indptr {
            tensor: tensor.clone(),
            axis,
        },
        BufferRole::Input,
    ));
    f.buffers.push(flat(
        "A_1_indices",
        DType::I32,
        p(nnz),
        BufferKind::Indices { tensor, axis },
        BufferRole::Input,
    ));
    f
}

/// SpMV in C for values of C type `t`; `extra_phase` appends a serial phase doubling `y`,
/// `fail_phase1` makes that phase return 7.
fn spmv_source(t: &str, extra_phase: bool, fail_phase1: bool) -> String {
    format!(
        r#"#include <stdint.h>
#include <math.h>
int64_t sparsile_abi_version(void) {{ return 1; }}
int64_t sparsile_num_phases(void) {{ return {phases}; }}
int64_t sparsile_phase_extent(int64_t ph, void *const *buffers, const int64_t *params) {{
    (void)buffers;
    return ph == 0 ? params[0] : 1;
}}
int32_t sparsile_phase_run(int64_t ph, void *const *buffers, const int64_t *params,
                           int64_t begin, int64_t end) {{
    const {t} *a = (const {t} *)buffers[0];
    const {t} *x = (const {t} *)buffers[1];
    {t} *y = ({t} *)buffers[2];
    const int32_t *indptr = (const int32_t *)buffers[3];
    const int32_t *indices = (const int32_t *)buffers[4];
    if (ph == 0) {{
        for (int64_t i = begin; i < end; ++i) {{
            {t} acc = 0;
            for (int32_t p = indptr[i]; p < indptr[i + 1]; ++p) acc = acc + a[p] * x[indices[p]];
            y[i] = acc;
        }}
        return 0;
    }}
    if ({fail}) return 7;
    for (int64_t i = 0; i < params[0]; ++i) y[i] = y[i] * 2;
    return 0;
}}
"#,
        phases = if extra_phase { 2 } else { 1 },
        fail = i32::from(fail_phase1),
    )
}

fn inputs(a: &CooTensor, x: &CooTensor, dtype: DType) -> HashMap<String, SparseTensor<'static>> {
    let cast = |t: SparseTensor<'static>| SparseTensor {
        values: Values::from_f64(&t.values.to_f64_vec(), dtype),
        structure: t.structure,
    };
    HashMap::from([
        (
            "A".to_string(),
            cast(SparseTensor::from_coo(a, &Format::Csr).unwrap()),
        ),
        (
            "x".to_string(),
            cast(SparseTensor::from_coo(x, &Format::Dense).unwrap()),
        ),
    ])
}

fn random_case(seed: u64, m: usize, n: usize) -> (CooTensor, CooTensor) {
    let mut r = rng(seed);
    // Every third row empty, some rows long.
    let lens: Vec<usize> = (0..m)
        .map(|i| {
            if i % 3 == 1 {
                0
            } else {
                (i * 7 + seed as usize) % (n + 1)
            }
        })
        .collect();
    let a = coo_rows(&mut r, m, n, |i| lens[i]);
    let x = random_coo(&mut r, &[n], 1.0);
    (a, x)
}

fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "entry {k}: got {g}, want {w}"
        );
    }
}

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
                    ..KernelOptions::default()
                };
                let got = kernel.run(&ins, &opts).unwrap();
                assert_eq!(got.len(), 1);
                let (gy, wy) = (&got["y"], &want["y"]);
                assert_eq!(gy.dtype(), dtype);
                assert_eq!(gy.shape(), wy.shape());
                assert_eq!(gy.format(), wy.format());
                assert_close(&gy.values.to_f64_vec(), &wy.values.to_f64_vec(), tol);
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
    assert_close(&got["y"].values.to_f64_vec(), &doubled, 1e-12);

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
            assert!(chunks.len() <= 4 * threads);
            assert_eq!(chunks.len() as i64, extent.min(4 * threads as i64));
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
    let from_settings = Settings {
        num_threads: Some(5),
        ..Settings::default()
    };
    assert_eq!(Launcher::new(None, &from_settings).unwrap().threads(), 5);
}

/// Builds the SpMV kernel with `func` (or reports the build error).
fn build(cache: &Cache, func: Func) -> Result<CompiledKernel, KernelError> {
    CompiledKernel::build_with(
        spmv_program(DType::F64),
        func,
        spmv_source("double", false, false),
        cache,
        2,
    )
}

#[test]
fn build_checks_the_function_against_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("build_checks_the_function", dir.path()) else {
        return;
    };
    let mut f = spmv_func(DType::F64);
    f.stage = Stage::Pos;
    assert!(matches!(build(&cache, f), Err(KernelError::NotFlat { .. })));

    let mut f = spmv_func(DType::F64);
    f.buffers.push(flat(
        "z",
        DType::F64,
        LExpr::Int(1),
        BufferKind::Values,
        BufferRole::Input,
    ));
    let err = build(&cache, f).unwrap_err();
    assert!(
        matches!(&err, KernelError::UnknownBuffer { buffer } if buffer == "z"),
        "{err:?}"
    );

    let f = spmv_func(DType::F32);
    let err = build(&cache, f).unwrap_err();
    assert!(
        matches!(err, KernelError::ValuesDTypeMismatch { .. }),
        "{err:?}"
    );

    let f = spmv_func(DType::F16);
    let err = build(&cache, f).unwrap_err();
    assert!(
        matches!(err, KernelError::UnsupportedDType { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("f16"), "{err}");

    // Axis 0 of A is dense_fixed: no indptr.
    let mut f = spmv_func(DType::F64);
    f.buffers.push(flat(
        "A_0_indptr",
        DType::I32,
        LExpr::Int(1),
        BufferKind::Indptr {
            tensor: "A".into(),
            axis: 0,
        },
        BufferRole::Input,
    ));
    let err = build(&cache, f).unwrap_err();
    assert!(
        matches!(
            err,
            KernelError::NoSuchArray {
                axis: 0,
                what: "indptr",
                ..
            }
        ),
        "{err:?}"
    );

    let mut f = spmv_func(DType::F64);
    f.buffers.push(flat(
        "A_5_indices",
        DType::I32,
        LExpr::Int(1),
        BufferKind::Indices {
            tensor: "A".into(),
            axis: 5,
        },
        BufferRole::Input,
    ));
    let err = build(&cache, f).unwrap_err();
    assert!(
        matches!(
            err,
            KernelError::AxisOutOfRange {
                axis: 5,
                axes: 2,
                ..
            }
        ),
        "{err:?}"
    );

    let mut f = spmv_func(DType::F64);
    f.buffers.push(flat(
        "B_1_indices",
        DType::I32,
        LExpr::Int(1),
        BufferKind::Indices {
            tensor: "B".into(),
            axis: 1,
        },
        BufferRole::Input,
    ));
    let err = build(&cache, f).unwrap_err();
    assert!(matches!(err, KernelError::UnknownTensor { .. }), "{err:?}");

    let mut f = spmv_func(DType::F64);
    f.buffers.push(flat(
        "A_1_indices_f",
        DType::F64,
        LExpr::Int(1),
        BufferKind::Indices {
            tensor: "A".into(),
            axis: 1,
        },
        BufferRole::Input,
    ));
    let err = build(&cache, f).unwrap_err();
    assert!(matches!(err, KernelError::NotAnIndexType { .. }), "{err:?}");

    let mut f = spmv_func(DType::F64);
    f.params.push(Param { name: "k".into() });
    let err = build(&cache, f).unwrap_err();
    assert!(
        matches!(&err, KernelError::UnknownParam { param } if param == "k"),
        "{err:?}"
    );
}

#[test]
fn run_checks_every_argument() {
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("run_checks_every_argument", dir.path()) else {
        return;
    };
    let kernel = build(&cache, spmv_func(DType::F64)).unwrap();
    let (a, x) = random_case(21, 12, 8);
    let good = inputs(&a, &x, DType::F64);
    let opts = KernelOptions::default();
    assert!(kernel.run(&good, &opts).is_ok());

    // Missing input.
    let mut ins = good.clone();
    ins.remove("x");
    let err = kernel.run(&ins, &opts).unwrap_err();
    assert!(
        matches!(err, KernelError::Bind(InterpError::MissingInput { .. })),
        "{err:?}"
    );

    // Unknown input name.
    let mut ins = good.clone();
    ins.insert("q".into(), good["x"].clone());
    let err = kernel.run(&ins, &opts).unwrap_err();
    assert!(
        matches!(err, KernelError::Bind(InterpError::UnknownInput { .. })),
        "{err:?}"
    );

    // Wrong value type.
    let err = kernel.run(&inputs(&a, &x, DType::F32), &opts).unwrap_err();
    assert!(
        matches!(err, KernelError::Bind(InterpError::DTypeMismatch { .. })),
        "{err:?}"
    );

    // x of the wrong length: n is 8 from A, 9 from x.
    let mut r = rng(3);
    let x9 = random_coo(&mut r, &[9], 1.0);
    let mut ins = good.clone();
    ins.insert(
        "x".into(),
        SparseTensor::from_coo(&x9, &Format::Dense).unwrap(),
    );
    let err = kernel.run(&ins, &opts).unwrap_err();
    assert!(
        matches!(err, KernelError::Bind(InterpError::ParamConflict { .. })),
        "{err:?}"
    );

    // A in the wrong format (dense axes instead of CSR).
    let mut ins = good.clone();
    ins.insert(
        "A".into(),
        SparseTensor::from_coo(&a, &Format::Dense).unwrap(),
    );
    let err = kernel.run(&ins, &opts).unwrap_err();
    assert!(
        matches!(err, KernelError::Bind(InterpError::AxisKindMismatch { .. })),
        "{err:?}"
    );

    // A with i64 indices where the function reads i32.
    let mut ins = good.clone();
    let a64 = SparseTensor::from_coo_with_index(&a, &Format::Csr, DType::F64, Some(IndexType::I64))
        .unwrap();
    ins.insert("A".into(), a64);
    let err = kernel.run(&ins, &opts).unwrap_err();
    assert!(
        matches!(&err, KernelError::IndexTypeMismatch { buffer, what: "indptr", .. } if buffer == "A_1_indptr"),
        "{err:?}"
    );

    // A parameter given explicitly that contradicts the tensors.
    let wrong_m = KernelOptions {
        params: HashMap::from([("m".to_string(), 13)]),
        ..KernelOptions::default()
    };
    let err = kernel.run(&good, &wrong_m).unwrap_err();
    assert!(
        matches!(err, KernelError::Bind(InterpError::ParamConflict { .. })),
        "{err:?}"
    );

    // Zero threads.
    let zero = KernelOptions {
        threads: Some(0),
        ..KernelOptions::default()
    };
    let err = kernel.run(&good, &zero).unwrap_err();
    assert!(
        matches!(err, KernelError::Jit(JitError::ZeroThreads)),
        "{err:?}"
    );
}

#[test]
fn arrays_shorter_than_declared_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let Some(cache) = cache_or_skip("arrays_shorter_than_declared", dir.path()) else {
        return;
    };
    let mut f = spmv_func(DType::F64);
    let x = f.buffer_by_name("x").unwrap();
    let n = f.param_by_name("n").unwrap();
    f.buffers[x].layout =
        BufferLayout::Flat(LExpr::binary(BinaryOp::Mul, LExpr::Param(n), LExpr::Int(2)));
    let kernel = build(&cache, f).unwrap();
    let (a, xv) = random_case(31, 6, 4);
    let err = kernel
        .run(&inputs(&a, &xv, DType::F64), &KernelOptions::default())
        .unwrap_err();
    assert!(
        matches!(&err, KernelError::BufferTooShort { buffer, needed: 8, found: 4 } if buffer == "x"),
        "{err:?}"
    );
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
int64_t sparsile_abi_version(void) { return 1; }
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
                    ..KernelOptions::default()
                };
                let got = kernel.run(ins, &opts).unwrap();
                assert_close(
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
    assert_close(
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
int64_t sparsile_abi_version(void) { return 1; }
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
    assert_close(
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
    assert_close(
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
