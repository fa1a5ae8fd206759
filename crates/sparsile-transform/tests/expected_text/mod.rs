//! The `.before` → `.after` text-IR check shared by the schedule tests: the function a
//! test computed from `X.before` must print exactly as `X.after` (`SPARSILE_BLESS=1`
//! rewrites the file instead), and `X.after` must parse back to the same text.

use std::path::Path;

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
