//! The builder, the stage verifiers and `expr_type` through the public API: rules that
//! text cannot express (the parser resolves names by scope) are checked on functions
//! built in Rust.

use sparsile_ir::coord::{AxisDecl, BinaryOp, BufferRole, Extent, ScalarKind};
use sparsile_ir::loops::builder::{float, int, lt, search};
use sparsile_ir::loops::{
    expr_type, verify, BufferKind, BufferLayout, Expr, ForKind, Func, FuncBuilder, Stage, Stmt,
    VarType,
};
use sparsile_ir::{flat, pos, DType, IndexType};

fn messages(f: &Func) -> Vec<String> {
    match verify(f) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.to_string()).collect(),
    }
}

/// SpMM over CSR in stage II, built in Rust, equals the parsed text.
#[test]
fn builder_matches_the_text_form() {
    let mut b = FuncBuilder::new("spmm", Stage::Pos);
    let (m, n, k, nnz) = (b.param("m"), b.param("n"), b.param("k"), b.param("nnz"));
    let i_axis = b.axis(AxisDecl::dense_fixed("I", Extent::Param(m)));
    let j_axis = b.axis(AxisDecl::sparse_variable(
        "J",
        i_axis,
        Extent::Param(n),
        Extent::Param(nnz),
        IndexType::I32,
    ));
    let jb = b.axis(AxisDecl::dense_fixed("JB", Extent::Param(n)));
    let k_axis = b.axis(AxisDecl::dense_fixed("K", Extent::Param(k)));
    let a = b.axes_buffer("A", DType::F32, &[i_axis, j_axis], BufferRole::Input);
    let bb = b.axes_buffer("B", DType::F32, &[jb, k_axis], BufferRole::Input);
    let c = b.axes_buffer("C", DType::F32, &[i_axis, k_axis], BufferRole::Output);
    let indptr = b.flat_buffer(
        "A_J_indptr",
        DType::I32,
        Expr::from(m) + int(1),
        BufferRole::Input,
        BufferKind::Indptr {
            tensor: "A".into(),
            axis: 1,
        },
    );
    let indices = b.flat_buffer(
        "A_J_indices",
        DType::I32,
        nnz.into(),
        BufferRole::Input,
        BufferKind::Indices {
            tensor: "A".into(),
            axis: 1,
        },
    );
    b.block("spmm.init", |b| {
        b.for_loop("i", int(0), m.into(), ForKind::Parallel, |b, i| {
            b.for_loop("kp", int(0), k.into(), ForKind::Serial, |b, kp| {
                b.store(c, vec![i.into(), kp.into()], float(0.0));
            });
        });
    });
    b.block("spmm", |b| {
        b.for_loop("i", int(0), m.into(), ForKind::Parallel, |b, i| {
            b.for_loop("kp", int(0), k.into(), ForKind::Serial, |b, kp| {
                let acc = b.let_("acc", VarType::Value(DType::F32), float(0.0));
                let lo = Expr::load(indptr, vec![i.into()]);
                let hi = Expr::load(indptr, vec![Expr::from(i) + int(1)]);
                b.for_loop("jp", lo, hi, ForKind::Serial, |b, jp| {
                    let j = b.let_("j", VarType::Index, Expr::load(indices, vec![jp.into()]));
                    let prod = Expr::load(a, vec![i.into(), jp.into()])
                        * Expr::load(bb, vec![j.into(), kp.into()]);
                    b.assign(acc, Expr::from(acc) + prod);
                });
                let old = Expr::load(c, vec![i.into(), kp.into()]);
                b.store(c, vec![i.into(), kp.into()], old + acc.into());
            });
        });
    });
    let built = b.finish();
    assert!(pos::verify(&built).is_ok(), "{:?}", messages(&built));
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/loops/spmm_csr.pos"),
    )
    .expect("example exists");
    let mut parsed: Func = text.parse().expect("example parses");
    parsed.clear_spans();
    assert_eq!(parsed, built);
}

#[test]
fn taken_names_get_a_suffix() {
    let mut b = FuncBuilder::new("f", Stage::Flat);
    let n = b.param("n");
    let x = b.flat_buffer(
        "X",
        DType::F32,
        n.into(),
        BufferRole::Output,
        BufferKind::Values,
    );
    b.for_loop("n", int(0), n.into(), ForKind::Serial, |b, outer| {
        b.for_loop("n", int(0), n.into(), ForKind::Serial, |b, inner| {
            b.store(x, vec![Expr::from(outer) + inner.into()], float(1.0));
        });
    });
    b.for_loop("i", int(0), n.into(), ForKind::Serial, |_, _| {});
    b.for_loop("i", int(0), n.into(), ForKind::Serial, |_, _| {});
    let f = b.finish();
    let names: Vec<&str> = f.vars.values().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["n_2", "n_3", "i", "i"]);
    assert!(verify(&f).is_ok(), "{:?}", messages(&f));
    let parsed: Func = f.to_string().parse().expect("prints parseable text");
    assert_eq!(parsed.to_string(), f.to_string());
}

#[test]
fn scope_and_declaration_rules() {
    let mut b = FuncBuilder::new("f", Stage::Flat);
    let n = b.param("n");
    let x = b.flat_buffer(
        "X",
        DType::F32,
        n.into(),
        BufferRole::Output,
        BufferKind::Values,
    );
    let mut leaked = None;
    let mut local = None;
    b.for_loop("i", int(0), n.into(), ForKind::Serial, |b, i| {
        leaked = Some(i);
        local = Some(b.let_("t", VarType::Value(DType::F32), float(1.0)));
    });
    let (i, t) = (leaked.expect("set"), local.expect("set"));
    // Uses after the scopes ended.
    b.store(x, vec![i.into()], t.into());
    b.assign(t, float(2.0));
    // The same variable declared twice, and a loop variable assigned.
    b.for_loop("k", int(0), n.into(), ForKind::Serial, |b, k| {
        b.assign(k, int(0));
        b.stmt(Stmt::Let {
            var: k,
            value: int(3),
            span: Default::default(),
        });
    });
    let f = b.finish();
    assert_eq!(
        messages(&f),
        [
            "store to `X`: variable `i` is used outside its scope",
            "store to `X`: variable `t` is used outside its scope",
            "assignment to `t`: the variable is not declared in scope",
            "assignment to `k`: only `let` locals can be assigned (not loop variables)",
            "let `k`: variable `k` is already in scope",
            "variable `k` is declared more than once",
        ]
    );
}

#[test]
fn flat_lengths_and_stage_checks() {
    let mut b = FuncBuilder::new("f", Stage::Pos);
    let n = b.param("n");
    let x = b.flat_buffer(
        "X",
        DType::F32,
        n.into(),
        BufferRole::Output,
        BufferKind::Values,
    );
    b.for_loop("i", int(0), n.into(), ForKind::Serial, |b, i| {
        b.store(x, vec![i.into()], float(0.0));
    });
    let mut f = b.finish();
    assert!(pos::verify(&f).is_ok());
    assert_eq!(
        flat::verify(&f).unwrap_err()[0].to_string(),
        "function `f` is a `pos` function, expected a `flat` one"
    );
    // A length that reads a loop variable is not over parameters.
    f.buffers[x].layout = BufferLayout::Flat(Expr::Var(sparsile_ir::VarId(0)));
    assert_eq!(
        messages(&f),
        ["buffer `X`: the length is not an integer expression over parameters"]
    );
    f.stage = Stage::Flat;
    f.buffers[x].layout = BufferLayout::Flat(n.into());
    assert!(flat::verify(&f).is_ok());
}

#[test]
fn expression_types() {
    let mut b = FuncBuilder::new("f", Stage::Flat);
    let n = b.param("n");
    let x = b.flat_buffer(
        "X",
        DType::F64,
        n.into(),
        BufferRole::Input,
        BufferKind::Values,
    );
    let p = b.flat_buffer(
        "P",
        DType::I64,
        n.into(),
        BufferRole::Input,
        BufferKind::Indptr {
            tensor: "X".into(),
            axis: 0,
        },
    );
    let f = b.finish();
    let load = Expr::load(x, vec![int(0)]);
    assert_eq!(expr_type(&f, &load), Ok(ScalarKind::Float));
    assert_eq!(
        expr_type(&f, &lt(load.clone(), float(1.0))),
        Ok(ScalarKind::Int)
    );
    assert_eq!(
        expr_type(&f, &search(p, int(0), n.into(), int(3))),
        Ok(ScalarKind::Int)
    );
    assert_eq!(
        expr_type(&f, &Expr::binary(BinaryOp::Rem, load.clone(), float(2.0)))
            .unwrap_err()
            .to_string(),
        "`%` takes integers, found floats"
    );
    assert_eq!(
        expr_type(&f, &search(x, int(0), int(1), int(2)))
            .unwrap_err()
            .to_string(),
        "`search` needs a flat integer buffer, but `X` is a flat f64 buffer"
    );
    assert_eq!(
        expr_type(&f, &Expr::load(x, vec![int(0), int(1)]))
            .unwrap_err()
            .to_string(),
        "buffer `X` has a flat layout but is accessed with 2 indices"
    );
}

#[test]
#[should_panic(expected = "else_ must follow")]
fn else_without_if_is_a_builder_misuse() {
    let mut b = FuncBuilder::new("f", Stage::Flat);
    b.else_(|_| {});
}

#[test]
fn dangling_ids_are_reported_not_panicked_on() {
    use sparsile_ir::loops::For;
    use sparsile_ir::{AxisId, BufferId, VarId};
    let mut f = Func::new("f", Stage::Pos);
    let n = f
        .params
        .push(sparsile_ir::coord::Param { name: "n".into() });
    f.buffers.push(sparsile_ir::loops::Buffer {
        name: "X".into(),
        dtype: DType::F32,
        layout: BufferLayout::Axes(vec![AxisId(5)]),
        role: BufferRole::Output,
        kind: BufferKind::Values,
        span: Default::default(),
    });
    f.body.push(Stmt::For(For {
        var: VarId(7),
        lo: int(0),
        hi: n.into(),
        kind: ForKind::Serial,
        body: vec![Stmt::Store {
            buffer: BufferId(9),
            indices: vec![Expr::Var(VarId(8))],
            value: Expr::load(BufferId(0), vec![int(0)]),
            span: Default::default(),
        }],
        span: Default::default(),
    }));
    let text = f.to_string();
    assert!(text.contains("for v#7 in 0..n {"), "{text}");
    assert!(text.contains("buffer#9[v#8] = X[0]"), "{text}");
    assert!(text.parse::<Func>().is_err());
    assert_eq!(
        messages(&f),
        [
            "buffer `X`: missing axis axis#5",
            "loop `v#7`: missing variable v#7",
            "store to `buffer#9`: access to missing buffer buffer#9",
        ]
    );
}
