//! Text-IR tests, one folder per pass: each input file is run through the pass and the
//! printed result compared with the expected file beside it (`SPARSILE_BLESS=1`
//! rewrites the expected files). The expected text must also parse back to a function
//! that prints the same and passes the loop-level verifier.
//!
//! - `lower_iterations/X.sir` → `X.pos`
//! - `default_schedule/X.sir` → `X.pos` (after `lower_iterations`)
//! - `lower_buffers/X.pos` → `X.flat`

use std::path::{Path, PathBuf};

use sparsile_ir::coord::Program;
use sparsile_ir::loops::{verify, Func};
use sparsile_ir::settings::Settings;
use sparsile_transform::{default_schedule, lower_buffers, lower_iterations};

fn folder(pass: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(pass)
}

fn inputs(pass: &str, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder(pass))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .{ext} inputs in {pass}/");
    files
}

fn check_expected(input: &Path, out_ext: &str, func: &Func) {
    verify(func)
        .unwrap_or_else(|e| panic!("{}: output does not verify: {e:?}\n{func}", input.display()));
    let text = func.to_string();
    let expected_path = input.with_extension(out_ext);
    if Settings::from_env().bless {
        std::fs::write(&expected_path, &text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with SPARSILE_BLESS=1)",
            expected_path.display()
        )
    });
    assert_eq!(
        text,
        expected,
        "{}: output differs from the expected file",
        input.display()
    );
    let reparsed: Func = expected
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
    assert_eq!(
        reparsed.to_string(),
        expected,
        "{}: round trip",
        expected_path.display()
    );
}

fn program(path: &Path) -> Program {
    let text = std::fs::read_to_string(path).unwrap();
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn lower_iterations_files() {
    for input in inputs("lower_iterations", "sir") {
        let func = lower_iterations(&program(&input))
            .unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        check_expected(&input, "pos", &func);
    }
}

#[test]
fn default_schedule_files() {
    for input in inputs("default_schedule", "sir") {
        let p = program(&input);
        let func = default_schedule(&p, lower_iterations(&p).unwrap()).unwrap();
        check_expected(&input, "pos", &func);
    }
}

#[test]
fn lower_buffers_files() {
    for input in inputs("lower_buffers", "pos") {
        let text = std::fs::read_to_string(&input).unwrap();
        let func: Func = text
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        let flat = lower_buffers(&func).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        check_expected(&input, "flat", &flat);
    }
}
