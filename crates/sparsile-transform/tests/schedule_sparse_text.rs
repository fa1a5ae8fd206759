//! Text-IR tests of the stage-I sparse schedules. Each `schedule/<primitive>/X.sir`
//! starts with a comment line `# <iteration>: <axis>, <axis>, ...` giving the arguments;
//! the scheduled program is compared with `X.after.sir` and its `lower_iterations`
//! output with `X.pos` (`SPARSILE_BLESS=1` rewrites both). Expected files must parse
//! back and print identically.

use std::path::{Path, PathBuf};

use sparsile_ir::coord::{self, Program};
use sparsile_ir::settings::Settings;
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::{sparse_fuse, sparse_reorder, ScheduleError};

type Primitive = fn(&Program, &str, &[String]) -> Result<Program, ScheduleError>;

fn inputs(primitive: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schedule")
        .join(primitive);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "sir")
                && !p.to_string_lossy().ends_with(".after.sir")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs for {primitive}");
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

fn run(primitive: &str, f: Primitive) {
    for input in inputs(primitive) {
        let source = std::fs::read_to_string(&input).unwrap();
        let args = source
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# "))
            .unwrap_or_else(|| panic!("{}: no `# iteration: axes` line", input.display()));
        let (iteration, axes) = args.split_once(':').expect("`iteration: axes`");
        let axes: Vec<String> = axes.split(',').map(|a| a.trim().to_string()).collect();
        let program: Program = source
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        let out = f(&program, iteration.trim(), &axes)
            .unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        coord::verify(&out).unwrap_or_else(|e| panic!("{}: {e:?}", input.display()));
        let text = out.to_string();
        let reparsed: Program = text.parse().unwrap();
        assert_eq!(
            reparsed.to_string(),
            text,
            "{}: round trip",
            input.display()
        );
        let after = PathBuf::from(input.to_string_lossy().replace(".sir", ".after.sir"));
        expect(&after, &text);
        let func = lower_iterations(&out).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        sparsile_ir::loops::verify(&func)
            .unwrap_or_else(|e| panic!("{}: {e:?}\n{func}", input.display()));
        let pos = func.to_string();
        let back: sparsile_ir::loops::Func = pos.parse().unwrap();
        assert_eq!(
            back.to_string(),
            pos,
            "{}: stage-II round trip",
            input.display()
        );
        expect(&input.with_extension("pos"), &pos);
    }
}

#[test]
fn sparse_reorder_text_files() {
    run("sparse_reorder", sparse_reorder);
}

#[test]
fn sparse_fuse_text_files() {
    run("sparse_fuse", sparse_fuse);
}

#[test]
fn unfused_text_is_unchanged_and_fused_text_round_trips() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/schedule/sparse_fuse/sddmm_csr.after.sir"),
    )
    .unwrap();
    assert!(text.contains("] fuse(I, J) as (i, j, k)"), "{text}");
    let program: Program = text.parse().unwrap();
    assert_eq!(program.to_string(), text);
    let json = serde_json::to_string(&program).unwrap();
    let back: Program = serde_json::from_str(&json).unwrap();
    assert_eq!(back, program);
    // Unfused iterations serialise without the field and read back without it.
    let unfused: Program = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schedule/sparse_fuse/sddmm_csr.sir"),
    )
    .unwrap()
    .parse()
    .unwrap();
    let json = serde_json::to_string(&unfused).unwrap();
    assert!(!json.contains("fused"), "{json}");
    assert_eq!(serde_json::from_str::<Program>(&json).unwrap(), unfused);
}
