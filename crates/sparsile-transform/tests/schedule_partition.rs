//! `parallel_with`: static, dynamic and balanced partitions of SpMV and SpMM row loops
//! match the interpreter (stage II, stage III, native with 1 and 3 threads) on matrices
//! with empty rows, one huge row, no entries, and sizes the chunk counts do not divide;
//! each precondition failure is its own error.

mod features;

use features::{check, native_settings, spmm, spmv, ALL_ROWS};
use sparsile_ir::loops::ForKind;
use sparsile_transform::schedule::partition::parallel_with;
use sparsile_transform::schedule::{LoopPartition, LoopRef, Schedule, ScheduleError};

const INDPTR: &str = "A_A_J_indptr";

fn partitions() -> [LoopPartition; 3] {
    [
        LoopPartition::Static,
        LoopPartition::Dynamic,
        LoopPartition::Balanced {
            indptr: INDPTR.to_string(),
        },
    ]
}

#[test]
fn partitions_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 0;
    for rows in ALL_ROWS {
        for (m, n, k) in [(7, 5, 3), (1, 4, 2), (13, 9, 1), (0, 3, 2)] {
            for partition in partitions() {
                seed += 1;
                for case in [spmv(m, n, rows, seed), spmm(m, n, k, rows, seed)] {
                    let mut sch = Schedule::new(&case.program);
                    let block = if case.label.starts_with("spmv") {
                        "y"
                    } else {
                        "C"
                    };
                    sch.parallel_with(&LoopRef::new(block, "i_2"), &partition)
                        .unwrap_or_else(|e| panic!("{}: {e}", case.label));
                    check(&case, &sch, native.as_ref());
                }
            }
        }
    }
}

#[test]
fn balanced_prints_and_parses() {
    let case = spmv(4, 4, features::Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    let rows = LoopRef::new("y", "i_2");
    sch.parallel_with(&rows, &partitions()[2]).unwrap();
    let text = sch.func().unwrap().to_string();
    assert!(
        text.contains("for i_2 in 0..m parallel(balanced A_A_J_indptr) {"),
        "{text}"
    );
    let parsed: sparsile_ir::loops::Func = text.parse().unwrap();
    assert_eq!(parsed.to_string(), text);
    sch.parallel_with(&rows, &LoopPartition::Dynamic).unwrap();
    let text = sch.func().unwrap().to_string();
    assert!(
        text.contains("for i_2 in 0..m parallel(dynamic) {"),
        "{text}"
    );
}

#[test]
fn balanced_needs_an_existing_buffer() {
    let case = spmv(4, 4, features::Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    let func = sch.func_or_lower().unwrap().clone();
    let err = parallel_with(
        &func,
        &LoopRef::new("y", "i_2"),
        &LoopPartition::Balanced {
            indptr: "nope".into(),
        },
    )
    .unwrap_err();
    assert!(
        matches!(err, ScheduleError::UnknownBuffer { ref buffer, .. } if buffer == "nope"),
        "{err}"
    );
}

#[test]
fn balanced_needs_an_integer_buffer() {
    let case = spmv(4, 4, features::Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    let func = sch.func_or_lower().unwrap().clone();
    let err = parallel_with(
        &func,
        &LoopRef::new("y", "i_2"),
        &LoopPartition::Balanced { indptr: "x".into() },
    )
    .unwrap_err();
    assert!(
        matches!(err, ScheduleError::PartitionBufferNotIndex { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("`x` is not one"), "{err}");
}

#[test]
fn balanced_needs_the_loop_to_read_the_indptr_at_its_variable() {
    // The init block's loop over rows does not read the indptr.
    let case = spmm(4, 4, 2, features::Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    let func = sch.func_or_lower().unwrap().clone();
    let err = parallel_with(
        &func,
        &LoopRef::new("C.init", "i"),
        &LoopPartition::Balanced {
            indptr: INDPTR.into(),
        },
    )
    .unwrap_err();
    assert!(
        matches!(err, ScheduleError::PartitionBufferNotRead { .. }),
        "{err}"
    );
}

#[test]
fn partitions_keep_the_parallel_preconditions() {
    let case = spmm(4, 4, 2, features::Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    let func = sch.func_or_lower().unwrap().clone();
    let err = parallel_with(&func, &LoopRef::new("C", "j_p"), &LoopPartition::Dynamic).unwrap_err();
    assert!(
        matches!(err, ScheduleError::NotOutermostLoop { .. }),
        "{err}"
    );
    let err =
        parallel_with(&func, &LoopRef::new("C", "nope"), &LoopPartition::Dynamic).unwrap_err();
    assert!(matches!(err, ScheduleError::UnknownLoop { .. }), "{err}");
    let ok = parallel_with(&func, &LoopRef::new("C", "i_2"), &LoopPartition::Dynamic).unwrap();
    let kinds: Vec<ForKind> = ok
        .body
        .iter()
        .filter_map(|s| match s {
            sparsile_ir::loops::Stmt::Block { body, .. } => match &body[0] {
                sparsile_ir::loops::Stmt::For(f) => Some(f.kind),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert!(kinds.contains(&ForKind::ParallelDynamic), "{kinds:?}");
}

#[test]
fn parallel_sees_through_the_let_split_leaves() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    for (seed, rows) in ALL_ROWS.into_iter().enumerate() {
        let case = spmm(10, 5, 3, rows, 40 + seed as u64);
        let mut sch = Schedule::new(&case.program);
        let (outer, _) = sch
            .split(
                &LoopRef::new("C", "i_2"),
                4,
                sparsile_transform::schedule::SplitTail::InnerFixed,
            )
            .unwrap();
        // `let i_2 = i_2_o * 4 + i_2_i` opens the body: the rows of one outer iteration
        // are its own.
        sch.parallel_with(&outer, &LoopPartition::Dynamic)
            .unwrap_or_else(|e| panic!("{e}\n{}", sch.func().unwrap()));
        check(&case, &sch, native.as_ref());
    }
}

#[test]
fn reorder_refuses_loops_with_a_kind() {
    let case = spmm(4, 4, 2, features::Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    sch.parallel_with(&LoopRef::new("C.init", "i"), &LoopPartition::Dynamic)
        .unwrap();
    let err = sch
        .reorder(&[LoopRef::new("C.init", "k2"), LoopRef::new("C.init", "i")])
        .unwrap_err();
    assert!(matches!(err, ScheduleError::NotSerial { .. }), "{err}");
}
