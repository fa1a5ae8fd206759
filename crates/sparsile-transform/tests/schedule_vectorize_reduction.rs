//! `vectorize_reduction`: the before/after text files
//! (`schedule/vectorize_reduction/X.before` names the calls in its leading `# ` lines;
//! `SPARSILE_BLESS=1` rewrites `X.after`), one test per precondition error, the
//! `Schedule` method with its trace step (JSON and replay), and that the marked loop
//! computes what the unmarked one does in the flat interpreter's serial order.

mod expected_text;

use sparsile_ir::loops::{verify, ForKind, Func, Stmt};
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::cache_write::cache_write;
use sparsile_transform::schedule::parallel::parallel;
use sparsile_transform::schedule::vectorize_reduction::vectorize_reduction;
use sparsile_transform::schedule::{LoopRef, Schedule, ScheduleError, Step, Trace};

const SPMV: &str =
    "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n";
const SPMM: &str =
    "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";

fn stage2(text: &str) -> Func {
    lower_iterations(&sparsile::compile_notation(text).unwrap()).unwrap()
}

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

/// SpMV with each row accumulated in the local `y_local`.
fn spmv_cached() -> Func {
    cache_write(&stage2(SPMV), &at("y", "i_2"), "y").unwrap().0
}

/// A flat function from the body of one block `b` over `x: f64[n]`, `out: f64[2]` and
/// the local `acc: f64[2]` (so that errors carry line numbers).
fn parsed(body: &str) -> Func {
    let text = format!(
        "flat func f(n) {{\n  buffer x: f64[n] input values\n  buffer out: f64[2] output values\n  buffer acc: f64[2] temp local\n  block b {{\n{body}  }}\n}}\n"
    );
    text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn kind_of(func: &Func, var: &str) -> Option<ForKind> {
    let mut out = None;
    Stmt::visit_all(&func.body, &mut |s| {
        if let Stmt::For(f) = s {
            if func.vars[f.var].name == var {
                out = Some(f.kind);
            }
        }
    });
    out
}

#[test]
fn before_and_after_files() {
    let files = expected_text::before_files("vectorize_reduction");
    assert!(files.len() >= 2, "{} files", files.len());
    for file in files {
        let path = &file.path;
        let mut func = file.func;
        let before = func.to_string();
        for call in &file.calls {
            let words: Vec<&str> = call.split_whitespace().collect();
            assert_eq!(words[0], "vectorize_reduction", "{}", path.display());
            func = vectorize_reduction(&func, &at(words[1], words[2]), 1, false)
                .unwrap_or_else(|e| panic!("{}: {call}: {e}", path.display()));
            verify(&func).unwrap_or_else(|e| panic!("{}: {e:?}\n{func}", path.display()));
        }
        let after = func.to_string();
        assert_ne!(after, before, "{}: nothing changed", path.display());
        expected_text::check_after(path, &after);
    }
}

#[test]
fn marks_the_row_loop_of_spmv_after_cache_write() {
    let f = vectorize_reduction(&spmv_cached(), &at("y", "j_p"), 1, false).unwrap();
    assert_eq!(
        kind_of(&f, "j_p"),
        Some(ForKind::VectorizedReduction {
            scalar_sums: 1,
            masked: false
        })
    );
    assert!(f.to_string().contains("vectorized(reassociate) {"), "{f}");
}

#[test]
fn refuses_an_unknown_loop() {
    let e = vectorize_reduction(&spmv_cached(), &at("y", "nope"), 1, false).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::UnknownLoop { primitive: "vectorize_reduction", var, .. } if var == "nope"),
        "{e:?}"
    );
}

#[test]
fn refuses_a_loop_that_is_not_serial() {
    let f = parallel(&spmv_cached(), &at("y.init", "i")).unwrap();
    let e = vectorize_reduction(&f, &at("y.init", "i"), 1, false).unwrap_err();
    assert!(
        matches!(
            &e,
            ScheduleError::NotSerial {
                primitive: "vectorize_reduction",
                kind: "parallel",
                ..
            }
        ),
        "{e:?}"
    );
    // Marking twice is refused the same way.
    let once = vectorize_reduction(&spmv_cached(), &at("y", "j_p"), 1, false).unwrap();
    let e = vectorize_reduction(&once, &at("y", "j_p"), 1, false).unwrap_err();
    assert!(
        matches!(
            &e,
            ScheduleError::NotSerial {
                kind: "vectorized",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn refuses_an_outer_loop() {
    let e = vectorize_reduction(&spmv_cached(), &at("y", "i_2"), 1, false).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::ReductionNotInnermost { inner, .. } if inner == "j_p"),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("vectorize_reduction: "), "{e}");
}

#[test]
fn refuses_a_reduction_into_memory() {
    // Without cache_write the row sums go straight into `y[i_2]`.
    let e = vectorize_reduction(&stage2(SPMV), &at("y", "j_p"), 1, false).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::LoopCarriedAccess(a) if a.primitive == "vectorize_reduction" && a.buffer == "y"),
        "{e:?}"
    );
}

#[test]
fn refuses_a_store_to_a_local_that_is_not_a_sum() {
    let f =
        parsed("    for i in 0..n {\n      acc[0] = acc[0] * x[i]\n    }\n    out[0] = acc[0]\n");
    let e = vectorize_reduction(&f, &at("b", "i"), 1, false).unwrap_err();
    match &e {
        ScheduleError::NotReassociable { reason, span, .. } => {
            assert_eq!(span.line, 7, "{e}");
            assert!(reason.contains("is not `acc[0] = acc[0] + …`"), "{e}");
        }
        _ => panic!("{e:?}"),
    }
}

#[test]
fn refuses_a_sum_whose_element_is_read_in_the_loop() {
    let f = parsed(
        "    for i in 0..n {\n      acc[0] = acc[0] + x[i]\n      acc[1] = acc[1] + acc[0]\n    }\n    out[0] = acc[1]\n",
    );
    let e = vectorize_reduction(&f, &at("b", "i"), 1, false).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NotReassociable { reason, span, .. }
            if span.line == 8 && reason.contains("`acc` is reduced in the loop")),
        "{e:?}"
    );
}

#[test]
fn refuses_a_sum_into_a_scalar_local() {
    let f = parsed(
        "    let s: f64 = 0.0\n    for i in 0..n {\n      s = s + x[i]\n    }\n    out[0] = s\n",
    );
    let e = vectorize_reduction(&f, &at("b", "i"), 1, false).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NotReassociable { reason, .. } if reason.contains("assignment to `s`")),
        "{e:?}"
    );
}

#[test]
fn refuses_a_loop_without_a_local_sum() {
    // `y.init`'s loop stores `y[i] = 0.0`: nothing to reassociate.
    let e = vectorize_reduction(&spmv_cached(), &at("y.init", "i"), 1, false).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NoLocalReduction { var, block, .. } if var == "i" && block == "y.init"),
        "{e:?}"
    );
    // SpMM's innermost loop writes a different element of `C` per iteration.
    let e = vectorize_reduction(&stage2(SPMM), &at("C", "k2_2"), 1, false).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NoLocalReduction { .. }),
        "{e:?}"
    );
}

#[test]
fn the_schedule_records_a_step_that_replays() {
    let program = sparsile::compile_notation(SPMV).unwrap();
    let mut sch = Schedule::new(&program);
    sch.cache_write(&at("y", "i_2"), "y").unwrap();
    // A failing call records nothing.
    assert!(sch.vectorize_reduction(&at("y", "i_2"), 1, false).is_err());
    sch.vectorize_reduction(&at("y", "j_p"), 1, false).unwrap();
    let last = sch.trace().steps.last().unwrap().clone();
    assert_eq!(
        last,
        Step::VectorizeReduction {
            target: at("y", "j_p"),
            scalar_sums: 1,
            masked: false
        }
    );
    assert_eq!(last.primitive(), "vectorize_reduction");
    let json = sch.trace().to_json();
    assert!(json.contains("\"step\": \"vectorize_reduction\""), "{json}");
    let replayed = Trace::from_json(&json).unwrap().replay(&program).unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
    let lowered = sch.finish().unwrap();
    assert!(
        lowered
            .stage3
            .to_string()
            .contains("vectorized(reassociate)"),
        "the loop kind survives lower_buffers:\n{}",
        lowered.stage3
    );
    verify(&lowered.stage3).unwrap();
}

#[test]
fn scalar_sums_are_recorded_printed_and_checked() {
    let program = sparsile::compile_notation(SPMV).unwrap();
    let mut sch = Schedule::new(&program);
    sch.cache_write(&at("y", "i_2"), "y").unwrap();
    for bad in [0, 17] {
        let e = sch
            .vectorize_reduction(&at("y", "j_p"), bad, false)
            .unwrap_err();
        assert!(
            matches!(&e, ScheduleError::BadScalarSums { scalar_sums, .. } if *scalar_sums == bad),
            "{e:?}"
        );
        assert!(e.to_string().contains("it must be 1 to 16"), "{e}");
    }
    sch.vectorize_reduction(&at("y", "j_p"), 4, false).unwrap();
    let text = sch.func().unwrap().to_string();
    assert!(
        text.contains("vectorized(reassociate, scalar_sums=4) {"),
        "{text}"
    );
    let json = sch.trace().to_json();
    assert!(json.contains("\"scalar_sums\": 4"), "{json}");
    let replayed = Trace::from_json(&json).unwrap().replay(&program).unwrap();
    assert_eq!(replayed.func().unwrap().to_string(), text);
    // A trace written without the field replays with one sum.
    let old = json.replace(",\n      \"scalar_sums\": 4", "");
    assert!(!old.contains("scalar_sums"), "{old}");
    let replayed = Trace::from_json(&old).unwrap().replay(&program).unwrap();
    assert!(replayed
        .func()
        .unwrap()
        .to_string()
        .contains("vectorized(reassociate) {"));
    let lowered = sch.finish().unwrap();
    verify(&lowered.stage3).unwrap();
    assert!(lowered.stage3.to_string().contains("scalar_sums=4"));
}

#[test]
fn masked_is_recorded_printed_and_replayed() {
    let program = sparsile::compile_notation(SPMV).unwrap();
    let mut sch = Schedule::new(&program);
    sch.cache_write(&at("y", "i_2"), "y").unwrap();
    sch.vectorize_reduction(&at("y", "j_p"), 4, true).unwrap();
    let text = sch.func().unwrap().to_string();
    assert!(
        text.contains("vectorized(reassociate, scalar_sums=4, masked) {"),
        "{text}"
    );
    let json = sch.trace().to_json();
    assert!(json.contains("\"masked\": true"), "{json}");
    let replayed = Trace::from_json(&json).unwrap().replay(&program).unwrap();
    assert_eq!(replayed.func().unwrap().to_string(), text);
    // A trace written before the flag existed replays unmasked.
    let old = json.replace(",\n      \"masked\": true", "");
    assert_ne!(old, json);
    let replayed = Trace::from_json(&old).unwrap().replay(&program).unwrap();
    assert!(replayed
        .func()
        .unwrap()
        .to_string()
        .contains("vectorized(reassociate, scalar_sums=4) {"));
}
