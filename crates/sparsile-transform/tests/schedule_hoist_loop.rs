//! `hoist_loop`: the before/after text files (`schedule/hoist_loop/X.before` names the
//! calls in its leading `# ` lines; `SPARSILE_BLESS=1` rewrites `X.after`), one test per
//! rule, the `Schedule` method with its trace step (JSON and replay), and SpMM with
//! column panels (`split` + `hoist_loop` above the rows, rows in parallel inside each
//! panel: one parallel phase per panel in C) against the interpreter through stage II,
//! stage III and native code (1 and 3 threads), on random rows, one huge row and an
//! empty matrix, with one and several panels.

mod expected_text;
mod features;

use std::collections::HashMap;

use features::{check, dense, native_settings, sparse, Case, Rows, ALL_ROWS};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::loops::verify;
use sparsile_transform::schedule::hoist_loop::hoist_loop;
use sparsile_transform::schedule::{LoopRef, Schedule, ScheduleError, SplitTail, Step, Trace};

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

fn spmm(m: usize, n: usize, k: usize, rows: Rows, seed: u64) -> Case {
    let text = "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = sparse(m, n, rows, &mut rng);
    let b = dense(vec![n, k], &mut rng);
    let tensor =
        |c: &sparsile_formats::CooTensor, f: &Format| SparseTensor::from_coo(c, f).unwrap();
    Case {
        program: sparsile::compile_notation(text).unwrap(),
        inputs: HashMap::from([
            ("A".to_string(), tensor(&a, &Format::Csr)),
            ("B".to_string(), tensor(&b, &Format::Dense)),
        ]),
        params: HashMap::from([
            ("m".to_string(), m as i64),
            ("n".to_string(), n as i64),
            ("k".to_string(), k as i64),
        ]),
        label: format!("spmm m={m} n={n} k={k} {rows:?} seed {seed}"),
    }
}

/// SpMM at width `k` with panels of `panel` columns above the rows.
fn panels(case: &Case, k: usize, panel: usize) -> Schedule {
    let mut sch = Schedule::new(&case.program);
    sch.specialize("k", k as i64).unwrap();
    let (outer, _) = sch
        .split(&at("C", "k2_2"), panel as i64, SplitTail::InnerFixed)
        .unwrap();
    sch.hoist_loop(&outer, &at("C", "i_2"))
        .unwrap_or_else(|e| panic!("{}: {e}", case.label));
    sch
}

#[test]
fn before_and_after_files() {
    let files = expected_text::before_files("hoist_loop");
    assert!(!files.is_empty());
    for file in files {
        let path = &file.path;
        let mut func = file.func;
        let before = func.to_string();
        for call in &file.calls {
            let words: Vec<&str> = call.split_whitespace().collect();
            assert_eq!(words[0], "hoist_loop", "{}", path.display());
            func = hoist_loop(&func, &at(words[1], words[2]), &at(words[1], words[3]))
                .unwrap_or_else(|e| panic!("{}: {call}: {e}", path.display()));
            verify(&func).unwrap_or_else(|e| panic!("{}: {e:?}\n{func}", path.display()));
        }
        let after = func.to_string();
        assert_ne!(after, before, "{}: nothing changed", path.display());
        expected_text::check_after(path, &after);
    }
}

#[test]
fn column_panels_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 90;
    for rows in ALL_ROWS {
        for (m, n, k, panel) in [
            (7, 5, 8, 4),
            (13, 30, 32, 8),
            (0, 3, 8, 2),
            (9, 6, 6, 3),
            (5, 9, 4, 4),
        ] {
            for (parallel_rows, vectorized) in [(false, false), (true, false), (true, true)] {
                seed += 1;
                let case = spmm(m, n, k, rows, seed);
                let mut sch = panels(&case, k, panel);
                if parallel_rows {
                    sch.parallel(&at("C", "i_2"))
                        .unwrap_or_else(|e| panic!("{}: {e}", case.label));
                    sch.parallel(&at("C.init", "i")).unwrap();
                }
                if vectorized {
                    sch.vectorize(&at("C", "k2_2_i"))
                        .unwrap_or_else(|e| panic!("{}: {e}", case.label));
                }
                let text = sch.func().unwrap().to_string();
                assert!(
                    text.contains("for k2_2_o in 0..")
                        && text.find("k2_2_o").unwrap() < text.find("for i_2").unwrap(),
                    "{}\n{text}",
                    case.label
                );
                check(&case, &sch, native.as_ref());
            }
        }
    }
}

#[test]
fn refuses_what_would_change_the_result() {
    let case = spmm(4, 4, 8, Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    sch.specialize("k", 8).unwrap();
    let err = |sch: &Schedule, target: &str, above: &str| {
        hoist_loop(sch.func().unwrap(), &at("C", target), &at("C", above)).unwrap_err()
    };
    let not = |e: &ScheduleError, needle: &str| {
        assert!(
            matches!(e, ScheduleError::NotHoistable { reason, .. } if reason.contains(needle)),
            "{needle}: {e:?}"
        );
    };
    sch.func_or_lower().unwrap();
    // Not split: every iteration of k2_2 writes its own column, but nothing proves it.
    not(&err(&sch, "k2_2", "i_2"), "has no index of the form");
    // The sparse loop's bounds are not constants.
    not(&err(&sch, "j_p", "i_2"), "bounds are not integer constants");
    // A loop above itself, and a loop not below `above`.
    not(&err(&sch, "i_2", "i_2"), "above itself");
    not(&err(&sch, "i_2", "j_p"), "not on the chain");
    assert!(matches!(
        hoist_loop(sch.func().unwrap(), &at("C", "nope"), &at("C", "i_2")),
        Err(ScheduleError::UnknownLoop {
            primitive: "hoist_loop",
            ..
        })
    ));
    // Split, the panel loop moves; SDDMM's dot product split the same way does not
    // (its output does not depend on k).
    let (outer, _) = sch
        .split(&at("C", "k2_2"), 4, SplitTail::InnerFixed)
        .unwrap();
    sch.hoist_loop(&outer, &at("C", "i_2")).unwrap();
    let sddmm = sparsile::compile_notation(
        "tensor A: f64[m, n] csr\ntensor X: f64[m, k]\ntensor Y: f64[n, k]\ntensor C: f64[m, n] csr\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n",
    )
    .unwrap();
    let mut s2 = Schedule::new(&sddmm);
    s2.specialize("k", 8).unwrap();
    let (outer, _) = s2.split(&at("C", "k2"), 4, SplitTail::InnerFixed).unwrap();
    let e = s2.hoist_loop(&outer, &at("C", "i_2")).unwrap_err();
    not(&e, "has no index of the form");
    assert!(
        e.to_string()
            .starts_with("hoist_loop: loop `k2_o` in block `C` cannot move above loop `i_2`"),
        "{e}"
    );
}

#[test]
fn the_step_round_trips_through_json_and_replays() {
    let case = spmm(4, 4, 8, Rows::Random, 3);
    let mut sch = Schedule::new(&case.program);
    sch.specialize("k", 8).unwrap();
    let (outer, _) = sch
        .split(&at("C", "k2_2"), 4, SplitTail::InnerFixed)
        .unwrap();
    let before = sch.trace().steps.len();
    assert!(sch.hoist_loop(&at("C", "k2_2_i"), &at("C", "i_2")).is_err());
    assert_eq!(sch.trace().steps.len(), before);
    sch.hoist_loop(&outer, &at("C", "i_2")).unwrap();
    assert_eq!(
        sch.trace().steps.last().unwrap(),
        &Step::HoistLoop {
            target: outer.clone(),
            above: at("C", "i_2")
        }
    );
    let json = sch.trace().to_json();
    assert!(json.contains("\"step\": \"hoist_loop\""), "{json}");
    let replayed = Trace::from_json(&json)
        .unwrap()
        .replay(&case.program)
        .unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
}

/// Found by the differential fuzzer: `parallel_reduce` on the row loop inside a panel
/// loop (which `parallel` accepts) panicked placing its merge loops; it is refused.
#[test]
fn parallel_reduce_refuses_a_loop_inside_a_panel_loop() {
    use sparsile_transform::schedule::ReductionStrategy;
    let case = spmm(4, 4, 8, Rows::Random, 4);
    let mut sch = panels(&case, 8, 4);
    sch.parallel(&at("C", "i_2")).unwrap();
    for strategy in [
        ReductionStrategy::Atomic,
        ReductionStrategy::PerThread { copies: 2 },
    ] {
        let e = sch.parallel_reduce(&at("C", "i_2"), strategy).unwrap_err();
        assert!(
            matches!(
                &e,
                ScheduleError::NotOutermostLoop {
                    primitive: "parallel_reduce",
                    ..
                }
            ),
            "{e:?}"
        );
    }
}
