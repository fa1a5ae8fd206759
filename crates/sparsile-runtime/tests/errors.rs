//! Every binding mistake, and every execution error, is a named error value.

mod common;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use sparsile_formats::{AxisStorage, CooTensor, IndexArray, SparseTensor, Values};
use sparsile_ir::coord::{AxisStructure, BufferRole::*, Expr, Extent, Program};
use sparsile_ir::{BufferId, DType, IndexType};
use sparsile_runtime::{interpret, InterpError, InterpOptions};

/// `y[i] = sum_j A[i, j] * x[j]`, A in CSR; buffers A = #0, x = #1, y = #2.
fn spmv() -> Program {
    let mut b = Builder::new("spmv");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    let jd = b.dense("JD", n);
    let a = b.buf("A", &[i, j], Input);
    let x = b.buf("x", &[jd], Input);
    let y = b.buf("y", &[i], Output);
    let (vi, vj) = (b.var("i", i), b.var("j", j));
    let s = b.iter(
        "spmv",
        &[(vi, S), (vj, R)],
        vec![st(y, vec![v(vi)], Expr::Float(0.0))],
        vec![acc(
            y,
            vec![v(vi)],
            mul(ld(a, vec![v(vi), v(vj)]), ld(x, vec![v(vj)])),
        )],
    );
    b.p.body.push(s);
    b.p
}

fn matrix() -> CooTensor {
    CooTensor::from_triplets(vec![3, 4], &[(0, 1, 1.0), (0, 3, 2.0), (2, 0, 3.0)]).unwrap()
}

fn ok_inputs() -> Vec<(&'static str, SparseTensor<'static>)> {
    vec![
        ("A", csr(&matrix())),
        ("x", dense_tensor(&[4], vec![1.0; 4])),
    ]
}

fn with(
    name: &'static str,
    t: SparseTensor<'static>,
) -> Vec<(&'static str, SparseTensor<'static>)> {
    let mut v: Vec<_> = ok_inputs()
        .into_iter()
        .filter(|(n, _)| *n != name)
        .collect();
    v.push((name, t));
    v
}

/// A CSR tensor with its column axis replaced.
fn csr_with_col(f: impl FnOnce(&mut AxisStorage<'static>)) -> SparseTensor<'static> {
    let t = csr(&matrix());
    let mut s = Arc::unwrap_or_clone(t.structure);
    f(&mut s.axes[1]);
    SparseTensor {
        structure: Arc::new(s),
        values: t.values,
    }
}

/// Runs without the verifier, to reach the interpreter's own checks.
fn run_unverified(
    p: &Program,
    inputs: Vec<(&str, SparseTensor<'static>)>,
) -> Result<sparsile_runtime::Outputs, InterpError> {
    let opts = InterpOptions {
        skip_verify: true,
        ..Default::default()
    };
    run_opts(p, inputs, opts)
}

#[test]
fn invalid_program_is_reported_by_the_verifier() {
    let mut p = spmv();
    let Some(sparsile_ir::coord::Stmt::Iteration(it)) = p.body.first_mut() else {
        unreachable!()
    };
    it.body = vec![st(BufferId(1), vec![int(0)], Expr::Float(1.0))];
    let err = run(&p, ok_inputs()).unwrap_err();
    assert!(
        matches!(&err, InterpError::InvalidProgram { errors } if errors.len() == 1 && errors[0].message.contains("is an input")),
        "{err}"
    );
}

#[test]
fn the_valid_program_runs() {
    let out = run(&spmv(), ok_inputs()).unwrap();
    assert_eq!(out["y"].values.to_f64_vec(), vec![3.0, 0.0, 3.0]);
}

#[test]
fn missing_input() {
    let err = run(&spmv(), vec![("A", csr(&matrix()))]).unwrap_err();
    assert_eq!(err, InterpError::MissingInput { buffer: "x".into() });
}

#[test]
fn unknown_input() {
    let mut inputs = ok_inputs();
    inputs.push(("z", dense_tensor(&[1], vec![0.0])));
    let err = run(&spmv(), inputs).unwrap_err();
    assert_eq!(err, InterpError::UnknownInput { name: "z".into() });
    // Naming the output as an input is the same mistake.
    let mut inputs = ok_inputs();
    inputs.push(("y", dense_tensor(&[3], vec![0.0; 3])));
    assert!(matches!(
        run(&spmv(), inputs),
        Err(InterpError::UnknownInput { .. })
    ));
}

fn run_opts(
    p: &Program,
    inputs: Vec<(&str, SparseTensor<'static>)>,
    opts: InterpOptions,
) -> Result<sparsile_runtime::Outputs, InterpError> {
    let inputs: HashMap<String, SparseTensor<'static>> = inputs
        .into_iter()
        .map(|(k, t)| (k.to_string(), t))
        .collect();
    interpret(p, &inputs, &opts)
}

#[test]
fn unknown_param_and_output_structure_names() {
    let opts = InterpOptions {
        params: [("q".to_string(), 1)].into(),
        ..Default::default()
    };
    assert_eq!(
        run_opts(&spmv(), ok_inputs(), opts).unwrap_err(),
        InterpError::UnknownParam { name: "q".into() }
    );
    let opts = InterpOptions {
        output_structures: [("A".to_string(), csr(&matrix()).structure)].into(),
        ..Default::default()
    };
    assert_eq!(
        run_opts(&spmv(), ok_inputs(), opts).unwrap_err(),
        InterpError::UnknownOutputStructure { name: "A".into() }
    );
}

#[test]
fn axis_count_mismatch() {
    let err = run(&spmv(), with("A", dense_tensor(&[12], vec![0.0; 12]))).unwrap_err();
    assert_eq!(
        err,
        InterpError::AxisCountMismatch {
            buffer: "A".into(),
            expected: 2,
            found: 1
        }
    );
}

#[test]
fn axis_kind_mismatch() {
    let err = run(&spmv(), with("A", dense_tensor(&[3, 4], vec![0.0; 12]))).unwrap_err();
    assert!(
        matches!(&err, InterpError::AxisKindMismatch { buffer, axis, position: 1, expected, found }
            if buffer == "A" && axis == "J" && expected == "sparse_variable" && found == "dense_fixed"),
        "{err}"
    );
}

#[test]
fn axis_parent_mismatch() {
    // K declared under J, but the tensor's third axis hangs under its first.
    let mut b = Builder::new("p");
    let (m, n, l, n1, n2) = (
        b.param("m"),
        b.param("n"),
        b.param("l"),
        b.param("n1"),
        b.param("n2"),
    );
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, n1);
    let k = b.svar("K", j, l, n2);
    b.buf("A", &[i, j, k], Input);
    let mut t = csf(&random_coo(&mut rng(1), &[3, 3, 3], 0.3));
    let s = Arc::make_mut(&mut t.structure);
    s.axes[2].parent = Some(0);
    let np = s.axes[0].npos;
    let npos2 = s.axes[2].npos;
    // Spread the third level's positions over the first level's positions.
    let ptr: Vec<usize> = (0..=np).map(|p| if p == np { npos2 } else { 0 }).collect();
    s.axes[2].indptr = Some(IndexArray::from_usizes(&ptr, IndexType::I32));
    s.axes[2].indices = Some(IndexArray::from_usizes(
        &(0..npos2).map(|x| x.min(2)).collect::<Vec<_>>(),
        IndexType::I32,
    ));
    if npos2 > 3 {
        // keep coordinates unique under the single parent
        s.axes[2].length = npos2;
        s.axes[2].indices = Some(IndexArray::from_usizes(
            &(0..npos2).collect::<Vec<_>>(),
            IndexType::I32,
        ));
    }
    let err = run(&b.p, vec![("A", t)]).unwrap_err();
    assert!(
        matches!(&err, InterpError::AxisParentMismatch { buffer, axis, expected, found }
            if buffer == "A" && axis == "K" && expected == "`J`" && found == "`I`"),
        "{err}"
    );
}

#[test]
fn buffer_missing_parent() {
    let mut p = spmv();
    let j = p.axis_by_name("J").unwrap();
    p.buffers[BufferId(0)].axes = vec![j];
    let err = run_unverified(&p, ok_inputs()).unwrap_err();
    assert_eq!(
        err,
        InterpError::BufferMissingParent {
            buffer: "A".into(),
            axis: "J".into(),
            parent: "I".into()
        }
    );
}

#[test]
fn param_conflict_between_tensors() {
    let err = run(&spmv(), with("x", dense_tensor(&[5], vec![0.0; 5]))).unwrap_err();
    assert_eq!(
        err,
        InterpError::ParamConflict {
            buffer: "x".into(),
            axis: "JD".into(),
            what: "length",
            param: "n".into(),
            bound: 4,
            found: 5
        }
    );
    assert!(err.to_string().contains("parameter `n`"), "{err}");
}

#[test]
fn param_conflict_with_explicit_value() {
    let opts = InterpOptions {
        params: [("nnz".to_string(), 99)].into(),
        ..Default::default()
    };
    let err = run_opts(&spmv(), ok_inputs(), opts).unwrap_err();
    assert!(
        matches!(&err, InterpError::ParamConflict { buffer, axis, what: "nnz", bound: 99, found: 3, .. } if buffer == "A" && axis == "J"),
        "{err}"
    );
}

#[test]
fn const_mismatch() {
    let mut p = spmv();
    let i = p.axis_by_name("I").unwrap();
    p.axes[i].length = Extent::Const(7);
    let err = run(&p, ok_inputs()).unwrap_err();
    assert_eq!(
        err,
        InterpError::ConstMismatch {
            buffer: "A".into(),
            axis: "I".into(),
            what: "length",
            declared: 7,
            found: 3
        }
    );
}

#[test]
fn uniqueness_mismatch() {
    let mut b = Builder::new("coo");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    let i = b.sfixed("I", None, m, nnz, true);
    let j = b.sfixed("J", Some(i), n, Extent::Const(1), true);
    b.buf("A", &[i, j], Input);
    let err = run(&b.p, vec![("A", coo_tensor(&matrix()))]).unwrap_err();
    assert_eq!(
        err,
        InterpError::UniquenessMismatch {
            buffer: "A".into(),
            axis: "I".into()
        }
    );
}

#[test]
fn shared_axis_mismatch() {
    let mut b = Builder::new("add");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    b.buf("A", &[i, j], Input);
    b.buf("B", &[i, j], Input);
    let other =
        CooTensor::from_triplets(vec![3, 4], &[(0, 2, 1.0), (0, 3, 2.0), (2, 0, 3.0)]).unwrap();
    let err = run(&b.p, vec![("A", csr(&matrix())), ("B", csr(&other))]).unwrap_err();
    assert!(
        matches!(&err, InterpError::SharedAxisMismatch { axis, detail, .. } if axis == "J" && detail.contains("indices[0] = 1 vs 2")),
        "{err}"
    );
    // The same arrays (even in another tensor) bind fine.
    run(&b.p, vec![("A", csr(&matrix())), ("B", csr(&matrix()))]).unwrap();
}

#[test]
fn dtype_mismatch() {
    let x = SparseTensor {
        values: Values::F32(Cow::Owned(vec![1.0; 4])),
        ..dense_tensor(&[4], vec![1.0; 4])
    };
    let err = run(&spmv(), with("x", x)).unwrap_err();
    assert_eq!(
        err,
        InterpError::DTypeMismatch {
            buffer: "x".into(),
            expected: "f64".into(),
            found: "f32".into()
        }
    );
}

#[test]
fn integer_buffer_needs_exact_integers() {
    let mut b = Builder::new("gather");
    let (m, e) = (b.param("m"), b.param("e"));
    let i = b.dense("I", m);
    let ea = b.dense("E", e);
    let eid = b.buf_t("eid", DType::I32, &[i], Input);
    let src = b.buf("B", &[ea], Input);
    let c = b.buf("C", &[i], Output);
    let vi = b.var("i", i);
    let s = b.iter(
        "g",
        &[(vi, S)],
        vec![],
        vec![st(c, vec![v(vi)], ld(src, vec![ld(eid, vec![v(vi)])]))],
    );
    b.p.body.push(s);
    let src_t = dense_tensor(&[2], vec![1.0, 2.0]);
    let err = run(
        &b.p,
        vec![
            ("eid", dense_tensor(&[2], vec![0.0, 1.5])),
            ("B", src_t.clone()),
        ],
    )
    .unwrap_err();
    assert!(
        matches!(&err, InterpError::NotAnInteger { buffer, offset: 1, .. } if buffer == "eid"),
        "{err}"
    );
    let err = run(
        &b.p,
        vec![("eid", dense_tensor(&[1], vec![3e9])), ("B", src_t.clone())],
    )
    .unwrap_err();
    assert!(
        matches!(&err, InterpError::NotAnInteger { offset: 0, .. }),
        "{err}"
    );
    let out = run(
        &b.p,
        vec![("eid", dense_tensor(&[2], vec![1.0, 0.0])), ("B", src_t)],
    )
    .unwrap();
    assert_eq!(out["C"].values.to_f64_vec(), vec![2.0, 1.0]);
}

#[test]
fn value_count_mismatch() {
    let t = csr(&matrix());
    let t = SparseTensor {
        values: Values::F64(Cow::Owned(vec![1.0; 4])),
        ..t
    };
    let err = run(&spmv(), with("A", t)).unwrap_err();
    assert_eq!(
        err,
        InterpError::ValueCountMismatch {
            buffer: "A".into(),
            expected: 3,
            found: 4
        }
    );
}

#[test]
fn malformed_storage() {
    let bad_ptr = csr_with_col(|c| c.indptr = Some(IndexArray::I32(Cow::Owned(vec![0, 2, 1, 3]))));
    let neg = csr_with_col(|c| c.indices = Some(IndexArray::I64(Cow::Owned(vec![1, -3, 0]))));
    let unsorted = csr_with_col(|c| c.indices = Some(IndexArray::I32(Cow::Owned(vec![3, 1, 0]))));
    let too_big = csr_with_col(|c| c.indices = Some(IndexArray::I32(Cow::Owned(vec![1, 5, 0]))));
    let short = csr_with_col(|c| c.indptr = Some(IndexArray::I32(Cow::Owned(vec![0, 2, 3]))));
    for (what, t) in [
        ("indptr", bad_ptr),
        ("negative", neg),
        ("out of order", unsorted),
        ("exceeds", too_big),
        ("indptr has length", short),
    ] {
        let err = run(&spmv(), with("A", t)).unwrap_err();
        assert!(
            matches!(&err, InterpError::InvalidStorage { buffer, position: 1, detail } if buffer == "A" && detail.contains(what)),
            "{what}: {err}"
        );
    }
}

#[test]
fn output_needs_structure_or_params() {
    // An output over a sparse axis that nothing binds.
    let mut b = Builder::new("p");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    let x = b.buf("x", &[i], Input);
    b.buf("C", &[i, j], Output);
    let _ = x;
    let err = run(&b.p, vec![("x", dense_tensor(&[3], vec![0.0; 3]))]).unwrap_err();
    assert_eq!(
        err,
        InterpError::OutputHasNoStructure {
            buffer: "C".into(),
            axis: "J".into()
        }
    );
    // The caller may supply it.
    let opts = InterpOptions {
        output_structures: [("C".to_string(), csr(&matrix()).structure)].into(),
        ..Default::default()
    };
    let given = opts.output_structures["C"].clone();
    let out = run_opts(&b.p, vec![("x", dense_tensor(&[3], vec![0.0; 3]))], opts).unwrap();
    assert_eq!(out["C"].nnz_stored(), 3);
    assert!(Arc::ptr_eq(&out["C"].structure, &given));

    // A dense output whose length no tensor gives.
    let mut b = Builder::new("q");
    let m = b.param("m");
    let i = b.dense("I", m);
    b.buf("y", &[i], Output);
    let err = run(&b.p, vec![]).unwrap_err();
    assert!(
        matches!(&err, InterpError::UnboundParam { param, .. } if param == "m"),
        "{err}"
    );
    let opts = InterpOptions {
        params: [("m".to_string(), 4)].into(),
        ..Default::default()
    };
    assert_eq!(run_opts(&b.p, vec![], opts).unwrap()["y"].values.len(), 4);
    let opts = InterpOptions {
        params: [("m".to_string(), -4)].into(),
        ..Default::default()
    };
    assert!(matches!(
        run_opts(&b.p, vec![], opts),
        Err(InterpError::BadParamValue { value: -4, .. })
    ));
    let opts = InterpOptions {
        params: [("m".to_string(), 1 << 60)].into(),
        ..Default::default()
    };
    assert!(matches!(
        run_opts(&b.p, vec![], opts),
        Err(InterpError::OutputTooLarge { .. })
    ));
}

#[test]
fn computed_axis_errors() {
    // A dense_fixed axis declared as the intersection of a sparse axis with coordinates
    // {0, 2} of 0..3: not every coordinate.
    let mut b = Builder::new("p");
    let (m, ns) = (b.param("m"), b.param("ns"));
    let sa = b.sfixed("S", None, m, ns, true);
    let c = b.dense("C", m);
    b.p.axes[c].structure = AxisStructure::Intersect(vec![sa]);
    b.buf("X", &[sa], Input);
    b.buf("Y", &[c], Output);
    let x = CooTensor {
        shape: vec![3],
        coords: vec![0, 2],
        values: vec![1.0, 2.0],
    };
    let err = run_unverified(&b.p, vec![("X", coo_tensor(&x))]).unwrap_err();
    assert!(
        matches!(&err, InterpError::ComputedAxis { axis, detail } if axis == "C" && detail.contains("not every coordinate")),
        "{err}"
    );
    // Every coordinate: fine.
    let x = CooTensor {
        shape: vec![2],
        coords: vec![0, 1],
        values: vec![1.0, 2.0],
    };
    assert_eq!(
        run_unverified(&b.p, vec![("X", coo_tensor(&x))]).unwrap()["Y"]
            .values
            .len(),
        2
    );
    // A listed axis that nothing binds.
    let mut b = Builder::new("q");
    let (m, ns) = (b.param("m"), b.param("ns"));
    let sa = b.sfixed("S", None, m, ns, true);
    let c = b.sfixed("C", None, m, ns, true);
    b.p.axes[c].structure = AxisStructure::Union(vec![sa]);
    b.buf("Y", &[c], Output);
    let err = run_unverified(&b.p, vec![]).unwrap_err();
    assert!(
        matches!(&err, InterpError::ComputedAxis { axis, .. } if axis == "C"),
        "{err}"
    );
}

/// An SDDMM-like program writing its sparse output at every dense coordinate.
#[test]
fn write_to_unstored_coordinate() {
    let mut b = Builder::new("p");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    let jd = b.dense("JD", n);
    b.buf("A", &[i, j], Input);
    let x = b.buf("x", &[jd], Input);
    let c = b.buf("C", &[i, j], Output);
    let (vi, vj) = (b.var("i", i), b.var("j", jd));
    let s = b.iter(
        "w",
        &[(vi, S), (vj, S)],
        vec![],
        vec![st(c, vec![v(vi), v(vj)], ld(x, vec![v(vj)]))],
    );
    b.p.body.push(s);
    let err = run(&b.p, ok_inputs()).unwrap_err();
    assert_eq!(
        err,
        InterpError::WriteNotStored {
            buffer: "C".into(),
            coordinates: vec![0, 0]
        }
    );
}

#[test]
fn execution_errors() {
    // Integer overflow in an index.
    let mut p = spmv();
    let Some(sparsile_ir::coord::Stmt::Iteration(it)) = p.body.first_mut() else {
        unreachable!()
    };
    let vi = it.axes[0].var;
    it.body = vec![st(
        BufferId(2),
        vec![mul(v(vi), int(i64::MAX))],
        Expr::Float(1.0),
    )];
    let err = run_unverified(&p, ok_inputs()).unwrap_err();
    assert!(
        matches!(err, InterpError::IntArithmetic { rhs: i64::MAX, .. }),
        "{err}"
    );

    // Store into an input.
    let mut p = spmv();
    let Some(sparsile_ir::coord::Stmt::Iteration(it)) = p.body.first_mut() else {
        unreachable!()
    };
    it.body = vec![st(BufferId(1), vec![int(0)], Expr::Float(1.0))];
    assert_eq!(
        run_unverified(&p, ok_inputs()).unwrap_err(),
        InterpError::StoreToInput { buffer: "x".into() }
    );

    // Floating-point index.
    let mut p = spmv();
    let Some(sparsile_ir::coord::Stmt::Iteration(it)) = p.body.first_mut() else {
        unreachable!()
    };
    it.body = vec![st(BufferId(2), vec![Expr::Float(0.0)], Expr::Float(1.0))];
    assert_eq!(
        run_unverified(&p, ok_inputs()).unwrap_err(),
        InterpError::FloatIndex {
            buffer: "y".into(),
            position: 0
        }
    );

    // Wrong number of indices.
    let mut p = spmv();
    let Some(sparsile_ir::coord::Stmt::Iteration(it)) = p.body.first_mut() else {
        unreachable!()
    };
    it.body = vec![st(BufferId(2), vec![int(0), int(0)], Expr::Float(1.0))];
    assert!(matches!(
        run_unverified(&p, ok_inputs()),
        Err(InterpError::IndexCountMismatch {
            expected: 1,
            found: 2,
            ..
        })
    ));

    // An init statement reading the reduction variable.
    let mut p = spmv();
    let Some(sparsile_ir::coord::Stmt::Iteration(it)) = p.body.first_mut() else {
        unreachable!()
    };
    let vj = it.axes[1].var;
    it.init = vec![st(BufferId(2), vec![v(vj)], Expr::Float(0.0))];
    assert!(
        matches!(run_unverified(&p, ok_inputs()), Err(InterpError::UnboundVar { var, .. }) if var == "j")
    );

    // Spatial axis under a reduction parent.
    let mut p = spmv();
    let Some(sparsile_ir::coord::Stmt::Iteration(it)) = p.body.first_mut() else {
        unreachable!()
    };
    it.axes[0].kind = R;
    it.axes[1].kind = S;
    assert!(
        matches!(run_unverified(&p, ok_inputs()), Err(InterpError::SpatialUnderReduction { axis, .. }) if axis == "J")
    );

    // Child axis without its parent iterated.
    let mut p = spmv();
    let Some(sparsile_ir::coord::Stmt::Iteration(it)) = p.body.first_mut() else {
        unreachable!()
    };
    it.axes.remove(0);
    assert!(
        matches!(run_unverified(&p, ok_inputs()), Err(InterpError::ParentNotIterated { axis, parent, .. }) if axis == "J" && parent == "I")
    );

    // Float stored into an integer output.
    let mut b = Builder::new("q");
    let i = b.dense("I", Extent::Const(2));
    let y = b.buf_t("y", DType::I32, &[i], Output);
    b.p.body.push(st(y, vec![int(0)], Expr::Float(1.0)));
    assert_eq!(
        run_unverified(&b.p, vec![]).unwrap_err(),
        InterpError::FloatIntoInteger { buffer: "y".into() }
    );
    b.p.body[0] = st(y, vec![int(1)], int(1 << 40));
    assert!(
        matches!(run_unverified(&b.p, vec![]), Err(InterpError::IntegerOutOfRange { value, .. }) if value == 1 << 40)
    );
    b.p.buffers[y].dtype = DType::I64;
    b.p.body[0] = st(y, vec![int(1)], int(1 << 60));
    assert!(matches!(
        run_unverified(&b.p, vec![]),
        Err(InterpError::IntegerOutOfRange { .. })
    ));
    b.p.body[0] = st(y, vec![int(1)], int(-7));
    assert_eq!(
        run_unverified(&b.p, vec![]).unwrap()["y"]
            .values
            .to_f64_vec(),
        vec![0.0, -7.0]
    );
}

/// Randomly corrupted structures (array entries, lengths, counts) give an error or a
/// result, never a panic.
#[test]
fn corrupted_tensors_never_panic() {
    use rand::Rng;
    let p = spmv();
    let mut r = rng(61);
    for round in 0..400 {
        let coo = random_coo(&mut r, &[5, 6], 0.4);
        let t = csr(&coo);
        let mut s = Arc::unwrap_or_clone(t.structure);
        let mut values = t.values.to_f64_vec();
        for _ in 0..r.random_range(1..3) {
            let col = &mut s.axes[1];
            match r.random_range(0..7) {
                0 | 1 => {
                    let mut ptr: Vec<i64> = (0..col.indptr.as_ref().unwrap().len())
                        .map(|i| col.indptr.as_ref().unwrap().get_i64(i))
                        .collect();
                    if !ptr.is_empty() {
                        let at = r.random_range(0..ptr.len());
                        ptr[at] = r.random_range(-2..12);
                    }
                    col.indptr = Some(IndexArray::I64(Cow::Owned(ptr)));
                }
                2 | 3 => {
                    let mut idx: Vec<i64> = (0..col.indices.as_ref().unwrap().len())
                        .map(|i| col.indices.as_ref().unwrap().get_i64(i))
                        .collect();
                    if !idx.is_empty() {
                        let at = r.random_range(0..idx.len());
                        idx[at] = r.random_range(-2..9);
                    } else {
                        idx.push(1);
                    }
                    col.indices = Some(IndexArray::I64(Cow::Owned(idx)));
                }
                4 => col.npos = r.random_range(0..20),
                5 => col.length = r.random_range(0..9),
                _ => {
                    values.truncate(r.random_range(0..values.len() + 1));
                    s.axes[0].npos = r.random_range(0..8);
                }
            }
        }
        let a = SparseTensor {
            structure: Arc::new(s),
            values: Values::F64(Cow::Owned(values)),
        };
        let x = dense_tensor(&[6], vec![1.0; 6]);
        match run(&p, vec![("A", a), ("x", x)]) {
            Ok(out) => assert_eq!(out["y"].values.len(), 5, "round {round}"),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}

#[test]
fn padding_on_an_axis_declared_without_padding() {
    // Row 0 keeps columns [1, 4]: 4 is the padding coordinate (the length).
    let padded = csr_with_col(|a| {
        a.indices = Some(IndexArray::from_usizes(&[1, 4, 0], IndexType::I32));
    });
    let mut p = spmv();
    let j = p.buffers[BufferId(0)].axes[1];
    // Declared padded, the sentinel is skipped like an unstored element.
    let y = run(&p, with("A", padded.clone())).unwrap();
    assert_eq!(y["y"].to_dense_f64(), vec![1.0, 0.0, 3.0]);
    p.axes[j].padded = false;
    let err = run(&p, with("A", padded)).unwrap_err();
    assert!(
        matches!(&err, InterpError::PaddingOnUnpaddedAxis { buffer, axis, position: 1 }
            if buffer == "A" && axis == "J"),
        "{err}"
    );
}

#[test]
fn a_structure_changed_after_a_valid_run_is_checked_again() {
    // A valid owned structure, run once (its validity is remembered).
    let mut a = csr(&matrix());
    let y = run(&spmv(), with("A", a.clone())).unwrap();
    assert_eq!(y["y"].to_dense_f64().len(), 3);
    // Changing it through the Arc gives a new allocation (a weak reference exists), so the
    // broken copy is validated and refused.
    std::sync::Arc::make_mut(&mut a.structure).axes[1].indices =
        Some(IndexArray::from_usizes(&[3, 1, 0], IndexType::I32));
    let err = run(&spmv(), with("A", a.clone())).unwrap_err();
    assert!(
        matches!(&err, InterpError::InvalidStorage { buffer, .. } if buffer == "A"),
        "{err}"
    );
    // The same broken structure again: still refused (failures are not remembered).
    assert!(run(&spmv(), with("A", a)).is_err());
}
