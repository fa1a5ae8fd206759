//! The loop-IR features of the interpreter: atomic adds (and how they race), local
//! buffers (private, undefined on entry), and balanced partitions (their indptr must
//! cover the loop's range).

use std::collections::HashMap;

use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::coord::Program;
use sparsile_ir::loops::Func;
use sparsile_runtime::{flat_interp, FlatInterpError, InterpOptions, Outputs};

const SPMV_SIR: &str = "\
func spmv(m, n, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JB = dense_fixed(n)
  buffer A: f64[I, J] input
  buffer x: f64[JB] input
  buffer y: f64[I] output
  iter spmv over [I: S, J: R] as (i, j) {
    init {
      y[i] = 0.0
    }
    y[i] = y[i] + A[i, j] * x[j]
  }
}
";

/// A flat SpMV over CSR whose body is `body` (buffers `A`, `x`, `y`, `P` = indptr,
/// `J` = indices, plus `extra` declarations).
fn spmv_func(extra: &str, body: &str) -> Func {
    let text = format!(
        "flat func spmv(m, n, nnz) {{
  buffer A: f64[nnz] input values
  buffer x: f64[n] input values
  buffer y: f64[m] output values
  buffer P: i32[m + 1] input indptr(A, 1)
  buffer J: i32[nnz] input indices(A, 1)
{extra}{body}}}
"
    );
    let f: Func = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    sparsile_ir::loops::verify(&f).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    f
}

fn inputs() -> HashMap<String, SparseTensor<'static>> {
    let a = CooTensor::from_triplets(
        vec![3, 3],
        &[(0, 0, 1.0), (0, 2, 2.0), (2, 1, 3.0), (2, 2, 4.0)],
    )
    .unwrap();
    let x = CooTensor {
        shape: vec![3],
        coords: vec![0, 1, 2],
        values: vec![1.0, 10.0, 100.0],
    };
    HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo(&a, &Format::Csr).unwrap(),
        ),
        (
            "x".to_string(),
            SparseTensor::from_coo(&x, &Format::Dense).unwrap(),
        ),
    ])
}

fn run(f: &Func) -> Result<Outputs, FlatInterpError> {
    let p: Program = SPMV_SIR.parse().unwrap();
    flat_interp::run(f, &p, &inputs(), &InterpOptions::default())
}

const ROW_OF: &str = "      let i: idx = 0
      for t in 0..m {
        if P[t + 1] <= p {
          i = t + 1
        }
      }
";

#[test]
fn atomic_adds_from_different_iterations_do_not_race() {
    let f = spmv_func(
        "",
        &format!(
            "  for p in 0..nnz parallel {{\n{ROW_OF}      atomic y[i] += A[p] * x[J[p]]\n  }}\n"
        ),
    );
    let out = run(&f).unwrap();
    assert_eq!(out["y"].values.to_f64_vec(), vec![201.0, 0.0, 430.0]);
}

#[test]
fn a_plain_read_of_an_atomically_updated_element_races() {
    let f = spmv_func(
        "",
        &format!(
            "  for p in 0..nnz parallel {{\n{ROW_OF}      atomic y[i] += A[p]\n      y[i] = y[i] + 1.0\n  }}\n"
        ),
    );
    let err = run(&f).unwrap_err();
    assert!(
        matches!(
            err,
            FlatInterpError::ParallelWriteConflict { .. }
                | FlatInterpError::ParallelReadWriteConflict { .. }
        ),
        "{err}"
    );
}

#[test]
fn local_buffers_are_private_to_parallel_iterations() {
    let f = spmv_func(
        "  buffer acc: f64[1] temp local\n",
        "  for i in 0..m parallel {
    acc[0] = 0.0
    for p in P[i]..P[i + 1] {
      acc[0] = acc[0] + A[p] * x[J[p]]
    }
    y[i] = acc[0]
  }
",
    );
    let out = run(&f).unwrap();
    assert_eq!(out["y"].values.to_f64_vec(), vec![201.0, 0.0, 430.0]);
}

#[test]
fn local_buffers_start_undefined_in_every_iteration() {
    // Iteration i reads acc before writing it: the value is undefined (NaN here), not
    // what the previous iteration left.
    let f = spmv_func(
        "  buffer acc: f64[1] temp local\n",
        "  for i in 0..m parallel {
    y[i] = acc[0]
    acc[0] = 1.0
  }
",
    );
    let out = run(&f).unwrap();
    assert!(out["y"].values.to_f64_vec().iter().all(|v| v.is_nan()));
}

#[test]
fn balanced_loops_run_like_parallel_ones() {
    let f = spmv_func(
        "",
        "  for i in 0..m parallel(balanced P) {
    for p in P[i]..P[i + 1] {
      y[i] = y[i] + A[p] * x[J[p]]
    }
  }
",
    );
    let out = run(&f).unwrap();
    assert_eq!(out["y"].values.to_f64_vec(), vec![201.0, 0.0, 430.0]);
}

#[test]
fn balanced_indptr_must_cover_the_loop() {
    let f = spmv_func(
        "",
        "  for i in 0..m + 1 parallel(balanced P) {
    y[0] = y[0]
  }
",
    );
    let err = run(&f).unwrap_err();
    assert!(
        matches!(err, FlatInterpError::BalancedIndptr { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("needs 5"), "{err}");
}

#[test]
fn dynamic_loops_are_checked_for_races() {
    let f = spmv_func(
        "",
        "  for i in 0..m parallel(dynamic) {
    y[0] = y[0] + 1.0
  }
",
    );
    let err = run(&f).unwrap_err();
    assert!(
        matches!(
            err,
            FlatInterpError::ParallelWriteConflict { .. }
                | FlatInterpError::ParallelReadWriteConflict { .. }
        ),
        "{err}"
    );
}
