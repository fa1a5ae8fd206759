//! Kernels on 3-D sparse tensors: MTTKRP (CSF and COO), TTV, RGMS.

mod common;

use common::*;
use sparsile_formats::CooTensor;
use sparsile_ir::coord::{BufferRole::*, Expr, Extent, Program};
use sparsile_ir::AxisId;

fn cases_3d(seed: u64) -> Vec<(&'static str, CooTensor)> {
    let mut r = rng(seed);
    let mut long = CooTensor::empty(vec![3, 4, 120]);
    for k in 0..110 {
        long.coords.extend([1, 2, k]);
        long.values.push(nonzero(&mut r));
    }
    vec![
        ("random", random_coo(&mut r, &[4, 5, 6], 0.2)),
        ("sparse slices", random_coo(&mut r, &[6, 3, 4], 0.05)),
        ("empty", CooTensor::empty(vec![0, 2, 3])),
        ("no entries", CooTensor::empty(vec![2, 2, 2])),
        ("one long fiber", long),
    ]
}

/// The axes of a 3-D sparse input: CSF (`I` dense, `J`, `K` sparse_variable) or COO
/// (non-unique `I`, then `sparse_fixed(1)` levels).
fn sparse3(b: &mut Builder, coo: bool, names: [&str; 3]) -> [AxisId; 3] {
    let (l0, l1, l2) = (b.param("d0"), b.param("d1"), b.param("d2"));
    if coo {
        let nnz = b.param("nnz");
        let i = b.sfixed(names[0], None, l0, nnz, false);
        let j = b.sfixed(names[1], Some(i), l1, Extent::Const(1), true);
        let k = b.sfixed(names[2], Some(j), l2, Extent::Const(1), true);
        [i, j, k]
    } else {
        let (n1, n2) = (b.param("nnz1"), b.param("nnz2"));
        let i = b.dense(names[0], l0);
        let j = b.svar(names[1], i, l1, n1);
        let k = b.svar(names[2], j, l2, n2);
        [i, j, k]
    }
}

/// `D[i, l] = sum_{j,k} A[i, j, k] * B[j, l] * C[k, l]`.
fn mttkrp(coo: bool) -> Program {
    let mut b = Builder::new("mttkrp");
    let [i, j, k] = sparse3(&mut b, coo, ["I", "J", "K"]);
    let rank = b.param("rank");
    let (d0, d1, d2) = (b.p.axes[i].length, b.p.axes[j].length, b.p.axes[k].length);
    let id = b.dense("ID", d0);
    let jd = b.dense("JD", d1);
    let kd = b.dense("KD", d2);
    let l = b.dense("L", rank);
    let a = b.buf("A", &[i, j, k], Input);
    let bb = b.buf("B", &[jd, l], Input);
    let c = b.buf("C", &[kd, l], Input);
    let d = b.buf("D", &[id, l], Output);
    let (vi, vj, vk, vl) = (b.var("i", i), b.var("j", j), b.var("k", k), b.var("l", l));
    let s = b.iter(
        "mttkrp",
        &[(vi, S), (vj, R), (vk, R), (vl, S)],
        vec![st(d, vec![v(vi), v(vl)], Expr::Float(0.0))],
        vec![acc(
            d,
            vec![v(vi), v(vl)],
            mul(
                ld(a, vec![v(vi), v(vj), v(vk)]),
                mul(ld(bb, vec![v(vj), v(vl)]), ld(c, vec![v(vk), v(vl)])),
            ),
        )],
    );
    b.p.body.push(s);
    b.p
}

#[test]
fn mttkrp_csf_and_coo_match_dense() {
    for coo_input in [false, true] {
        let p = mttkrp(coo_input);
        for (name, t) in cases_3d(21) {
            let (d0, d1, d2, rank) = (t.shape[0], t.shape[1], t.shape[2], 3);
            let mut r = rng(22);
            let (bv, bt) = random_dense(&mut r, &[d1, rank]);
            let (cv, ct) = random_dense(&mut r, &[d2, rank]);
            let a = if coo_input { coo_tensor(&t) } else { csf(&t) };
            let out = run(&p, vec![("A", a), ("B", bt), ("C", ct)]).unwrap();
            let ad = to_dense(&t);
            let mut want = vec![0.0; d0 * rank];
            for ii in 0..d0 {
                for jj in 0..d1 {
                    for kk in 0..d2 {
                        for l in 0..rank {
                            want[ii * rank + l] += ad[(ii * d1 + jj) * d2 + kk]
                                * bv[jj * rank + l]
                                * cv[kk * rank + l];
                        }
                    }
                }
            }
            assert_close(&out["D"].values.to_f64_vec(), &want, name);
        }
    }
}

/// `Y[i, j] = sum_k A[i, j, k] * x[k]`; Y is sparse over A's first two levels.
#[test]
fn ttv_output_over_csf_levels() {
    let mut b = Builder::new("ttv");
    let [i, j, k] = sparse3(&mut b, false, ["I", "J", "K"]);
    let kd = b.dense("KD", b.p.axes[k].length);
    let a = b.buf("A", &[i, j, k], Input);
    let x = b.buf("x", &[kd], Input);
    let y = b.buf("Y", &[i, j], Output);
    let (vi, vj, vk) = (b.var("i", i), b.var("j", j), b.var("k", k));
    let s = b.iter(
        "ttv",
        &[(vi, S), (vj, S), (vk, R)],
        vec![st(y, vec![v(vi), v(vj)], Expr::Float(0.0))],
        vec![acc(
            y,
            vec![v(vi), v(vj)],
            mul(ld(a, vec![v(vi), v(vj), v(vk)]), ld(x, vec![v(vk)])),
        )],
    );
    b.p.body.push(s);
    for (name, t) in cases_3d(23) {
        let (d0, d1, d2) = (t.shape[0], t.shape[1], t.shape[2]);
        let (xv, xt) = random_dense(&mut rng(24), &[d2]);
        let out = run(&b.p, vec![("A", csf(&t)), ("x", xt)]).unwrap();
        let yt = &out["Y"];
        assert_eq!(yt.format(), &sparsile_formats::Format::Csr, "{name}");
        let ad = to_dense(&t);
        let want: Vec<f64> = (0..d0 * d1)
            .map(|ij| (0..d2).map(|kk| ad[ij * d2 + kk] * xv[kk]).sum())
            .collect();
        assert_close(&tensor_to_dense(yt), &want, name);
    }
}

/// RGMS: `Y[i, l] = sum_{r,j,k} A[r, i, j] * X[j, k] * W[r, k, l]`, A a 3-D CSF
/// tensor (one sparse matrix per relation `r`).
#[test]
fn rgms_matches_dense() {
    let mut b = Builder::new("rgms");
    let [rr, i, j] = sparse3(&mut b, false, ["R", "I", "J"]);
    let (kw, lw) = (b.param("kw"), b.param("lw"));
    let id = b.dense("ID", b.p.axes[i].length);
    let jd = b.dense("JD", b.p.axes[j].length);
    let k = b.dense("K", kw);
    let l = b.dense("L", lw);
    let a = b.buf("A", &[rr, i, j], Input);
    let x = b.buf("X", &[jd, k], Input);
    let w = b.buf("W", &[rr, k, l], Input);
    let y = b.buf("Y", &[id, l], Output);
    let (vr, vi, vj, vk, vl) = (
        b.var("r", rr),
        b.var("i", i),
        b.var("j", j),
        b.var("k", k),
        b.var("l", l),
    );
    let (zi, zl) = (b.var("zi", id), b.var("zl", l));
    let zero = b.iter(
        "zero",
        &[(zi, S), (zl, S)],
        vec![],
        vec![st(y, vec![v(zi), v(zl)], Expr::Float(0.0))],
    );
    let main = b.iter(
        "rgms",
        &[(vr, R), (vi, R), (vj, R), (vk, R), (vl, R)],
        vec![],
        vec![acc(
            y,
            vec![v(vi), v(vl)],
            mul(
                ld(a, vec![v(vr), v(vi), v(vj)]),
                mul(ld(x, vec![v(vj), v(vk)]), ld(w, vec![v(vr), v(vk), v(vl)])),
            ),
        )],
    );
    b.p.body.extend([zero, main]);
    for (name, t) in cases_3d(25) {
        let (nr, m, n) = (t.shape[0], t.shape[1], t.shape[2]);
        let (kk, ll) = (3, 2);
        let mut r = rng(26);
        let (xv, xt) = random_dense(&mut r, &[n, kk]);
        let (wv, wt) = random_dense(&mut r, &[nr, kk, ll]);
        let opts = vec![("A", csf(&t)), ("X", xt), ("W", wt)];
        let out = run(&b.p, opts).unwrap();
        let ad = to_dense(&t);
        let mut want = vec![0.0; m * ll];
        for r0 in 0..nr {
            for ii in 0..m {
                for jj in 0..n {
                    for k0 in 0..kk {
                        for l0 in 0..ll {
                            want[ii * ll + l0] += ad[(r0 * m + ii) * n + jj]
                                * xv[jj * kk + k0]
                                * wv[(r0 * kk + k0) * ll + l0];
                        }
                    }
                }
            }
        }
        assert_close(&out["Y"].values.to_f64_vec(), &want, name);
    }
}
