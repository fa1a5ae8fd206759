//! Helpers of the compiled-kernel tests: a hand-built SpMV (stage-I program, stage-III
//! signature, hand-written C implementing the kernel ABI), seeded inputs, and a cache in
//! a temporary folder (or a printed skip when no C compiler runs).
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;

use crate::common::*;
use sparsile_formats::{CooTensor, Format, SparseTensor, Values};
use sparsile_ir::coord::{BinaryOp, BufferRole, Param, Program};
use sparsile_ir::loops::{Buffer, BufferKind, BufferLayout, Expr as LExpr, Func, Stage};
use sparsile_ir::settings::Settings;
use sparsile_ir::{DType, Span};
use sparsile_runtime::jit::{Cache, Compiler};
use sparsile_runtime::{CompiledKernel, KernelError};

pub fn cache_or_skip(test: &str, dir: &Path) -> Option<Cache> {
    let settings = Settings {
        cache_dir: Some(dir.to_path_buf()),
        ..Settings::from_env()
    };
    match Compiler::detect(&settings) {
        Ok(c) => Some(Cache::with_compiler(dir.to_path_buf(), c).unwrap()),
        Err(e) => {
            eprintln!("{test}: skipped, no C compiler: {e}");
            None
        }
    }
}

/// `y[i] = sum_j A[i, j] * x[j]`, A in CSR with i32 indices, all of `dtype`.
pub fn spmv_program(dtype: DType) -> Program {
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

pub fn flat(name: &str, dtype: DType, len: LExpr, kind: BufferKind, role: BufferRole) -> Buffer {
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
pub fn spmv_func(dtype: DType) -> Func {
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
pub fn spmv_source(t: &str, extra_phase: bool, fail_phase1: bool) -> String {
    format!(
        r#"#include <stdint.h>
#include <math.h>
int64_t sparsile_abi_version(void) {{ return 3; }}
int64_t sparsile_phase_partition(int64_t ph) {{ (void)ph; return 0; }}
int32_t sparsile_phase_bounds(int64_t ph, void *const *buffers, const int64_t *params, int64_t n, int64_t *bounds) {{ (void)ph; (void)buffers; (void)params; (void)n; (void)bounds; return 1; }}
int64_t sparsile_phase_work(int64_t ph, void *const *buffers, const int64_t *params) {{ (void)ph; (void)buffers; (void)params; return -1; }}
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

pub fn inputs(
    a: &CooTensor,
    x: &CooTensor,
    dtype: DType,
) -> HashMap<String, SparseTensor<'static>> {
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

pub fn random_case(seed: u64, m: usize, n: usize) -> (CooTensor, CooTensor) {
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

pub fn assert_close_rel(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "entry {k}: got {g}, want {w}"
        );
    }
}

/// Builds the SpMV kernel with `func` (or reports the build error).
pub fn build(cache: &Cache, func: Func) -> Result<CompiledKernel, KernelError> {
    CompiledKernel::build_with(
        spmv_program(DType::F64),
        func,
        spmv_source("double", false, false),
        cache,
        2,
    )
}
