//! The loop-level semantics, statement by statement: integer floor division, select and
//! short-circuit logic evaluating only what they need, loop bounds evaluated once,
//! local scopes, nested blocks, integer buffers, and the parallel-loop checks.

mod common;
mod flat_support;

use flat_support::*;
use sparsile_ir::coord::UnaryOp;
use sparsile_ir::loops::{CmpOp, Expr};
use sparsile_ir::DType;
use sparsile_runtime::{flat_interp, FlatInterpError, FlatOptions, InterpOptions};

#[test]
fn integer_division_and_remainder_floor() {
    let (p, k) = kit();
    let (y, z) = (k.y, k.z);
    let f = with_body(
        k,
        vec![
            store(y, vec![int(0)], div(int(-7), int(2))),
            store(y, vec![int(1)], rem(int(-7), int(2))),
            store(y, vec![int(2)], rem(int(7), int(-2))),
            store(z, vec![int(0)], div(int(7), int(-2))),
            store(
                z,
                vec![int(1)],
                Expr::Unary {
                    op: UnaryOp::Neg,
                    arg: Box::new(int(5)),
                },
            ),
            store(
                z,
                vec![int(2)],
                Expr::Unary {
                    op: UnaryOp::Relu,
                    arg: Box::new(int(-5)),
                },
            ),
        ],
    );
    let out = run(&p, &f).unwrap();
    assert_eq!(out["y"].values.to_f64_vec(), vec![-4.0, 1.0, -1.0]);
    assert_eq!(out["z"].values.to_f64_vec(), vec![-4.0, -5.0, 0.0]);
}

#[test]
fn float_arithmetic_mixes_and_compares() {
    let (p, k) = kit();
    let y = k.y;
    let f = with_body(
        k,
        vec![
            store(y, vec![int(0)], div(int(7), float(2.0))),
            store(y, vec![int(1)], cmp(CmpOp::Eq, int(3), float(3.0))),
            store(
                y,
                vec![int(2)],
                add(
                    cmp(CmpOp::Lt, float(1.5), int(2)),
                    cmp(CmpOp::Ge, float(-0.5), int(0)),
                ),
            ),
        ],
    );
    assert_eq!(y_of(&p, &f), vec![3.5, 1.0, 1.0]);
}

#[test]
fn select_and_logic_evaluate_only_what_they_need() {
    let (p, k) = kit();
    let (y, a) = (k.y, k.a);
    let bad = || ld(a, int(99));
    let f = with_body(
        k,
        vec![
            store(y, vec![int(0)], Expr::select(int(1), float(5.0), bad())),
            store(y, vec![int(1)], and(int(0), cmp(CmpOp::Gt, bad(), int(0)))),
            store(
                y,
                vec![int(2)],
                add(
                    or(int(2), cmp(CmpOp::Gt, bad(), int(0))),
                    Expr::select(int(0), bad(), float(0.5)),
                ),
            ),
        ],
    );
    assert_eq!(y_of(&p, &f), vec![5.0, 0.0, 1.5]);
    // The same expressions do read out of bounds when the branch is taken.
    let (p, k) = kit();
    let (y, a) = (k.y, k.a);
    let f = with_body(
        k,
        vec![store(
            y,
            vec![int(0)],
            and(int(1), cmp(CmpOp::Gt, ld(a, int(99)), int(0))),
        )],
    );
    assert!(matches!(
        run(&p, &f),
        Err(FlatInterpError::OutOfBounds {
            offset: 99,
            len: 3,
            ..
        })
    ));
}

#[test]
fn loop_bounds_are_evaluated_once_and_empty_ranges_run_nothing() {
    let (p, mut k) = kit();
    let (y, s) = (k.y, k.s);
    let (t, u) = (k.fb.idx("t"), k.fb.idx("u"));
    let f = with_body(
        k,
        vec![
            store(s, vec![int(0)], float(3.0)),
            for_(
                t,
                int(0),
                Expr::binary(sparsile_ir::coord::BinaryOp::Max, int(-4), int(3)),
                vec![acc(s, int(0), float(1.0)), acc(y, int(0), float(1.0))],
            ),
            for_(u, int(2), int(2), vec![acc(y, int(1), float(1.0))]),
            for_(u, int(5), int(-1), vec![acc(y, int(1), float(1.0))]),
            store(y, vec![int(2)], ld(s, int(0))),
        ],
    );
    assert_eq!(y_of(&p, &f), vec![3.0, 0.0, 6.0]);

    // A bound read from a buffer the body writes is still read once.
    let (p, mut k) = kit();
    let (y, z) = (k.y, k.z);
    let t = k.fb.idx("t");
    let f = with_body(
        k,
        vec![
            store(z, vec![int(0)], int(2)),
            for_(
                t,
                int(0),
                ld(z, int(0)),
                vec![acc(z, int(0), int(1)), acc(y, int(0), float(1.0))],
            ),
        ],
    );
    let out = run(&p, &f).unwrap();
    assert_eq!(out["y"].values.to_f64_vec()[0], 2.0);
    assert_eq!(out["z"].values.to_f64_vec()[0], 4.0);
}

#[test]
fn locals_are_scoped_to_their_statement_list() {
    let (p, mut k) = kit();
    let y = k.y;
    let x = k.fb.val("x", DType::F64);
    let w = k.fb.idx("w");
    let f = with_body(
        k,
        vec![
            let_(x, float(1.0)),
            block(
                "outer",
                vec![
                    let_(x, float(2.0)),
                    block(
                        "inner",
                        vec![set(x, add(v(x), float(10.0))), store(y, vec![int(0)], v(x))],
                    ),
                    store(y, vec![int(1)], v(x)),
                ],
            ),
            store(y, vec![int(2)], v(x)),
            // An index local assigned from an integer expression.
            let_(w, int(1)),
            if_(
                cmp(CmpOp::Eq, v(w), int(1)),
                vec![set(w, int(2))],
                vec![set(w, int(7))],
            ),
            acc(y, int(2), v(w)),
        ],
    );
    assert_eq!(y_of(&p, &f), vec![12.0, 12.0, 3.0]);

    // Out of its block, the local is unbound.
    let (p, mut k) = kit();
    let y = k.y;
    let x = k.fb.val("x", DType::F64);
    let f = with_body(
        k,
        vec![
            block("b", vec![let_(x, float(1.0))]),
            store(y, vec![int(0)], v(x)),
        ],
    );
    match run(&p, &f) {
        Err(FlatInterpError::UnboundVar { var, .. }) => assert_eq!(var, "x"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn nested_blocks_and_ifs_run_in_order() {
    let (p, mut k) = kit();
    let (y, ptr) = (k.y, k.ptr);
    let i = k.fb.idx("i");
    // y[i] = number of stored entries of row i, or -1 for empty rows; then doubled.
    let f = with_body(
        k,
        vec![
            block(
                "count",
                vec![for_(
                    i,
                    int(0),
                    int(3),
                    vec![block(
                        "row",
                        vec![if_(
                            cmp(CmpOp::Lt, ld(ptr, v(i)), ld(ptr, add(v(i), int(1)))),
                            vec![store(
                                y,
                                vec![v(i)],
                                sub(ld(ptr, add(v(i), int(1))), ld(ptr, v(i))),
                            )],
                            vec![store(y, vec![v(i)], int(-1))],
                        )],
                    )],
                )],
            ),
            block(
                "double",
                vec![for_(
                    i,
                    int(0),
                    int(3),
                    vec![store(y, vec![v(i)], mul(ld(y, v(i)), int(2)))],
                )],
            ),
        ],
    );
    assert_eq!(y_of(&p, &f), vec![4.0, -2.0, 2.0]);
}

#[test]
fn outputs_the_function_never_writes_are_zero() {
    let (p, k) = kit();
    let f = with_body(k, vec![]);
    let out = run(&p, &f).unwrap();
    assert_eq!(out["y"].values.to_f64_vec(), vec![0.0; 3]);
    assert_eq!(out["z"].values.to_f64_vec(), vec![0.0; 3]);
    assert_eq!(out.len(), 2);
}

#[test]
fn parallel_loops_must_write_distinct_elements() {
    // Distinct rows: fine; every iteration writing y[0]: a conflict naming both.
    let (p, mut k) = kit();
    let (y, s) = (k.y, k.s);
    let i = k.fb.idx("i");
    let ok = with_body(
        k,
        vec![par(
            i,
            int(0),
            int(3),
            vec![
                store(y, vec![v(i)], float(1.0)),
                acc(y, v(i), float(1.0)),
                // Scratch is private working memory: shared offsets are allowed.
                store(s, vec![int(0)], v(i)),
            ],
        )],
    );
    assert_eq!(y_of(&p, &ok), vec![2.0; 3]);

    let (p, mut k) = kit();
    let y = k.y;
    let i = k.fb.idx("i");
    let bad = with_body(
        k,
        vec![par(
            i,
            int(0),
            int(3),
            vec![store(y, vec![rem(v(i), int(2))], add(v(i), int(1)))],
        )],
    );
    match run(&p, &bad) {
        Err(FlatInterpError::ParallelWriteConflict {
            var,
            buffer,
            offset,
            first,
            second,
            ..
        }) => {
            assert_eq!(
                (var.as_str(), buffer.as_str(), offset, first, second),
                ("i", "y", 0, 0, 2)
            );
        }
        other => panic!("{other:?}"),
    }
    // Without checking, the loop runs serially.
    let out = flat_interp::run_with(
        &bad,
        &p,
        &inputs(),
        &InterpOptions::default(),
        &FlatOptions {
            check_parallel: false,
            ..FlatOptions::default()
        },
    )
    .unwrap();
    assert_eq!(out["y"].values.to_f64_vec(), vec![3.0, 2.0, 0.0]);
}

#[test]
fn nested_parallel_loops_are_checked_separately() {
    // y[i] written by every iteration of the inner parallel loop over t.
    let (p, mut k) = kit();
    let y = k.y;
    let (i, t) = (k.fb.idx("i"), k.fb.idx("t"));
    let f = with_body(
        k,
        vec![par(
            i,
            int(0),
            int(3),
            vec![par(t, int(0), int(2), vec![store(y, vec![v(i)], v(t))])],
        )],
    );
    match run(&p, &f) {
        Err(FlatInterpError::ParallelWriteConflict {
            var, first, second, ..
        }) => assert_eq!((var.as_str(), first, second), ("t", 0, 1)),
        other => panic!("{other:?}"),
    }
    // Inner iterations writing y[t] conflict across outer iterations.
    let (p, mut k) = kit();
    let y = k.y;
    let (i, t) = (k.fb.idx("i"), k.fb.idx("t"));
    let f = with_body(
        k,
        vec![par(
            i,
            int(0),
            int(2),
            vec![for_(t, int(0), int(2), vec![store(y, vec![v(t)], v(i))])],
        )],
    );
    match run(&p, &f) {
        Err(FlatInterpError::ParallelWriteConflict {
            var,
            offset,
            first,
            second,
            ..
        }) => {
            assert_eq!((var.as_str(), offset, first, second), ("i", 0, 0, 1))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn parallel_iterations_may_not_assign_outer_locals() {
    let (p, mut k) = kit();
    let y = k.y;
    let (i, own) = (k.fb.idx("i"), k.fb.val("own", DType::F64));
    let ok = with_body(
        k,
        vec![par(
            i,
            int(0),
            int(3),
            vec![
                let_(own, float(1.0)),
                set(own, add(v(own), v(own))),
                store(y, vec![v(i)], v(own)),
            ],
        )],
    );
    assert_eq!(y_of(&p, &ok), vec![2.0; 3]);

    let (p, mut k) = kit();
    let (i, sum) = (k.fb.idx("i"), k.fb.val("sum", DType::F64));
    let bad = with_body(
        k,
        vec![
            let_(sum, float(0.0)),
            par(i, int(0), int(3), vec![set(sum, add(v(sum), float(1.0)))]),
        ],
    );
    match run(&p, &bad) {
        Err(FlatInterpError::ParallelSharedLocal {
            var,
            local,
            iteration,
            ..
        }) => {
            assert_eq!((var.as_str(), local.as_str(), iteration), ("i", "sum", 0))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn parallel_iterations_may_not_load_what_others_store() {
    // Iteration 2 loads y[0], which iteration 0 stored.
    let (p, mut k) = kit();
    let y = k.y;
    let i = k.fb.idx("i");
    let f = with_body(
        k,
        vec![par(
            i,
            int(0),
            int(3),
            vec![store(
                y,
                vec![v(i)],
                add(ld(y, sub(int(2), v(i))), float(1.0)),
            )],
        )],
    );
    match run(&p, &f) {
        Err(FlatInterpError::ParallelReadWriteConflict {
            var,
            buffer,
            offset,
            writer,
            reader,
            ..
        }) => {
            assert_eq!(
                (var.as_str(), buffer.as_str(), offset, writer, reader),
                ("i", "y", 0, 0, 2)
            )
        }
        other => panic!("{other:?}"),
    }
    // Iteration 1 stores y[1], which iteration 0 loaded before.
    let (p, mut k) = kit();
    let y = k.y;
    let i = k.fb.idx("i");
    let f = with_body(
        k,
        vec![par(
            i,
            int(0),
            int(2),
            vec![if_(
                cmp(CmpOp::Eq, v(i), int(0)),
                vec![store(y, vec![int(2)], ld(y, int(1)))],
                vec![store(y, vec![int(1)], float(5.0))],
            )],
        )],
    );
    match run(&p, &f) {
        Err(FlatInterpError::ParallelReadWriteConflict {
            offset,
            writer,
            reader,
            ..
        }) => {
            assert_eq!((offset, writer, reader), (1, 1, 0))
        }
        other => panic!("{other:?}"),
    }
    // Many iterations loading an element no iteration stores, and loads of inputs and
    // structure arrays, are independent.
    let (p, mut k) = kit();
    let (y, z, a, ptr) = (k.y, k.z, k.a, k.ptr);
    let i = k.fb.idx("i");
    let f = with_body(
        k,
        vec![par(
            i,
            int(0),
            int(3),
            vec![store(
                y,
                vec![v(i)],
                add(add(ld(z, int(0)), ld(a, int(0))), ld(ptr, int(3))),
            )],
        )],
    );
    assert_eq!(y_of(&p, &f), vec![4.0; 3]);
}
