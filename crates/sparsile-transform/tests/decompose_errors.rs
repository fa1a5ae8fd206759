//! One test per precondition of `decompose_format` and `horizontal_fuse`: each
//! violation gives its own `ScheduleError`, naming the buffer, iteration or block.

use sparsile_formats::decompose::DecomposeRule;
use sparsile_ir::coord::Program;
use sparsile_ir::loops::Func;
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::{
    decompose_format, horizontal_fuse, sparse_fuse, Schedule, ScheduleError,
};

const HYB: DecomposeRule = DecomposeRule::Hyb { c: 1, k: 1 };

/// SpMV over CSR `A` with the iteration body given.
fn spmv(body: &str) -> Program {
    format!(
        "func f(m, n, nnz) {{\n  axis I = dense_fixed(m)\n  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)\n  \
         axis JD = dense_fixed(n)\n  buffer A: f64[I, J] input\n  buffer x: f64[JD] input\n  \
         buffer y: f64[I] output\n  {body}\n}}\n"
    )
    .parse()
    .unwrap()
}

fn plain() -> Program {
    spmv("iter y over [I: S, J: R] as (i, j) {\n    init {\n      y[i] = 0.0\n    }\n    y[i] = y[i] + A[i, j] * x[j]\n  }")
}

fn err(program: &Program, buffer: &str, rule: &DecomposeRule) -> ScheduleError {
    decompose_format(program, buffer, rule).unwrap_err()
}

#[test]
fn input_must_verify() {
    let mut p = plain();
    p.buffers[sparsile_ir::BufferId(1)].axes.clear();
    assert!(matches!(
        err(&p, "A", &HYB),
        ScheduleError::InputNotVerified { .. }
    ));
}

#[test]
fn unknown_buffer() {
    let e = err(&plain(), "Q", &HYB);
    assert!(matches!(e, ScheduleError::UnknownBuffer { .. }), "{e}");
    assert!(e.to_string().contains("`Q`"));
}

#[test]
fn only_inputs_decompose() {
    let e = err(&plain(), "y", &HYB);
    assert!(matches!(e, ScheduleError::NotDecomposable { .. }), "{e}");
    assert!(e.to_string().contains("output"), "{e}");
}

#[test]
fn a_derived_buffer_does_not_decompose_again() {
    let once = decompose_format(&plain(), "A", &HYB).unwrap();
    let e = err(&once, "A_p0", &HYB);
    assert!(matches!(e, ScheduleError::NotDecomposable { .. }), "{e}");
    assert!(e.to_string().contains("derived"), "{e}");
}

#[test]
fn axes_must_be_one_per_dimension_in_order() {
    // `K` hangs under `I`, not under the axis before it (`J`).
    let p: Program = "func f(m, n, nj, nk) {\n  axis I = dense_fixed(m)\n  \
        axis J = sparse_variable(I, n, nnz=nj, idx=i32)\n  axis K = sparse_variable(I, n, nnz=nk, idx=i32)\n  \
        buffer A: f64[I, J, K] input\n  buffer y: f64[I] output\n  \
        iter y over [I: S, J: R, K: R] as (i, j, k) {\n    y[i] = y[i] + A[i, j, k]\n  }\n}\n"
        .parse()
        .unwrap();
    let e = err(&p, "A", &HYB);
    assert!(matches!(e, ScheduleError::NotDecomposable { .. }), "{e}");
    assert!(e.to_string().contains("not stored under"), "{e}");
}

#[test]
fn bad_rules_are_refused() {
    let e = err(&plain(), "A", &DecomposeRule::Hyb { c: 0, k: 1 });
    assert!(matches!(e, ScheduleError::DecomposeBadRule { .. }), "{e}");
    let e = err(&plain(), "x", &HYB);
    assert!(matches!(e, ScheduleError::DecomposeBadRule { .. }), "{e}");
    assert!(e.to_string().contains("order 1"), "{e}");
    let e = err(
        &plain(),
        "A",
        &DecomposeRule::Convert {
            format: "bsr:0x1".into(),
        },
    );
    assert!(matches!(e, ScheduleError::DecomposeBadRule { .. }), "{e}");
}

#[test]
fn the_buffer_must_be_read() {
    let p = spmv("iter y over [I: S] as (i) {\n    y[i] = 1.0\n  }");
    let e = err(&p, "A", &HYB);
    assert!(matches!(e, ScheduleError::BufferNotRead { .. }), "{e}");
}

#[test]
fn every_axis_of_the_buffer_must_be_iterated() {
    let p = spmv("iter y over [I: S] as (i) {\n    y[i] = y[i] + A[i, 0]\n  }");
    let e = err(&p, "A", &HYB);
    assert!(
        matches!(e, ScheduleError::SourceAxisNotIterated { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("`J`"), "{e}");
}

#[test]
fn reads_must_use_the_iteration_variables() {
    let p = spmv("iter y over [I: S, J: R] as (i, j) {\n    y[i] = y[i] + A[i, j] * A[i, 0]\n  }");
    let e = err(&p, "A", &HYB);
    assert!(
        matches!(e, ScheduleError::SourceAccessNotIterated { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("A[i, 0]"), "{e}");
}

#[test]
fn the_body_must_accumulate() {
    let p = spmv("iter y over [I: S, J: R] as (i, j) {\n    y[i] = A[i, j] * x[j]\n  }");
    let e = err(&p, "A", &HYB);
    assert!(matches!(e, ScheduleError::NotAnAccumulation { .. }), "{e}");
    let p = spmv("iter y over [I: S, J: R] as (i, j) {\n    y[i] = y[i] + A[i, j] * y[i]\n  }");
    let e = err(&p, "A", &HYB);
    assert!(matches!(e, ScheduleError::NotAnAccumulation { .. }), "{e}");
}

#[test]
fn fused_axes_of_the_buffer_are_refused() {
    let fused = sparse_fuse(&plain(), "y", &["I".to_string(), "J".to_string()]).unwrap();
    let e = err(&fused, "A", &HYB);
    assert!(matches!(e, ScheduleError::AlreadyFused { .. }), "{e}");
}

#[test]
fn decompose_format_is_stage_one_only() {
    let mut sch = Schedule::new(&plain());
    sch.func_or_lower().unwrap();
    let e = sch.decompose_format("A", HYB).unwrap_err();
    assert!(matches!(e, ScheduleError::WrongStage { .. }), "{e}");
    assert_eq!(sch.trace().steps.len(), 1, "a failing call records nothing");
}

fn parts() -> Func {
    lower_iterations(&decompose_format(&plain(), "A", &HYB).unwrap()).unwrap()
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn fuse_needs_two_distinct_blocks() {
    let f = parts();
    let e = horizontal_fuse(&f, &names(&["y_p0"])).unwrap_err();
    assert!(matches!(e, ScheduleError::BadBlockList { .. }), "{e}");
    let e = horizontal_fuse(&f, &names(&["y_p0", "y_p0"])).unwrap_err();
    assert!(matches!(e, ScheduleError::BadBlockList { .. }), "{e}");
}

#[test]
fn fuse_unknown_block() {
    let e = horizontal_fuse(&parts(), &names(&["y_p0", "nope"])).unwrap_err();
    assert!(matches!(e, ScheduleError::UnknownBlock { .. }), "{e}");
}

#[test]
fn fuse_blocks_must_be_one_loop() {
    let mut f = parts();
    if let sparsile_ir::loops::Stmt::Block { body, .. } = &mut f.body[1] {
        let again = body[0].clone();
        body.push(again);
    }
    let e = horizontal_fuse(&f, &names(&["y_p0", "y_p1"])).unwrap_err();
    assert!(
        matches!(e, ScheduleError::NotASingleLoopBlock { .. }),
        "{e}"
    );
}

#[test]
fn fuse_blocks_must_be_adjacent() {
    let e = horizontal_fuse(&parts(), &names(&["y_init", "y_p1"])).unwrap_err();
    assert!(matches!(e, ScheduleError::BlocksNotAdjacent { .. }), "{e}");
}

#[test]
fn fuse_blocks_must_be_independent() {
    // The init block writes `y`, which the part blocks accumulate into.
    let e = horizontal_fuse(&parts(), &names(&["y_init", "y_p0"])).unwrap_err();
    assert!(matches!(e, ScheduleError::BlocksDependent { .. }), "{e}");
    assert!(e.to_string().contains("`y`"), "{e}");
}
