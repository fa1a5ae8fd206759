//! Every index notation error, with the line and column it points at.

use sparsile::compile_notation;
use sparsile::notation::NotationError;

/// Compiles `text`, expecting an error at (line, column); returns it.
fn error_at(text: &str, line: u32, col: u32) -> NotationError {
    let err = compile_notation(text).expect_err(text);
    assert_eq!(
        (err.span().line, err.span().col),
        (line, col),
        "wrong place for `{err}` in\n{text}"
    );
    assert!(err
        .to_string()
        .starts_with(&format!("line {line}, column {col}: ")));
    err
}

const DECLS: &str = "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\n";

#[test]
fn lexical_and_syntax_errors() {
    let e = error_at("tensor A: f32[m] \nA[i] = $\n", 2, 8);
    assert!(matches!(e, NotationError::UnexpectedChar { ch: '$', .. }));
    let e = error_at("tensor A: f32[m]\nA[i] = 99999999999999999999\n", 2, 8);
    assert!(matches!(e, NotationError::BadNumber { .. }));
    let e = error_at("tensor A: f32[m]\nA[i] 2\n", 2, 6);
    assert!(matches!(e, NotationError::UnexpectedToken { .. }), "{e}");
    assert!(e
        .to_string()
        .contains("expected `=`, `+=`, `max=` or `min=`"));
    // `max=` is one operator: no space before `=`.
    let e = error_at(
        "tensor A: f32[m]\ntensor B: f32[m]\nB[i] max = A[i]\n",
        3,
        6,
    );
    assert!(matches!(e, NotationError::UnexpectedToken { .. }), "{e}");
    let e = error_at("tensor A: f32[m]\nA[i] = (A[i]\n", 2, 13);
    assert!(matches!(e, NotationError::UnexpectedToken { .. }));
    let e = error_at("tensor A: f32[m,]\n", 1, 17);
    assert!(matches!(e, NotationError::UnexpectedToken { .. }));
    let e = error_at(
        "tensor A: f32[m]\ntensor B: f32[m]\nB[i] = A[i] A[i]\n",
        3,
        13,
    );
    assert!(e.to_string().contains("end of line"));
}

#[test]
fn declaration_errors() {
    let e = error_at("tensor A: f31[m]\n", 1, 11);
    assert!(matches!(e, NotationError::UnknownDType { .. }));
    let e = error_at("tensor A: f32[m, n] bsr:0x4\n", 1, 21);
    assert!(matches!(e, NotationError::BadFormat { .. }), "{e}");
    let e = error_at("tensor A: f32[m, n]   blocky  # comment\n", 1, 23);
    assert!(matches!(e, NotationError::BadFormat { ref text, .. } if text == "blocky"));
    let e = error_at("tensor A: f32[m]\ntensor A: f32[n]\n", 2, 1);
    assert!(matches!(e, NotationError::DuplicateTensor { first, .. } if first.line == 1));
    let e = error_at("tensor A: f32[0]\n", 1, 15);
    assert!(matches!(e, NotationError::BadDimension { value: 0, .. }));
    // Format not supporting the order.
    let e = error_at("tensor A: f32[m, n, o] csr\n", 1, 24);
    assert!(matches!(e, NotationError::UnsupportedOrder { ndim: 3, .. }));
    let e = error_at("tensor v: f32[m] csf\n", 1, 18);
    assert!(matches!(e, NotationError::UnsupportedOrder { ndim: 1, .. }));
    // A scalar is dense.
    let e = error_at("tensor s: f32[] csr\n", 1, 17);
    assert!(matches!(e, NotationError::UnsupportedOrder { ndim: 0, .. }));
}

#[test]
fn max_and_min_reductions_need_a_dense_float_output() {
    let e = error_at(
        "tensor A: i32[m, n]\ntensor M: i32[m]\nM[i] max= A[i,j]\n",
        3,
        1,
    );
    assert!(
        matches!(e, NotationError::UnsupportedReduction { op: "max=", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("floating-point"), "{e}");
    let e = error_at(
        "tensor A: f32[m, n] csr\ntensor C: f32[m, n] csr\nC[i,j] min= A[i,j]\n",
        3,
        1,
    );
    assert!(e.to_string().contains("must be dense"), "{e}");
    // A scalar written without brackets is read with them.
    let e = error_at(
        "tensor A: f32[m, n] csr\ntensor s: f32[]\ntensor t: f32[]\ns = A[i,j]\nt = s\n",
        5,
        6,
    );
    assert!(matches!(e, NotationError::UnexpectedToken { .. }), "{e}");
}

#[test]
fn name_and_shape_errors() {
    let e = error_at(&format!("{DECLS}C[i,k] = A[i,j] * D[j,k]\n"), 4, 19);
    assert!(matches!(e, NotationError::UnknownTensor { ref name, .. } if name == "D"));
    let e = error_at(&format!("{DECLS}C[i,k] = A[i,j] * B[j]\n"), 4, 19);
    assert!(
        matches!(
            e,
            NotationError::IndexCount {
                expected: 2,
                found: 1,
                ..
            }
        ),
        "{e}"
    );
    let e = error_at(&format!("{DECLS}C[i,k] = A[i,j] * B[j,k,l]\n"), 4, 19);
    assert!(matches!(e, NotationError::IndexCount { found: 3, .. }));
    let e = error_at(&format!("{DECLS}C[i,k] = A[i,i] * B[i,k]\n"), 4, 14);
    assert!(matches!(e, NotationError::RepeatedIndex { .. }));
    // An index variable used for dimensions of different sizes (n vs k).
    let e = error_at(&format!("{DECLS}C[i,k] = A[i,j] * B[k,k2]\n"), 4, 21);
    match e {
        NotationError::DimMismatch {
            var,
            first,
            second,
            first_span,
            ..
        } => {
            assert_eq!(
                (var.as_str(), first.as_str(), second.as_str()),
                ("k", "k", "n")
            );
            assert_eq!((first_span.line, first_span.col), (4, 5));
        }
        other => panic!("{other}"),
    }
    let e = error_at(&format!("{DECLS}C[i,k] = A[i,j] * B[j,j]\n"), 4, 23);
    assert!(matches!(e, NotationError::RepeatedIndex { .. }));
    let e = error_at(&format!("{DECLS}C[i,k] = A[i,j]\n"), 4, 5);
    assert!(matches!(e, NotationError::UnboundOutputIndex { ref var, .. } if var == "k"));
    let e = error_at(&format!("{DECLS}C[i,k] = foo(A[i,j]) * B[j,k]\n"), 4, 10);
    assert!(matches!(e, NotationError::UnknownFunction { arity: 1, .. }));
    let e = error_at(&format!("{DECLS}C[i,k] = max(A[i,j]) * B[j,k]\n"), 4, 10);
    assert!(matches!(e, NotationError::UnknownFunction { arity: 1, .. }));
}

#[test]
fn type_errors() {
    let e = error_at(
        "tensor A: f32[m]\ntensor B: f64[m]\ntensor C: f32[m]\nC[i] = A[i] + B[i]\n",
        4,
        8,
    );
    assert!(matches!(e, NotationError::DTypeMismatch { .. }));
    let e = error_at(
        "tensor A: f64[m]\ntensor C: f32[m]\nC[i] = A[i] * 2\n",
        3,
        8,
    );
    assert!(matches!(e, NotationError::DTypeMismatch { .. }));
    // Half-precision values widen into f32 and f64 outputs, never the other way.
    for (from, to) in [("f16", "f32"), ("bf16", "f64")] {
        let text = format!(
            "tensor A: {from}[m]\ntensor B: {from}[m]\ntensor C: {to}[m]\nC[i] = A[i] * B[i]\n"
        );
        sparsile::notation::compile_notation(&text)
            .unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
    }
    let e = error_at(
        "tensor A: f32[m]\ntensor C: f16[m]\nC[i] = A[i] * 2\n",
        3,
        8,
    );
    assert!(matches!(e, NotationError::DTypeMismatch { .. }));
    let e = error_at(
        "tensor A: f16[m]\ntensor B: f32[m]\ntensor C: f32[m]\nC[i] = A[i] * B[i]\n",
        4,
        8,
    );
    assert!(matches!(e, NotationError::DTypeMismatch { .. }));
    let e = error_at(
        "tensor A: i32[m]\ntensor C: i32[m]\nC[i] = A[i] * 0.5\n",
        3,
        8,
    );
    assert!(matches!(e, NotationError::DTypeMismatch { .. }));
    let e = error_at(
        "tensor A: i32[m]\ntensor C: i32[m]\nC[i] = exp(A[i])\n",
        3,
        8,
    );
    assert!(
        e.to_string().contains("floating-point argument of `exp`"),
        "{e}"
    );
    let e = error_at(
        "tensor X: f32[p, c]\ntensor idx: f32[m]\ntensor Y: f32[m, c]\nY[i,k] = X[idx[i], k]\n",
        4,
        12,
    );
    assert!(matches!(e, NotationError::IndexNotInteger { .. }));
}

#[test]
fn assignment_order_errors() {
    let e = error_at(&format!("{DECLS}C[i,k] += A[i,j] * B[j,k]\n"), 4, 1);
    assert!(matches!(e, NotationError::AccumulateBeforeAssign { .. }));
    let e = error_at(
        "tensor A: f32[m]\ntensor B: f32[m]\ntensor C: f32[m]\nB[i] = C[i]\nC[i] = A[i]\n",
        4,
        8,
    );
    assert!(matches!(e, NotationError::ReadBeforeAssign { .. }));
    let e = error_at(
        "tensor A: f32[m]\ntensor C: f32[m]\nC[i] = A[i]\nC[i] = C[i] * A[i]\n",
        4,
        8,
    );
    assert!(matches!(e, NotationError::ReadsOwnOutput { .. }));
    // A scatter through the output itself.
    let e = error_at(
        "tensor idx: i32[m]\ntensor Y: i32[m]\nY[Y[i]] = idx[i]\n",
        3,
        3,
    );
    assert!(matches!(e, NotationError::ReadsOwnOutput { .. }));
}

#[test]
fn sparse_output_pattern_errors() {
    let base = "tensor A: f32[m, n] csr\ntensor D: f32[m, n]\ntensor S: f32[m, n] csc\ntensor C: f32[m, n] csr\n";
    // A dense term fills entries outside any stored pattern.
    let e = error_at(&format!("{base}C[i,j] = A[i,j] + D[i,j]\n"), 5, 10);
    assert!(
        matches!(e, NotationError::PatternNotDerivable { .. }),
        "{e}"
    );
    // exp(0) != 0.
    let e = error_at(&format!("{base}C[i,j] = exp(A[i,j])\n"), 5, 10);
    assert!(matches!(e, NotationError::PatternNotDerivable { .. }));
    // Another format cannot give the pattern of a csr output.
    let e = error_at(&format!("{base}C[i,j] = S[i,j] * D[i,j]\n"), 5, 10);
    assert!(e.to_string().contains("format `csr`"), "{e}");
    // Mixed union and intersection.
    let e = error_at(
        "tensor A: f32[m, n] csr\ntensor B: f32[m, n] csr\ntensor E: f32[m, n] csr\ntensor C: f32[m, n] csr\nC[i,j] = (A[i,j] + B[i,j]) * E[i,j]\n",
        5,
        10,
    );
    assert!(e.to_string().contains("mixes"), "{e}");
    // A later statement must stay within the pattern fixed by the first.
    let e = error_at(
        "tensor A: f32[m, n] csr\ntensor B: f32[m, n] csr\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] * 2\nC[i,j] += B[i,j]\n",
        5,
        11,
    );
    assert!(matches!(e, NotationError::PatternNotDerivable { .. }));
}

#[test]
fn operands_without_random_access_must_drive() {
    // SR-BCRS cannot locate a coordinate: reading it inside a non-linear function fails.
    let e = error_at(
        "tensor A: f32[m, n] srbcrs:2x4\ntensor C: f32[m, n]\nC[i,j] = relu(A[i,j])\n",
        3,
        15,
    );
    assert!(matches!(e, NotationError::NotRandomAccess { .. }), "{e}");
    // ...but as a factor of a product it drives the iteration.
    assert!(compile_notation(
        "tensor A: f32[m, n] srbcrs:2x4\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n"
    )
    .is_ok());
}

/// Parentheses, minus signs, calls, indirect accesses and long operator chains deeper
/// than [`sparsile::notation::parser::MAX_DEPTH`] are errors (they used to overflow the
/// stack: ~7,000 parentheses killed the process); the deepest accepted programs still
/// compile and evaluate on a test thread's stack.
#[test]
fn nesting_past_the_limit_is_an_error_and_up_to_it_works() {
    use sparsile::notation::parser::MAX_DEPTH;
    let decls = "tensor x: f64[n]\ntensor y: f64[n]\n";
    let cases = [
        format!("y[i] = {}x[i]{}", "(".repeat(7000), ")".repeat(7000)),
        format!("y[i] = {}x[i]", "-".repeat(50_000)),
        format!("y[i] = x[i]{}", " + x[i]".repeat(20_000)),
        format!("y[i] = x[i]{}", " * x[i]".repeat(MAX_DEPTH)),
        format!(
            "y[i] = {}x[i]{}",
            "exp(".repeat(MAX_DEPTH),
            ")".repeat(MAX_DEPTH)
        ),
    ];
    for program in &cases {
        let err = compile_notation(&format!("{decls}{program}\n")).unwrap_err();
        assert!(
            matches!(err, NotationError::TooDeep { max: MAX_DEPTH, .. }),
            "{err}"
        );
        assert!(err.to_string().starts_with("line 3, column "), "{err}");
    }
    let idx = "tensor x: f64[n]\ntensor p: i32[n]\ntensor y: f64[n]\n";
    let deep_indirect = format!(
        "y[i] = x[{}i{}]\n",
        "p[".repeat(MAX_DEPTH + 5),
        "]".repeat(MAX_DEPTH + 5)
    );
    let err = compile_notation(&format!("{idx}{deep_indirect}")).unwrap_err();
    assert!(matches!(err, NotationError::TooDeep { .. }), "{err}");

    // Just inside the limit: parsed, lowered and evaluated (sum of n terms = n * x).
    let terms = MAX_DEPTH - 10;
    let program = format!("{decls}y[i] = (x[i]{})\n", " + x[i]".repeat(terms));
    let x = sparsile::formats::SparseTensor::dense_from_f64(
        &[3],
        &[1.0, 2.0, 3.0],
        sparsile::ir::DType::F64,
    )
    .unwrap();
    let out = sparsile::evaluate(
        &program,
        &std::collections::HashMap::from([("x".to_string(), x)]),
    )
    .unwrap();
    let n = (terms + 1) as f64;
    assert_eq!(out["y"].to_dense_f64(), vec![n, 2.0 * n, 3.0 * n]);
}
