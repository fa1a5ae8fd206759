//! Parse errors point at the offending line and column.

use sparsile_ir::coord::Program;

const HEADER: &str = "func f(m, n) {\n  axis I = dense_fixed(m)\n  buffer X: f32[I] input\n  buffer Y: f32[I] output\n";

/// `(text, expected error)`; `HEADER` is prepended where the text starts with `+`.
const CASES: &[(&str, &str)] = &[
    ("", "line 1, column 1: expected `func`, found end of input"),
    ("func f(m n) {\n}\n", "line 1, column 10: expected `,` or `)`, found `n`"),
    ("func f(m, m) {\n}\n", "line 1, column 11: parameter `m` is declared twice"),
    (
        "func f(m) {\n  axis I = dense_fixed(m)\n  buffer X: f32[I) input\n}\n",
        "line 3, column 18: expected `,` or `]`, found `)`",
    ),
    (
        "func f(m) {\n  axis I = dense_fixd(m)\n}\n",
        "line 2, column 12: unknown axis kind `dense_fixd` (expected one of dense_fixed, dense_variable, sparse_fixed, sparse_variable)",
    ),
    (
        "func f(m) {\n  axis I = dense_fixed(k)\n}\n",
        "line 2, column 24: unknown parameter `k`",
    ),
    (
        "func f(m) {\n  axis I = dense_fixed(m)\n  axis I = dense_fixed(m)\n}\n",
        "line 3, column 3: axis `I` is declared twice",
    ),
    (
        "func f(m) {\n  axis J = sparse_variable(K, m, nnz=m)\n}\n",
        "line 2, column 28: unknown axis `K`",
    ),
    (
        "func f(m) {\n  axis J = sparse_variable(m, nnz=m)\n}\n",
        "line 2, column 31: expected the axis length, found `nnz`",
    ),
    (
        "func f(m) {\n  axis I = dense_fixed(m, size=3)\n}\n",
        "line 2, column 27: expected an axis attribute (`nnz=`, `per=`, `idx=`, `nonunique` or `nopad`), found `size`",
    ),
    (
        "func f(m) {\n  axis J = sparse_fixed(none, m, per=2, per=3)\n}\n",
        "line 2, column 41: attribute `per` is given twice",
    ),
    (
        "func f(m) {\n  axis J = sparse_fixed(none, m, per=2, idx=u8)\n}\n",
        "line 2, column 45: unknown index type `u8` (expected i32 or i64)",
    ),
    (
        "func f(m) {\n  axis I = dense_fixed(m)\n  buffer X: f33[I] input\n}\n",
        "line 3, column 13: unknown element type `f33` (expected f16, bf16, f32, f64, i32 or i64)",
    ),
    (
        "func f(m) {\n  axis I = dense_fixed(m)\n  buffer X: f32[I] inout\n}\n",
        "line 3, column 20: expected a buffer role (`input`, `output` or `temp`), found `inout`",
    ),
    ("+  iter s over [I: T] as (i) {\n  }\n}\n", "line 5, column 19: expected `S` or `R`, found `T`"),
    ("+  iter s over [I: S] as (i, j) {\n  }\n}\n", "line 5, column 25: iteration `s` has 1 axis but binds 2 variables"),
    ("+  iter s over [I: S] as (m) {\n  }\n}\n", "line 5, column 26: variable `m` has the name of a parameter"),
    (
        "+  iter s over [I: S] as (i) {\n    iter t over [I: S] as (i) {\n    }\n  }\n}\n",
        "line 6, column 28: variable `i` is already in scope",
    ),
    ("+  iter s over [I: S] as (i) {\n    Y[i] = X[j]\n  }\n}\n", "line 6, column 14: unknown variable or parameter `j`"),
    ("+  iter s over [I: S] as (i) {\n    Y[i] = Z[i]\n  }\n}\n", "line 6, column 12: unknown buffer `Z`"),
    ("+  iter s over [I: S] as (i) {\n    Y[i] = -X[i]\n  }\n}\n", "line 6, column 12: `-` must be followed by a number (negate an expression with `neg(...)`), found `X`"),
    ("+  iter s over [I: S] as (i) {\n    Y[i] = pow(X[i])\n  }\n}\n", "line 6, column 12: unknown function `pow` (expected max, min, neg, exp, relu, sqrt, abs or log)"),
    ("+  iter s over [I: S] as (i) {\n    Y[i] = max(X[i])\n  }\n}\n", "line 6, column 15: `max` takes 2 argument(s), found 1"),
    ("+  iter s over [I: S] as (i) {\n    Y[i] = (X[i] + 1.0\n  }\n}\n", "line 7, column 3: expected `)`, found `}`"),
    ("+  iter s over [I: S] as (i) {\n    Y[i] = X[i] $ 2.0\n  }\n}\n", "line 6, column 17: unexpected character `$`"),
    ("+  iter s over [I: S] as (i) {\n    Y[i] = 12abc\n  }\n}\n", "line 6, column 14: malformed number `12a`"),
    ("+  Y[0] = 99999999999999999999\n}\n", "line 5, column 10: integer literal `99999999999999999999` does not fit in 64 bits"),
    ("+  axis J = dense_fixed(m)\n}\n", "line 5, column 3: `axis` declarations must come before the statements"),
    ("+  Y[0] = 1.0\n", "line 6, column 1: expected `iter`, a store `buffer[...] = ...` or `}`, found end of input"),
    ("+}\n}\n", "line 6, column 1: expected end of input, found `}`"),
    ("+  Y[0] = 1.0 # a comment\n  none[0] = 1.0\n}\n", "line 6, column 3: expected `iter`, a store `buffer[...] = ...` or `}`, found `none`"),
];

#[test]
fn parse_errors_point_at_line_and_column() {
    let mut failures = Vec::new();
    for (k, (text, expected)) in CASES.iter().enumerate() {
        let src = match text.strip_prefix('+') {
            Some(rest) => format!("{HEADER}{rest}"),
            None => text.to_string(),
        };
        match src.parse::<Program>() {
            Ok(p) => failures.push(format!("case {k}: parsed, printing\n{p}")),
            Err(e) => {
                if e.to_string() != *expected {
                    failures.push(format!(
                        "case {k}: got      {e}\n        expected {expected}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn error_span_covers_the_token() {
    let err = "func f(m) {\n  axis I = dense_fixed(mm)\n}\n"
        .parse::<Program>()
        .unwrap_err();
    assert_eq!((err.span.line, err.span.col), (2, 24));
    assert_eq!(err.span.end - err.span.start, 2);
    assert_eq!(err.message, "unknown parameter `mm`");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for depth in [250, 100_000] {
        let value = format!("{}1.0{}", "(".repeat(depth), ")".repeat(depth));
        let src = format!("{HEADER}  Y[0] = {value}\n}}\n");
        let err = src.parse::<Program>().unwrap_err();
        assert_eq!(err.span.line, 5);
        assert_eq!(err.message, "nested more than 200 levels deep");
    }
    let mut src = HEADER.to_string();
    for k in 0..300 {
        src.push_str(&format!("iter s{k} over [] as () {{\n"));
    }
    let err = src.parse::<Program>().unwrap_err();
    assert_eq!(err.message, "nested more than 200 levels deep");
    assert_eq!(err.span.line, 5 + 200);
    let shallow = format!(
        "{HEADER}  Y[0] = {}1.0{}\n}}\n",
        "(".repeat(150),
        ")".repeat(150)
    );
    assert!(shallow.parse::<Program>().is_ok());
}

/// A long chain of operators builds a tree as deep as the chain is long (`a + b + c` is
/// `(a + b) + c`): each operator counts one level, so 20,000 terms are an error instead of
/// a tree that the verifier, the printer or a pass overflows the stack on.
#[test]
fn long_operator_chains_count_as_nesting() {
    for op in ["+", "*", "-", "/"] {
        let chain = format!("1.0{}", format!(" {op} 1.0").repeat(20_000));
        let src = format!("{HEADER}  Y[0] = {chain}\n}}\n");
        let err = src.parse::<Program>().unwrap_err();
        assert_eq!(err.message, "nested more than 200 levels deep", "{op}");
    }
    // Chains inside parentheses add up with the parentheses.
    let value = format!("{}1.0{}", "(1.0 + ".repeat(120), ")".repeat(120));
    let src = format!("{HEADER}  Y[0] = {value}\n}}\n");
    assert_eq!(
        src.parse::<Program>().unwrap_err().message,
        "nested more than 200 levels deep"
    );
    // A chain of 150 operators is fine and prints back to the same text.
    let chain = format!("1.0{}", " + 1.0".repeat(150));
    let src = format!("{HEADER}  Y[0] = {chain}\n}}\n");
    let program = src.parse::<Program>().unwrap();
    assert_eq!(
        program.to_string().parse::<Program>().unwrap().to_string(),
        program.to_string()
    );
}
