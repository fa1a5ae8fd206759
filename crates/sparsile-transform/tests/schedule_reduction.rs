//! `parallel_reduce`: element-balanced SpMV and SpMM (one parallel loop over the
//! non-zeros after `sparse_fuse`, whose iterations add into the same rows) with atomic
//! adds and with per-thread copies match the interpreter (stage II, stage III, native
//! with 1 and 3 threads) on matrices with empty rows, one huge row and no entries; each
//! precondition failure is its own error.

mod features;

use features::{check, native_settings, spmm, spmv, Case, Rows, ALL_ROWS};
use sparsile_ir::loops::{Func, Stmt};
use sparsile_transform::schedule::reduction::parallel_reduce;
use sparsile_transform::schedule::{LoopRef, ReductionStrategy, Schedule, ScheduleError};

/// The outermost loop of `block`.
fn outer(func: &Func, block: &str) -> LoopRef {
    for s in &func.body {
        if let Stmt::Block { name, body, .. } = s {
            if name == block {
                if let Some(Stmt::For(f)) = body.first() {
                    return LoopRef::new(block, func.vars[f.var].name.clone());
                }
            }
        }
    }
    panic!("no loop in block {block}\n{func}")
}

/// The schedule of `case` with its rows and non-zeros fused into one loop.
fn fused(case: &Case, block: &str) -> (Schedule, LoopRef) {
    let mut sch = Schedule::new(&case.program);
    sch.sparse_fuse(block, &["I_m".to_string(), "A_J".to_string()])
        .unwrap_or_else(|e| panic!("{e}"));
    let func = sch.func_or_lower().unwrap().clone();
    let target = outer(&func, block);
    (sch, target)
}

#[test]
fn element_balanced_kernels_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 300;
    let strategies = [
        ReductionStrategy::Atomic,
        ReductionStrategy::PerThread { copies: 3 },
        ReductionStrategy::PerThread { copies: 1 },
    ];
    for rows in ALL_ROWS {
        for (m, n, k) in [(7, 5, 3), (1, 4, 2), (0, 3, 2)] {
            for strategy in strategies {
                seed += 1;
                for (case, block) in [
                    (spmv(m, n, rows, seed), "y"),
                    (spmm(m, n, k, rows, seed), "C"),
                ] {
                    let (mut sch, target) = fused(&case, block);
                    sch.parallel_reduce(&target, strategy)
                        .unwrap_or_else(|e| panic!("{}: {e}\n{}", case.label, sch.func().unwrap()));
                    check(&case, &sch, native.as_ref());
                }
            }
        }
    }
}

#[test]
fn atomic_adds_print_and_parse() {
    let case = spmv(4, 4, Rows::Random, 1);
    let (mut sch, target) = fused(&case, "y");
    sch.parallel_reduce(&target, ReductionStrategy::Atomic)
        .unwrap();
    let text = sch.func().unwrap().to_string();
    assert!(text.contains("atomic y["), "{text}");
    let parsed: Func = text.parse().unwrap();
    assert_eq!(parsed.to_string(), text);
}

#[test]
fn owner_computes_loops_need_no_strategy_but_accept_one() {
    let case = spmv(4, 4, Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    sch.parallel_reduce(&LoopRef::new("y", "i_2"), ReductionStrategy::Atomic)
        .unwrap();
    assert!(!sch.func().unwrap().to_string().contains("atomic"));
}

#[test]
fn refuses_zero_copies() {
    let case = spmv(4, 4, Rows::Random, 1);
    let (mut sch, target) = fused(&case, "y");
    let func = sch.func_or_lower().unwrap().clone();
    let err =
        parallel_reduce(&func, &target, ReductionStrategy::PerThread { copies: 0 }).unwrap_err();
    assert!(
        matches!(err, ScheduleError::BadFactor { factor: 0, .. }),
        "{err}"
    );
}

#[test]
fn refuses_a_shared_buffer_that_is_not_a_sum() {
    let text = "pos func f(n) {
  buffer y: f64[4] output values
  for i in 0..n {
    y[i % 4] = 1.0
  }
}
";
    let func: Func = text.parse().unwrap();
    let err = parallel_reduce(&func, &LoopRef::new("", "i"), ReductionStrategy::Atomic);
    // Loops outside blocks cannot be named; put it in one.
    assert!(err.is_err());
    let text = "pos func f(n) {
  buffer y: f64[4] output values
  block b {
    for i in 0..n {
      y[i % 4] = y[i % 4] * 2.0
    }
  }
}
";
    let func: Func = text.parse().unwrap();
    let err =
        parallel_reduce(&func, &LoopRef::new("b", "i"), ReductionStrategy::Atomic).unwrap_err();
    assert!(matches!(err, ScheduleError::NotAReduction { .. }), "{err}");
}

#[test]
fn refuses_a_sum_that_is_also_read() {
    let text = "pos func f(n) {
  buffer y: f64[4] output values
  buffer z: f64[n] output values
  block b {
    for i in 0..n {
      y[i % 4] = y[i % 4] + 1.0
      z[i] = y[0]
    }
  }
}
";
    let func: Func = text.parse().unwrap();
    let err =
        parallel_reduce(&func, &LoopRef::new("b", "i"), ReductionStrategy::Atomic).unwrap_err();
    assert!(matches!(err, ScheduleError::NotAReduction { .. }), "{err}");
    assert!(
        err.to_string().contains("outside its `+=` updates"),
        "{err}"
    );
}

#[test]
fn refuses_an_inner_loop() {
    let case = spmm(4, 4, 2, Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    let func = sch.func_or_lower().unwrap().clone();
    let err =
        parallel_reduce(&func, &LoopRef::new("C", "j_p"), ReductionStrategy::Atomic).unwrap_err();
    assert!(
        matches!(err, ScheduleError::NotOutermostLoop { .. }),
        "{err}"
    );
}
