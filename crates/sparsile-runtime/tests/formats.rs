//! SpMM over block, padded and coordinate formats, random access by `locate` into CSC
//! and COO operands, and indirect indexing through an integer buffer.

mod common;

use std::collections::HashMap;

use common::*;
use sparsile_ir::coord::{BufferRole::*, Expr, Extent, Program};
use sparsile_ir::{AxisId, DType};
use sparsile_runtime::{interpret, InterpOptions};

/// `C[io*r + ii, k] += A[io, jo, ii, ji] * B[jo*c + ji, k]` over BSR `A`.
fn bsr_spmm(r: i64, c: i64) -> Program {
    let mut b = Builder::new("bsr_spmm");
    let (mb, nb, nnzb, m, n, k) = (
        b.param("mb"),
        b.param("nb"),
        b.param("nnzb"),
        b.param("m"),
        b.param("n"),
        b.param("k"),
    );
    let io = b.dense("IO", mb);
    let jo = b.svar("JO", io, nb, nnzb);
    let ii = b.dense("II", Extent::Const(r));
    let ji = b.dense("JI", Extent::Const(c));
    let id = b.dense("ID", m);
    let jd = b.dense("JD", n);
    let kk = b.dense("K", k);
    let a = b.buf("A", &[io, jo, ii, ji], Input);
    let bb = b.buf("B", &[jd, kk], Input);
    let cc = b.buf("C", &[id, kk], Output);
    let (vio, vjo, vii, vji, vk) = (
        b.var("io", io),
        b.var("jo", jo),
        b.var("ii", ii),
        b.var("ji", ji),
        b.var("k", kk),
    );
    let row = add(mul(v(vio), int(r)), v(vii));
    let col = add(mul(v(vjo), int(c)), v(vji));
    let s = b.iter(
        "bsr_spmm",
        &[(vio, S), (vjo, R), (vii, S), (vji, R), (vk, S)],
        vec![st(cc, vec![row.clone(), v(vk)], Expr::Float(0.0))],
        vec![acc(
            cc,
            vec![row, v(vk)],
            mul(
                ld(a, vec![v(vio), v(vjo), v(vii), v(vji)]),
                ld(bb, vec![col, v(vk)]),
            ),
        )],
    );
    b.p.body.push(s);
    b.p
}

#[test]
fn bsr_spmm_with_ragged_edges() {
    for (r, c) in [(2usize, 3usize), (4, 4), (1, 2)] {
        let p = bsr_spmm(r as i64, c as i64);
        for (name, coo) in matrix_cases(31) {
            let (m, n, k) = (coo.shape[0], coo.shape[1], 3);
            let (bv, bt) = random_dense(&mut rng(32), &[n, k]);
            let inputs = HashMap::from([("A".to_string(), bsr(&coo, r, c)), ("B".to_string(), bt)]);
            let opts = InterpOptions {
                params: [("m".to_string(), m as i64)].into(),
                ..Default::default()
            };
            let out = interpret(&p, &inputs, &opts).unwrap();
            assert_close(
                &out["C"].values.to_f64_vec(),
                &matmul(&to_dense(&coo), &bv, m, n, k),
                &format!("{name} bsr {r}x{c}"),
            );
        }
    }
}

/// SpMM with `A`'s column axis given by `col(b, i, n)`.
fn spmm_with(
    col: impl Fn(&mut Builder, AxisId, Extent) -> AxisId,
    out_rows_own_axis: bool,
) -> Program {
    let mut b = Builder::new("spmm");
    let (m, n, k) = (b.param("m"), b.param("n"), b.param("k"));
    let i = b.dense("I", m);
    let j = col(&mut b, i, n);
    let jd = b.dense("JD", n);
    let kk = b.dense("K", k);
    let ci = if out_rows_own_axis {
        b.dense("ID", m)
    } else {
        i
    };
    let a = b.buf("A", &[i, j], Input);
    let bb = b.buf("B", &[jd, kk], Input);
    let c = b.buf("C", &[ci, kk], Output);
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
fn ell_spmm_skips_padding() {
    let p = spmm_with(
        |b, i, n| {
            let w = b.param("width");
            b.sfixed("J", Some(i), n, w, true)
        },
        false,
    );
    for (name, coo) in matrix_cases(33) {
        let (m, n, k) = (coo.shape[0], coo.shape[1], 4);
        let longest = (0..m)
            .map(|i| (0..coo.nnz()).filter(|&e| coo.coord(e)[0] == i).count())
            .max()
            .unwrap_or(0);
        let (bv, bt) = random_dense(&mut rng(34), &[n, k]);
        // One slot more than the longest row, so every row has padding.
        let out = run(&p, vec![("A", ell(&coo, longest + 1)), ("B", bt)]).unwrap();
        assert_close(
            &out["C"].values.to_f64_vec(),
            &matmul(&to_dense(&coo), &bv, m, n, k),
            name,
        );
    }
}

#[test]
fn coo_driven_spmm() {
    let mut b = Builder::new("coo_spmm");
    let (m, n, k, nnz) = (b.param("m"), b.param("n"), b.param("k"), b.param("nnz"));
    let i = b.sfixed("I", None, m, nnz, false);
    let j = b.sfixed("J", Some(i), n, Extent::Const(1), true);
    let id = b.dense("ID", m);
    let jd = b.dense("JD", n);
    let kk = b.dense("K", k);
    let a = b.buf("A", &[i, j], Input);
    let bb = b.buf("B", &[jd, kk], Input);
    let c = b.buf("C", &[id, kk], Output);
    let (vi, vj, vk) = (b.var("i", i), b.var("j", j), b.var("k", kk));
    let s = b.iter(
        "coo_spmm",
        &[(vi, S), (vj, R), (vk, S)],
        vec![st(c, vec![v(vi), v(vk)], Expr::Float(0.0))],
        vec![acc(
            c,
            vec![v(vi), v(vk)],
            mul(ld(a, vec![v(vi), v(vj)]), ld(bb, vec![v(vj), v(vk)])),
        )],
    );
    b.p.body.push(s);
    for (name, coo) in matrix_cases(35) {
        let (mm, nn, kw) = (coo.shape[0], coo.shape[1], 3);
        let (bv, bt) = random_dense(&mut rng(36), &[nn, kw]);
        let out = run(&b.p, vec![("A", coo_tensor(&coo)), ("B", bt)]).unwrap();
        assert_close(
            &out["C"].values.to_f64_vec(),
            &matmul(&to_dense(&coo), &bv, mm, nn, kw),
            name,
        );
    }
}

/// A dense iteration space reading a sparse operand only by `locate`:
/// `C[i, k] = sum_j A[i, j] * B[j, k]` with `A` in CSC (accessed as `A[j, i]` in storage
/// order) or COO (non-unique row axis: locate backtracks over the run of equal rows).
fn dense_loops_over(csc_axes: bool) -> Program {
    let mut b = Builder::new("locate");
    let (m, n, k) = (b.param("m"), b.param("n"), b.param("k"));
    let id = b.dense("ID", m);
    let jd = b.dense("JD", n);
    let kk = b.dense("K", k);
    let (a, a_index): (_, fn(Expr, Expr) -> Vec<Expr>) = if csc_axes {
        let nnz = b.param("nnz");
        let ja = b.dense("JA", n);
        let ia = b.svar("IA", ja, m, nnz);
        (b.buf("A", &[ja, ia], Input), |i, j| vec![j, i])
    } else {
        let nnz = b.param("nnz");
        let ia = b.sfixed("IA", None, m, nnz, false);
        let ja = b.sfixed("JA", Some(ia), n, Extent::Const(1), true);
        (b.buf("A", &[ia, ja], Input), |i, j| vec![i, j])
    };
    let bb = b.buf("B", &[jd, kk], Input);
    let c = b.buf("C", &[id, kk], Output);
    let (vi, vj, vk) = (b.var("i", id), b.var("j", jd), b.var("k", kk));
    let s = b.iter(
        "locate",
        &[(vi, S), (vj, R), (vk, S)],
        vec![st(c, vec![v(vi), v(vk)], Expr::Float(0.0))],
        vec![acc(
            c,
            vec![v(vi), v(vk)],
            mul(ld(a, a_index(v(vi), v(vj))), ld(bb, vec![v(vj), v(vk)])),
        )],
    );
    b.p.body.push(s);
    b.p
}

#[test]
fn csc_and_coo_operands_read_by_locate() {
    for csc_axes in [true, false] {
        let p = dense_loops_over(csc_axes);
        for (name, coo) in matrix_cases(37) {
            let (m, n, k) = (coo.shape[0], coo.shape[1], 2);
            let (bv, bt) = random_dense(&mut rng(38), &[n, k]);
            let a = if csc_axes {
                csc(&coo)
            } else {
                coo_tensor(&coo)
            };
            let out = run(&p, vec![("A", a), ("B", bt)]).unwrap();
            assert_close(
                &out["C"].values.to_f64_vec(),
                &matmul(&to_dense(&coo), &bv, m, n, k),
                name,
            );
        }
    }
}

/// `C[i, k] = B[eid[i], k]` with an `i64` index map; entries outside `B` read 0.
#[test]
fn indirect_index_through_integer_buffer() {
    let mut b = Builder::new("gather");
    let (m, e, k) = (b.param("m"), b.param("e"), b.param("k"));
    let i = b.dense("I", m);
    let ea = b.dense("E", e);
    let kk = b.dense("K", k);
    let eid = b.buf_t("eid", DType::I64, &[i], Input);
    let src = b.buf("B", &[ea, kk], Input);
    let c = b.buf("C", &[i, kk], Output);
    let (vi, vk) = (b.var("i", i), b.var("k", kk));
    let s = b.iter(
        "gather",
        &[(vi, S), (vk, S)],
        vec![],
        vec![st(
            c,
            vec![v(vi), v(vk)],
            ld(src, vec![ld(eid, vec![v(vi)]), v(vk)]),
        )],
    );
    b.p.body.push(s);
    let mut r = rng(39);
    let (mm, ee, kw) = (9, 5, 3);
    let map: Vec<f64> = (0..mm)
        .map(|_| rand::Rng::random_range(&mut r, -1i64..=ee as i64) as f64)
        .collect();
    let (bv, bt) = random_dense(&mut r, &[ee, kw]);
    let out = run(
        &b.p,
        vec![("eid", dense_tensor(&[mm], map.clone())), ("B", bt)],
    )
    .unwrap();
    let mut want = vec![0.0; mm * kw];
    for ii in 0..mm {
        let src_row = map[ii] as i64;
        if (0..ee as i64).contains(&src_row) {
            for l in 0..kw {
                want[ii * kw + l] = bv[src_row as usize * kw + l];
            }
        }
    }
    assert_close(&out["C"].values.to_f64_vec(), &want, "gather");
}
