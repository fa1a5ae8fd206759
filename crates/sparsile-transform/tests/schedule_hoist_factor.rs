//! `hoist_factor`: the before/after text files (`schedule/hoist_factor/X.before` names the
//! calls in its leading `# ` lines; `SPARSILE_BLESS=1` rewrites `X.after`), one test per
//! precondition error, the `Schedule` method with its trace step (JSON and replay), and
//! SDDMM with the sparse value hoisted out of the dot product — after `cache_write` and
//! `absorb_init` on its sparse output, with and without `vectorize_reduction` — against
//! the interpreter through stage II, stage III and native code (1 and 3 threads), on
//! random rows, one huge row and an empty matrix, with the dense operand laid out both
//! ways (`Y[j, k]`, read contiguously in `k`, and `Y[k, j]`).

mod expected_text;
mod features;

use std::collections::HashMap;

use features::{check, dense, native_settings, sparse, Case, Rows, ALL_ROWS};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::loops::verify;
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::hoist_factor::hoist_factor;
use sparsile_transform::schedule::parallel::parallel;
use sparsile_transform::schedule::{LoopRef, Schedule, ScheduleError, Step, Trace};

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

/// SDDMM with `Y` of shape n×k (`transposed`: k×n).
fn sddmm(m: usize, n: usize, k: usize, rows: Rows, transposed: bool, seed: u64) -> Case {
    let (decl, access) = if transposed {
        ("tensor Y: f64[k, n]", "Y[k,j]")
    } else {
        ("tensor Y: f64[n, k]", "Y[j,k]")
    };
    let text = format!(
        "tensor A: f64[m, n] csr\ntensor X: f64[m, k]\n{decl}\ntensor C: f64[m, n] csr\nC[i,j] = A[i,j] * X[i,k] * {access}\n"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = sparse(m, n, rows, &mut rng);
    let x = dense(vec![m, k], &mut rng);
    let y = dense(if transposed { vec![k, n] } else { vec![n, k] }, &mut rng);
    let tensor =
        |c: &sparsile_formats::CooTensor, f: &Format| SparseTensor::from_coo(c, f).unwrap();
    Case {
        program: sparsile::compile_notation(&text).unwrap(),
        inputs: HashMap::from([
            ("A".to_string(), tensor(&a, &Format::Csr)),
            ("X".to_string(), tensor(&x, &Format::Dense)),
            ("Y".to_string(), tensor(&y, &Format::Dense)),
        ]),
        params: HashMap::from([
            ("m".to_string(), m as i64),
            ("n".to_string(), n as i64),
            ("k".to_string(), k as i64),
        ]),
        label: format!("sddmm m={m} n={n} k={k} {rows:?} transposed={transposed} seed {seed}"),
    }
}

#[test]
fn before_and_after_files() {
    let files = expected_text::before_files("hoist_factor");
    assert!(!files.is_empty());
    for file in files {
        let path = &file.path;
        let mut func = file.func;
        let before = func.to_string();
        for call in &file.calls {
            let words: Vec<&str> = call.split_whitespace().collect();
            assert_eq!(words[0], "hoist_factor", "{}", path.display());
            func = hoist_factor(&func, &at(words[1], words[2]))
                .unwrap_or_else(|e| panic!("{}: {call}: {e}", path.display()));
            verify(&func).unwrap_or_else(|e| panic!("{}: {e:?}\n{func}", path.display()));
        }
        let after = func.to_string();
        assert_ne!(after, before, "{}: nothing changed", path.display());
        expected_text::check_after(path, &after);
    }
}

#[test]
fn sddmm_with_the_value_hoisted_matches_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 40;
    for rows in ALL_ROWS {
        for (m, n, k) in [(7, 5, 3), (9, 6, 17), (0, 3, 2), (5, 40, 32)] {
            for transposed in [false, true] {
                for vectorized in [false, true] {
                    seed += 1;
                    let case = sddmm(m, n, k, rows, transposed, seed);
                    let mut sch = Schedule::new(&case.program);
                    sch.specialize("k", k as i64).unwrap();
                    let nonzeros = at("C", "j_p_2");
                    let reduction = at("C", "k2");
                    sch.parallel(&at("C", "i_2")).unwrap();
                    sch.cache_write(&nonzeros, "C").unwrap();
                    sch.absorb_init("C", "C")
                        .unwrap_or_else(|e| panic!("{}: {e}", case.label));
                    sch.hoist_factor(&reduction)
                        .unwrap_or_else(|e| panic!("{}: {e}", case.label));
                    if vectorized {
                        sch.vectorize_reduction(&reduction, 1, false).unwrap();
                    }
                    let text = sch.func().unwrap().to_string();
                    assert!(!text.contains("block C.init"), "{text}");
                    assert!(
                        text.contains("C_local[0] = C_local[0] + A[i_2, j_p_2] * C_local_sum[0]"),
                        "{text}"
                    );
                    check(&case, &sch, native.as_ref());
                }
            }
        }
    }
}

#[test]
fn refuses_a_loop_with_nothing_to_hoist() {
    let case = sddmm(4, 4, 2, Rows::Random, false, 1);
    let mut sch = Schedule::new(&case.program);
    sch.cache_write(&at("C", "j_p_2"), "C").unwrap();
    sch.hoist_factor(&at("C", "k2")).unwrap();
    // Hoisted once, the product left is `X * Y`: both vary with `k2`.
    let e = sch.hoist_factor(&at("C", "k2")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::HoistNothing { var, block, .. } if var == "k2" && block == "C"),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("hoist_factor: loop `k2`"), "{e}");
    // SpMV's row sum: `A[i, jp] * x[j]` both vary with the non-zero.
    let spmv = sparsile::compile_notation(
        "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
    )
    .unwrap();
    let mut sch = Schedule::new(&spmv);
    sch.cache_write(&at("y", "i_2"), "y").unwrap();
    assert!(matches!(
        sch.hoist_factor(&at("y", "j_p")),
        Err(ScheduleError::HoistNothing { .. })
    ));
}

#[test]
fn refuses_unknown_parallel_and_unreassociable_loops() {
    let case = sddmm(4, 4, 2, Rows::Random, false, 2);
    let func = lower_iterations(&case.program).unwrap();
    assert!(matches!(
        hoist_factor(&func, &at("C", "nope")),
        Err(ScheduleError::UnknownLoop {
            primitive: "hoist_factor",
            ..
        })
    ));
    let par = parallel(&func, &at("C", "i_2")).unwrap();
    assert!(matches!(
        hoist_factor(&par, &at("C", "i_2")),
        Err(ScheduleError::NotSerial {
            primitive: "hoist_factor",
            ..
        })
    ));
    // Without cache_write the sum goes into the output in memory, which another
    // iteration of the loop around reads: not a local reduction.
    let e = hoist_factor(&func, &at("C", "k2")).unwrap_err();
    assert!(matches!(&e, ScheduleError::NotReassociable { .. }), "{e:?}");
}

#[test]
fn the_step_round_trips_through_json_and_replays() {
    let case = sddmm(4, 4, 2, Rows::Random, false, 3);
    let mut sch = Schedule::new(&case.program);
    sch.cache_write(&at("C", "j_p_2"), "C").unwrap();
    // A failing call records nothing.
    assert!(sch.hoist_factor(&at("C", "i_2")).is_err());
    sch.hoist_factor(&at("C", "k2")).unwrap();
    let step = sch.trace().steps.last().unwrap().clone();
    assert_eq!(
        step,
        Step::HoistFactor {
            target: at("C", "k2")
        }
    );
    let json = sch.trace().to_json();
    assert!(json.contains("\"step\": \"hoist_factor\""), "{json}");
    let replayed = Trace::from_json(&json)
        .unwrap()
        .replay(&case.program)
        .unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
}
