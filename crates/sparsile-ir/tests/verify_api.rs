//! Verifier checks that only programs built in Rust can break (the parser rejects the
//! equivalent text), and `expr_type`.

use sparsile_ir::coord::builder::{float, int};
use sparsile_ir::coord::{
    expr_type, verify, AxisDecl, BufferRole, Expr, Extent, IterKind::*, IterVar, Program,
    ProgramBuilder, ScalarKind, Stmt, UnaryOp,
};
use sparsile_ir::{AxisId, BufferId, DType, IterVarId, ParamId};

fn messages(p: &Program) -> Vec<String> {
    match verify(p) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.to_string()).collect(),
    }
}

#[test]
fn duplicate_and_invalid_names() {
    let mut b = ProgramBuilder::new("names");
    let m = b.param("m");
    b.axis(AxisDecl::dense_fixed("I", m.into()));
    let i2 = b.axis(AxisDecl::dense_fixed("I", m.into()));
    b.axis(AxisDecl::dense_fixed("none", m.into()));
    b.buffer("X", DType::F32, &[i2], BufferRole::Input);
    b.buffer("X", DType::F32, &[i2], BufferRole::Input);
    b.buffer("two words", DType::F32, &[i2], BufferRole::Input);
    let mut p = b.finish();
    p.params
        .push(sparsile_ir::coord::Param { name: "m".into() });
    assert_eq!(
        messages(&p),
        [
            "parameter `m` is declared twice",
            "axis `I` is declared twice",
            "axis `none`: name is not an identifier",
            "buffer `X` is declared twice",
            "buffer `two words`: name is not an identifier",
        ]
    );
}

#[test]
fn dangling_ids_are_reported_not_panicked_on() {
    let mut b = ProgramBuilder::new("dangling");
    let i = b.dense_axis("I", Extent::Param(ParamId(4)));
    let y = b.buffer("Y", DType::F32, &[i, AxisId(9)], BufferRole::Output);
    b.store(BufferId(7), vec![], float(1.0));
    b.store(
        y,
        vec![int(0), Expr::Param(ParamId(3))],
        Expr::load(BufferId(8), vec![]),
    );
    let p = b.finish();
    let text = p.to_string();
    assert!(text.contains("axis I = dense_fixed(param#4)"), "{text}");
    assert_eq!(
        messages(&p),
        [
            "axis `I`: missing parameter param#4",
            "buffer `Y`: axis axis#9 does not exist",
            "store to `buffer#7`: buffer buffer#7 does not exist",
            "store to `Y`: value: load of missing buffer buffer#8",
            "store to `Y`: parameter param#3 does not exist",
        ]
    );
}

#[test]
fn variables_used_outside_their_iteration_or_bound_twice() {
    let mut b = ProgramBuilder::new("scopes");
    let m = b.param("m");
    let i = b.dense_axis("I", m);
    let j = b.dense_axis("J", m);
    let y = b.buffer("Y", DType::F32, &[i], BufferRole::Output);
    let mut first = None;
    b.iteration("a", &[(i, Spatial)], |v, body| {
        first = Some(v[0].clone());
        body.store(y, vec![v[0].clone()], float(0.0));
    });
    let escaped = first.expect("closure ran");
    b.store(y, vec![escaped.clone()], float(1.0));
    b.iteration("b", &[(i, Spatial)], |_, body| {
        body.store(y, vec![escaped.clone()], float(2.0));
    });
    let mut p = b.finish();
    // Rebind `a`'s variable in a third iteration, and bind a variable to the wrong axis.
    let Stmt::Iteration(a) = p.body[0].clone() else {
        panic!("expected an iteration");
    };
    let mut c = a.clone();
    c.name = "c".into();
    p.body.push(Stmt::Iteration(c));
    let wrong = p.vars.push(IterVar {
        name: "w".into(),
        axis: j,
    });
    let mut d = a;
    d.name = "d".into();
    d.axes[0].var = wrong;
    d.body.clear();
    p.body.push(Stmt::Iteration(d));
    assert_eq!(
        messages(&p),
        [
            "store to `Y`: variable `i` is used outside its iteration",
            "iteration `b`: store to `Y`: variable `i` is used outside its iteration",
            "iteration `c`: variable `i` is also bound by iteration `a`",
            "iteration `d`: variable `w` is declared for axis `J` but bound to `I`",
        ]
    );
}

#[test]
fn variable_names_must_not_shadow() {
    let mut b = ProgramBuilder::new("shadow");
    let m = b.param("m");
    let i = b.dense_axis("I", m);
    let y = b.buffer("Y", DType::F32, &[i], BufferRole::Output);
    b.iteration("outer", &[(i, Spatial)], |_, body| {
        body.iteration("inner", &[(i, Spatial)], |w, inner| {
            inner.store(y, vec![w[0].clone()], float(0.0));
        });
    });
    let mut p = b.finish();
    p.vars[IterVarId(1)].name = "i".into();
    p.vars[IterVarId(0)].name = "m".into();
    assert_eq!(
        messages(&p),
        ["iteration `outer`: variable `m` has the name of a parameter"]
    );
    p.vars[IterVarId(0)].name = "i".into();
    assert_eq!(
        messages(&p),
        ["iteration `inner`: variable `i` is already in scope"]
    );
}

#[test]
fn expression_types() {
    let mut b = ProgramBuilder::new("types");
    let m = b.param("m");
    let i = b.dense_axis("I", m);
    let x = b.buffer("X", DType::BF16, &[i], BufferRole::Input);
    let e = b.buffer("E", DType::I64, &[i], BufferRole::Input);
    let p = b.finish();
    let load_x = Expr::load(x, vec![int(0)]);
    let load_e = Expr::load(e, vec![Expr::Param(m)]);
    assert_eq!(expr_type(&p, &load_x), Ok(ScalarKind::Float));
    assert_eq!(expr_type(&p, &load_e), Ok(ScalarKind::Int));
    assert_eq!(
        expr_type(&p, &(load_e.clone() % int(3) - int(-1))),
        Ok(ScalarKind::Int)
    );
    assert_eq!(
        expr_type(&p, &Expr::unary(UnaryOp::Sqrt, load_x.clone() / float(2.0))),
        Ok(ScalarKind::Float)
    );
    assert_eq!(
        expr_type(&p, &Expr::load(x, vec![load_e.clone()])),
        Ok(ScalarKind::Float)
    );
    let err = |ex: Expr| expr_type(&p, &ex).unwrap_err().to_string();
    assert_eq!(
        err(load_x.clone() + int(1)),
        "`+` mixes a float and an integer operand (write float literals with a `.`)"
    );
    assert_eq!(
        err(float(1.0) % float(2.0)),
        "`%` takes integers, found floats"
    );
    assert_eq!(
        err(Expr::unary(UnaryOp::Relu, int(1))),
        "`relu` takes a float, found an integer"
    );
    assert_eq!(
        err(Expr::load(x, vec![])),
        "buffer `X` has 1 axis but is read with 0 indices"
    );
    assert_eq!(
        err(Expr::load(x, vec![load_x.clone()])),
        "index 0 of a read of `X` is a float (indices are integers)"
    );
}

#[test]
fn verify_error_display_without_span_names_the_entity() {
    let mut b = ProgramBuilder::new("nospan");
    let m = b.param("m");
    let i = b.dense_axis("I", m);
    let x = b.buffer("X", DType::F32, &[i], BufferRole::Input);
    b.iteration("s", &[(i, Spatial)], |v, body| {
        body.store(x, vec![v[0].clone()], float(1.0));
    });
    let p = b.finish();
    let errors = verify(&p).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].span.line, 0);
    assert_eq!(
        errors[0].to_string(),
        "iteration `s`: store to `X`: buffer `X` is an input (stores go to output or temp buffers)"
    );
}
