//! Malformed loop-level text is rejected with the line, column and problem.

use sparsile_ir::loops::Func;

fn error_of(text: &str) -> String {
    match text.parse::<Func>() {
        Ok(f) => panic!("expected a parse error, parsed:\n{f}"),
        Err(e) => e.to_string(),
    }
}

const HEAD: &str = "flat func f(n) {\n  buffer X: f32[n] output values\n";

#[test]
fn reports_line_and_column() {
    let cases: &[(&str, &str)] = &[
        ("func f() {\n}\n", "line 1, column 1: expected `pos` or `flat`, found `func`"),
        ("loop func f() {\n}\n", "line 1, column 1: expected `pos` or `flat`, found `loop`"),
        (
            "flat func f(n) {\n  buffer X: f32[n] output vals\n}\n",
            "line 2, column 27: expected a buffer kind (`values`, `indptr(..)`, `indices(..)`, `scratch`, `local` or `shared`), found `vals`",
        ),
        (
            "flat func f(n) {\n  buffer X: f32[n] output\n}\n",
            "line 3, column 1: expected a buffer kind (`values`, `indptr(..)`, `indices(..)`, `scratch`, `local` or `shared`), found `}`",
        ),
        (
            "flat func f(n) {\n  buffer P: i32[n] input indptr(A, x)\n}\n",
            "line 2, column 36: expected an axis number, found `x`",
        ),
        (
            "pos func f(I) {\n  axis I = dense_fixed(4)\n}\n",
            "line 2, column 3: axis `I` has the name of a parameter",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(error_of(text), *expected, "for input:\n{text}");
    }
}

#[test]
fn statement_errors() {
    let cases: &[(&str, &str)] = &[
        ("  for i in 0..n {\n    X[i] = 1.0\n  }\n", ""),
        ("  for i in 0 n {\n  }\n", "line 3, column 14: expected `..`, found `n`"),
        (
            "  for i in 0..n sequential {\n  }\n",
            "line 3, column 17: expected `{` or a loop kind (`parallel`, `vectorized`, `unrolled`, `batched`, `register_tiled` or `bind`), found `sequential`",
        ),
        ("  for n in 0..n {\n  }\n", "line 3, column 7: variable `n` has the name of a parameter"),
        (
            "  for i in 0..n {\n    for i in 0..n {\n    }\n  }\n",
            "line 4, column 9: variable `i` is already in scope",
        ),
        ("  let a: i16 = 1\n", "line 3, column 10: expected a type (`idx` or a float type), found `i16`"),
        ("  let a: f32 = a\n", "line 3, column 16: unknown variable or parameter `a`"),
        ("  a = 1.0\n", "line 3, column 3: unknown variable `a`"),
        ("  Y[0] = 1.0\n", "line 3, column 3: unknown buffer `Y`"),
        ("  if 1 < 2 < 3 {\n  }\n", "line 3, column 12: comparisons do not chain; add parentheses"),
        ("  if 1 {\n  } else 2\n", "line 4, column 10: expected `{`, found `2`"),
        ("  X[0] = search(Y, 0, 1, 2)\n", "line 3, column 17: unknown buffer `Y`"),
        ("  X[0] = search(X, 0, 1)\n", "line 3, column 24: expected `,`, found `)`"),
        ("  X[0] = select(1, 2.0)\n", "line 3, column 16: `select` takes 3 argument(s), found 2"),
        (
            "  X[0] = sin(1.0)\n",
            "line 3, column 10: unknown function `sin` (expected select, search, max, min, neg, exp, relu, sqrt, abs or log)",
        ),
        ("  X[0] = 1.0 ! 2.0\n", "line 3, column 14: unexpected character `!`"),
        ("  X[0] = 1 & 2\n", "line 3, column 12: unexpected character `&`"),
        ("  X[0] = -n\n", "line 3, column 10: `-` must be followed by a number (negate an expression with `neg(...)`), found `n`"),
        ("  block a. {\n  }\n", "line 3, column 12: expected a block name part, found `{`"),
        ("  X[0] = 1.0\n  buffer Z: f32[n] temp values\n", "line 4, column 3: `buffer` declarations must come before the statements"),
        ("  3 = 4\n", "line 3, column 3: expected a statement or `}`, found `3`"),
        ("  n\n", "line 3, column 3: expected a statement (`for`, `if`, `let`, `block`, `launch`, `sync_threads`, `sync_warp`, `x = ...` or `buffer[...] = ...`) or `}`, found `n`"),
        ("  for i in 0..n {\n  }\n  i = 1\n", "line 5, column 3: unknown variable `i`"),
        (
            "  for i in 0..n bind(blockIdx.w) {\n  }\n",
            "line 3, column 22: expected a GPU axis (`blockIdx.x`, `threadIdx.y`, ...), found `blockIdx.w`",
        ),
        ("  for i in 0..n bind blockIdx.x {\n  }\n", "line 3, column 22: expected `(`, found `blockIdx`"),
        ("  launch {\n  }\n", "line 3, column 10: expected a launch name, found `{`"),
        (
            "  let s: f32 = warp_sum(1.0)\n",
            "line 3, column 28: expected `,`, found `)`",
        ),
        (
            "  let s: f32 = warp_sum(1.0, n)\n",
            "line 3, column 30: expected the lanes of each group (an integer), found `n`",
        ),
        (
            "  let s: f32 = warp_segment_sum(1.0, 32)\n",
            "line 3, column 40: expected `,`, found `)`",
        ),
        ("  let warp_sum: f32 = 1.0\n", "line 3, column 7: expected a variable name, found `warp_sum`"),
        ("  mma m16n8k2 f16 (r, c, p) X[r] += X[p] * X[c]\n", "line 3, column 7: expected an mma shape (`m16n8k16`, `m16n8k8` or `m16n8k4`), found `m16n8k2`"),
        ("  mma m16n8k16 f8 (r, c, p) X[r] += X[p] * X[c]\n", "line 3, column 16: expected an mma type (`f16`, `bf16` or `tf32`), found `f8`"),
        ("  mma m16n8k16 f16 (r, c) X[r] += X[r] * X[c]\n", "line 3, column 25: expected `,`, found `)`"),
        ("  mma m16n8k16 f16 (r, c, p) X[r] += X[p] + X[c]\n", "line 3, column 38: expected the product of the two operands (`A * B`) after `+=`"),
        ("  mma m16n8k16 f16 (r, c, p) X[r] = X[p] * X[c]\n", "line 3, column 35: expected `+`, found `=`"),
        ("  mma m16n8k16 f16 (r, c, p) where r < n X[r] += X[p] * X[c]\n", "line 3, column 42: expected `:`, found `X`"),
        ("  mma m16n8k16 f16 (r, c, p) X[r] += X[p] * X[c]\n  X[r] = 1.0\n", "line 4, column 5: unknown variable or parameter `r`"),
        ("  mma m16n8k16 f16 (n, c, p) X[c] += X[p] * X[c]\n", "line 3, column 21: variable `n` has the name of a parameter"),
    ];
    let mut failures = Vec::new();
    for (body, expected) in cases {
        let text = format!("{HEAD}{body}}}\n");
        let actual = match text.parse::<Func>() {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        };
        if actual != *expected {
            failures.push(format!(
                "input:\n{text}expected: {expected}\nactual:   {actual}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn locals_end_with_their_statement_list() {
    let text = format!("{HEAD}  if 1 {{\n    let a: f32 = 1.0\n  }}\n  X[0] = a\n}}\n");
    assert_eq!(
        error_of(&text),
        "line 6, column 10: unknown variable or parameter `a`"
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let depth = 5000;
    let text = format!(
        "{HEAD}  X[0] = {}1.0{}\n}}\n",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    assert!(error_of(&text).contains("nested more than"));
    let mut blocks = String::new();
    for k in 0..depth {
        blocks.push_str(&format!("block b{k} {{\n"));
    }
    blocks.push_str(&"}\n".repeat(depth));
    let text = format!("{HEAD}{blocks}}}\n");
    assert!(error_of(&text).contains("nested more than"));
}

#[test]
fn columns_count_characters() {
    let text = format!("{HEAD}  # gewöhnlich\n  X[0] = é\n}}\n");
    assert_eq!(
        error_of(&text),
        "line 4, column 10: unexpected character `é`"
    );
    let text = format!("{HEAD}  X[0] = \"ä\" + é\n}}\n");
    assert_eq!(
        error_of(&text),
        "line 3, column 10: unexpected character `\"`"
    );
}

mod mutations {
    use proptest::prelude::*;
    use sparsile_ir::loops::{verify, Func};

    fn examples() -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/loops");
        let mut texts: Vec<String> = std::fs::read_dir(dir)
            .expect("tests/loops exists")
            .map(|e| e.expect("readable entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "pos" || e == "flat"))
            .map(|p| std::fs::read_to_string(p).expect("readable file"))
            .collect();
        texts.sort();
        texts
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// Cutting, duplicating or replacing a piece of a valid text never panics: the
        /// result is a parse error, or a function that verifies or not and round-trips.
        #[test]
        fn mutated_text_never_panics(
            file in 0usize..64,
            at in 0usize..4000,
            len in 0usize..40,
            how in 0usize..3,
            insert in "[a-z0-9_.\\[\\](){}<>=!&|+*/%:, -]{0,6}",
        ) {
            let texts = examples();
            let text = &texts[file % texts.len()];
            let chars: Vec<char> = text.chars().collect();
            let start = at % (chars.len() + 1);
            let end = (start + len).min(chars.len());
            let piece: String = chars[start..end].iter().collect();
            let before: String = chars[..start].iter().collect();
            let after: String = chars[end..].iter().collect();
            let mutated = match how {
                0 => format!("{before}{after}"),
                1 => format!("{before}{piece}{piece}{after}"),
                _ => format!("{before}{insert}{after}"),
            };
            if let Ok(f) = mutated.parse::<Func>() {
                let _ = verify(&f);
                let printed = f.to_string();
                let again: Func = printed.parse().expect("printed text parses");
                prop_assert_eq!(again.to_string(), printed);
            }
        }
    }
}

/// Operator chains (arithmetic and `&&` / `||`) count one level per operator, so a long
/// chain is an error, not a tree deep enough to overflow a later pass.
#[test]
fn long_operator_chains_are_an_error_not_a_crash() {
    for (op, value) in [("+", "1.0"), ("*", "1.0"), ("&&", "1 < 2"), ("||", "1 < 2")] {
        let chain = format!("{value}{}", format!(" {op} {value}").repeat(20_000));
        let text = if op.len() == 2 {
            format!("{HEAD}  if {chain} {{\n    X[0] = 1.0\n  }}\n}}\n")
        } else {
            format!("{HEAD}  X[0] = {chain}\n}}\n")
        };
        assert!(error_of(&text).contains("nested more than"), "{op}");
    }
}
