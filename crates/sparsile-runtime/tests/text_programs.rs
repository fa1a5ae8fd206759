//! Programs written in the stage-I text form, parsed and interpreted: scalar buffers,
//! integer temps with floor division, DIA through an offset map, nested iterations with
//! unary functions, union and intersection outputs.

mod common;

use common::*;
use sparsile_formats::CooTensor;
use sparsile_ir::coord::Program;

fn parse(text: &str) -> Program {
    text.parse().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn scalar_buffers_and_integer_arithmetic() {
    let p = parse(
        "\
func scalars(n) {
  axis E = dense_fixed(n)
  buffer eid: i32[E] input
  buffer t: f64[] output
  buffer u: i64[] output
  buffer h: i64[E] output
  t[] = 0.5 + 1e-7 * -0.0 - -2.0
  u[] = -9007199254740 + 0 - -1
  iter hash over [E: S] as (e) {
    h[e] = eid[e] % 4 + (n - 1) / 2 - (e - -3) * max(e, 1)
  }
}
",
    );
    let eid = vec![-7.0, 5.0, 0.0, 13.0];
    let out = run(&p, vec![("eid", dense_tensor(&[4], eid.clone()))]).unwrap();
    assert_eq!(out["t"].values.to_f64_vec(), vec![2.5]);
    assert_eq!(out["t"].shape(), &[] as &[usize]);
    assert_eq!(out["u"].values.to_f64_vec(), vec![-9007199254739.0]);
    let want: Vec<f64> = eid
        .iter()
        .enumerate()
        .map(|(e, &x)| {
            let e = e as i64;
            ((x as i64).rem_euclid(4) + (4 - 1) / 2 - (e + 3) * e.max(1)) as f64
        })
        .collect();
    assert_eq!(out["h"].values.to_f64_vec(), want);
}

#[test]
fn dia_spmv_through_offset_map() {
    // DIA stored as a dense [D, I] array plus the offset of each diagonal.
    let p = parse(
        "\
func spmv_dia(m, n, ndiag) {
  axis D = dense_fixed(ndiag)
  axis I = dense_fixed(m)
  axis JD = dense_fixed(n)
  buffer off: i32[D] input
  buffer A: f64[D, I] input
  buffer x: f64[JD] input
  buffer y: f64[I] output
  iter dia over [D: R, I: S] as (d, i) {
    init {
      y[i] = 0.0
    }
    y[i] = y[i] + A[d, i] * x[i + off[d]]
  }
}
",
    );
    let (m, n) = (6usize, 8usize);
    let offs = [-2i64, 0, 1, 5];
    let mut r = rng(71);
    let (av, at) = random_dense(&mut r, &[offs.len(), m]);
    let (xv, xt) = random_dense(&mut r, &[n]);
    let off_t = dense_tensor(&[offs.len()], offs.iter().map(|&o| o as f64).collect());
    let out = run(&p, vec![("off", off_t), ("A", at), ("x", xt)]).unwrap();
    let mut want = vec![0.0; m];
    for (d, &o) in offs.iter().enumerate() {
        for (i, w) in want.iter_mut().enumerate() {
            let j = i as i64 + o;
            if (0..n as i64).contains(&j) {
                *w += av[d * m + i] * xv[j as usize];
            }
        }
    }
    assert_close(&out["y"].values.to_f64_vec(), &want, "dia");
}

#[test]
fn nested_iterations_and_unary_functions() {
    let p = parse(
        "\
func nested_spmv(m, n, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JD = dense_fixed(n)
  buffer A: f64[I, J] input
  buffer x: f64[JD] input
  buffer bias: f64[I] input
  buffer acc: f64[I] temp
  buffer y: f64[I] output
  iter rows over [I: S] as (i) {
    init {
      acc[i] = 0.0
    }
    iter cols over [J: R] as (j) {
      acc[i] = acc[i] + A[i, j] * x[j]
    }
    y[i] = relu(acc[i] + bias[i])
  }
  iter clamp over [I: S] as (i) {
    y[i] = min(max(y[i], -1.0), exp(neg(abs(y[i]))) / sqrt(2.0) - log(3.0))
  }
}
",
    );
    for (name, coo) in matrix_cases(72) {
        let (m, n) = (coo.shape[0], coo.shape[1]);
        let mut r = rng(73);
        let (xv, xt) = random_dense(&mut r, &[n]);
        let (bv, bt) = random_dense(&mut r, &[m]);
        let out = run(&p, vec![("A", csr(&coo)), ("x", xt), ("bias", bt)]).unwrap();
        let ax = matmul(&to_dense(&coo), &xv, m, n, 1);
        let want: Vec<f64> = ax
            .iter()
            .zip(&bv)
            .map(|(a, b)| {
                let y = (a + b).max(0.0);
                y.max(-1.0).min((-y.abs()).exp() / 2f64.sqrt() - 3f64.ln())
            })
            .collect();
        assert_close(&out["y"].values.to_f64_vec(), &want, name);
    }
}

#[test]
fn union_and_intersection_outputs_from_text() {
    let p = parse(
        "\
func sparse_add(m, n, nnz_A, nnz_B, nnz_C, nnz_D) {
  axis I = dense_fixed(m)
  axis JA = sparse_variable(I, n, nnz=nnz_A, idx=i32)
  axis JB = sparse_variable(I, n, nnz=nnz_B, idx=i32)
  axis JC = sparse_variable(I, n, nnz=nnz_C, idx=i32) = union(JA, JB)
  axis JD = sparse_variable(I, n, nnz=nnz_D, idx=i32) = intersect(JA, JB)
  buffer A: f32[I, JA] input
  buffer B: f32[I, JB] input
  buffer C: f32[I, JC] output
  buffer D: f32[I, JD] output
  iter add over [I: S, JC: S] as (i, j) {
    C[i, j] = A[i, j] + B[i, j]
  }
  iter mul over [I: S, JD: S] as (i, j) {
    D[i, j] = A[i, j] * B[i, j]
  }
}
",
    );
    let f32_csr = |c: &CooTensor| {
        sparsile_formats::SparseTensor::from_coo_with(
            c,
            &sparsile_formats::Format::Csr,
            sparsile_ir::DType::F32,
        )
        .unwrap()
    };
    let mut r = rng(74);
    for (name, a) in matrix_cases(75) {
        let b = random_coo(&mut r, &a.shape, 0.35);
        let (at, bt) = (f32_csr(&a), f32_csr(&b));
        let (da, db) = (at.to_dense_f64(), bt.to_dense_f64());
        let out = run(&p, vec![("A", at), ("B", bt)]).unwrap();
        let sum: Vec<f64> = da
            .iter()
            .zip(&db)
            .map(|(x, y)| ((x + y) as f32) as f64)
            .collect();
        let prod: Vec<f64> = da
            .iter()
            .zip(&db)
            .map(|(x, y)| ((x * y) as f32) as f64)
            .collect();
        assert_eq!(out["C"].to_dense_f64(), sum, "{name}");
        assert_eq!(out["D"].to_dense_f64(), prod, "{name}");
        let both = da
            .iter()
            .zip(&db)
            .filter(|(x, y)| **x != 0.0 && **y != 0.0)
            .count();
        assert_eq!(out["D"].nnz_stored(), both, "{name}");
    }
}

/// RGMS over `A[REL, I, J]` with `I` a `dense_variable` axis (every relation stores all
/// rows; the row coordinate is the position minus the start of the relation's run).
#[test]
fn rgms_with_dense_variable_rows() {
    use std::sync::Arc;

    use sparsile_formats::{AxisStorage, Format, IndexArray, SparseTensor, Structure, Values};
    use sparsile_ir::{AxisKind, IndexType};
    let p = parse(
        "\
func rgms(nrel, m, n, fin, fout, nrows, nnz) {
  axis REL = dense_fixed(nrel)
  axis I = dense_variable(REL, m, nnz=nrows, idx=i32)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis ID = dense_fixed(m)
  axis JD = dense_fixed(n)
  axis K = dense_fixed(fin)
  axis L = dense_fixed(fout)
  buffer A: f64[REL, I, J] input
  buffer X: f64[JD, K] input
  buffer W: f64[REL, K, L] input
  buffer Y: f64[ID, L] output
  iter zero over [ID: S, L: S] as (i, l) {
    Y[i, l] = 0.0
  }
  iter rgms over [REL: R, I: R, J: R, K: R, L: S] as (r, i, j, k, l) {
    Y[i, l] = Y[i, l] + A[r, i, j] * X[j, k] * W[r, k, l]
  }
}
",
    );
    let (nr, m, n, fin, fout) = (3usize, 5usize, 7usize, 2usize, 3usize);
    let mut r = rng(76);
    let rels: Vec<CooTensor> = (0..nr)
        .map(|k| {
            if k == 1 {
                CooTensor::empty(vec![m, n])
            } else {
                random_coo(&mut r, &[m, n], 0.3)
            }
        })
        .collect();
    let row_ptr: Vec<usize> = (0..=nr).map(|k| k * m).collect();
    let mut col_ptr = vec![0usize];
    let mut cols = Vec::new();
    let mut values = Vec::new();
    for rel in &rels {
        let t = csr(rel);
        let ptr = t.structure.axes[1].indptr.as_ref().unwrap().to_usizes();
        let base = *col_ptr.last().unwrap();
        col_ptr.extend(ptr[1..].iter().map(|p| p + base));
        cols.extend(t.structure.axes[1].indices.as_ref().unwrap().to_usizes());
        values.extend(t.values.to_f64_vec());
    }
    let ia = |v: &[usize]| Some(IndexArray::from_usizes(v, IndexType::I32));
    let a = SparseTensor {
        structure: Arc::new(Structure {
            format: Format::Csf,
            shape: vec![nr, m, n],
            axes: vec![
                AxisStorage::dense_fixed(nr),
                AxisStorage {
                    kind: AxisKind::DenseVariable,
                    parent: Some(0),
                    length: m,
                    npos: nr * m,
                    nnz_per_parent: None,
                    indptr: ia(&row_ptr),
                    indices: None,
                    unique: true,
                },
                AxisStorage {
                    kind: AxisKind::SparseVariable,
                    parent: Some(1),
                    length: n,
                    npos: cols.len(),
                    nnz_per_parent: None,
                    indptr: ia(&col_ptr),
                    indices: ia(&cols),
                    unique: true,
                },
            ],
        }),
        values: Values::F64(values.into()),
    };
    let (xv, xt) = random_dense(&mut r, &[n, fin]);
    let (wv, wt) = random_dense(&mut r, &[nr, fin, fout]);
    let out = run(&p, vec![("A", a), ("X", xt), ("W", wt)]).unwrap();
    let mut want = vec![0.0; m * fout];
    for (k, rel) in rels.iter().enumerate() {
        let ad = to_dense(rel);
        let ax = matmul(&ad, &xv, m, n, fin);
        let y = matmul(&ax, &wv[k * fin * fout..(k + 1) * fin * fout], m, fin, fout);
        for (w, v) in want.iter_mut().zip(y) {
            *w += v;
        }
    }
    assert_close(&out["Y"].values.to_f64_vec(), &want, "rgms");
}
