//! `cache_write`: SpMM and SpMV rows accumulated in a local array match the interpreter
//! (stage II, stage III, native with 1 and 3 threads), alone and combined with `bound`,
//! balanced `parallel_with` and `vectorize`, on matrices with empty rows, one huge row,
//! no entries, and widths the bound does not equal; SpMM over `bsr:1xC` caches the row of
//! a one-row block (its block-row loop runs once); each precondition failure is its own
//! error; the text IR before/after is in `tests/schedule/cache_write/`.

mod features;

use features::{check, native_settings, spmm, spmm_bsr, spmv, Rows, ALL_ROWS};
use sparsile_ir::loops::BufferKind;
use sparsile_transform::schedule::cache_write::cache_write;
use sparsile_transform::schedule::{LoopPartition, LoopRef, Schedule, ScheduleError};

fn balanced() -> LoopPartition {
    LoopPartition::Balanced {
        indptr: "A_A_J_indptr".to_string(),
    }
}

#[test]
fn spmm_cached_rows_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 100;
    for rows in ALL_ROWS {
        for (m, n, k, extent) in [(7, 5, 3, 4), (1, 4, 2, 2), (9, 6, 5, 8), (0, 3, 2, 2)] {
            seed += 1;
            let case = spmm(m, n, k, rows, seed);
            let mut sch = Schedule::new(&case.program);
            let kloop = LoopRef::new("C", "k2_2");
            sch.bound(&kloop, extent).unwrap();
            let local = sch.cache_write(&LoopRef::new("C", "i_2"), "C").unwrap();
            assert_eq!(local, "C_local");
            sch.parallel_with(&LoopRef::new("C", "i_2"), &balanced())
                .unwrap_or_else(|e| panic!("{}: {e}", case.label));
            sch.vectorize(&kloop).unwrap();
            sch.vectorize(&LoopRef::new("C", "C_in1")).unwrap();
            sch.vectorize(&LoopRef::new("C", "C_out1")).unwrap();
            check(&case, &sch, native.as_ref());
        }
    }
}

#[test]
fn spmm_over_one_row_blocks_caches_the_row() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 300;
    for rows in ALL_ROWS {
        for (m, n, k) in [(7, 9, 3), (1, 4, 2), (0, 3, 2), (6, 8, 5)] {
            seed += 1;
            let case = spmm_bsr(m, n, k, (1, 4), rows, seed);
            let mut sch = Schedule::new(&case.program);
            let kloop = LoopRef::new("C", "k2_2");
            sch.bound(&kloop, 8).unwrap();
            let local = sch
                .cache_write(&LoopRef::new("C", "io"), "C")
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", case.label, sch.func().unwrap()));
            let text = sch.func().unwrap().to_string();
            // The row `io * 1 + ii` of the one-row block is read in and written back once.
            assert!(
                text.contains(&format!("{local}[C_in1] = C[io * 1 + 0, C_in1]")),
                "{text}"
            );
            assert!(
                text.contains(&format!("C[io * 1 + 0, C_out1] = {local}[C_out1]")),
                "{text}"
            );
            sch.parallel(&LoopRef::new("C", "io")).unwrap();
            sch.vectorize(&kloop).unwrap();
            check(&case, &sch, native.as_ref());
        }
    }
}

#[test]
fn refuses_the_rows_of_a_block_of_several_rows() {
    let case = spmm_bsr(4, 8, 2, (2, 4), Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    sch.bound(&LoopRef::new("C", "k2_2"), 2).unwrap();
    let e = sch.cache_write(&LoopRef::new("C", "io"), "C").unwrap_err();
    assert!(matches!(e, ScheduleError::CacheAccess(_)), "{e}");
}

#[test]
fn spmv_cached_row_is_a_one_element_local() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    for (seed, rows) in ALL_ROWS.into_iter().enumerate() {
        let case = spmv(6, 5, rows, seed as u64);
        let mut sch = Schedule::new(&case.program);
        sch.cache_write(&LoopRef::new("y", "i_2"), "y").unwrap();
        sch.parallel_with(&LoopRef::new("y", "i_2"), &LoopPartition::Dynamic)
            .unwrap();
        let func = sch.func().unwrap();
        let local = func
            .buffers
            .values()
            .find(|b| b.kind == BufferKind::Local)
            .unwrap();
        assert_eq!(
            local.layout,
            sparsile_ir::loops::BufferLayout::Flat(sparsile_ir::loops::Expr::Int(1))
        );
        check(&case, &sch, native.as_ref());
    }
}

fn lowered_spmm() -> sparsile_ir::loops::Func {
    let case = spmm(4, 4, 2, Rows::Random, 1);
    sparsile_transform::lower_iterations(&case.program).unwrap()
}

#[test]
fn refuses_an_unknown_buffer() {
    let err = cache_write(&lowered_spmm(), &LoopRef::new("C", "i_2"), "Z").unwrap_err();
    assert!(matches!(err, ScheduleError::UnknownBuffer { .. }), "{err}");
}

#[test]
fn refuses_a_buffer_the_loop_does_not_write() {
    let err = cache_write(&lowered_spmm(), &LoopRef::new("C", "i_2"), "B").unwrap_err();
    assert!(matches!(err, ScheduleError::CacheBuffer { .. }), "{err}");
    assert!(err.to_string().contains("does not store to it"), "{err}");
}

#[test]
fn refuses_an_unbounded_cached_dimension() {
    // Without `bound`, the k loop runs to the parameter `k`.
    let err = cache_write(&lowered_spmm(), &LoopRef::new("C", "i_2"), "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::CacheAccess(a) if a.dim == 1),
        "{err}"
    );
    assert!(err.to_string().contains("no constant bounds"), "{err}");
}

#[test]
fn refuses_an_index_that_varies_inside_the_iteration_over_a_sparse_axis() {
    // Caching C under the position loop: the row index is fixed but C[i_2, k] varies
    // with k2_2 (unbounded); caching A's row is refused since it is not written.
    let func = lowered_spmm();
    let err = cache_write(&func, &LoopRef::new("C", "j_p"), "C").unwrap_err();
    assert!(matches!(err, ScheduleError::CacheAccess(_)), "{err}");
}

#[test]
fn refuses_too_large_a_local() {
    let func = sparsile_transform::schedule::bound::bound(
        &lowered_spmm(),
        &LoopRef::new("C", "k2_2"),
        1 << 20,
    )
    .unwrap();
    let err = cache_write(&func, &LoopRef::new("C", "i_2"), "C").unwrap_err();
    assert!(matches!(err, ScheduleError::CacheTooLarge { .. }), "{err}");
}

#[test]
fn refuses_an_unknown_loop() {
    let err = cache_write(&lowered_spmm(), &LoopRef::new("C", "q"), "C").unwrap_err();
    assert!(matches!(err, ScheduleError::UnknownLoop { .. }), "{err}");
}
