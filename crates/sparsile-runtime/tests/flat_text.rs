//! Loop-level functions written in the text IR, run next to their stage-I programs: the
//! loop-level interpreter must give exactly the stage-I interpreter's outputs (same
//! summation order, one rounding to f32 at the end).

mod common;

use std::collections::HashMap;

use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::coord::Program;
use sparsile_ir::loops::Func;
use sparsile_ir::{DType, IndexType};
use sparsile_runtime::{flat_interp, interpret, FlatOptions, InterpOptions, Outputs};

type Inputs = HashMap<String, SparseTensor<'static>>;

const SPMM_SIR: &str = "\
func spmm(m, n, k, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JB = dense_fixed(n)
  axis K = dense_fixed(k)
  buffer A: f32[I, J] input
  buffer B: f32[JB, K] input
  buffer C: f32[I, K] output
  iter spmm over [I: S, J: R, K: S] as (i, j, kp) {
    init {
      C[i, kp] = 0.0
    }
    C[i, kp] = C[i, kp] + A[i, j] * B[j, kp]
  }
}
";

const SPMM_POS: &str = "\
pos func spmm(m, n, k, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JB = dense_fixed(n)
  axis K = dense_fixed(k)
  buffer A: f32[I, J] input values
  buffer B: f32[JB, K] input values
  buffer C: f32[I, K] output values
  buffer A_J_indptr: i32[m + 1] input indptr(A, 1)
  buffer A_J_indices: i32[nnz] input indices(A, 1)
  block spmm.init {
    for i0 in 0..m parallel {
      for kp0 in 0..k {
        C[i0, kp0] = 0.0
      }
    }
  }
  block spmm {
    for i in 0..m parallel {
      for kp in 0..k {
        let acc: f32 = 0.0
        for jp in A_J_indptr[i]..A_J_indptr[i + 1] {
          let j: idx = A_J_indices[jp]
          acc = acc + A[i, jp] * B[j, kp]
        }
        C[i, kp] = C[i, kp] + acc
      }
    }
  }
}
";

const SPMM_FLAT: &str = "\
flat func spmm(m, n, k, nnz) {
  buffer A: f32[nnz] input values
  buffer B: f32[n * k] input values
  buffer C: f32[m * k] output values
  buffer A_J_indptr: i32[m + 1] input indptr(A, 1)
  buffer A_J_indices: i32[nnz] input indices(A, 1)
  block spmm.init {
    for i0 in 0..m parallel {
      for kp0 in 0..k vectorized {
        C[i0 * k + kp0] = 0.0
      }
    }
  }
  block spmm {
    for i in 0..m parallel {
      for kp in 0..k {
        let acc: f32 = 0.0
        for jp in A_J_indptr[i]..A_J_indptr[i + 1] {
          let j: idx = A_J_indices[jp]
          acc = acc + A[jp] * B[j * k + kp]
        }
        C[i * k + kp] = C[i * k + kp] + acc
      }
    }
  }
}
";

const MASKED_SIR: &str = "\
func masked_read(m, n, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i64)
  axis JD = dense_fixed(n)
  buffer A: f32[I, J] input
  buffer D: f32[I, JD] output
  iter read over [I: S, JD: S] as (i, j) {
    D[i, j] = A[i, j] * 2.0
  }
}
";

/// A read of `A` at coordinates the loops do not bind: binary search, -1 = not stored.
const MASKED_POS: &str = "\
pos func masked_read(m, n, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i64)
  axis JD = dense_fixed(n)
  buffer A: f32[I, J] input values
  buffer D: f32[I, JD] output values
  buffer A_J_indptr: i64[m + 1] input indptr(A, 1)
  buffer A_J_indices: i64[nnz] input indices(A, 1)
  block read {
    for i in 0..m parallel {
      for j in 0..n {
        let jp: idx = search(A_J_indices, A_J_indptr[i], A_J_indptr[i + 1], j)
        if jp >= 0 {
          D[i, j] = A[i, jp]
        } else {
          D[i, j] = 0.0
        }
        D[i, j] = select(jp == -1 || j < 0, 0.0, D[i, j] * 2.0)
      }
    }
  }
}
";

const BSR_SIR: &str = "\
func spmm_bsr(mb, nb, m, n, feat, nnzb) {
  axis IO = dense_fixed(mb)
  axis JO = sparse_variable(IO, nb, nnz=nnzb, idx=i64)
  axis II = dense_fixed(4)
  axis JI = dense_fixed(4)
  axis BR = dense_fixed(n)
  axis CR = dense_fixed(m)
  axis F = dense_fixed(feat)
  buffer A: f32[IO, JO, II, JI] input
  buffer B: f32[BR, F] input
  buffer C: f32[CR, F] output
  iter bsr over [IO: S, JO: R, II: S, JI: R, F: S] as (io, jo, ii, ji, f) {
    init {
      C[io * 4 + ii, f] = 0.0
    }
    C[io * 4 + ii, f] = C[io * 4 + ii, f] + A[io, jo, ii, ji] * B[jo * 4 + ji, f]
  }
}
";

/// Stage III with the stage-I range semantics as explicit guards; the sum over the
/// block row is a local (f64 in the interpreter, like stage I) stored once.
const BSR_FLAT: &str = "\
flat func spmm_bsr(mb, nb, m, n, feat, nnzb) {
  buffer A: f32[nnzb * 16] input values
  buffer B: f32[n * feat] input values
  buffer C: f32[m * feat] output values
  buffer A_JO_indptr: i64[mb + 1] input indptr(A, 1)
  buffer A_JO_indices: i64[nnzb] input indices(A, 1)
  block bsr.init {
    for io0 in 0..mb parallel {
      for ii0 in 0..4 {
        for f0 in 0..feat {
          if io0 * 4 + ii0 < m {
            C[(io0 * 4 + ii0) * feat + f0] = 0.0
          }
        }
      }
    }
  }
  block bsr {
    for io in 0..mb parallel {
      for ii in 0..4 {
        for f in 0..feat {
          if io * 4 + ii < m {
            let acc: f32 = 0.0
            for jop in A_JO_indptr[io]..A_JO_indptr[io + 1] {
              let jo: idx = A_JO_indices[jop]
              for ji in 0..4 {
                if jo * 4 + ji < n {
                  acc = acc + A[(jop * 4 + ii) * 4 + ji] * B[(jo * 4 + ji) * feat + f]
                }
              }
            }
            C[(io * 4 + ii) * feat + f] = C[(io * 4 + ii) * feat + f] + acc
          }
        }
      }
    }
  }
}
";

fn parse(sir: &str, func: &str) -> (Program, Func) {
    let p: Program = sir.parse().unwrap_or_else(|e| panic!("{e}"));
    let f: Func = func.parse().unwrap_or_else(|e| panic!("{e}"));
    sparsile_ir::loops::verify(&f).unwrap_or_else(|e| panic!("{e:?}"));
    (p, f)
}

fn run(f: &Func, p: &Program, inputs: &Inputs, opts: &InterpOptions) -> Outputs {
    let flat = FlatOptions {
        verify_func: true,
        ..FlatOptions::default()
    };
    flat_interp::run_with(f, p, inputs, opts, &flat).unwrap_or_else(|e| panic!("{e}"))
}

fn f32_dense(r: &mut rand_chacha::ChaCha8Rng, shape: &[usize]) -> SparseTensor<'static> {
    let total = shape.iter().product();
    let values: Vec<f64> = (0..total).map(|_| common::nonzero(r)).collect();
    SparseTensor::dense_from_f64(shape, &values, DType::F32).unwrap()
}

fn assert_same(got: &Outputs, want: &Outputs, name: &str, what: &str) {
    assert_eq!(got[name].values, want[name].values, "{what}");
    assert_eq!(got[name].structure, want[name].structure, "{what}");
}

#[test]
fn spmm_csr_text_stage2_and_stage3_equal_stage1() {
    let (p, pos) = parse(SPMM_SIR, SPMM_POS);
    let (_, flat) = parse(SPMM_SIR, SPMM_FLAT);
    let mut r = common::rng(21);
    for (case, coo) in common::matrix_cases(22) {
        let inputs: Inputs = HashMap::from([
            (
                "A".to_string(),
                SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap(),
            ),
            ("B".to_string(), f32_dense(&mut r, &[coo.shape[1], 5])),
        ]);
        let opts = InterpOptions::default();
        let want = interpret(&p, &inputs, &opts).unwrap();
        assert_same(
            &run(&pos, &p, &inputs, &opts),
            &want,
            "C",
            &format!("stage II, {case}"),
        );
        assert_same(
            &run(&flat, &p, &inputs, &opts),
            &want,
            "C",
            &format!("stage III, {case}"),
        );
    }
}

#[test]
fn masked_read_by_search_equals_stage1() {
    let (p, pos) = parse(MASKED_SIR, MASKED_POS);
    for (case, coo) in common::matrix_cases(23) {
        let a =
            SparseTensor::from_coo_with_index(&coo, &Format::Csr, DType::F32, Some(IndexType::I64))
                .unwrap();
        let inputs: Inputs = HashMap::from([("A".to_string(), a)]);
        let opts = InterpOptions::default();
        let want = interpret(&p, &inputs, &opts).unwrap();
        assert_same(&run(&pos, &p, &inputs, &opts), &want, "D", case);
    }
}

#[test]
fn bsr_spmm_with_edge_guards_equals_stage1() {
    let (p, flat) = parse(BSR_SIR, BSR_FLAT);
    let mut r = common::rng(24);
    for shape in [[9, 10], [8, 8], [1, 13], [0, 3]] {
        let coo: CooTensor = common::random_coo(&mut r, &shape, 0.3);
        let a = SparseTensor::from_coo_with_index(
            &coo,
            &Format::Bsr { r: 4, c: 4 },
            DType::F32,
            Some(IndexType::I64),
        )
        .unwrap();
        let inputs: Inputs = HashMap::from([
            ("A".to_string(), a),
            ("B".to_string(), f32_dense(&mut r, &[shape[1], 3])),
        ]);
        let opts = InterpOptions {
            params: HashMap::from([("m".to_string(), shape[0] as i64)]),
            ..Default::default()
        };
        let want = interpret(&p, &inputs, &opts).unwrap();
        assert_same(
            &run(&flat, &p, &inputs, &opts),
            &want,
            "C",
            &format!("{shape:?}"),
        );
    }
}

/// Real matrices (from the shared data folder, when present): the CSR SpMM of stages II
/// and III and the BSR SpMM of stage III equal the stage-I interpreter exactly.
#[test]
fn real_matrices_equal_stage1() {
    use sparsile_formats::mtx::{self, MtxData, MtxReadOptions};
    let dir = std::path::Path::new("/work/shared/data");
    let read = MtxReadOptions {
        duplicates: mtx::Duplicates::Sum,
    };
    let (p, pos) = parse(SPMM_SIR, SPMM_POS);
    let (_, flat) = parse(SPMM_SIR, SPMM_FLAT);
    let (pb, bsr) = parse(BSR_SIR, BSR_FLAT);
    let mut r = common::rng(25);
    for file in ["cora.mtx", "dlmc_rn50_mp70_initconv.mtx"] {
        let path = dir.join(file);
        if !path.exists() {
            eprintln!("skipping {file}: not found under {}", dir.display());
            continue;
        }
        let MtxData::Sparse(mut coo) = mtx::read_path(&path, &read).unwrap() else {
            panic!("{file} is not a coordinate file");
        };
        coo.sort_and_sum_duplicates();
        let b = f32_dense(&mut r, &[coo.shape[1], 4]);
        let csr = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap();
        let inputs: Inputs = HashMap::from([("A".to_string(), csr), ("B".to_string(), b.clone())]);
        let opts = InterpOptions::default();
        let want = interpret(&p, &inputs, &opts).unwrap();
        assert_same(
            &run(&pos, &p, &inputs, &opts),
            &want,
            "C",
            &format!("{file}, stage II"),
        );
        assert_same(
            &run(&flat, &p, &inputs, &opts),
            &want,
            "C",
            &format!("{file}, stage III"),
        );

        let a = SparseTensor::from_coo_with_index(
            &coo,
            &Format::Bsr { r: 4, c: 4 },
            DType::F32,
            Some(IndexType::I64),
        )
        .unwrap();
        let inputs: Inputs = HashMap::from([("A".to_string(), a), ("B".to_string(), b)]);
        let opts = InterpOptions {
            params: HashMap::from([("m".to_string(), coo.shape[0] as i64)]),
            ..Default::default()
        };
        let want = interpret(&pb, &inputs, &opts).unwrap();
        assert_same(
            &run(&bsr, &pb, &inputs, &opts),
            &want,
            "C",
            &format!("{file}, BSR"),
        );
    }
}
