//! Text-IR before/after files of split, fuse and reorder: in `tests/schedule/<primitive>/`,
//! each `X.before.pos` is parsed, the steps of `X.steps.json` (a JSON list of trace
//! steps) are applied with the pure primitives, and the printed result is compared with
//! `X.after.pos` (`SPARSILE_BLESS=1` rewrites it). The expected text must parse back to
//! the same function and pass the verifier.

use std::path::{Path, PathBuf};

use sparsile_ir::loops::{verify, Func};
use sparsile_ir::settings::Settings;
use sparsile_transform::schedule::{fuse, reorder, split, Step};

fn cases(primitive: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schedule")
        .join(primitive);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".before.pos"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs in {}", dir.display());
    files
}

fn sibling(before: &Path, suffix: &str) -> PathBuf {
    let s = before.to_string_lossy();
    PathBuf::from(format!("{}{suffix}", s.trim_end_matches(".before.pos")))
}

fn apply(func: &Func, step: &Step) -> Func {
    match step {
        Step::Split {
            target,
            factor,
            tail,
        } => split(func, target, *factor, *tail).unwrap().0,
        Step::Fuse { outer, inner } => fuse(func, outer, inner).unwrap().0,
        Step::Reorder { loops } => reorder(func, loops).unwrap(),
        other => panic!("not a split/fuse/reorder step: {other:?}"),
    }
}

fn run(primitive: &str) {
    for before in cases(primitive) {
        let text = std::fs::read_to_string(&before).unwrap();
        let mut func: Func = text
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", before.display()));
        let steps_path = sibling(&before, ".steps.json");
        let steps: Vec<Step> = serde_json::from_str(&std::fs::read_to_string(&steps_path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", steps_path.display()));
        for step in &steps {
            func = apply(&func, step);
            verify(&func).unwrap_or_else(|e| {
                panic!(
                    "{}: {step:?}: does not verify: {e:?}\n{func}",
                    before.display()
                )
            });
        }
        let printed = func.to_string();
        let after = sibling(&before, ".after.pos");
        if Settings::from_env().bless {
            std::fs::write(&after, &printed).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&after)
            .unwrap_or_else(|e| panic!("{}: {e} (run with SPARSILE_BLESS=1)", after.display()));
        assert_eq!(printed, expected, "{}: output differs", before.display());
        let reparsed: Func = expected
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", after.display()));
        assert_eq!(
            reparsed.to_string(),
            expected,
            "{}: round trip",
            after.display()
        );
    }
}

#[test]
fn split_files() {
    run("split");
}

#[test]
fn fuse_files() {
    run("fuse");
}

#[test]
fn reorder_files() {
    run("reorder");
}
