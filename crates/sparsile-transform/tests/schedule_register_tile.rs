//! `register_tile`: the before/after text files (`schedule/register_tile/X.before` names
//! the calls in its leading `# ` lines; `SPARSILE_BLESS=1` rewrites `X.after`), the
//! preconditions (unknown and parallel loops, a CSR row, each rule of the register-tiled
//! shape), the verifier on hand-written `register_tiled` loops that break it, the
//! `Schedule` method with its trace step (JSON and replay), and BSR SpMM with the tile
//! against the interpreter through stage II, stage III and native code (1 and 3
//! threads), f64, on random rows, one huge row and an empty matrix, with sizes off the
//! block and widths off the tile's vectors.

mod expected_text;
mod features;

use features::{check, native_settings, spmm, spmm_bsr, ALL_ROWS};
use sparsile_ir::loops::{verify, Func};
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::parallel::parallel;
use sparsile_transform::schedule::register_tile::register_tile;
use sparsile_transform::schedule::{LoopRef, Schedule, ScheduleError, Step, Trace};

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

#[test]
fn before_and_after_files() {
    let files = expected_text::before_files("register_tile");
    assert!(!files.is_empty());
    for file in files {
        let path = &file.path;
        let mut func = file.func;
        let before = func.to_string();
        for call in &file.calls {
            let words: Vec<&str> = call.split_whitespace().collect();
            assert_eq!(words[0], "register_tile", "{}", path.display());
            func = register_tile(&func, &at(words[1], words[2]))
                .unwrap_or_else(|e| panic!("{}: {call}: {e}", path.display()));
            verify(&func).unwrap_or_else(|e| panic!("{}: {e:?}\n{func}", path.display()));
        }
        let after = func.to_string();
        assert_ne!(after, before, "{}: nothing changed", path.display());
        assert!(after.contains(" register_tiled {"), "{after}");
        expected_text::check_after(path, &after);
    }
}

#[test]
fn tiled_block_rows_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 90;
    for rows in ALL_ROWS {
        for (m, n, k, block) in [
            (13, 11, 16, (4, 4)),
            (16, 24, 24, (8, 4)),
            (10, 7, 3, (2, 3)),
            (0, 5, 8, (4, 4)),
            (9, 18, 40, (16, 2)),
        ] {
            seed += 1;
            let case = spmm_bsr(m, n, k, block, rows, seed);
            let mut sch = Schedule::new(&case.program);
            sch.specialize("k", k as i64).unwrap();
            sch.parallel(&at("C", "io")).unwrap();
            sch.vectorize(&at("C", "k2_2")).unwrap();
            sch.register_tile(&at("C", "jo_p"))
                .unwrap_or_else(|e| panic!("{}: {e}", case.label));
            let text = sch.func().unwrap().to_string();
            assert!(text.contains(" register_tiled {"), "{}\n{text}", case.label);
            check(&case, &sch, native.as_ref());
        }
    }
}

#[test]
fn refuses_loops_without_the_tile_shape() {
    let case = spmm_bsr(8, 8, 16, (4, 4), features::Rows::Random, 1);
    let func = lower_iterations(&case.program).unwrap();
    assert!(matches!(
        register_tile(&func, &at("C", "nope")),
        Err(ScheduleError::UnknownLoop {
            primitive: "register_tile",
            ..
        })
    ));
    let par = parallel(&func, &at("C", "io")).unwrap();
    assert!(matches!(
        register_tile(&par, &at("C", "io")),
        Err(ScheduleError::NotSerial {
            primitive: "register_tile",
            ..
        })
    ));
    // The width is a parameter (not specialised): no literal bounds.
    let e = register_tile(&func, &at("C", "jo_p")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NotRegisterTileable { reason, .. } if reason.contains("integer literal bounds")),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("register_tile: loop `jo_p` in block `C`"),
        "{e}"
    );
    // A CSR row whose width is not specialised: no literal bounds either.
    let csr = spmm(6, 6, 8, features::Rows::Random, 2);
    let func = lower_iterations(&csr.program).unwrap();
    let e = register_tile(&func, &at("C", "j_p")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NotRegisterTileable { reason, .. } if reason.contains("integer literal bounds")),
        "{e:?}"
    );
}

/// A CSR row of SpMM with the width fixed is a row of scalars: its output row is held
/// in registers across the row's non-zeros, with and without the row cached in a local.
#[test]
fn tiled_csr_rows_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 300;
    for rows in ALL_ROWS {
        for (m, n, k) in [
            (13, 11, 16),
            (10, 7, 3),
            (0, 5, 8),
            (9, 18, 136),
            (21, 6, 72),
        ] {
            for cached in [false, true] {
                seed += 1;
                let case = spmm(m, n, k, rows, seed);
                let mut sch = Schedule::new(&case.program);
                sch.specialize("k", k as i64).unwrap();
                sch.parallel(&at("C", "i_2")).unwrap();
                if cached {
                    sch.cache_write(&at("C", "i_2"), "C").unwrap();
                }
                sch.vectorize(&at("C", "k2_2")).unwrap();
                sch.register_tile(&at("C", "j_p"))
                    .unwrap_or_else(|e| panic!("{} cached={cached}: {e}", case.label));
                let text = sch.func().unwrap().to_string();
                assert!(text.contains(" register_tiled {"), "{}\n{text}", case.label);
                check(&case, &sch, native.as_ref());
            }
        }
    }
}

/// A flat function with a loop over blocks `jp` around a 2 x 2 x 16 tile nest whose
/// update and guard are given, to break one rule at a time.
fn shaped(pre: &str, update: &str) -> Func {
    format!(
        "flat func f(n, m) {{\n  buffer P: i32[2] input values\n  buffer J: i32[n] input values\n  \
         buffer A: f32[n * 4] input values\n  buffer B: f32[m * 32] input values\n  \
         buffer C: f32[64] output values\n  buffer D: f32[64] output values\n  block b {{\n  \
         for jp in P[0]..P[1] {{\n    let j: idx = J[jp]\n{pre}    for r in 0..2 {{\n      \
         for c in 0..2 {{\n        for k in 0..16 vectorized {{\n          {update}\n        }}\n      }}\n    }}\n  }}\n  }}\n}}\n"
    )
    .parse()
    .unwrap_or_else(|e| panic!("{e}"))
}

const UPDATE: &str =
    "C[r * 32 + k] = C[r * 32 + k] + A[jp * 4 + r * 2 + c] * B[(j * 2 + c) * 16 + k]";

#[test]
fn each_rule_of_the_shape_is_checked() {
    let ok = shaped("    prefetch B[j * 32]\n", UPDATE);
    register_tile(&ok, &at("b", "jp")).unwrap_or_else(|e| panic!("{e}"));
    let guarded = shaped(
        "",
        "if r < n {\n            C[r * 32 + k] = C[r * 32 + k] + A[jp * 4 + r * 2 + c] * B[(j * 2 + c) * 16 + k]\n          }",
    );
    register_tile(&guarded, &at("b", "jp")).unwrap_or_else(|e| panic!("{e}"));
    let refused = [
        // A store before the nest.
        (shaped("    D[0] = 1.0\n", UPDATE), "only `let`s and prefetches"),
        // The output read before the nest.
        (
            shaped("    let q: f32 = C[0]\n", UPDATE),
            "nothing but the update may read",
        ),
        // The element moves with the blocks (it reads a `let` of the loop).
        (
            shaped(
                "",
                "C[r * 32 + k + j] = C[r * 32 + k + j] + A[jp * 4 + r * 2 + c] * B[(j * 2 + c) * 16 + k]",
            ),
            "must not change across",
        ),
        // Rows overlap: the row stride is smaller than the width.
        (
            shaped(
                "",
                "C[r * 8 + k] = C[r * 8 + k] + A[jp * 4 + r * 2 + c] * B[(j * 2 + c) * 16 + k]",
            ),
            "distinct for distinct rows",
        ),
        // The factor that reads the width also reads the rows.
        (
            shaped(
                "",
                "C[r * 32 + k] = C[r * 32 + k] + A[jp * 4 + r * 2 + c] * B[(j * 2 + c + r) * 16 + k]",
            ),
            "must not read the tile's rows",
        ),
        // The guard reads the width.
        (
            shaped(
                "",
                "if k < n {\n            C[r * 32 + k] = C[r * 32 + k] + A[jp * 4 + r * 2 + c] * B[(j * 2 + c) * 16 + k]\n          }",
            ),
            "the guard may read only",
        ),
        // Not an update.
        (
            shaped("", "C[r * 32 + k] = A[jp * 4 + r * 2 + c] * B[(j * 2 + c) * 16 + k]"),
            "not an update",
        ),
    ];
    for (func, needle) in refused {
        let e = register_tile(&func, &at("b", "jp")).unwrap_err();
        assert!(
            matches!(&e, ScheduleError::NotRegisterTileable { reason, .. } if reason.contains(needle)),
            "{needle}: {e:?}\n{func}"
        );
        // The verifier refuses the same loop marked `register_tiled` by hand.
        let marked: Func = func
            .to_string()
            .replace(
                "for jp in P[0]..P[1] {",
                "for jp in P[0]..P[1] register_tiled {",
            )
            .parse()
            .unwrap();
        let errors = verify(&marked).unwrap_err();
        assert!(
            format!("{errors:?}").contains("a `register_tiled` loop"),
            "{needle}: {errors:?}"
        );
    }
}

#[test]
fn the_step_round_trips_through_json_and_replays() {
    let case = spmm_bsr(8, 8, 16, (4, 4), features::Rows::Random, 3);
    let mut sch = Schedule::new(&case.program);
    sch.specialize("k", 16).unwrap();
    sch.func_or_lower().unwrap();
    // A failing call records nothing.
    let before = sch.trace().steps.len();
    assert!(sch.register_tile(&at("C", "io")).is_err());
    assert_eq!(sch.trace().steps.len(), before);
    sch.register_tile(&at("C", "jo_p")).unwrap();
    let step = sch.trace().steps.last().unwrap().clone();
    assert_eq!(
        step,
        Step::RegisterTile {
            target: at("C", "jo_p")
        }
    );
    let json = sch.trace().to_json();
    assert!(json.contains("\"step\": \"register_tile\""), "{json}");
    let replayed = Trace::from_json(&json)
        .unwrap()
        .replay(&case.program)
        .unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
}

/// `parallel` over a `dbsr` matrix's block rows: each iteration writes the rows
/// `io * 4 + ii` (`ii` in 0..4) of its block-row coordinate `io = I[io_p]`, distinct per
/// iteration; with a stride smaller than the block (`io * 2 + ii`) rows overlap and the
/// loop is refused.
#[test]
fn parallel_owns_the_rows_of_a_compressed_block_row() {
    let text = "tensor A: f64[m, n] dbsr:4x4\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
    let program = sparsile::compile_notation(text).unwrap();
    let func = lower_iterations(&program).unwrap();
    let rows = at("C", "io_p");
    parallel(&func, &rows).unwrap_or_else(|e| panic!("{e}\n{func}"));
    let overlapping: Func = func
        .to_string()
        .replace("io * 4 + ii", "io * 2 + ii")
        .parse()
        .unwrap();
    assert!(matches!(
        parallel(&overlapping, &rows),
        Err(ScheduleError::LoopCarriedAccess(_))
    ));
    // The coordinate mixed with the position itself is not a function of `io` alone.
    let mixed: Func = func
        .to_string()
        .replace(
            "C[io * 4 + ii, k2_2] = C[io * 4 + ii, k2_2]",
            "C[io * 4 + ii + io_p, k2_2] = C[io * 4 + ii + io_p, k2_2]",
        )
        .parse()
        .unwrap();
    assert!(parallel(&mixed, &rows).is_err(), "{mixed}");
}
