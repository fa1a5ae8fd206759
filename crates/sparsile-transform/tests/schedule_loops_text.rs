//! Text-IR before/after files of the loop-kind schedules: each
//! `schedule/{parallel,vectorize,unroll,bound}/X.before` starts with comment lines naming
//! the calls to apply in order (`# parallel C i_2`, `# bound C k2_2 8`); the function
//! is parsed, scheduled, verified and printed, and the result compared with `X.after`
//! (`SPARSILE_BLESS=1` rewrites it). `X.after` must parse back to the same text.

mod expected_text;

use std::path::{Path, PathBuf};

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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schedule");
    let mut seen = 0;
    for primitive in ["parallel", "vectorize", "unroll", "bound"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(primitive))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "before"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no .before files in {primitive}/");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let calls: Vec<&str> = text.lines().map_while(|l| l.strip_prefix("# ")).collect();
            assert!(
                calls.iter().any(|c| c.starts_with(primitive)),
                "{}: no {primitive} call",
                file.display()
            );
            let mut func: Func = text
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let before = func.to_string();
            for call in &calls {
                func = apply(&func, call, &file);
            }
            let after = func.to_string();
            assert_ne!(
                after,
                before,
                "{}: the calls changed nothing",
                file.display()
            );
            expected_text::check_after(&file, &after);
            seen += 1;
        }
    }
    assert!(seen >= 4);
}
