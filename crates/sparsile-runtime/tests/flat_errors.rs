//! Every error of the loop-level interpreter, from binding to execution: each is a value
//! naming the buffer, variable or parameter concerned, never a panic.

mod common;
mod flat_support;

use std::collections::HashMap;

use flat_support::*;
use sparsile_ir::coord::{BufferRole, UnaryOp};
use sparsile_ir::loops::{Buffer, BufferKind, BufferLayout, CmpOp, Expr, Func, Stage};
use sparsile_ir::{AxisId, BufferId, DType, IndexType, Span, VarId};
use sparsile_runtime::{
    flat_interp, FlatInterpError as E, FlatOptions, InterpError, InterpOptions,
};

fn err(p: &sparsile_ir::coord::Program, f: &Func) -> E {
    match run(p, f) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

/// A function over `program()` whose body stores `value` into `y[0]`.
fn storing(value: Expr) -> (sparsile_ir::coord::Program, Func) {
    let (p, k) = kit();
    let y = k.y;
    (p, with_body(k, vec![store(y, vec![int(0)], value)]))
}

#[test]
fn binding_errors_of_the_program_are_wrapped() {
    let (p, k) = kit();
    let f = with_body(k, vec![]);
    let e = flat_interp::run(&f, &p, &HashMap::new(), &InterpOptions::default()).unwrap_err();
    assert!(
        matches!(e, E::Binding(InterpError::MissingInput { ref buffer }) if buffer == "A"),
        "{e}"
    );
}

#[test]
fn undeclared_ids_are_reported() {
    let (p, k) = kit();
    let f = with_body(k, vec![store(BufferId(99), vec![int(0)], float(1.0))]);
    let e = err(&p, &f);
    assert!(
        matches!(e, E::UnknownId { what: "buffer", ref id, .. } if id == "buffer#99"),
        "{e}"
    );
    let (p, k) = kit();
    let y = k.y;
    let f = with_body(k, vec![store(y, vec![int(0)], Expr::Var(VarId(50)))]);
    assert!(matches!(
        err(&p, &f),
        E::UnknownId {
            what: "variable",
            ..
        }
    ));
    let (p, mut k) = kit();
    k.fb.f.buffers[k.y].layout = BufferLayout::Flat(Expr::Param(sparsile_ir::ParamId(9)));
    assert!(matches!(
        err(&p, &with_body(k, vec![])),
        E::UnknownId {
            what: "parameter",
            ..
        }
    ));
}

fn push(k: &mut Kit, name: &str, dtype: DType, layout: BufferLayout, kind: BufferKind) -> BufferId {
    k.fb.f.buffers.push(Buffer {
        name: name.into(),
        dtype,
        layout,
        role: BufferRole::Input,
        kind,
        span: Span::default(),
    })
}

#[test]
fn buffers_must_match_the_program() {
    let (p, mut k) = kit();
    k.fb.f
        .params
        .push(sparsile_ir::coord::Param { name: "q".into() });
    assert!(
        matches!(err(&p, &with_body(k, vec![])), E::UnknownParam { ref param } if param == "q")
    );

    let (p, mut k) = kit();
    push(
        &mut k,
        "B_1_indptr",
        DType::I32,
        BufferLayout::Flat(int(4)),
        BufferKind::Indptr {
            tensor: "B".into(),
            axis: 1,
        },
    );
    assert!(
        matches!(err(&p, &with_body(k, vec![])), E::UnknownTensor { ref tensor, .. } if tensor == "B")
    );

    let (p, mut k) = kit();
    push(
        &mut k,
        "y",
        DType::F64,
        BufferLayout::Flat(int(3)),
        BufferKind::Values,
    );
    assert!(matches!(
        err(&p, &with_body(k, vec![])),
        E::DuplicateValues {
            first: 1,
            second: 5,
            ..
        }
    ));

    let (p, mut k) = kit();
    k.fb.f.buffers[k.y].dtype = DType::F32;
    let e = err(&p, &with_body(k, vec![]));
    assert!(matches!(e, E::DTypeMismatch { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "buffer `y` has element type f32 but stage-I buffer `y` has f64"
    );

    let (p, mut k) = kit();
    k.fb.f.buffers[k.ptr].dtype = DType::F64;
    assert!(matches!(
        err(&p, &with_body(k, vec![])),
        E::NonIntegerStructure {
            array: "indptr",
            ..
        }
    ));

    let (p, mut k) = kit();
    k.fb.f.buffers[k.ptr].dtype = DType::I64;
    let e = err(&p, &with_body(k, vec![]));
    assert!(
        matches!(
            e,
            E::IndexTypeMismatch {
                expected: DType::I64,
                found: IndexType::I32,
                ..
            }
        ),
        "{e}"
    );

    let (p, mut k) = kit();
    push(
        &mut k,
        "A_5_indices",
        DType::I32,
        BufferLayout::Flat(int(3)),
        BufferKind::Indices {
            tensor: "A".into(),
            axis: 5,
        },
    );
    assert!(matches!(
        err(&p, &with_body(k, vec![])),
        E::AxisOutOfRange {
            axis: 5,
            count: 2,
            ..
        }
    ));

    let (p, mut k) = kit();
    push(
        &mut k,
        "A_0_indptr",
        DType::I32,
        BufferLayout::Flat(int(3)),
        BufferKind::Indptr {
            tensor: "A".into(),
            axis: 0,
        },
    );
    assert!(matches!(
        err(&p, &with_body(k, vec![])),
        E::MissingArray {
            axis: 0,
            array: "indptr",
            ..
        }
    ));
}

#[test]
fn layouts_and_lengths_must_fit() {
    // Stage III: no axes layouts (the axes are declared, or the id check reports them).
    let (p, mut k) = kit();
    k.fb.f.buffers[k.y].layout = BufferLayout::Axes(vec![AxisId(0)]);
    k.fb.f.axes = p.axes.clone();
    let e = err(&p, &with_body(k, vec![]));
    assert!(
        matches!(e, E::LayoutMismatch { ref buffer, .. } if buffer == "y"),
        "{e}"
    );

    // Stage II: y is over I, not J.
    let (p, mut k) = kit();
    k.fb.f.stage = Stage::Pos;
    k.fb.f.axes = p.axes.clone();
    k.fb.f.buffers[k.y].layout = BufferLayout::Axes(vec![AxisId(1)]);
    let e = err(&p, &with_body(k, vec![]));
    assert!(
        e.to_string().contains("[\"J\"]") && e.to_string().contains("[\"I\"]"),
        "{e}"
    );

    let (p, mut k) = kit();
    k.fb.f.buffers[k.s].layout = BufferLayout::Axes(vec![AxisId(0)]);
    k.fb.f.axes = p.axes.clone();
    assert!(
        matches!(err(&p, &with_body(k, vec![])), E::LayoutMismatch { ref buffer, .. } if buffer == "s")
    );

    let (p, mut k) = kit();
    let m = k.fb.p("m");
    k.fb.f.buffers[k.y].layout = BufferLayout::Flat(add(m, int(1)));
    assert!(matches!(
        err(&p, &with_body(k, vec![])),
        E::LengthMismatch {
            declared: 4,
            actual: 3,
            ..
        }
    ));

    let (p, mut k) = kit();
    k.fb.f.buffers[k.s].layout = BufferLayout::Flat(int(-1));
    assert!(matches!(
        err(&p, &with_body(k, vec![])),
        E::BadScratchLength { len: -1, .. }
    ));
}

#[test]
fn out_of_bounds_accesses_name_buffer_offset_and_length() {
    let (p, k) = kit();
    let y = k.y;
    let e = err(&p, &with_body(k, vec![store(y, vec![int(3)], float(1.0))]));
    assert!(
        matches!(
            e,
            E::OutOfBounds {
                access: "store",
                offset: 3,
                len: 3,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "line 0, column 0: store of `y` at offset 3, outside its 3 elements"
    );

    let (p, k) = kit();
    let (y, ptr) = (k.y, k.ptr);
    let e = err(
        &p,
        &with_body(k, vec![store(y, vec![int(0)], ld(ptr, int(-1)))]),
    );
    assert!(
        matches!(e, E::OutOfBounds { access: "load", offset: -1, len: 4, ref buffer, .. } if buffer == "A_1_indptr"),
        "{e}"
    );

    for (lo, hi, offset) in [(-2, 1, -2), (2, 5, 4)] {
        let (p, k) = kit();
        let (y, ptr) = (k.y, k.ptr);
        let e = err(
            &p,
            &with_body(
                k,
                vec![store(
                    y,
                    vec![int(0)],
                    search(ptr, int(lo), int(hi), int(0)),
                )],
            ),
        );
        assert!(
            matches!(e, E::OutOfBounds { access: "search", offset: o, len: 4, .. } if o == offset),
            "{e}"
        );
    }
    // An empty range is never read.
    let (p, k) = kit();
    let (y, ptr) = (k.y, k.ptr);
    let f = with_body(
        k,
        vec![store(y, vec![int(0)], search(ptr, int(9), int(9), int(0)))],
    );
    assert_eq!(y_of(&p, &f), vec![-1.0, 0.0, 0.0]);
}

/// Stage II: A over (I, J) addressed by positions.
fn stage2(
    body: impl FnOnce(BufferId, BufferId) -> Vec<sparsile_ir::loops::Stmt>,
) -> (sparsile_ir::coord::Program, Func) {
    let p = program();
    let mut fb = FuncBuilder::new(&p, Stage::Pos);
    let a = fb.values_axes("A", DType::F64, &[AxisId(0), AxisId(1)], BufferRole::Input);
    let y = fb.values_axes("y", DType::F64, &[AxisId(0)], BufferRole::Output);
    fb.f.body = body(a, y);
    (p, fb.f)
}

#[test]
fn stage2_positions_are_checked() {
    // Row 0 holds positions 0..2, row 1 none, row 2 position 2.
    let (p, f) = stage2(|a, y| vec![store(y, vec![int(2)], ldn(a, vec![int(2), int(2)]))]);
    assert_eq!(y_of(&p, &f), vec![0.0, 0.0, 3.0]);

    let (p, f) = stage2(|a, y| vec![store(y, vec![int(0)], ldn(a, vec![int(0), int(3)]))]);
    let e = err(&p, &f);
    assert!(
        matches!(e, E::PositionOutOfRange { ref axis, position: 3, npos: 3, .. } if axis == "J"),
        "{e}"
    );

    let (p, f) = stage2(|_, y| vec![store(y, vec![int(3)], float(1.0))]);
    assert!(matches!(
        err(&p, &f),
        E::PositionOutOfRange {
            access: "store",
            position: 3,
            npos: 3,
            ..
        }
    ));

    let (p, f) = stage2(|a, y| vec![store(y, vec![int(0)], ldn(a, vec![int(0), int(2)]))]);
    let e = err(&p, &f);
    assert!(
        matches!(
            e,
            E::PositionNotUnderParent {
                position: 2,
                parent_position: 0,
                lo: 0,
                hi: 2,
                ..
            }
        ),
        "{e}"
    );

    let (p, f) = stage2(|a, y| vec![store(y, vec![int(0)], ldn(a, vec![int(0)]))]);
    assert!(matches!(
        err(&p, &f),
        E::IndexCount {
            expected: 2,
            found: 1,
            ..
        }
    ));
}

#[test]
fn type_errors() {
    let (p, k) = kit();
    let y = k.y;
    let e = err(
        &p,
        &with_body(k, vec![store(y, vec![float(0.0)], float(1.0))]),
    );
    assert!(
        matches!(e, E::FloatWhereInt { ref what, .. } if what == "index 0 of a store of `y`"),
        "{e}"
    );

    let (p, mut k) = kit();
    let t = k.fb.idx("t");
    let e = err(&p, &with_body(k, vec![for_(t, int(0), float(2.0), vec![])]));
    assert!(
        matches!(e, E::FloatWhereInt { ref what, .. } if what == "the end of the loop over `t`"),
        "{e}"
    );

    let (p, k) = kit();
    let e = err(&p, &with_body(k, vec![if_(float(1.0), vec![], vec![])]));
    assert!(matches!(e, E::FloatWhereInt { .. }));

    let (p, mut k) = kit();
    let t = k.fb.idx("t");
    let e = err(&p, &with_body(k, vec![let_(t, float(1.0))]));
    assert!(
        matches!(e, E::FloatWhereInt { ref what, .. } if what.contains("`t`")),
        "{e}"
    );

    let (p, k) = kit();
    let e = err(
        &p,
        &with_body(k, vec![if_(and(int(1), float(0.5)), vec![], vec![])]),
    );
    assert!(
        matches!(e, E::FloatWhereInt { ref what, .. } if what.contains("&&")),
        "{e}"
    );

    let (p, k) = kit();
    let (y, a) = (k.y, k.a);
    let e = err(
        &p,
        &with_body(
            k,
            vec![store(y, vec![int(0)], search(a, int(0), int(2), int(1)))],
        ),
    );
    assert!(matches!(e, E::SearchInFloat { ref buffer, .. } if buffer == "A"));
}

#[test]
fn integer_arithmetic_errors() {
    let (p, f) = storing(div(int(1), int(0)));
    assert!(matches!(
        err(&p, &f),
        E::IntArithmetic { lhs: 1, rhs: 0, .. }
    ));
    let (p, f) = storing(mul(int(i64::MAX), int(2)));
    assert!(matches!(err(&p, &f), E::IntArithmetic { .. }));
    let (p, f) = storing(Expr::Unary {
        op: UnaryOp::Neg,
        arg: Box::new(int(i64::MIN)),
    });
    assert!(matches!(err(&p, &f), E::IntUnary { arg: i64::MIN, .. }));
    // Float division by zero is IEEE.
    let (p, f) = storing(div(float(1.0), int(0)));
    assert_eq!(y_of(&p, &f)[0], f64::INFINITY);
}

#[test]
fn variable_errors() {
    let (p, mut k) = kit();
    let y = k.y;
    let t = k.fb.idx("t");
    let e = err(
        &p,
        &with_body(
            k,
            vec![
                for_(t, int(0), int(1), vec![]),
                store(y, vec![v(t)], float(1.0)),
            ],
        ),
    );
    assert!(
        matches!(e, E::UnboundVar { ref var, .. } if var == "t"),
        "{e}"
    );

    let (p, mut k) = kit();
    let x = k.fb.val("x", DType::F64);
    assert!(matches!(
        err(&p, &with_body(k, vec![set(x, float(1.0))])),
        E::BadAssign {
            why: "not declared",
            ..
        }
    ));

    let (p, mut k) = kit();
    let t = k.fb.idx("t");
    let e = err(
        &p,
        &with_body(k, vec![for_(t, int(0), int(2), vec![set(t, int(5))])]),
    );
    assert!(
        matches!(
            e,
            E::BadAssign {
                why: "a loop variable",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn store_errors() {
    let (p, k) = kit();
    let z = k.z;
    let e = err(&p, &with_body(k, vec![store(z, vec![int(0)], float(1.5))]));
    assert!(matches!(e, E::FloatIntoInteger { ref buffer, .. } if buffer == "z"));

    let (p, k) = kit();
    let z = k.z;
    let e = err(
        &p,
        &with_body(k, vec![store(z, vec![int(0)], int(1 << 40))]),
    );
    assert!(
        matches!(e, E::IntegerOutOfRange { value, .. } if value == 1 << 40),
        "{e}"
    );

    let (p, k) = kit();
    let a = k.a;
    let e = err(&p, &with_body(k, vec![store(a, vec![int(0)], float(1.0))]));
    assert!(
        matches!(
            e,
            E::StoreToReadOnly {
                why: "an input",
                ..
            }
        ),
        "{e}"
    );

    let (p, k) = kit();
    let ptr = k.ptr;
    let e = err(&p, &with_body(k, vec![store(ptr, vec![int(0)], int(1))]));
    assert!(
        matches!(
            e,
            E::StoreToReadOnly {
                why: "a structure array",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn spans_locate_execution_errors() {
    let (p, k) = kit();
    let y = k.y;
    let span = Span {
        line: 7,
        col: 3,
        start: 0,
        end: 0,
    };
    let f = with_body(
        k,
        vec![sparsile_ir::loops::Stmt::Store {
            buffer: y,
            indices: vec![int(0)],
            value: cmp(CmpOp::Lt, div(int(1), int(0)), int(0)),
            span,
        }],
    );
    assert!(err(&p, &f).to_string().starts_with("line 7, column 3: "));
}

#[test]
fn the_loop_level_verifier_runs_when_asked() {
    let (p, k) = kit();
    let a = k.a;
    let f = with_body(k, vec![store(a, vec![int(0)], float(1.0))]);
    let verify = FlatOptions {
        verify_func: true,
        ..FlatOptions::default()
    };
    let e =
        flat_interp::run_with(&f, &p, &inputs(), &InterpOptions::default(), &verify).unwrap_err();
    match e {
        E::InvalidFunc { errors } => {
            assert!(errors[0].message.contains("`A` is an input"), "{errors:?}")
        }
        other => panic!("{other:?}"),
    }
    // Without it, the interpreter meets the store and refuses it.
    assert!(matches!(err(&p, &f), E::StoreToReadOnly { .. }));
}

#[test]
fn errors_stay_small() {
    assert!(
        std::mem::size_of::<E>() <= 128,
        "{}",
        std::mem::size_of::<E>()
    );
}
