//! Every `tests/loops/*.pos` and `*.flat` file parses, passes the verifier, prints back
//! to exactly its text (comment lines removed), and re-parses to the same function.

use std::fs;
use std::path::PathBuf;

use sparsile_ir::loops::{Func, Stage};
use sparsile_ir::{flat, pos};

fn example_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/loops");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("tests/loops exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pos" || e == "flat"))
        .collect();
    files.sort();
    files
}

#[test]
fn examples_round_trip() {
    let files = example_files();
    assert!(files.len() >= 6, "expected examples, found {files:?}");
    for path in files {
        let name = path.display().to_string();
        let text = fs::read_to_string(&path).expect("readable file");
        let without_comments: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        let func: Func = text
            .parse()
            .unwrap_or_else(|e| panic!("{name}: parse error: {e}"));
        let expected_stage = if name.ends_with(".pos") {
            Stage::Pos
        } else {
            Stage::Flat
        };
        assert_eq!(func.stage, expected_stage, "{name}");
        let verified = match expected_stage {
            Stage::Pos => pos::verify(&func),
            Stage::Flat => flat::verify(&func),
        };
        if let Err(errors) = verified {
            let listing: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!("{name}: verifier errors:\n{}", listing.join("\n"));
        }
        let printed = func.to_string();
        assert_eq!(printed, without_comments, "{name}: printed text differs");
        let mut again: Func = printed.parse().expect("printed text parses");
        assert_eq!(again.to_string(), printed, "{name}: second print differs");
        let mut first = func.clone();
        first.clear_spans();
        again.clear_spans();
        assert_eq!(first, again, "{name}: re-parsed function differs");
    }
}
