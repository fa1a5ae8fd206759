//! Every `tests/programs/*.sir` file parses, verifies, prints back to its own text
//! (comment lines left out) and re-parses to the same program.

use std::fs;
use std::path::PathBuf;

use sparsile_ir::coord::{verify, Program};

fn program_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("tests/programs exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sir"))
        .collect();
    files.sort();
    files
}

/// The text without its `#` comment lines.
fn strip_comments(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn example_programs_round_trip() {
    let files = program_files();
    assert!(
        files.len() >= 12,
        "expected the example programs, found {files:?}"
    );
    for path in files {
        let name = path.display();
        let text = fs::read_to_string(&path).expect("readable file");
        let program: Program = text
            .parse()
            .unwrap_or_else(|e| panic!("{name}: parse error: {e}"));
        if let Err(errors) = verify(&program) {
            let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!("{name}: verifier errors:\n{}", list.join("\n"));
        }
        let printed = program.to_string();
        assert_eq!(
            printed,
            strip_comments(&text),
            "{name}: print differs from the file"
        );
        let mut reparsed: Program = printed
            .parse()
            .unwrap_or_else(|e| panic!("{name}: printed text does not parse: {e}"));
        assert_eq!(
            reparsed.to_string(),
            printed,
            "{name}: second print differs"
        );
        let mut original = program.clone();
        original.clear_spans();
        reparsed.clear_spans();
        assert_eq!(reparsed, original, "{name}: re-parsed program differs");
    }
}

#[test]
fn spans_point_at_declarations_and_statements() {
    let text = fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/programs/spmm_csr.sir"),
    )
    .expect("readable file");
    let program: Program = text.parse().expect("parses");
    let j = program.axis_by_name("J").expect("axis J");
    let span = program.axes[j].span;
    assert_eq!((span.line, span.col), (3, 3));
    assert_eq!(
        &text[span.start..span.end],
        "axis J = sparse_variable(I, n, nnz=nnz_A, idx=i32)"
    );
    let c = program.buffer_by_name("C").expect("buffer C");
    assert_eq!(
        &text[program.buffers[c].span.start..program.buffers[c].span.end],
        "buffer C: f32[I, K] output"
    );
    let sparsile_ir::coord::Stmt::Iteration(it) = &program.body[0] else {
        panic!("expected an iteration");
    };
    assert_eq!((it.span.line, it.span.col), (9, 3));
    assert!(text[it.span.start..it.span.end].ends_with("B[j, k]\n  }"));
    let sparsile_ir::coord::Stmt::Store(st) = &it.body[0] else {
        panic!("expected a store");
    };
    assert_eq!(
        &text[st.span.start..st.span.end],
        "C[i, k] = C[i, k] + A[i, j] * B[j, k]"
    );
    assert_eq!((st.span.line, st.span.col), (13, 5));
}

#[test]
fn nan_and_negative_zero_literals_round_trip() {
    let text = "func f() {\n  buffer T: f64[] temp\n  T[] = nan + -0.0 * 0.0\n}\n";
    let program: Program = text.parse().expect("parses");
    assert_eq!(program.to_string(), text);
    let sparsile_ir::coord::Stmt::Store(st) = &program.body[0] else {
        panic!("expected a store");
    };
    let sparsile_ir::coord::Expr::Binary { lhs, rhs, .. } = &st.value else {
        panic!("expected a sum");
    };
    assert!(matches!(**lhs, sparsile_ir::coord::Expr::Float(x) if x.is_nan()));
    let sparsile_ir::coord::Expr::Binary { lhs: z, .. } = &**rhs else {
        panic!("expected a product");
    };
    assert!(matches!(**z, sparsile_ir::coord::Expr::Float(x) if x == 0.0 && x.is_sign_negative()));
}
