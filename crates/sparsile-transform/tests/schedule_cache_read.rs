//! `cache_read`: SDDMM with the row `X[i, 0..K]` staged in a local array once per row
//! (and SpMM with `B`'s row staged under the position loop) match the interpreter (stage
//! II, stage III, native with 1 and 3 threads) on matrices with empty rows, one huge
//! row and no entries, with bounds above the width; each precondition failure is its own
//! error.

mod features;

use features::{check, loops_to, native_settings, sddmm, spmm, Rows, ALL_ROWS};
use sparsile_transform::schedule::cache_read::cache_read;
use sparsile_transform::schedule::{LoopRef, Schedule, ScheduleError};

#[test]
fn sddmm_staged_rows_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 500;
    for rows in ALL_ROWS {
        for (m, n, k, extent) in [(6, 5, 3, 4), (1, 3, 2, 2), (0, 3, 2, 3)] {
            seed += 1;
            let case = sddmm(m, n, k, rows, seed);
            let mut sch = Schedule::new(&case.program);
            let func = sch.func_or_lower().unwrap().clone();
            let kloops = loops_to(&func, "C", "k");
            assert_eq!(kloops.len(), 1, "{func}");
            sch.bound(&LoopRef::new("C", kloops[0].clone()), extent)
                .unwrap();
            let local = sch
                .cache_read(&LoopRef::new("C", "i_2"), "X")
                .unwrap_or_else(|e| panic!("{e}\n{}", sch.func().unwrap()));
            assert_eq!(local, "X_local");
            sch.parallel(&LoopRef::new("C", "i_2")).unwrap();
            check(&case, &sch, native.as_ref());
        }
    }
}

#[test]
fn spmm_staged_b_rows_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    for (seed, rows) in ALL_ROWS.into_iter().enumerate() {
        let case = spmm(5, 4, 3, rows, 600 + seed as u64);
        let mut sch = Schedule::new(&case.program);
        sch.bound(&LoopRef::new("C", "k2_2"), 4).unwrap();
        // Under the position loop, `B[j, k2_2]` has `j` from the `let` that opens it.
        sch.cache_read(&LoopRef::new("C", "j_p"), "B")
            .unwrap_or_else(|e| panic!("{e}\n{}", sch.func().unwrap()));
        check(&case, &sch, native.as_ref());
    }
}

fn lowered_spmm() -> sparsile_ir::loops::Func {
    let case = spmm(4, 4, 2, Rows::Random, 1);
    sparsile_transform::lower_iterations(&case.program).unwrap()
}

#[test]
fn refuses_a_buffer_the_loop_writes() {
    let err = cache_read(&lowered_spmm(), &LoopRef::new("C", "i_2"), "C").unwrap_err();
    assert!(matches!(err, ScheduleError::CacheBuffer { .. }), "{err}");
    assert!(err.to_string().contains("use cache_write"), "{err}");
}

#[test]
fn refuses_a_buffer_the_loop_does_not_read() {
    let err = cache_read(&lowered_spmm(), &LoopRef::new("C.init", "i"), "B").unwrap_err();
    assert!(matches!(err, ScheduleError::CacheBuffer { .. }), "{err}");
    assert!(err.to_string().contains("does not read it"), "{err}");
}

#[test]
fn refuses_an_index_read_from_memory() {
    // Under the row loop, B's row index `j` changes with the position loop.
    let func =
        sparsile_transform::schedule::bound::bound(&lowered_spmm(), &LoopRef::new("C", "k2_2"), 2)
            .unwrap();
    let err = cache_read(&func, &LoopRef::new("C", "i_2"), "B").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::CacheAccess(a) if a.dim == 0),
        "{err}"
    );
}

#[test]
fn refuses_an_unknown_buffer() {
    let err = cache_read(&lowered_spmm(), &LoopRef::new("C", "i_2"), "Q").unwrap_err();
    assert!(matches!(err, ScheduleError::UnknownBuffer { .. }), "{err}");
}
