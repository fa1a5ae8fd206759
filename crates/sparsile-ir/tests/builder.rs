//! Programs built with `ProgramBuilder` verify and equal their parsed text form.

use std::fs;
use std::path::PathBuf;

use sparsile_ir::coord::builder::{float, int, max};
use sparsile_ir::coord::{verify, BufferRole, IterKind::*, Program, ProgramBuilder};
use sparsile_ir::{DType, IndexType};

fn parse_example(name: &str) -> Program {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(name);
    let mut p: Program = fs::read_to_string(path)
        .expect("readable file")
        .parse()
        .expect("parses");
    p.clear_spans();
    p
}

#[test]
fn spmm_csr_built_equals_parsed() {
    let mut b = ProgramBuilder::new("spmm_csr");
    let m = b.param("m");
    let n = b.param("n");
    let feat = b.param("feat");
    let nnz = b.param("nnz_A");
    let i = b.dense_axis("I", m);
    let j = b.sparse_variable_axis("J", i, n, nnz, IndexType::I32);
    let jd = b.dense_axis("JD", n);
    let k = b.dense_axis("K", feat);
    let a = b.buffer("A", DType::F32, &[i, j], BufferRole::Input);
    let bb = b.buffer("B", DType::F32, &[jd, k], BufferRole::Input);
    let c = b.buffer("C", DType::F32, &[i, k], BufferRole::Output);
    b.iteration(
        "spmm",
        &[(i, Spatial), (j, Reduction), (k, Spatial)],
        |v, body| {
            let (vi, vj, vk) = (v[0].clone(), v[1].clone(), v[2].clone());
            body.init_store(c, vec![vi.clone(), vk.clone()], float(0.0));
            let acc = body.load(c, vec![vi.clone(), vk.clone()])
                + body.load(a, vec![vi.clone(), vj.clone()]) * body.load(bb, vec![vj, vk.clone()]);
            body.store(c, vec![vi, vk], acc);
        },
    );
    let built = b.finish();
    assert_eq!(verify(&built), Ok(()));
    assert_eq!(built, parse_example("spmm_csr.sir"));
}

#[test]
fn bsr_affine_indices_built_equals_parsed() {
    let mut b = ProgramBuilder::new("spmm_bsr");
    let [mb, nb, m, n, feat, nnzb] =
        ["mb", "nb", "m", "n", "feat", "nnzb"].map(|name| b.param(name));
    let io = b.dense_axis("IO", mb);
    let jo = b.sparse_variable_axis("JO", io, nb, nnzb, IndexType::I64);
    let ii = b.dense_axis("II", 4);
    let ji = b.dense_axis("JI", 4);
    let br = b.dense_axis("BR", n);
    let cr = b.dense_axis("CR", m);
    let f = b.dense_axis("F", feat);
    let a = b.buffer("A", DType::F32, &[io, jo, ii, ji], BufferRole::Input);
    let bb = b.buffer("B", DType::F32, &[br, f], BufferRole::Input);
    let c = b.buffer("C", DType::F32, &[cr, f], BufferRole::Output);
    let axes = [
        (io, Spatial),
        (jo, Reduction),
        (ii, Spatial),
        (ji, Reduction),
        (f, Spatial),
    ];
    b.iteration("bsr", &axes, |v, body| {
        let row = v[0].clone() * int(4) + v[2].clone();
        let col = v[1].clone() * int(4) + v[3].clone();
        body.init_store(c, vec![row.clone(), v[4].clone()], float(0.0));
        let value = body.load(c, vec![row.clone(), v[4].clone()])
            + body.load(a, v[..4].to_vec()) * body.load(bb, vec![col, v[4].clone()]);
        body.store(c, vec![row, v[4].clone()], value);
    });
    let built = b.finish();
    assert_eq!(verify(&built), Ok(()));
    assert_eq!(built, parse_example("spmm_bsr.sir"));
}

#[test]
fn variable_names_avoid_parameters_and_enclosing_variables() {
    let mut b = ProgramBuilder::new("names");
    let i_param = b.param("i");
    let i = b.dense_axis("I", i_param);
    let none = b.dense_axis("NONE", 3);
    let y = b.buffer("y", DType::F64, &[i], BufferRole::Output);
    b.iteration("outer", &[(i, Spatial)], |v, body| {
        let vi = v[0].clone();
        body.iteration("inner", &[(i, Spatial), (none, Spatial)], |w, inner| {
            inner.store(y, vec![w[0].clone()], float(1.5));
            inner.store(y, vec![vi.clone()], float(2.5));
        });
    });
    b.iteration_with_vars("named", &[(i, Spatial, "row")], |v, body| {
        body.store(y, vec![max(v[0].clone(), int(0))], float(-1.0));
    });
    let p = b.finish();
    assert_eq!(verify(&p), Ok(()));
    let text = p.to_string();
    assert!(text.contains("iter outer over [I: S] as (i1) {"), "{text}");
    assert!(
        text.contains("iter inner over [I: S, NONE: S] as (i2, none1) {"),
        "{text}"
    );
    assert!(text.contains("y[max(row, 0)] = -1.0"), "{text}");
    let mut reparsed: Program = text.parse().expect("parses");
    reparsed.clear_spans();
    assert_eq!(reparsed, p);
}

#[test]
fn compact_vars_renumbers_in_binding_order() {
    let mut p = parse_example("nested.sir");
    let original_text = p.to_string();
    // Swap the two top-level iterations and add a variable no iteration binds: the
    // variables are no longer numbered in binding order.
    p.body.swap(0, 1);
    let stray_axis = p.axis_by_name("I").expect("axis I");
    p.vars.push(sparsile_ir::coord::IterVar {
        name: "stray".into(),
        axis: stray_axis,
    });
    let text = p.to_string();
    assert_ne!(text, original_text);
    let mut reparsed: Program = text.parse().expect("parses");
    reparsed.clear_spans();
    assert_ne!(reparsed, p);
    p.compact_vars();
    assert_eq!(reparsed, p);
    assert_eq!(p.to_string(), text);
    assert_eq!(p.vars.len(), 3);
    assert_eq!(verify(&p), Ok(()));
}
