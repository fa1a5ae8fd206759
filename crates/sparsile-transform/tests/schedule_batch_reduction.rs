//! `batch_reduction`: the before/after text files (`schedule/batch_reduction/X.before`
//! names the calls in its leading `# ` lines; `SPARSILE_BLESS=1` rewrites `X.after`), one
//! test per precondition (each rule of the batched shape), the verifier on a hand-written
//! `batched` loop that breaks it, the `Schedule` method with its trace step (JSON and
//! replay), and SDDMM with batched dot products against the interpreter through stage II,
//! stage III and native code (1 and 3 threads), on random rows, one huge row and an
//! empty matrix, for widths that fill whole vectors (8, 32: the groups are written) and
//! widths that do not (3, 17, 20: the plain loop is written), in f64 (groups of 4).

mod expected_text;
mod features;

use std::collections::HashMap;

use features::{check, dense, native_settings, sparse, Case, Rows, ALL_ROWS};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::loops::{verify, Func};
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::batch_reduction::batch_reduction;
use sparsile_transform::schedule::parallel::parallel;
use sparsile_transform::schedule::{LoopRef, Schedule, ScheduleError, Step, Trace};

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

fn sddmm(m: usize, n: usize, k: usize, rows: Rows, seed: u64) -> Case {
    sddmm_in("csr", m, n, k, rows, seed)
}

/// SDDMM with `A` and `C` in `fmt` on random operands.
fn sddmm_in(fmt: &str, m: usize, n: usize, k: usize, rows: Rows, seed: u64) -> Case {
    let text = format!(
        "tensor A: f64[m, n] {fmt}\ntensor X: f64[m, k]\ntensor Y: f64[n, k]\ntensor C: f64[m, n] {fmt}\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = sparse(m, n, rows, &mut rng);
    let x = dense(vec![m, k], &mut rng);
    let y = dense(vec![n, k], &mut rng);
    let format: Format = fmt.parse().unwrap();
    let tensor =
        |c: &sparsile_formats::CooTensor, f: &Format| SparseTensor::from_coo(c, f).unwrap();
    Case {
        program: sparsile::compile_notation(&text).unwrap(),
        inputs: HashMap::from([
            ("A".to_string(), tensor(&a, &format)),
            ("X".to_string(), tensor(&x, &Format::Dense)),
            ("Y".to_string(), tensor(&y, &Format::Dense)),
        ]),
        params: HashMap::from([
            ("m".to_string(), m as i64),
            ("n".to_string(), n as i64),
            ("k".to_string(), k as i64),
        ]),
        label: format!("sddmm {fmt} m={m} n={n} k={k} {rows:?} seed {seed}"),
    }
}

/// The schedule up to the vectorized dot product (what `rowwise` records before it).
fn dot_product(case: &Case, k: Option<usize>) -> Schedule {
    let mut sch = Schedule::new(&case.program);
    if let Some(k) = k {
        sch.specialize("k", k as i64).unwrap();
    }
    let nonzeros = at("C", "j_p_2");
    let reduction = at("C", "k2");
    sch.cache_write(&nonzeros, "C").unwrap();
    sch.absorb_init("C", "C").unwrap();
    sch.hoist_factor(&reduction).unwrap();
    sch.vectorize_reduction(&reduction, 1, false).unwrap();
    sch
}

#[test]
fn before_and_after_files() {
    let files = expected_text::before_files("batch_reduction");
    assert!(!files.is_empty());
    for file in files {
        let path = &file.path;
        let mut func = file.func;
        let before = func.to_string();
        for call in &file.calls {
            let words: Vec<&str> = call.split_whitespace().collect();
            assert_eq!(words[0], "batch_reduction", "{}", path.display());
            func = batch_reduction(&func, &at(words[1], words[2]))
                .unwrap_or_else(|e| panic!("{}: {call}: {e}", path.display()));
            verify(&func).unwrap_or_else(|e| panic!("{}: {e:?}\n{func}", path.display()));
        }
        let after = func.to_string();
        assert_ne!(after, before, "{}: nothing changed", path.display());
        assert!(after.contains(" batched {"), "{after}");
        expected_text::check_after(path, &after);
    }
}

#[test]
fn batched_dot_products_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 70;
    for rows in ALL_ROWS {
        for (m, n, k) in [
            (7, 5, 8),
            (13, 40, 32),
            (0, 3, 8),
            (9, 6, 3),
            (11, 30, 17),
            (6, 25, 20),
        ] {
            for parallel_rows in [false, true] {
                seed += 1;
                let case = sddmm(m, n, k, rows, seed);
                let mut sch = dot_product(&case, Some(k));
                if parallel_rows {
                    sch.parallel(&at("C", "i_2")).unwrap();
                }
                sch.batch_reduction(&at("C", "j_p_2"))
                    .unwrap_or_else(|e| panic!("{}: {e}", case.label));
                let text = sch.func().unwrap().to_string();
                assert!(text.contains(" batched {"), "{}\n{text}", case.label);
                check(&case, &sch, native.as_ref());
            }
        }
    }
}

#[test]
fn refuses_loops_without_the_batched_shape() {
    let case = sddmm(4, 4, 8, Rows::Random, 1);
    let func = lower_iterations(&case.program).unwrap();
    assert!(matches!(
        batch_reduction(&func, &at("C", "nope")),
        Err(ScheduleError::UnknownLoop {
            primitive: "batch_reduction",
            ..
        })
    ));
    let par = parallel(&func, &at("C", "i_2")).unwrap();
    assert!(matches!(
        batch_reduction(&par, &at("C", "i_2")),
        Err(ScheduleError::NotSerial {
            primitive: "batch_reduction",
            ..
        })
    ));
    // The dot product is a plain loop summing into the output: no reassociated loop.
    let e = batch_reduction(&func, &at("C", "j_p_2")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NotBatchable { reason, .. } if reason.contains("not `vectorized(reassociate)`")),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("batch_reduction: loop `j_p_2` in block `C`"),
        "{e}"
    );
    // The loop over rows holds the loop over non-zeros, which holds the reduction.
    let sch = dot_product(&case, Some(8));
    let e = batch_reduction(sch.func().unwrap(), &at("C", "i_2")).unwrap_err();
    assert!(matches!(&e, ScheduleError::NotBatchable { .. }), "{e:?}");
}

/// A flat function with one loop over `i` whose body is `pre; R; post`, to break one rule
/// at a time.
fn shaped(pre: &str, post: &str) -> Func {
    format!(
        "flat func f(m) {{\n  buffer x: f64[m * 8] input values\n  buffer y: f64[m] output values\n  \
         buffer z: f64[m] output values\n  buffer acc: f64[1] temp local\n  buffer t: f64[2] temp local\n  \
         block b {{\n  for i in 0..m {{\n{pre}    for k in 0..8 vectorized(reassociate) {{\n      acc[0] = acc[0] + x[i * 8 + k]\n    }}\n{post}  }}\n  }}\n}}\n"
    )
    .parse()
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn each_rule_of_the_shape_is_checked() {
    let ok = shaped(
        "    acc[0] = 0.0\n    t[0] = 1.0\n",
        "    y[i] = acc[0] * t[0]\n",
    );
    batch_reduction(&ok, &at("b", "i")).unwrap_or_else(|e| panic!("{e}"));
    let refused = [
        // A store to memory before the reduction.
        (
            shaped("    z[i] = 1.0\n", "    y[i] = acc[0]\n"),
            "not to a local buffer",
        ),
        // The accumulator read before the reduction.
        (
            shaped("    t[0] = acc[0]\n", "    y[i] = t[0]\n"),
            "read before the reduction",
        ),
        // A local store before the reduction that would not give the same value twice.
        (
            shaped("    t[0] = t[0] + 1.0\n", "    y[i] = acc[0]\n"),
            "same value when run again",
        ),
        // After the reduction, a store to what the part before it reads at another
        // element (here one that every iteration writes).
        (
            shaped("    let q: f64 = y[0]\n", "    y[i] = acc[0] + q\n"),
            "stored after the reduction",
        ),
        // A local loaded from an element that does not move with the loop.
        (
            shaped("    t[0] = y[0]\n", "    y[0] = acc[0] + t[0]\n"),
            "same value when run again",
        ),
        // A local loaded from the element another iteration writes.
        (
            shaped("    t[0] = y[i]\n", "    y[i + 1] = acc[0] + t[0]\n"),
            "same value when run again",
        ),
        // An own element read inside the reduction.
        (
            shaped("    t[0] = y[i]\n", "    y[i] = acc[0] + t[0] + y[i]\n")
                .to_string()
                .replace("x[i * 8 + k]", "x[i * 8 + k] * y[i]")
                .parse()
                .unwrap(),
            "same value when run again",
        ),
        // A second loop.
        (
            shaped("", "    for q in 0..2 {\n      y[i] = acc[0]\n    }\n"),
            "more than one loop",
        ),
    ];
    for (func, needle) in refused {
        let e = batch_reduction(&func, &at("b", "i")).unwrap_err();
        assert!(
            matches!(&e, ScheduleError::NotBatchable { reason, .. } if reason.contains(needle)),
            "{needle}: {e:?}\n{func}"
        );
        // The verifier refuses the same loop marked `batched` by hand.
        let marked: Func = func
            .to_string()
            .replace("for i in 0..m {", "for i in 0..m batched {")
            .parse()
            .unwrap();
        let errors = verify(&marked).unwrap_err();
        assert!(
            format!("{errors:?}").contains("a `batched` loop"),
            "{needle}: {errors:?}"
        );
    }
}

#[test]
fn an_element_loaded_before_and_stored_after_by_its_own_iteration_alone_is_allowed() {
    // `cache_write` of a block's output (BSR SDDMM): each iteration loads its own element
    // into a local before the reduction and stores it after; no other iteration touches
    // it, so running the part before the reduction again reads the same value.
    for (pre, post) in [
        (
            "    t[0] = y[i]\n",
            "    t[0] = t[0] + acc[0]\n    y[i] = t[0]\n",
        ),
        ("    let q: f64 = y[i]\n", "    y[i] = acc[0] + q\n"),
        (
            "    t[0] = y[2 * i + 1]\n",
            "    y[2 * i + 1] = t[0] * acc[0]\n",
        ),
    ] {
        let func = shaped(pre, post);
        batch_reduction(&func, &at("b", "i")).unwrap_or_else(|e| panic!("{pre}{post}: {e}"));
        let marked: Func = func
            .to_string()
            .replace("for i in 0..m {", "for i in 0..m batched {")
            .parse()
            .unwrap();
        verify(&marked).unwrap_or_else(|e| panic!("{pre}{post}: {e:?}"));
    }
}

/// BSR SDDMM: `cache_write` at the block's column loop (the output loaded into a local
/// before the dot product: BSR's init block has a guard, so it is not absorbed),
/// `hoist_factor`, `vectorize_reduction`, then the column loop batched.
#[test]
fn batched_block_columns_of_bsr_sddmm_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 300;
    for rows in ALL_ROWS {
        for (m, n, k, block) in [
            (16, 16, 8, (4, 4)),
            (13, 21, 32, (4, 8)),
            (9, 30, 16, (8, 8)),
            (0, 8, 8, (2, 2)),
            (10, 7, 20, (3, 5)),
        ] {
            for parallel_rows in [false, true] {
                seed += 1;
                let case = sddmm_in(&format!("bsr:{}x{}", block.0, block.1), m, n, k, rows, seed);
                let mut sch = Schedule::new(&case.program);
                sch.specialize("k", k as i64).unwrap();
                let func = sch.func_or_lower().unwrap().clone();
                let text = func.to_string();
                // The block's column loop: the loop around the reduction over `k`.
                let col = text
                    .lines()
                    .filter(|l| l.trim_start().starts_with("for ji"))
                    .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
                    .next_back()
                    .unwrap_or_else(|| panic!("{}: no block column loop\n{text}", case.label));
                let reduction = text
                    .lines()
                    .filter(|l| l.trim_start().starts_with("for k"))
                    .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
                    .next_back()
                    .unwrap();
                sch.cache_write(&at("C", &col), "C").unwrap();
                sch.hoist_factor(&at("C", &reduction)).unwrap();
                sch.vectorize_reduction(&at("C", &reduction), 1, false)
                    .unwrap();
                if parallel_rows {
                    sch.parallel(&at("C", "io_2")).unwrap();
                }
                sch.batch_reduction(&at("C", &col))
                    .unwrap_or_else(|e| panic!("{}: {e}\n{}", case.label, sch.func().unwrap()));
                let text = sch.func().unwrap().to_string();
                assert!(text.contains(" batched {"), "{}\n{text}", case.label);
                check(&case, &sch, native.as_ref());
            }
        }
    }
}

#[test]
fn the_step_round_trips_through_json_and_replays() {
    let case = sddmm(4, 4, 8, Rows::Random, 3);
    let mut sch = dot_product(&case, Some(8));
    // A failing call records nothing.
    let before = sch.trace().steps.len();
    assert!(sch.batch_reduction(&at("C", "i_2")).is_err());
    assert_eq!(sch.trace().steps.len(), before);
    sch.batch_reduction(&at("C", "j_p_2")).unwrap();
    let step = sch.trace().steps.last().unwrap().clone();
    assert_eq!(
        step,
        Step::BatchReduction {
            target: at("C", "j_p_2")
        }
    );
    let json = sch.trace().to_json();
    assert!(json.contains("\"step\": \"batch_reduction\""), "{json}");
    let replayed = Trace::from_json(&json)
        .unwrap()
        .replay(&case.program)
        .unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
}
