//! `rfactor`: SpMV rows split by 4 with partial sums per inner iteration (then the row
//! loop parallel and the inner loop vectorised) match the interpreter (stage II, stage
//! III, native with 1 and 3 threads) on matrices with empty rows, one huge row and no
//! entries; each precondition failure is its own error. SpMV over `bsr:1xC` blocks keeps
//! one partial sum per block column across all the blocks of a row (the block row loop
//! runs once, so the updated element is known before the row's blocks).

mod features;

use features::{check, native_settings, spmm, spmv, spmv_bsr, Rows, ALL_ROWS};
use sparsile_transform::schedule::rfactor::rfactor;
use sparsile_transform::schedule::{LoopRef, Schedule, ScheduleError, SplitTail};

#[test]
fn spmv_partial_sums_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 700;
    for rows in ALL_ROWS {
        for (m, n) in [(6, 11), (1, 3), (0, 2), (9, 4)] {
            for factor in [1, 4] {
                seed += 1;
                let case = spmv(m, n, rows, seed);
                let mut sch = Schedule::new(&case.program);
                let (o, i) = sch
                    .split(&LoopRef::new("y", "j_p"), factor, SplitTail::InnerFixed)
                    .unwrap();
                let partial = sch
                    .rfactor(&o, &i)
                    .unwrap_or_else(|e| panic!("{e}\n{}", sch.func().unwrap()));
                assert_eq!(partial, "y_partial");
                sch.vectorize(&i)
                    .unwrap_or_else(|e| panic!("{e}\n{}", sch.func().unwrap()));
                sch.parallel(&LoopRef::new("y", "i_2")).unwrap();
                check(&case, &sch, native.as_ref());
            }
        }
    }
}

fn split_spmv() -> (sparsile_ir::loops::Func, LoopRef, LoopRef) {
    let case = spmv(4, 4, Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    let (o, i) = sch
        .split(&LoopRef::new("y", "j_p"), 4, SplitTail::InnerFixed)
        .unwrap();
    (sch.func().unwrap().clone(), o, i)
}

#[test]
fn refuses_an_inner_loop_outside_the_target() {
    let (func, o, i) = split_spmv();
    let err = rfactor(&func, &i, &o).unwrap_err();
    assert!(matches!(err, ScheduleError::RfactorInner { .. }), "{err}");
}

#[test]
fn refuses_an_inner_loop_without_constant_bounds() {
    let (func, _, _) = split_spmv();
    let err = rfactor(
        &func,
        &LoopRef::new("y", "i_2"),
        &LoopRef::new("y", "j_p_o"),
    )
    .unwrap_err();
    assert!(matches!(err, ScheduleError::RfactorInner { .. }), "{err}");
    assert!(err.to_string().contains("not constants"), "{err}");
}

#[test]
fn refuses_updates_of_an_element_chosen_by_the_loop() {
    // Over the rows, each iteration updates its own y[i_2]: not one element.
    let case = spmm(4, 4, 2, Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    sch.bound(&LoopRef::new("C", "k2_2"), 2).unwrap();
    let func = sch.func().unwrap().clone();
    let err = rfactor(&func, &LoopRef::new("C", "j_p"), &LoopRef::new("C", "k2_2")).unwrap_err();
    assert!(matches!(err, ScheduleError::NotAReduction { .. }), "{err}");
}

#[test]
fn refuses_a_loop_without_updates() {
    let case = spmm(4, 4, 2, Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    sch.bound(&LoopRef::new("C.init", "k2"), 2).unwrap();
    let func = sch.func().unwrap().clone();
    let err = rfactor(
        &func,
        &LoopRef::new("C.init", "i"),
        &LoopRef::new("C.init", "k2"),
    )
    .unwrap_err();
    assert!(matches!(err, ScheduleError::NotAReduction { .. }), "{err}");
}

#[test]
fn spmv_one_row_blocks_sum_across_the_row() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 900;
    for rows in ALL_ROWS {
        // Widths that are, and are not, multiples of the block width.
        for (m, n) in [(6, 11), (1, 3), (0, 2), (9, 8), (5, 17)] {
            seed += 1;
            let case = spmv_bsr(m, n, (1, 4), rows, seed);
            let mut sch = Schedule::new(&case.program);
            let partial = sch
                .rfactor(&LoopRef::new("y", "jo_p"), &LoopRef::new("y", "ji"))
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", case.label, sch.func().unwrap()));
            let text = sch.func().unwrap().to_string();
            // Zeroed once before the row's blocks, combined into y[io * 1 + 0] after.
            assert!(
                text.contains(&format!("for r in 0..4 {{\n        {partial}[r] = 0.0")),
                "{text}"
            );
            assert!(
                text.contains(&format!("y[io * 1 + 0] = y[io * 1 + 0] + {partial}[r2]")),
                "{text}"
            );
            sch.vectorize(&LoopRef::new("y", "ji")).unwrap();
            sch.parallel(&LoopRef::new("y", "io")).unwrap();
            check(&case, &sch, native.as_ref());
        }
    }
}

#[test]
fn spmv_blocks_of_several_rows_keep_a_row_of_partial_sums_per_block_row() {
    // `y[io * R + ii]` over `for ii in 0..R`: the block row's R elements, each with one
    // partial sum per column, combined under the padded row's guard.
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 950;
    for rows in ALL_ROWS {
        for (r, c) in [(2, 4), (3, 2), (8, 8)] {
            // Row and column counts that are, and are not, multiples of the block.
            for (m, n) in [(6, 11), (1, 3), (0, 2), (16, 16), (7, 17)] {
                seed += 1;
                let case = spmv_bsr(m, n, (r, c), rows, seed);
                let mut sch = Schedule::new(&case.program);
                let partial = sch
                    .rfactor(&LoopRef::new("y", "jo_p"), &LoopRef::new("y", "ji"))
                    .unwrap_or_else(|e| panic!("{}: {e}\n{}", case.label, sch.func().unwrap()));
                let text = sch.func().unwrap().to_string();
                // One row's partial sums side by side (the columns consecutive), each
                // row combined where it exists.
                assert!(
                    text.contains(&format!(
                        "{partial}[ii * {c} + ji] = {partial}[ii * {c} + ji] + "
                    )),
                    "{text}"
                );
                assert!(
                    text.contains(&format!(
                        "if io * {r} + c < m {{\n            y[io * {r} + c] = y[io * {r} + c] + {partial}[c * {c} + r2]"
                    )),
                    "{text}"
                );
                sch.vectorize(&LoopRef::new("y", "ji")).unwrap();
                sch.parallel(&LoopRef::new("y", "io")).unwrap();
                check(&case, &sch, native.as_ref());
            }
        }
    }
}

#[test]
fn refuses_a_block_row_element_that_is_not_offset_by_the_row() {
    // `y[io * 2 + ii * ii]` is not `base + ii`: the rows do not map one to one.
    let case = spmv_bsr(4, 8, (2, 4), Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    let func = sch.func_or_lower().unwrap().to_string();
    let text = func.replace("y[io * 2 + ii]", "y[io * 2 + ii * ii]");
    assert_ne!(text, func, "the test edits the update");
    let func: sparsile_ir::loops::Func = text.parse().unwrap();
    let err = rfactor(&func, &LoopRef::new("y", "jo_p"), &LoopRef::new("y", "ji")).unwrap_err();
    assert!(matches!(err, ScheduleError::NotAReduction { .. }), "{err}");
}
