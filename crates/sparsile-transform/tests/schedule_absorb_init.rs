//! `absorb_init`: SpMM (widths 1 to 32) and SpMV rows cached with `cache_write` and
//! started at the init constant match the interpreter (stage II, stage III, native with
//! 1 and 3 threads) on matrices with empty rows, one huge row and no entries, and their
//! traces replay; with an init constant other than zero, rows with no entries must
//! still be stored, checked against the unabsorbed function; each precondition failure
//! is its own error; the text IR before/after is in `tests/schedule/absorb_init/`
//! (`SPARSILE_BLESS=1` rewrites the `.after` files).

mod expected_text;

mod features;

use std::collections::HashMap;
use std::path::Path;

use features::{check, dense, native_settings, sparse, spmm, spmv, Rows, ALL_ROWS};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::loops::{verify, Expr, Func, Stmt};
use sparsile_runtime::{CompiledKernel, InterpOptions, KernelOptions};
use sparsile_transform::schedule::absorb_init::absorb_init;
use sparsile_transform::schedule::bound::bound;
use sparsile_transform::schedule::cache_write::cache_write;
use sparsile_transform::schedule::partition::parallel_with;
use sparsile_transform::schedule::vectorize::vectorize;
use sparsile_transform::schedule::{LoopPartition, LoopRef, Schedule, ScheduleError, Step, Trace};

fn balanced() -> LoopPartition {
    LoopPartition::Balanced {
        indptr: "A_A_J_indptr".to_string(),
    }
}

#[test]
fn spmm_rows_started_at_zero_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 900;
    for rows in ALL_ROWS {
        for (m, n, k) in [(7, 5, 3), (1, 4, 1), (9, 6, 5), (0, 3, 2), (6, 4, 32)] {
            seed += 1;
            let case = spmm(m, n, k, rows, seed);
            let mut sch = Schedule::new(&case.program);
            sch.specialize("k", k as i64).unwrap();
            let i = LoopRef::new("C", "i_2");
            sch.cache_write(&i, "C").unwrap();
            sch.absorb_init("C", "C")
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", case.label, sch.func().unwrap()));
            sch.parallel_with(&i, &balanced()).unwrap();
            sch.vectorize(&LoopRef::new("C", "k2_2")).unwrap();
            let text = sch.func().unwrap().to_string();
            assert!(!text.contains("block C.init"), "{text}");
            assert!(text.contains("C_local[C_in1] = 0.0"), "{text}");
            check(&case, &sch, native.as_ref());
        }
    }
}

#[test]
fn spmv_row_started_at_zero_matches_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    for (seed, rows) in ALL_ROWS.into_iter().enumerate() {
        for (m, n) in [(6, 5), (1, 1), (0, 3)] {
            let case = spmv(m, n, rows, 950 + seed as u64);
            let mut sch = Schedule::new(&case.program);
            let i = LoopRef::new("y", "i_2");
            sch.cache_write(&i, "y").unwrap();
            sch.absorb_init("y", "y").unwrap();
            sch.parallel_with(&i, &LoopPartition::Dynamic).unwrap();
            let text = sch.func().unwrap().to_string();
            assert!(text.contains("y_local[0] = 0.0"), "{text}");
            assert!(!text.contains("block y.init"), "{text}");
            check(&case, &sch, native.as_ref());
        }
    }
}

const SPMM4: &str =
    "tensor A: f64[m, n] csr\ntensor B: f64[n, 4]\ntensor C: f64[m, 4]\nC[i,k] = A[i,j] * B[j,k]\n";

/// `func` with every store of the init block `block` writing `value` instead.
fn with_init_constant(func: &Func, block: &str, value: f64) -> Func {
    let mut out = func.clone();
    for s in &mut out.body {
        if let Stmt::Block { name, body, .. } = s {
            if name == block {
                *body = Stmt::map_leaves(body, &mut |leaf| match leaf {
                    Stmt::Store {
                        buffer,
                        indices,
                        span,
                        ..
                    } => Some(Stmt::Store {
                        buffer: *buffer,
                        indices: indices.clone(),
                        value: Expr::Float(value),
                        span: *span,
                    }),
                    _ => None,
                });
            }
        }
    }
    out
}

/// With an init constant of 1.5, every element of the output, rows without entries
/// included, must be stored by the absorbed function: outputs start at zero, so a row
/// the new function skipped would differ from the unabsorbed one.
#[test]
fn a_nonzero_init_constant_is_stored_for_empty_rows() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let program = sparsile::compile_notation(SPMM4).unwrap();
    let lowered = sparsile_transform::lower_iterations(&program).unwrap();
    let before = with_init_constant(&lowered, "C.init", 1.5);
    let (before, _) = cache_write(&before, &LoopRef::new("C", "i_2"), "C").unwrap();
    let after = absorb_init(&before, "C", "C").unwrap();
    verify(&after).unwrap();
    assert!(
        after.to_string().contains("C_local[C_in1] = 1.5"),
        "{after}"
    );
    for (seed, rows) in ALL_ROWS.into_iter().enumerate() {
        for (m, n) in [(7, 5), (3, 1), (0, 2)] {
            let mut rng = ChaCha8Rng::seed_from_u64(990 + seed as u64);
            let a = sparse(m, n, rows, &mut rng);
            let b = dense(vec![n, 4], &mut rng);
            let inputs = HashMap::from([
                (
                    "A".to_string(),
                    SparseTensor::from_coo(&a, &Format::Csr).unwrap(),
                ),
                (
                    "B".to_string(),
                    SparseTensor::from_coo(&b, &Format::Dense).unwrap(),
                ),
            ]);
            let params = HashMap::from([("m".to_string(), m as i64), ("n".to_string(), n as i64)]);
            let options = InterpOptions {
                params: params.clone(),
                ..InterpOptions::default()
            };
            let run = |f: &Func| {
                sparsile_runtime::flat_interp::run(f, &program, &inputs, &options)
                    .unwrap_or_else(|e| panic!("{e}\n{f}"))["C"]
                    .values
                    .to_f64_vec()
            };
            let want = run(&before);
            if rows == Rows::Empty {
                assert!(want.iter().all(|v| *v == 1.5), "{want:?}");
            }
            let stage3 = sparsile_transform::lower_buffers(&after).unwrap();
            assert_eq!(run(&after), want, "stage II, {rows:?} {m}x{n}");
            assert_eq!(run(&stage3), want, "stage III, {rows:?} {m}x{n}");
            let Some(settings) = native.as_ref() else {
                continue;
            };
            let source = sparsile_codegen::emit_c(&stage3).unwrap();
            let kernel =
                CompiledKernel::build(program.clone(), stage3.clone(), source.code, settings)
                    .unwrap();
            for threads in [1, 3] {
                let got = kernel
                    .run(
                        &inputs,
                        &KernelOptions {
                            params: params.clone(),
                            threads: Some(threads),
                            parallelism: sparsile_runtime::jit::Parallelism::Always,
                            ..KernelOptions::default()
                        },
                    )
                    .unwrap();
                assert_eq!(
                    got["C"].values.to_f64_vec(),
                    want,
                    "native, {threads} threads"
                );
            }
        }
    }
}

#[test]
fn the_step_round_trips_through_json_and_replays() {
    let case = spmv(5, 4, Rows::Random, 3);
    let mut sch = Schedule::new(&case.program);
    sch.cache_write(&LoopRef::new("y", "i_2"), "y").unwrap();
    sch.absorb_init("y", "y").unwrap();
    let step = sch.trace().steps.last().unwrap().clone();
    assert_eq!(
        step,
        Step::AbsorbInit {
            block: "y".into(),
            buffer: "y".into()
        }
    );
    assert_eq!(step.primitive(), "absorb_init");
    let json = sch.trace().to_json();
    assert!(json.contains("\"step\": \"absorb_init\""), "{json}");
    let replayed = Trace::from_json(&json)
        .unwrap()
        .replay(&case.program)
        .unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
    // A failing call records nothing.
    let steps = sch.trace().steps.len();
    assert!(sch.absorb_init("y", "y").is_err());
    assert_eq!(sch.trace().steps.len(), steps);
}

// ---- text IR ----

fn apply(func: &Func, call: &str, file: &Path) -> Func {
    let w: Vec<&str> = call.split_whitespace().collect();
    let result = match w[0] {
        "absorb_init" => absorb_init(func, w[1], w[2]),
        "cache_write" => cache_write(func, &LoopRef::new(w[1], w[2]), w[3]).map(|(f, _)| f),
        "bound" => bound(func, &LoopRef::new(w[1], w[2]), w[3].parse().unwrap()),
        "vectorize" => vectorize(func, &LoopRef::new(w[1], w[2])),
        "parallel_with" => {
            assert_eq!(w[3], "balanced", "{}", file.display());
            let partition = LoopPartition::Balanced {
                indptr: w[4].to_string(),
            };
            parallel_with(func, &LoopRef::new(w[1], w[2]), &partition)
        }
        other => panic!("{}: unknown call {other}", file.display()),
    };
    let out = result.unwrap_or_else(|e| panic!("{}: {call}: {e}", file.display()));
    verify(&out).unwrap_or_else(|e| panic!("{}: {call}: {e:?}\n{out}", file.display()));
    out
}

#[test]
fn before_and_after_files() {
    let files = expected_text::before_files("absorb_init");
    assert!(files.len() >= 4, "{} files", files.len());
    for file in files {
        assert_eq!(
            file.calls.last().map(|c| c.split(' ').next()),
            Some(Some("absorb_init"))
        );
        let mut func = file.func;
        for call in &file.calls {
            func = apply(&func, call, &file.path);
        }
        let after = func.to_string();
        assert!(
            !after.contains(".init {"),
            "{}: init block kept",
            file.path.display()
        );
        expected_text::check_after(&file.path, &after);
    }
}

// ---- preconditions ----

/// The SpMM of width 4, lowered and cached over its rows, as text.
fn cached_spmm_text() -> String {
    let program = sparsile::compile_notation(SPMM4).unwrap();
    let lowered = sparsile_transform::lower_iterations(&program).unwrap();
    let (func, _) = cache_write(&lowered, &LoopRef::new("C", "i_2"), "C").unwrap();
    func.to_string()
}

/// `cached_spmm_text()` with a scratch buffer `T: f64[4]` added and `from` replaced by
/// `to` (which must occur), parsed.
fn edited(from: &str, to: &str) -> Func {
    let local = "  buffer C_local: f64[4] temp local\n";
    let text = cached_spmm_text().replacen(
        local,
        &format!("{local}  buffer T: f64[4] temp scratch\n"),
        1,
    );
    assert!(text.contains(from), "`{from}` not in\n{text}");
    let edited = text.replacen(from, to, 1);
    let func: Func = edited.parse().unwrap_or_else(|e| panic!("{e}\n{edited}"));
    verify(&func).unwrap_or_else(|e| panic!("{e:?}\n{edited}"));
    func
}

fn cached_spmm() -> Func {
    cached_spmm_text().parse().unwrap()
}

#[test]
fn refuses_an_unknown_buffer_or_block() {
    let err = absorb_init(&cached_spmm(), "C", "Z").unwrap_err();
    assert!(matches!(err, ScheduleError::UnknownBuffer { .. }), "{err}");
    let err = absorb_init(&cached_spmm(), "Q", "C").unwrap_err();
    assert!(matches!(err, ScheduleError::UnknownBlock { .. }), "{err}");
}

#[test]
fn refuses_a_block_with_no_init_before_it() {
    let err = absorb_init(&cached_spmm(), "C.init", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbNoInit { block, buffer } if block == "C.init" && buffer == "C"),
        "{err}"
    );
}

#[test]
fn refuses_an_init_that_is_not_a_constant() {
    let func = edited("C[i, k] = 0.0", "C[i, k] = 2.0 * B[0, k]");
    let err = absorb_init(&func, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbInitNotConstant { init, .. } if init == "C.init"),
        "{err}"
    );
    assert!(err.to_string().contains("not a constant"), "{err}");
    // Writing another buffer too.
    let func = edited("C[i, k] = 0.0", "C[i, k] = 0.0\n        T[k] = 0.0");
    let err = absorb_init(&func, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbInitNotConstant { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("also writes `T`"), "{err}");
}

#[test]
fn refuses_an_init_that_misses_elements() {
    let func = edited("for k in 0..4 {", "for k in 0..3 {");
    let err = absorb_init(&func, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbInitNotFull { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("not 0..4"), "{err}");
    let func = edited(
        "C[i, k] = 0.0",
        "if k < 2 {\n          C[i, k] = 0.0\n        }",
    );
    let err = absorb_init(&func, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbInitNotFull { .. }),
        "{err}"
    );
}

#[test]
fn refuses_an_output_over_a_compressed_row_axis() {
    // A `dcsr` output's row axis is sparse with no parent: its stored rows are not a
    // range of a loop the init block can be shown to cover.
    let program = sparsile::compile_notation(
        "tensor A: f64[m, n] dcsr\ntensor X: f64[m, k]\ntensor Y: f64[n, k]\ntensor C: f64[m, n] dcsr\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n",
    )
    .unwrap();
    let func = sparsile_transform::lower_iterations(&program).unwrap();
    let err = absorb_init(&func, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbInitNotFull { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("neither a parentless dense_fixed axis nor a sparse_variable axis under the axis before it"),
        "{err}"
    );
}

#[test]
fn refuses_a_block_touching_the_buffer_in_between() {
    let func = edited(
        "  block C {",
        "  block peek {\n    for q in 0..m {\n      T[0] = C[q, 0]\n    }\n  }\n  block C {",
    );
    let err = absorb_init(&func, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbInterleaved { between, init, .. } if between == "peek" && init == "C.init"),
        "{err}"
    );
}

#[test]
fn refuses_a_block_without_a_cached_copy() {
    let program = sparsile::compile_notation(SPMM4).unwrap();
    let lowered = sparsile_transform::lower_iterations(&program).unwrap();
    let err = absorb_init(&lowered, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbTargetShape { .. }),
        "{err}"
    );
    // A block nested in another one.
    let text = cached_spmm_text().replacen("  block C {", "  block outer {\n  block C {", 1);
    let text = format!("{}}}\n}}\n", text.trim_end().strip_suffix('}').unwrap());
    let func: Func = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    let err = absorb_init(&func, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbTargetShape { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("not a top-level block"), "{err}");
}

#[test]
fn refuses_rows_that_do_not_cover_the_buffer() {
    // The row loop skips row 0.
    let func = edited("for i_2 in 0..m {", "for i_2 in 1..m {");
    let err = absorb_init(&func, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbRegionNotFull { var, .. } if var == "i_2"),
        "{err}"
    );
    // A width only promised by `bound`: the copy back runs 0..8 under `C_out1 < k`,
    // which does not provably hold 0..k.
    let case = spmm(4, 4, 2, Rows::Random, 1);
    let mut sch = Schedule::new(&case.program);
    sch.bound(&LoopRef::new("C", "k2_2"), 8).unwrap();
    sch.cache_write(&LoopRef::new("C", "i_2"), "C").unwrap();
    let err = sch.absorb_init("C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbRegionNotFull { var, .. } if var == "C_out1"),
        "{err}"
    );
}

#[test]
fn refuses_other_accesses_of_the_buffer() {
    // The load reads another row's elements.
    let func = edited("= C[i_2, C_in1]", "= C[0, C_in1]");
    let err = absorb_init(&func, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbOtherAccess { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("another iteration"), "{err}");
    // A read of the buffer between the copies.
    let func = edited(
        "let j: idx = A_A_J_indices[j_p]",
        "let j: idx = A_A_J_indices[j_p]\n        T[0] = C[i_2, 1]",
    );
    let err = absorb_init(&func, "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbOtherAccess { access, .. } if access == "C[i_2, 1]"),
        "{err}"
    );
}

/// SDDMM's sparse output: the init block runs over the positions of each row, the
/// cached loop over the same positions; an init block that skips a position is refused
/// with the range it should cover.
#[test]
fn a_sparse_output_is_absorbed_over_its_positions() {
    let case = features::sddmm(6, 5, 3, Rows::Random, 7);
    let func = sparsile_transform::lower_iterations(&case.program).unwrap();
    let (cached, _) = cache_write(&func, &LoopRef::new("C", "j_p_2"), "C").unwrap();
    let after = absorb_init(&cached, "C", "C").unwrap();
    verify(&after).unwrap();
    let text = after.to_string();
    assert!(!text.contains("block C.init"), "{text}");
    assert!(text.contains("C_local[0] = 0.0"), "{text}");
    let short =
        cached
            .to_string()
            .replacen("A_A_J_indptr[i + 1] {", "A_A_J_indptr[i + 1] - 1 {", 1);
    let short: Func = short.parse().unwrap();
    let e = absorb_init(&short, "C", "C").unwrap_err();
    assert!(
        matches!(&e, ScheduleError::AbsorbInitNotFull { reason, .. }
            if reason.contains("not A_A_J_indptr[i]..A_A_J_indptr[i + 1]")),
        "{e:?}"
    );
}

/// BSR SDDMM (`sddmm_bsr_prefetch.before`): the loop over a block row's blocks holds a
/// prefetch and a `let` beside the loops down to the cached one, which the chain
/// passes; a read of the buffer beside the chain is refused like one inside it, and a
/// statement beside the chain that is neither a `let` nor a prefetch ends the chain.
#[test]
fn the_chain_passes_prefetches_and_lets_but_not_reads_beside_it() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schedule/absorb_init/sddmm_bsr_prefetch.before");
    let text: String = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let cached = |text: &str| {
        let func: Func = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
        cache_write(&func, &LoopRef::new("C", "ji_2"), "C")
            .unwrap()
            .0
    };
    assert!(absorb_init(&cached(&text), "C", "C").is_ok());
    let guard = "if jo_p_2 + 4 < nnz_A {";
    let read = text.replacen(guard, "if C[io_2, jo_p_2, 0, 0] > 0.0 {", 1);
    let err = absorb_init(&cached(&read), "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbOtherAccess { access, .. } if access == "C[io_2, jo_p_2, 0, 0]"),
        "{err}"
    );
    let store = text.replacen(
        "let jo_2: idx = C_A_JO_indices[jo_p_2]",
        "let jo_2: idx = C_A_JO_indices[jo_p_2]\n        C[io_2, jo_p_2, 0, 0] = 1.0",
        1,
    );
    let err = absorb_init(&cached(&store), "C", "C").unwrap_err();
    assert!(
        matches!(&err, ScheduleError::AbsorbTargetShape { .. }),
        "{err}"
    );
}
