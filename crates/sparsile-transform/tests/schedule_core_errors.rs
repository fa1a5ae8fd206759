//! One test per precondition of split, fuse, reorder and the `Schedule`: each error
//! names the primitive, the violated precondition and where (block, loop, and the line
//! and column of the loop in the parsed text).

use sparsile_ir::loops::Func;
use sparsile_transform::schedule::{
    fuse, reorder, split, LoopRef, Schedule, ScheduleError, SplitTail, Step, Trace,
};

/// SpMM on CSR in stage II, parsed from text (so loops carry spans).
fn spmm() -> Func {
    let text = include_str!("schedule/split/spmm_csr_rows.before.pos");
    text.parse().unwrap()
}

fn r(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

#[test]
fn unknown_block() {
    let e = split(&spmm(), &r("D", "i"), 2, SplitTail::InnerFixed).unwrap_err();
    assert!(matches!(e, ScheduleError::UnknownBlock { .. }), "{e:?}");
    assert_eq!(e.to_string(), "split: no block `D` in the function");
}

#[test]
fn unknown_loop() {
    // `i` is a loop of `C.init`, not of `C`.
    let e = split(&spmm(), &r("C", "i"), 2, SplitTail::InnerFixed).unwrap_err();
    assert!(matches!(e, ScheduleError::UnknownLoop { .. }), "{e:?}");
    assert_eq!(e.to_string(), "split: no loop `i` in block `C`");
}

#[test]
fn bad_factor() {
    let e = split(&spmm(), &r("C", "i_2"), 0, SplitTail::OuterFixed).unwrap_err();
    assert!(
        matches!(e, ScheduleError::BadFactor { factor: 0, .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "split: loop `i_2` in block `C`: factor 0 must be at least 1"
    );
}

#[test]
fn split_of_a_vectorized_loop() {
    let text = include_str!("schedule/split/spmm_csr_rows.before.pos")
        .replace("for i_2 in 0..m {", "for i_2 in 0..m vectorized {");
    let func: Func = text.parse().unwrap();
    let e = split(&func, &r("C", "i_2"), 2, SplitTail::InnerFixed).unwrap_err();
    assert!(matches!(e, ScheduleError::NotSerial { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "split: loop `i_2` in block `C` (line 19, column 5) is vectorized, only serial loops (and, for split, parallel ones) can be transformed"
    );
}

#[test]
fn fuse_not_perfectly_nested() {
    // `j_p`'s body starts with `let j = …`, so `k2_2` is not its only statement.
    let e = fuse(&spmm(), &r("C", "j_p"), &r("C", "k2_2")).unwrap_err();
    assert!(
        matches!(e, ScheduleError::NotPerfectlyNested { .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "fuse: in block `C`, loop `k2_2` is not the only statement of loop `j_p` (line 20, column 7): the loops must be perfectly nested"
    );
}

#[test]
fn fuse_position_loop_with_its_parent() {
    let e = fuse(&spmm(), &r("C", "i_2"), &r("C", "j_p")).unwrap_err();
    assert!(matches!(e, ScheduleError::DependentBounds { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "fuse: in block `C`, the bounds of loop `j_p` (line 20, column 7) depend on loop `i_2`"
    );
}

#[test]
fn fuse_loops_of_two_blocks() {
    let e = fuse(&spmm(), &r("C.init", "i"), &r("C", "j_p")).unwrap_err();
    assert!(matches!(e, ScheduleError::BadLoopList { .. }), "{e:?}");
    assert!(
        e.to_string().contains("two different loops of one block"),
        "{e}"
    );
}

#[test]
fn reorder_position_loop_outside_its_parent() {
    let e = reorder(&spmm(), &[r("C", "j_p"), r("C", "i_2")]).unwrap_err();
    assert!(matches!(e, ScheduleError::DependentBounds { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "reorder: in block `C`, the bounds of loop `j_p` (line 20, column 7) depend on loop `i_2`"
    );
}

#[test]
fn reorder_not_perfectly_nested() {
    // A store between the loops (a `let` that never changes may sit there: it moves).
    let f: Func = "\
pos func f(m, n) {
  axis I = dense_fixed(m)
  axis J = dense_fixed(n)
  buffer y: f64[I] output values
  buffer z: f64[I, J] output values
  block b {
    for i in 0..m {
      y[i] = 0.0
      for j in 0..n {
        z[i, j] = 1.0
      }
    }
  }
}
"
    .parse()
    .unwrap();
    let e = reorder(&f, &[r("b", "j"), r("b", "i")]).unwrap_err();
    assert!(
        matches!(e, ScheduleError::NotPerfectlyNested { .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "reorder: in block `b`, loop `j` is not the only statement of loop `i` (line 7, column 5): the loops must be perfectly nested"
    );
    // SpMM's dense loop below the coordinate `let` moves above the position loop.
    assert!(reorder(&spmm(), &[r("C", "k2_2"), r("C", "j_p")]).is_ok());
}

#[test]
fn reorder_duplicate_loop() {
    let e = reorder(&spmm(), &[r("C", "i_2"), r("C", "i_2")]).unwrap_err();
    assert_eq!(e.to_string(), "reorder: loop C/i_2 is named twice");
}

#[test]
fn reorder_empty_list() {
    let e = reorder(&spmm(), &[]).unwrap_err();
    assert_eq!(e.to_string(), "reorder: no loops given");
}

#[test]
fn reorder_loops_of_two_blocks() {
    let e = reorder(&spmm(), &[r("C", "i_2"), r("C.init", "i")]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "reorder: loops C/i_2 and C.init/i are in different blocks"
    );
}

#[test]
fn lower_twice_is_wrong_stage() {
    let program = sparsile::compile_notation(
        "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
    )
    .unwrap();
    let mut sch = Schedule::new(&program);
    sch.apply(&Step::Lower).unwrap();
    let e = sch.apply(&Step::Lower).unwrap_err();
    assert!(matches!(e, ScheduleError::WrongStage { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "lower: expects stage I, but the schedule is at stage II"
    );
    assert_eq!(sch.trace().steps, vec![Step::Lower]);
}

#[test]
fn a_failed_call_records_nothing() {
    let program = sparsile::compile_notation(
        "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
    )
    .unwrap();
    let mut sch = Schedule::new(&program);
    let before = sch.func_or_lower().unwrap().to_string();
    assert!(sch
        .split(&r("y", "nope"), 2, SplitTail::InnerFixed)
        .is_err());
    assert_eq!(sch.func().unwrap().to_string(), before);
    assert_eq!(sch.trace().steps, vec![Step::Lower]);
}

#[test]
fn malformed_trace_json() {
    let e = Trace::from_json("{\"steps\": [{\"step\": \"spin\"}]}").unwrap_err();
    assert!(matches!(e, ScheduleError::TraceJson(_)), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("trace JSON: unknown variant `spin`"),
        "{e}"
    );
}

#[test]
fn stage_one_primitive_after_lowering_is_wrong_stage() {
    let program = sparsile::compile_notation(
        "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
    )
    .unwrap();
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    let order = vec!["A_J".to_string(), "I_m".to_string()];
    let e = sch.sparse_reorder("y", &order).unwrap_err();
    assert!(matches!(e, ScheduleError::WrongStage { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "sparse_reorder: expects stage I, but the schedule is at stage II"
    );
}

#[test]
fn split_of_a_loop_whose_bound_its_body_writes() {
    // The loop over `k2_2` is bounded by `C[i_2, 0]`, which its body stores to.
    let text = include_str!("schedule/split/spmm_csr_rows.before.pos").replace(
        "for k2_2 in 0..k {",
        "for k2_2 in 0..select(C[i_2, 0] < 1.0, k, k) {",
    );
    let func: Func = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    let e = split(&func, &r("C", "k2_2"), 2, SplitTail::InnerFixed).unwrap_err();
    assert!(
        matches!(e, ScheduleError::BoundsNotInvariant { .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "split: the bounds of loop `k2_2` in block `C` (line 22, column 9) read a buffer or local that the loop body writes"
    );
}

/// Factors past the largest i32 extent are refused: 2^63 - 1 made the generated
/// `n + f - 1` overflow (the kernel silently computed nothing), factors between 2^31 and
/// 2^62 made guarded loops run for ever. The same goes for `bound` extents and for
/// factors arriving through a replayed trace.
#[test]
fn factors_and_extents_past_the_index_range_are_refused() {
    use sparsile_transform::schedule::bound::bound;
    use sparsile_transform::schedule::split::MAX_FACTOR;
    for factor in [MAX_FACTOR + 1, 1 << 40, (1 << 62) + 3, i64::MAX] {
        for tail in [SplitTail::OuterFixed, SplitTail::InnerFixed] {
            let e = split(&spmm(), &r("C", "i_2"), factor, tail).unwrap_err();
            assert!(
                matches!(e, ScheduleError::FactorTooLarge { factor: f, max: MAX_FACTOR, .. } if f == factor),
                "{e:?}"
            );
        }
        let e = bound(&spmm(), &r("C", "k2_2"), factor).unwrap_err();
        assert!(
            matches!(
                e,
                ScheduleError::FactorTooLarge {
                    primitive: "bound",
                    ..
                }
            ),
            "{e:?}"
        );
    }
    assert_eq!(
        split(&spmm(), &r("C", "i_2"), i64::MAX, SplitTail::OuterFixed)
            .unwrap_err()
            .to_string(),
        format!("split: loop `i_2` in block `C`: {} is more than {MAX_FACTOR}, the largest extent an index can have here (i32 indices); the generated index arithmetic would overflow or the loop would run through iterations that cannot exist", i64::MAX)
    );
    // The largest factor is accepted.
    split(&spmm(), &r("C", "i_2"), MAX_FACTOR, SplitTail::InnerFixed).unwrap();
    bound(&spmm(), &r("C", "k2_2"), MAX_FACTOR).unwrap();
}
