//! Text-IR tests of `decompose_format` and `horizontal_fuse`. Each
//! `schedule/decompose_format/X.sir` starts with a comment line `# <buffer>: <rule>`;
//! the decomposed program is compared with `X.after.sir`, its `lower_iterations` output
//! with `X.pos`, and, when it has several parts, that output after `horizontal_fuse` of
//! the part blocks with `X.hf.pos` (`SPARSILE_BLESS=1` rewrites them). Expected files
//! must parse back and print identically.

use std::path::{Path, PathBuf};

use sparsile_formats::decompose::DecomposeRule;
use sparsile_ir::coord::Program;
use sparsile_ir::loops::{Func, Stmt};
use sparsile_ir::settings::Settings;
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::{decompose_format, horizontal_fuse};

fn inputs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schedule/decompose_format");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "sir")
                && !p.to_string_lossy().ends_with(".after.sir")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty());
    files
}

fn expect(path: &Path, text: &str) {
    if Settings::from_env().bless {
        std::fs::write(path, text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with SPARSILE_BLESS=1)", path.display()));
    assert_eq!(text, expected, "{}: output differs", path.display());
}

fn with_ext(path: &Path, ext: &str) -> PathBuf {
    path.with_extension(ext)
}

#[test]
fn decompose_format_text_files() {
    for input in inputs() {
        let text = std::fs::read_to_string(&input).unwrap();
        let header = text.lines().next().unwrap();
        let (buffer, rule) = header
            .strip_prefix("# ")
            .and_then(|h| h.split_once(": "))
            .unwrap_or_else(|| panic!("{}: bad header", input.display()));
        let rule: DecomposeRule = rule.parse().unwrap();
        let program: Program = text.parse().unwrap();
        let after = decompose_format(&program, buffer, &rule)
            .unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        let printed = after.to_string();
        let reparsed: Program = printed.parse().unwrap();
        assert_eq!(
            reparsed.to_string(),
            printed,
            "{}: round trip",
            input.display()
        );
        expect(&with_ext(&input, "after.sir"), &printed);

        let func = lower_iterations(&after).unwrap();
        let printed = func.to_string();
        let reparsed: Func = printed.parse().unwrap();
        assert_eq!(reparsed.to_string(), printed);
        expect(&with_ext(&input, "pos"), &printed);

        let parts: Vec<String> = func
            .body
            .iter()
            .filter_map(|s| match s {
                Stmt::Block { name, .. } if !name.ends_with("init") => Some(name.clone()),
                _ => None,
            })
            .collect();
        if parts.len() > 1 {
            let (fused, _) = horizontal_fuse(&func, &parts).unwrap();
            let printed = fused.to_string();
            let reparsed: Func = printed.parse().unwrap();
            assert_eq!(reparsed.to_string(), printed);
            expect(&with_ext(&input, "hf.pos"), &printed);
        }
    }
}
