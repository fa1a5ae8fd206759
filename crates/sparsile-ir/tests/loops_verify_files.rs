//! Each `tests/loops/verify/*.pos` and `*.flat` file parses, and the verifier reports
//! exactly the errors listed in its `# error: ...` comment lines (at the end of the file,
//! so that they do not shift the line numbers), in order.

use std::fs;
use std::path::PathBuf;

use sparsile_ir::loops::{verify, Func};

#[test]
fn verifier_reports_the_expected_errors() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/loops/verify");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("tests/loops/verify exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pos" || e == "flat"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 6,
        "expected verifier test files, found {files:?}"
    );
    let mut failures = Vec::new();
    for path in files {
        let name = path.display().to_string();
        let text = fs::read_to_string(&path).expect("readable file");
        let expected: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# error: "))
            .map(str::to_string)
            .collect();
        let func: Func = text
            .parse()
            .unwrap_or_else(|e| panic!("{name}: parse error: {e}"));
        let actual: Vec<String> = match verify(&func) {
            Ok(()) => Vec::new(),
            Err(errors) => errors.iter().map(|e| e.to_string()).collect(),
        };
        if expected.is_empty() || actual != expected {
            let listing: String = actual.iter().map(|e| format!("# error: {e}\n")).collect();
            failures.push(format!("{name}: the verifier reported\n{listing}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
