//! SpMV, SpMM, batched SpMM and SDDMM on CSR inputs against dense arithmetic.

mod common;

use common::*;
use sparsile_ir::coord::{BufferRole::*, Program};

/// `y[i] = sum_j A[i, j] * x[j]`, A in CSR.
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

use sparsile_ir::coord::Expr;

#[test]
fn spmv_matches_dense() {
    let p = spmv();
    for (name, coo) in matrix_cases(1) {
        let (m, n) = (coo.shape[0], coo.shape[1]);
        let mut r = rng(2);
        let (xv, x) = random_dense(&mut r, &[n]);
        let out = run(&p, vec![("A", csr(&coo)), ("x", x)]).unwrap();
        let want = matmul(&to_dense(&coo), &xv, m, n, 1);
        assert_close(&out["y"].values.to_f64_vec(), &want, name);
        assert_eq!(out["y"].shape(), &[m]);
    }
}

/// `C[i, k] = sum_j A[i, j] * B[j, k]`, A in CSR.
pub fn spmm() -> Program {
    let mut b = Builder::new("spmm");
    let (m, n, k, nnz) = (b.param("m"), b.param("n"), b.param("k"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    let jd = b.dense("JD", n);
    let kk = b.dense("K", k);
    let a = b.buf("A", &[i, j], Input);
    let bb = b.buf("B", &[jd, kk], Input);
    let c = b.buf("C", &[i, kk], Output);
    let (vi, vj, vk) = (b.var("i", i), b.var("j", j), b.var("k", kk));
    let s = b.iter(
        "spmm",
        &[(vi, S), (vj, R), (vk, S)],
        vec![st(c, vec![v(vi), v(vk)], Expr::Float(0.0))],
        vec![acc(
            c,
            vec![v(vi), v(vk)],
            mul(ld(a, vec![v(vi), v(vj)]), ld(bb, vec![v(vj), v(vk)])),
        )],
    );
    b.p.body.push(s);
    b.p
}

#[test]
fn spmm_matches_dense() {
    let p = spmm();
    for (name, coo) in matrix_cases(3) {
        let (m, n, k) = (coo.shape[0], coo.shape[1], 5);
        let (bv, bt) = random_dense(&mut rng(4), &[n, k]);
        let out = run(&p, vec![("A", csr(&coo)), ("B", bt)]).unwrap();
        assert_close(
            &out["C"].values.to_f64_vec(),
            &matmul(&to_dense(&coo), &bv, m, n, k),
            name,
        );
    }
}

#[test]
fn spmm_outputs_in_buffer_dtype() {
    let mut p = spmm();
    p.buffers[sparsile_ir::BufferId(2)].dtype = sparsile_ir::DType::F32;
    let coo = random_coo(&mut rng(5), &[4, 4], 0.5);
    let (bv, bt) = random_dense(&mut rng(6), &[4, 3]);
    let out = run(&p, vec![("A", csr(&coo)), ("B", bt)]).unwrap();
    assert_eq!(out["C"].dtype(), sparsile_ir::DType::F32);
    let want: Vec<f64> = matmul(&to_dense(&coo), &bv, 4, 4, 3)
        .iter()
        .map(|&x| x as f32 as f64)
        .collect();
    assert_eq!(out["C"].values.to_f64_vec(), want);
}

/// `C[b, i, k] = sum_j A[b, i, j] * X[b, j, k]`: a dense batch axis in front of a CSR
/// pattern shared by every batch (values differ per batch).
#[test]
fn batched_spmm_matches_dense() {
    let mut bld = Builder::new("bspmm");
    let (nb, m, n, k, nnz) = (
        bld.param("nb"),
        bld.param("m"),
        bld.param("n"),
        bld.param("k"),
        bld.param("nnz"),
    );
    let ba = bld.dense("B", nb);
    let i = bld.dense("I", m);
    let j = bld.svar("J", i, n, nnz);
    let jd = bld.dense("JD", n);
    let kk = bld.dense("K", k);
    let a = bld.buf("A", &[ba, i, j], Input);
    let x = bld.buf("X", &[ba, jd, kk], Input);
    let c = bld.buf("C", &[ba, i, kk], Output);
    let (vb, vi, vj, vk) = (
        bld.var("b", ba),
        bld.var("i", i),
        bld.var("j", j),
        bld.var("k", kk),
    );
    let s = bld.iter(
        "bspmm",
        &[(vb, S), (vi, S), (vj, R), (vk, S)],
        vec![st(c, vec![v(vb), v(vi), v(vk)], Expr::Float(0.0))],
        vec![acc(
            c,
            vec![v(vb), v(vi), v(vk)],
            mul(
                ld(a, vec![v(vb), v(vi), v(vj)]),
                ld(x, vec![v(vb), v(vj), v(vk)]),
            ),
        )],
    );
    bld.p.body.push(s);

    for (name, coo) in matrix_cases(7) {
        let (mm, nn, kw, batches) = (coo.shape[0], coo.shape[1], 3, 3);
        let mut r = rng(8);
        let pattern = csr(&coo);
        // Batch values: batch b scales the pattern's values by (b + 1) plus noise.
        let mut values = Vec::new();
        let mut dense_a = Vec::new();
        for bi in 0..batches {
            let mut scaled = coo.clone();
            for val in &mut scaled.values {
                *val = *val * (bi as f64 + 1.0) + nonzero(&mut r) * 0.1;
            }
            values.extend(scaled.values.iter().copied());
            dense_a.push(to_dense(&scaled));
        }
        let mut axes = vec![sparsile_formats::AxisStorage::dense_fixed(batches)];
        for mut ax in pattern.structure.axes.clone() {
            ax.parent = ax.parent.map(|p| p + 1);
            axes.push(ax);
        }
        let a_t = sparsile_formats::SparseTensor {
            structure: std::sync::Arc::new(sparsile_formats::Structure {
                format: sparsile_formats::Format::Csf,
                shape: vec![batches, mm, nn],
                axes,
            }),
            values: sparsile_formats::Values::F64(values.into()),
        };
        let (xv, x_t) = random_dense(&mut r, &[batches, nn, kw]);
        let out = run(&bld.p, vec![("A", a_t), ("X", x_t)]).unwrap();
        let mut want = Vec::new();
        for bi in 0..batches {
            want.extend(matmul(
                &dense_a[bi],
                &xv[bi * nn * kw..(bi + 1) * nn * kw],
                mm,
                nn,
                kw,
            ));
        }
        assert_close(&out["C"].values.to_f64_vec(), &want, name);
    }
}

/// `C[i, j] = A[i, j] * sum_k X[i, k] * Y[j, k]`; C shares A's axes.
#[test]
fn sddmm_output_shares_a_structure() {
    let mut b = Builder::new("sddmm");
    let (m, n, k, nnz) = (b.param("m"), b.param("n"), b.param("k"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    let jd = b.dense("JD", n);
    let kk = b.dense("K", k);
    let a = b.buf("A", &[i, j], Input);
    let x = b.buf("X", &[i, kk], Input);
    let y = b.buf("Y", &[jd, kk], Input);
    let c = b.buf("C", &[i, j], Output);
    let (vi, vj, vk) = (b.var("i", i), b.var("j", j), b.var("k", kk));
    let s = b.iter(
        "sddmm",
        &[(vi, S), (vj, S), (vk, R)],
        vec![st(c, vec![v(vi), v(vj)], Expr::Float(0.0))],
        vec![acc(
            c,
            vec![v(vi), v(vj)],
            mul(
                ld(a, vec![v(vi), v(vj)]),
                mul(ld(x, vec![v(vi), v(vk)]), ld(y, vec![v(vj), v(vk)])),
            ),
        )],
    );
    b.p.body.push(s);
    for (name, coo) in matrix_cases(9) {
        let (mm, nn, kw) = (coo.shape[0], coo.shape[1], 4);
        let mut r = rng(10);
        let (xv, xt) = random_dense(&mut r, &[mm, kw]);
        let (yv, yt) = random_dense(&mut r, &[nn, kw]);
        let a_t = csr(&coo);
        let out = run(&b.p, vec![("A", a_t.clone()), ("X", xt), ("Y", yt)]).unwrap();
        let cs = &out["C"];
        assert_eq!(cs.structure.axes, a_t.structure.axes, "{name}: pattern");
        assert_eq!(cs.format(), a_t.format());
        let ad = to_dense(&coo);
        let mut want = vec![0.0; mm * nn];
        for ii in 0..mm {
            for jj in 0..nn {
                let dot: f64 = (0..kw).map(|l| xv[ii * kw + l] * yv[jj * kw + l]).sum();
                want[ii * nn + jj] = ad[ii * nn + jj] * dot;
            }
        }
        assert_close(&tensor_to_dense(cs), &want, name);
    }
}
