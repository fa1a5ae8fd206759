//! Element-wise kernels: sparse × dense, sparse + sparse (union axis), sparse .* sparse
//! (intersection axis).

mod common;

use common::*;
use sparsile_formats::CooTensor;
use sparsile_ir::coord::{AxisStructure, BufferRole::*, Program};
use sparsile_ir::AxisKind;

#[test]
fn sparse_times_dense_keeps_pattern() {
    let mut b = Builder::new("ewise");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    let jd = b.dense("JD", n);
    let a = b.buf("A", &[i, j], Input);
    let d = b.buf("D", &[i, jd], Input);
    let c = b.buf("C", &[i, j], Output);
    let (vi, vj) = (b.var("i", i), b.var("j", j));
    let s = b.iter(
        "ewise",
        &[(vi, S), (vj, S)],
        vec![],
        vec![st(
            c,
            vec![v(vi), v(vj)],
            mul(ld(a, vec![v(vi), v(vj)]), ld(d, vec![v(vi), v(vj)])),
        )],
    );
    b.p.body.push(s);
    for (name, coo) in matrix_cases(11) {
        let (dv, dt) = random_dense(&mut rng(12), &coo.shape);
        let out = run(&b.p, vec![("A", csr(&coo)), ("D", dt)]).unwrap();
        let want: Vec<f64> = to_dense(&coo).iter().zip(&dv).map(|(x, y)| x * y).collect();
        assert_close(&tensor_to_dense(&out["C"]), &want, name);
        assert_eq!(out["C"].nnz_stored(), coo.nnz());
    }
}

/// `C = A op B` with C's column axis computed as the union or intersection of A's and B's.
fn combine(union: bool) -> Program {
    let mut b = Builder::new(if union { "add" } else { "mul" });
    let (m, n, na, nb, nc) = (
        b.param("m"),
        b.param("n"),
        b.param("na"),
        b.param("nb"),
        b.param("nc"),
    );
    let i = b.dense("I", m);
    let ja = b.svar("JA", i, n, na);
    let jb = b.svar("JB", i, n, nb);
    let jc = b.svar("JC", i, n, nc);
    b.p.axes[jc].structure = if union {
        AxisStructure::Union(vec![ja, jb])
    } else {
        AxisStructure::Intersect(vec![ja, jb])
    };
    let a = b.buf("A", &[i, ja], Input);
    let bb = b.buf("B", &[i, jb], Input);
    let c = b.buf("C", &[i, jc], Output);
    let (vi, vj) = (b.var("i", i), b.var("j", jc));
    let value = if union {
        add(ld(a, vec![v(vi), v(vj)]), ld(bb, vec![v(vi), v(vj)]))
    } else {
        mul(ld(a, vec![v(vi), v(vj)]), ld(bb, vec![v(vi), v(vj)]))
    };
    let s = b.iter(
        "combine",
        &[(vi, S), (vj, S)],
        vec![],
        vec![st(c, vec![v(vi), v(vj)], value)],
    );
    b.p.body.push(s);
    b.p
}

fn pairs() -> Vec<(&'static str, CooTensor, CooTensor)> {
    let mut r = rng(13);
    let mut cases: Vec<(&'static str, CooTensor, CooTensor)> = matrix_cases(14)
        .into_iter()
        .map(|(name, a)| {
            let bm = random_coo(&mut r, &a.shape, 0.3);
            (name, a, bm)
        })
        .collect();
    let a = random_coo(&mut r, &[5, 8], 0.4);
    cases.push(("identical patterns", a.clone(), a));
    cases
}

#[test]
fn sparse_plus_sparse_union_axis() {
    let p = combine(true);
    for (name, a, bm) in pairs() {
        let out = run(&p, vec![("A", csr(&a)), ("B", csr(&bm))]).unwrap();
        let (da, db) = (to_dense(&a), to_dense(&bm));
        let want: Vec<f64> = da.iter().zip(&db).map(|(x, y)| x + y).collect();
        let c = &out["C"];
        assert_close(&tensor_to_dense(c), &want, name);
        // Stored exactly where A or B stores.
        let stored = da
            .iter()
            .zip(&db)
            .filter(|(x, y)| **x != 0.0 || **y != 0.0)
            .count();
        assert_eq!(c.nnz_stored(), stored, "{name}");
        assert_eq!(c.structure.axes[1].kind, AxisKind::SparseVariable);
    }
}

#[test]
fn sparse_times_sparse_intersect_axis() {
    let p = combine(false);
    for (name, a, bm) in pairs() {
        let out = run(&p, vec![("A", csr(&a)), ("B", csr(&bm))]).unwrap();
        let (da, db) = (to_dense(&a), to_dense(&bm));
        let want: Vec<f64> = da.iter().zip(&db).map(|(x, y)| x * y).collect();
        let c = &out["C"];
        assert_close(&tensor_to_dense(c), &want, name);
        let stored = da
            .iter()
            .zip(&db)
            .filter(|(x, y)| **x != 0.0 && **y != 0.0)
            .count();
        assert_eq!(c.nnz_stored(), stored, "{name}");
    }
}

#[test]
fn union_binds_declared_nnz_param() {
    // nc is unified with the computed union's size; a conflicting explicit value fails.
    let p = combine(true);
    let a = random_coo(&mut rng(15), &[4, 4], 0.5);
    let bm = random_coo(&mut rng(16), &[4, 4], 0.5);
    let inputs =
        std::collections::HashMap::from([("A".to_string(), csr(&a)), ("B".to_string(), csr(&bm))]);
    let opts = sparsile_runtime::InterpOptions {
        params: [("nc".to_string(), 10_000)].into(),
        ..Default::default()
    };
    let err = sparsile_runtime::interpret(&p, &inputs, &opts).unwrap_err();
    assert!(
        matches!(&err, sparsile_runtime::InterpError::ParamConflict { param, bound: 10_000, .. } if param == "nc"),
        "{err}"
    );
}
