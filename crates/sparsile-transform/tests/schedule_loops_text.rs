//! Text-IR before/after files of the loop-kind schedules: each
//! `schedule/{parallel,vectorize,unroll,bound}/X.before` starts with comment lines naming
//! the calls to apply in order (`# parallel C i_2`, `# bound C k2_2 8`); the function
//! is parsed, scheduled, verified and printed, and the result compared with `X.after`
//! (`SPARSILE_BLESS=1` rewrites it). `X.after` must parse back to the same text.

mod expected_text;

use std::path::Path;

use sparsile_ir::loops::{verify, Func};
use sparsile_transform::schedule::bound::bound;
use sparsile_transform::schedule::parallel::parallel;
use sparsile_transform::schedule::unroll::unroll;
use sparsile_transform::schedule::vectorize::vectorize;
use sparsile_transform::schedule::LoopRef;

fn apply(func: &Func, call: &str, file: &Path) -> Func {
    let words: Vec<&str> = call.split_whitespace().collect();
    let target = LoopRef {
        block: words[1].to_string(),
        var: words[2].to_string(),
    };
    let result = match words[0] {
        "parallel" => parallel(func, &target),
        "vectorize" => vectorize(func, &target),
        "unroll" => unroll(func, &target),
        "bound" => bound(func, &target, words[3].parse().unwrap()),
        other => panic!("{}: unknown call {other}", file.display()),
    };
    let out = result.unwrap_or_else(|e| panic!("{}: {call}: {e}", file.display()));
    verify(&out).unwrap_or_else(|e| panic!("{}: {call}: {e:?}\n{out}", file.display()));
    out
}

#[test]
fn before_and_after_files() {
    let mut seen = 0;
    for primitive in ["parallel", "vectorize", "unroll", "bound"] {
        for file in expected_text::before_files(primitive) {
            let path = &file.path;
            assert!(
                file.calls.iter().any(|c| c.starts_with(primitive)),
                "{}: no {primitive} call",
                path.display()
            );
            let mut func = file.func;
            let before = func.to_string();
            for call in &file.calls {
                func = apply(&func, call, path);
            }
            let after = func.to_string();
            assert_ne!(
                after,
                before,
                "{}: the calls changed nothing",
                path.display()
            );
            expected_text::check_after(path, &after);
            seen += 1;
        }
    }
    assert!(seen >= 4);
}
