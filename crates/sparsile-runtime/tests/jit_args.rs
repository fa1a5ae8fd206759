//! Argument checks of compiled kernels: a stage-III function that does not match its
//! stage-I program is refused when the kernel is built, and inputs that do not match
//! (missing, unknown, wrong type, shape, format, index type, parameter, short arrays) are
//! refused before native code runs. Tests print that they skipped when no C compiler
//! runs.

mod common;
mod jit_support;

use std::collections::HashMap;

use common::*;
use jit_support::*;
use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::coord::{BinaryOp, BufferRole, Param};
use sparsile_ir::loops::{BufferKind, BufferLayout, Expr as LExpr, Stage};
use sparsile_ir::{DType, IndexType};
use sparsile_runtime::jit::JitError;
use sparsile_runtime::{InterpError, KernelError, KernelOptions};

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

    // f16 values are bound like f32 ones, but this program's are f64.
    let f = spmv_func(DType::F16);
    let err = build(&cache, f).unwrap_err();
    assert!(
        matches!(err, KernelError::ValuesDTypeMismatch { .. }),
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
