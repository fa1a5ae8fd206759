//! A GPU kernel written by hand for the CUDA runtime's tests: SpMV (`y = A x`, A in
//! CSR) as a stage-I program, a stage-III GPU function of three launches, the CUDA
//! source the emitter would write for it and its launch plan; seeded inputs, and the
//! comparison with the interpreter.
//!
//! The launches: `rows` (a thread per row, sums into a `scratch` buffer), `store` (copies
//! the sums into `y`) and `never`, whose grid (`A_indptr[m] - nnz` blocks, read from an
//! input array on the host) is empty for every valid CSR matrix, so it must be skipped:
//! if it ran, it would clear `y`.
#![allow(dead_code)]

pub mod stub;

use std::borrow::Cow;
use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{CooTensor, Format, SparseTensor, Values};
use sparsile_ir::coord::{BinaryOp, Program};
use sparsile_ir::loops::{Expr, Func};
use sparsile_ir::{BufferId, DType, ParamId};
use sparsile_runtime::cuda::{ArgRef, KernelPlan, LaunchPlan};
use sparsile_runtime::{interpret, InterpOptions, Outputs};

pub const SPMV_SIR: &str = "\
func spmv(m, n, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JD = dense_fixed(n)
  buffer A: f32[I, J] input
  buffer x: f32[JD] input
  buffer y: f32[I] output
  iter spmv over [I: S, J: R] as (i, j) {
    y[i] = y[i] + A[i, j] * x[j]
  }
}
";

pub const SPMV_GPU: &str = "\
flat func spmv(m, n, nnz) {
  buffer A: f32[nnz] input values
  buffer x: f32[n] input values
  buffer y: f32[m] output values
  buffer A_indptr: i32[m + 1] input indptr(A, 1)
  buffer A_indices: i32[nnz] input indices(A, 1)
  buffer partial: f32[m] temp scratch
  launch rows {
    for b in 0..(m + 127) / 128 bind(blockIdx.x) {
      for t in 0..128 bind(threadIdx.x) {
        let i: idx = b * 128 + t
        if i < m {
          let acc: f32 = 0.0
          for jp in A_indptr[i]..A_indptr[i + 1] {
            acc = acc + A[jp] * x[A_indices[jp]]
          }
          partial[i] = acc
        }
      }
    }
  }
  launch store {
    for b in 0..(m + 255) / 256 bind(blockIdx.x) {
      for t in 0..256 bind(threadIdx.x) {
        if b * 256 + t < m {
          y[b * 256 + t] = partial[b * 256 + t]
        }
      }
    }
  }
  launch never {
    for b in 0..A_indptr[m] - nnz bind(blockIdx.x) {
      for t in 0..32 bind(threadIdx.x) {
        if b * 32 + t < m {
          y[b * 32 + t] = 0.0
        }
      }
    }
  }
}
";

/// The CUDA source, in the emitter's shape and launch convention.
pub const SPMV_CU: &str = r#"/* SpMV, a thread per row, in the shape of Sparsile's CUDA backend.
 * params:  m, n, nnz
 * buffers: A (f32), x (f32), y (f32), A_indptr (i32), A_indices (i32), partial (f32, scratch)
 * kernels, launched in this order: spmv_rows, spmv_store, spmv_never
 */
typedef long long int64_t;
typedef int int32_t;
typedef unsigned long long uint64_t;
#define INT64_C(c) c##LL
#define INT64_MIN (-INT64_C(9223372036854775807) - 1)
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)

/* Launch `rows`: grid ((m + 127) / 128, 1, 1) x block (128, 1, 1), 0 bytes of shared memory. */
extern "C" __global__ void __launch_bounds__(128) spmv_rows(long long m, const float *__restrict__ A, const float *__restrict__ x, const int32_t *__restrict__ A_indptr, const int32_t *__restrict__ A_indices, float *__restrict__ partial)
{
    const int64_t b = (int64_t)blockIdx.x;
    const int64_t t = (int64_t)threadIdx.x;
    int64_t i = b * 128 + t;
    if (i < m) {
        float acc = 0.0f;
        for (int64_t jp = (int64_t)A_indptr[i]; jp < (int64_t)A_indptr[i + 1]; ++jp) {
            acc = acc + A[jp] * x[(int64_t)A_indices[jp]];
        }
        partial[i] = acc;
    }
}

/* Launch `store`: grid ((m + 255) / 256, 1, 1) x block (256, 1, 1), 0 bytes of shared memory. */
extern "C" __global__ void __launch_bounds__(256) spmv_store(long long m, float *__restrict__ y, const float *__restrict__ partial)
{
    const int64_t b = (int64_t)blockIdx.x;
    const int64_t t = (int64_t)threadIdx.x;
    if (b * 256 + t < m) {
        y[b * 256 + t] = partial[b * 256 + t];
    }
}

/* Launch `never`: grid (A_indptr[m] - nnz, 1, 1) x block (32, 1, 1), 0 bytes of shared memory. */
extern "C" __global__ void __launch_bounds__(32) spmv_never(long long m, float *__restrict__ y)
{
    const int64_t b = (int64_t)blockIdx.x;
    const int64_t t = (int64_t)threadIdx.x;
    if (b * 32 + t < m) {
        y[b * 32 + t] = 0.0f;
    }
}
"#;

pub fn program() -> Program {
    SPMV_SIR.parse().unwrap_or_else(|e| panic!("{e}"))
}

pub fn gpu_func() -> Func {
    let f: Func = SPMV_GPU.parse().unwrap_or_else(|e| panic!("{e}"));
    if let Err(errors) = sparsile_ir::loops::verify(&f) {
        panic!("the GPU function does not verify: {errors:?}");
    }
    f
}

fn p(name: &str) -> Expr {
    let i = ["m", "n", "nnz"].iter().position(|&n| n == name).unwrap();
    Expr::Param(ParamId(i as u32))
}

fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    Expr::binary(op, a, b)
}

/// `(m + add) / div`.
fn blocks(add: i64, div: i64) -> Expr {
    bin(
        BinaryOp::Div,
        bin(BinaryOp::Add, p("m"), Expr::Int(add)),
        Expr::Int(div),
    )
}

/// The plan the emitter gives [`SPMV_GPU`] (buffers: A 0, x 1, y 2, A_indptr 3,
/// A_indices 4, partial 5).
pub fn plan() -> LaunchPlan {
    let one = || Expr::Int(1);
    let never_blocks = bin(
        BinaryOp::Sub,
        Expr::load(BufferId(3), vec![p("m")]),
        p("nnz"),
    );
    LaunchPlan {
        kernels: vec![
            KernelPlan {
                symbol: "spmv_rows".into(),
                grid: [blocks(127, 128), one(), one()],
                block: [128, 1, 1],
                shared_bytes: 0,
                args: vec![
                    ArgRef::Param(0),
                    ArgRef::Buffer(0),
                    ArgRef::Buffer(1),
                    ArgRef::Buffer(3),
                    ArgRef::Buffer(4),
                    ArgRef::Buffer(5),
                ],
                alignments: vec![],
            },
            KernelPlan {
                symbol: "spmv_store".into(),
                grid: [blocks(255, 256), one(), one()],
                block: [256, 1, 1],
                shared_bytes: 0,
                args: vec![ArgRef::Param(0), ArgRef::Buffer(2), ArgRef::Buffer(5)],
                alignments: vec![],
            },
            KernelPlan {
                symbol: "spmv_never".into(),
                grid: [never_blocks, one(), one()],
                block: [32, 1, 1],
                shared_bytes: 0,
                args: vec![ArgRef::Param(0), ArgRef::Buffer(2)],
                alignments: vec![],
            },
        ],
    }
}

/// `t` with its values as f32.
pub fn as_f32(t: SparseTensor<'static>) -> SparseTensor<'static> {
    let values = t.values.to_f64_vec().iter().map(|&v| v as f32).collect();
    SparseTensor {
        structure: t.structure,
        values: Values::F32(Cow::Owned(values)),
    }
}

/// A seeded `m x n` CSR matrix (f32, i32 indices; some rows empty) and a dense `x`.
pub fn inputs(seed: u64, m: usize, n: usize) -> HashMap<String, SparseTensor<'static>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut coo = CooTensor::empty(vec![m, n]);
    for i in 0..m {
        if i % 5 == 3 {
            continue;
        }
        for j in 0..n {
            if rng.random_bool(0.3) {
                coo.coords.extend([i, j]);
                coo.values.push(rng.random_range(-1.0..1.0));
            }
        }
    }
    let a = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).expect("CSR");
    let mut x = CooTensor::empty(vec![n]);
    for j in 0..n {
        x.coords.push(j);
        x.values.push(rng.random_range(-1.0..1.0));
    }
    let x = SparseTensor::from_coo_with(&x, &Format::Dense, DType::F32).expect("dense x");
    HashMap::from([("A".to_string(), a), ("x".to_string(), x)])
}

/// Checks `outputs` against the interpreter's on `inputs` (f32 sums in row order against
/// f64 sums rounded once).
pub fn assert_matches_interpreter(
    outputs: &Outputs,
    inputs: &HashMap<String, SparseTensor<'static>>,
) {
    let want = interpret(&program(), inputs, &InterpOptions::default()).unwrap();
    let got = outputs["y"].values.to_f64_vec();
    let want = want["y"].values.to_f64_vec();
    assert_eq!(got.len(), want.len(), "length of y");
    assert_eq!(outputs["y"].shape(), &[want.len()]);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "y[{i}]: got {g}, want {w}"
        );
    }
}
