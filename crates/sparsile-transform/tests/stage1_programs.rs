//! Differential tests of hand-written stage-I programs the index notation does not
//! produce: nested iterations (the parent iterated by the enclosing iteration), stores
//! outside any iteration, affine indices that leave the axis (skipped writes, zero
//! reads), and coordinate reads of the transposed element of a sparse input.

mod common;

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::coord::Program;
use sparsile_runtime::InterpOptions;

fn random_matrix(
    rows: usize,
    cols: usize,
    density: f64,
    format: &Format,
    seed: u64,
) -> SparseTensor<'static> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            if rng.random::<f64>() < density {
                t.push((r, c, rng.random_range(-4..=4) as f64 * 0.5));
            }
        }
    }
    let coo = CooTensor::from_triplets(vec![rows, cols], &t).unwrap();
    SparseTensor::from_coo(&coo, format).unwrap()
}

fn dense_vector(values: Vec<f64>) -> SparseTensor<'static> {
    SparseTensor::dense_from_f64(&[values.len()], &values, sparsile_ir::DType::F64).unwrap()
}

fn run(text: &str, inputs: HashMap<String, SparseTensor<'static>>) {
    let program: Program = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    common::check_program(&program, text, &inputs, &InterpOptions::default(), true);
}

#[test]
fn nested_iterations_and_a_top_level_store() {
    let text = "\
func nested(m, n, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JD = dense_fixed(n)
  buffer A: f64[I, J] input
  buffer x: f64[JD] input
  buffer y: f64[I] output
  y[0] = 5.0
  iter rows over [I: S] as (i) {
    iter cols over [J: R] as (j) {
      y[i] = y[i] + A[i, j] * x[j]
    }
  }
}
";
    for (seed, (m, n)) in [(6, 5), (1, 8), (9, 3)].into_iter().enumerate() {
        let inputs = HashMap::from([
            (
                "A".to_string(),
                random_matrix(m, n, 0.5, &Format::Csr, seed as u64),
            ),
            (
                "x".to_string(),
                dense_vector((0..n).map(|v| v as f64 + 1.0).collect()),
            ),
        ]);
        run(text, inputs);
    }
}

#[test]
fn shifted_indices_skip_writes_and_read_zero() {
    // y[i + 1] = A[i, j] * x[j - 1]: the last row's write is skipped, x[-1] reads 0.
    let text = "\
func shifted(m, n, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JD = dense_fixed(n)
  buffer A: f64[I, J] input
  buffer x: f64[JD] input
  buffer y: f64[I] output
  iter s over [I: R, J: R] as (i, j) {
    y[i + 1] = y[i + 1] + A[i, j] * x[j - 1]
  }
}
";
    for seed in 0..4 {
        let inputs = HashMap::from([
            (
                "A".to_string(),
                random_matrix(7, 6, 0.5, &Format::Csr, seed),
            ),
            (
                "x".to_string(),
                dense_vector((0..6).map(|v| v as f64 - 2.5).collect()),
            ),
        ]);
        run(text, inputs);
    }
}

#[test]
fn sparse_output_written_by_coordinate() {
    // B shares A's structure; each element reads the transposed element A[j, i] by a
    // binary search in row j (the pattern is symmetric, so it is stored).
    let text = "\
func sym(m, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, m, nnz=nnz, idx=i32)
  buffer A: f64[I, J] input
  buffer B: f64[I, J] output
  iter t over [I: S, J: S] as (i, j) {
    B[i, j] = A[j, i] * 2.0 + A[i, j]
  }
}
";
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut t = Vec::new();
    for r in 0..6usize {
        for c in r..6usize {
            if rng.random::<f64>() < 0.4 {
                t.push((r, c, rng.random_range(1..5) as f64));
                if r != c {
                    t.push((c, r, rng.random_range(1..5) as f64));
                }
            }
        }
    }
    t.sort_by_key(|&(r, c, _)| (r, c));
    let coo = CooTensor::from_triplets(vec![6, 6], &t).unwrap();
    let a = SparseTensor::from_coo(&coo, &Format::Csr).unwrap();
    run(text, HashMap::from([("A".to_string(), a)]));
}
