//! One test per precondition of `sparse_reorder` and `sparse_fuse`: the error names the
//! primitive, the iteration, the axes involved and the iteration's line.

use sparsile_ir::coord::{self, Program, Stmt};
use sparsile_transform::schedule::{sparse_fuse, sparse_reorder, ScheduleError};

const CSF: &str = "\
func f(m, n, o, nnz_j, nnz_k) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz_j, idx=i32)
  axis K = sparse_variable(J, o, nnz=nnz_k, idx=i32)
  axis D = dense_fixed(4)
  buffer A: f64[I, J, K] input
  buffer x: f64[D] input
  buffer y: f64[I, D] output
  iter T over [I: S, J: R, K: R, D: S] as (i, j, l, d) {
    init {
      y[i, d] = 0.0
    }
    y[i, d] = y[i, d] + A[i, j, l] * x[d]
  }
}
";

fn program() -> Program {
    CSF.parse().unwrap()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn fused_jk() -> Program {
    sparse_fuse(&program(), "T", &s(&["J", "K"])).unwrap()
}

#[test]
fn reorder_unknown_iteration() {
    let e = sparse_reorder(&program(), "U", &s(&["I", "J", "K", "D"])).unwrap_err();
    assert!(matches!(e, ScheduleError::UnknownIteration { ref iteration, .. } if iteration == "U"));
    assert!(
        e.to_string().contains("sparse_reorder: no iteration `U`"),
        "{e}"
    );
}

#[test]
fn reorder_axis_not_in_iteration() {
    let e = sparse_reorder(&program(), "T", &s(&["I", "J", "K", "Q"])).unwrap_err();
    assert!(matches!(e, ScheduleError::AxisNotInIteration { ref axis, .. } if axis == "Q"));
    assert!(
        e.to_string()
            .contains("iteration `T` (line 9, column 3) has no axis `Q`"),
        "{e}"
    );
}

#[test]
fn reorder_wrong_length_is_not_a_permutation() {
    let e = sparse_reorder(&program(), "T", &s(&["I", "J", "K"])).unwrap_err();
    assert!(matches!(e, ScheduleError::NotAPermutation { .. }), "{e}");
    assert!(
        e.to_string().contains("names 3 axes, the iteration has 4"),
        "{e}"
    );
}

#[test]
fn reorder_repeated_axis_is_not_a_permutation() {
    let e = sparse_reorder(&program(), "T", &s(&["I", "J", "J", "D"])).unwrap_err();
    assert!(e.to_string().contains("axis `J` is named twice"), "{e}");
}

#[test]
fn reorder_child_before_parent_names_both() {
    let e = sparse_reorder(&program(), "T", &s(&["I", "K", "J", "D"])).unwrap_err();
    match &e {
        ScheduleError::ChildBeforeParent {
            axis,
            parent,
            iteration,
            span,
            ..
        } => {
            assert_eq!(
                (axis.as_str(), parent.as_str(), iteration.as_str()),
                ("K", "J", "T")
            );
            assert_eq!(span.line, 9);
        }
        other => panic!("{other}"),
    }
    assert!(
        e.to_string()
            .contains("axis `K` would come before its parent `J`"),
        "{e}"
    );
}

#[test]
fn reorder_may_not_split_a_fused_group() {
    let e = sparse_reorder(&fused_jk(), "T", &s(&["I", "J", "D", "K"])).unwrap_err();
    assert!(
        matches!(e, ScheduleError::AlreadyFused { ref axes, .. } if axes == "J, K"),
        "{e}"
    );
}

#[test]
fn reorder_moves_a_fused_group_whole() {
    let p = sparse_reorder(&fused_jk(), "T", &s(&["I", "D", "J", "K"])).unwrap();
    assert!(
        p.to_string()
            .contains("[I: S, D: S, J: R, K: R] fuse(J, K) as (i, d, j, l)"),
        "{p}"
    );
}

#[test]
fn reorder_refuses_an_invalid_program() {
    let mut p = program();
    let Stmt::Iteration(it) = &mut p.body[0] else {
        panic!()
    };
    it.axes.swap(1, 2);
    let e = sparse_reorder(&p, "T", &s(&["I", "J", "K", "D"])).unwrap_err();
    assert!(matches!(e, ScheduleError::InputNotVerified { .. }), "{e}");
    assert!(e.to_string().contains("needs its parent `J`"), "{e}");
}

#[test]
fn fuse_unknown_iteration() {
    let e = sparse_fuse(&program(), "U", &s(&["I", "J"])).unwrap_err();
    assert!(
        e.to_string().contains("sparse_fuse: no iteration `U`"),
        "{e}"
    );
}

#[test]
fn fuse_needs_two_axes() {
    let e = sparse_fuse(&program(), "T", &s(&["J"])).unwrap_err();
    assert!(
        matches!(e, ScheduleError::TooFewAxes { count: 1, .. }),
        "{e}"
    );
}

#[test]
fn fuse_axis_not_in_iteration() {
    let e = sparse_fuse(&program(), "T", &s(&["J", "Q"])).unwrap_err();
    assert!(
        matches!(e, ScheduleError::AxisNotInIteration { ref axis, .. } if axis == "Q"),
        "{e}"
    );
}

#[test]
fn fuse_axes_must_be_consecutive() {
    let e = sparse_fuse(&program(), "T", &s(&["I", "K"])).unwrap_err();
    match &e {
        ScheduleError::NotConsecutive { previous, axis, .. } => {
            assert_eq!((previous.as_str(), axis.as_str()), ("I", "K"))
        }
        other => panic!("{other}"),
    }
    assert!(
        e.to_string()
            .contains("axis `K` does not directly follow `I`"),
        "{e}"
    );
}

#[test]
fn fuse_axes_must_form_a_parent_chain() {
    let e = sparse_fuse(&program(), "T", &s(&["K", "D"])).unwrap_err();
    match &e {
        ScheduleError::NotParentChain {
            previous,
            axis,
            span,
            ..
        } => {
            assert_eq!((previous.as_str(), axis.as_str(), span.line), ("K", "D", 9))
        }
        other => panic!("{other}"),
    }
    assert!(
        e.to_string().contains("axis `D` is not a child of `K`"),
        "{e}"
    );
}

#[test]
fn fuse_may_not_overlap_a_fused_group() {
    let e = sparse_fuse(&fused_jk(), "T", &s(&["I", "J"])).unwrap_err();
    assert!(
        matches!(e, ScheduleError::AlreadyFused { ref axes, .. } if axes == "J, K"),
        "{e}"
    );
}

#[test]
fn fuse_refuses_an_invalid_program() {
    let mut p = program();
    let j = p.axis_by_name("J").unwrap();
    p.axes[j].parent = None;
    let e = sparse_fuse(&p, "T", &s(&["I", "J"])).unwrap_err();
    assert!(matches!(e, ScheduleError::InputNotVerified { .. }), "{e}");
}

#[test]
fn verifier_rejects_bad_fused_groups() {
    let mut p = program();
    let Stmt::Iteration(it) = &mut p.body[0] else {
        panic!()
    };
    it.fused = vec![(2, 4)];
    let errors = coord::verify(&p).unwrap_err();
    assert!(
        errors[0]
            .message
            .contains("fused axis `D` is not a child of `K`"),
        "{errors:?}"
    );
    let Stmt::Iteration(it) = &mut p.body[0] else {
        panic!()
    };
    it.fused = vec![(0, 2), (1, 3)];
    let errors = coord::verify(&p).unwrap_err();
    assert!(
        errors[0].message.contains("not a sorted, disjoint range"),
        "{errors:?}"
    );
}

#[test]
fn parser_rejects_a_fused_group_out_of_order() {
    let text = CSF.replace("as (i, j, l, d)", "fuse(J, D) as (i, j, l, d)");
    let e = text.parse::<Program>().unwrap_err();
    assert!(
        e.to_string()
            .contains("fused axis `D` is not the next axis of iteration `T`"),
        "{e}"
    );
    let text = CSF.replace("as (i, j, l, d)", "fuse(J, K) as (i, j, l, d)");
    let p: Program = text.parse().unwrap();
    assert_eq!(p.to_string(), fused_jk().to_string());
}
