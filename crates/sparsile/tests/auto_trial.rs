//! The automatic choice's timed trial (`sparsile_tune::trial`): an `AutoKernel` given
//! an input whose selection lists close candidates times them on its first call, runs
//! one of them, answers as the interpreter does (empty rows, an empty matrix, one long
//! row, sizes that divide no tile), remembers the winner so that later calls do not time
//! again, and says in the selection's note what it timed. `SPARSILE_TRIAL=0` (here its
//! setting) lists nothing to time. Without a C compiler the checks print that they
//! skipped.

mod support;

use sparsile::auto::{select, AutoKernel, Context, Source};
use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::settings::Settings;
use sparsile::ir::DType;
use sparsile::tune::op::Operator;
use sparsile::RunOptions;
use support::{have_compiler, matrix, op_inputs, rng};

const OPS: [(Operator, &str); 3] = [
    (
        Operator::Spmm,
        "tensor A: f32[m, n] csr\ntensor X: f32[n, k]\ntensor Y: f32[m, k]\nY[i,c] = A[i,j] * X[j,c]\n",
    ),
    (
        Operator::Sddmm,
        "tensor A: f32[m, n] csr\ntensor X: f32[m, k]\ntensor Y: f32[n, k]\ntensor O: f32[m, n] csr\nO[i,j] = A[i,j] * X[i,c] * Y[j,c]\n",
    ),
    (
        Operator::Spmv,
        "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
    ),
];

#[test]
fn a_first_call_times_the_short_list_runs_a_winner_and_remembers_it() {
    if !have_compiler() {
        eprintln!("skipped: no C compiler");
        return;
    }
    let options = RunOptions {
        threads: Some(2),
        ..RunOptions::default()
    };
    let mut g = rng(21);
    let mut trials = 0;
    for (kind, m, n) in [
        ("random", 300, 200),
        ("random", 37, 53),
        ("long_row", 200, 300),
        ("empty", 40, 40),
    ] {
        let coo = matrix(kind, m, n, &mut g);
        let a = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap();
        for (op, text) in OPS {
            for k in [8, 33] {
                let what = format!("{op} on {kind} {m}x{n}, K = {k}");
                let auto = AutoKernel::new(text).unwrap();
                let ins = op_inputs(op, &a, k, m as u64);
                let before = auto.select(&ins, 2);
                let out = auto.run(&ins, &options).unwrap();
                support::matches_interpreter(text, &ins, &out, &what);
                let ran = auto.last_selection().unwrap();
                assert!(ran.trial.is_empty(), "{what}: {ran:?}");
                if before.trial.len() > 1 {
                    trials += 1;
                    assert_eq!(before.source, Source::Selector, "{what}");
                    assert_eq!(before.trial[0], before.candidate, "{what}: the pick first");
                    assert!(
                        before.trial.iter().all(|c| c.format == "csr"),
                        "{what}: an operand that keeps its format is timed in it: {:?}",
                        before.trial
                    );
                    assert!(before.trial.contains(&ran.candidate), "{what}: {ran:?}");
                    let note = ran.note.clone().unwrap_or_default();
                    assert!(note.contains("timed against"), "{what}: {note}");
                    // Remembered: the next choice is the winner, with nothing to time.
                    let again = auto.select(&ins, 2);
                    assert_eq!(again.candidate, ran.candidate, "{what}");
                    assert!(again.trial.is_empty(), "{what}");
                    auto.run(&ins, &options).unwrap();
                    assert_eq!(auto.last_selection().unwrap().candidate, ran.candidate);
                } else {
                    assert!(before.trial.is_empty(), "{what}: a list of one");
                }
            }
        }
    }
    assert!(trials > 0, "no input had a short list: nothing was tested");
    println!("{trials} first calls timed a short list");
}

#[test]
fn the_setting_turns_the_trial_off() {
    let mut g = rng(4);
    let coo = matrix("random", 300, 200, &mut g);
    let a = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap();
    let (op, text) = OPS[0];
    let ins = op_inputs(op, &a, 8, 1);
    let stage1 = sparsile::lower(&sparsile::notation::parse(text).unwrap()).unwrap();
    let info = sparsile::tune::op::classify(&stage1);
    let ctx = Context {
        program: "test",
        info: &info,
        threads: 2,
        other_formats: false,
    };
    let off = Settings {
        no_trial: true,
        ..Settings::default()
    };
    let s = select(&ctx, &ins, &off);
    assert!(s.trial.is_empty(), "{s:?}");
    let on = select(&ctx, &ins, &Settings::default());
    if on.source == Source::Selector && !on.trial.is_empty() {
        assert_eq!(on.trial[0], s.candidate, "the same pick, timed or not");
    }
}
