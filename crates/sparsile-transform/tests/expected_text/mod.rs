//! The `.before` → `.after` text-IR files shared by the schedule tests: the `.before`
//! files of a folder of `tests/schedule/` with the calls their leading `# ` lines name,
//! and the check that the function a test computed from `X.before` prints exactly as
//! `X.after` (`SPARSILE_BLESS=1` rewrites the file instead) and that `X.after` parses
//! back to the same text.

use std::path::{Path, PathBuf};

use sparsile_ir::loops::Func;
use sparsile_ir::settings::Settings;

/// Checks `after` (computed from the `.before` file `before`) against `before`'s
/// `.after` file, then that file's parse → print round trip.
pub fn check_after(before: &Path, after: &str) {
    let expected_path = before.with_extension("after");
    if Settings::from_env().bless {
        std::fs::write(&expected_path, after).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with SPARSILE_BLESS=1)",
            expected_path.display()
        )
    });
    assert_eq!(after, expected, "{}: output differs", before.display());
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

/// One `.before` file: its path, the calls of its leading `# ` lines, and its function.
pub struct BeforeFile {
    pub path: PathBuf,
    pub calls: Vec<String>,
    pub func: Func,
}

/// The `.before` files of `tests/schedule/<dir>`, sorted by name (at least one).
pub fn before_files(dir: &str) -> Vec<BeforeFile> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schedule")
        .join(dir);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "before"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no .before files in {}", dir.display());
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let calls = text
                .lines()
                .map_while(|l| l.strip_prefix("# "))
                .map(str::to_string)
                .collect();
            let func = text
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            BeforeFile { path, calls, func }
        })
        .collect()
}
