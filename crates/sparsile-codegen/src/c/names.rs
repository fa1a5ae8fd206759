//! C identifiers for the names of a function's params, buffers and locals.
//!
//! Every IR name becomes a valid C identifier that is unique in the translation unit
//! and clashes with no C keyword, no standard-library name the generated code uses,
//! and none of the ABI's own parameters (`buffers`, `params`, `begin`, `end`, `ph`).
//! Names are kept as written when possible (`A_indptr` stays `A_indptr`); otherwise
//! characters outside `[A-Za-z0-9_]` become `_` and a numeric suffix makes them unique
//! (`i`, `i_2`, …).
//!
//! ```text
//! "i", "i", "x.y", "float"  ->  i, i_2, x_y, float_2
//! ```

use std::collections::HashSet;

/// Identifiers the generated code uses for its own purposes.
const RESERVED: &[&str] = &[
    // C99 keywords
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "_Bool",
    "_Complex",
    "_Imaginary", // common macros and types
    "bool",
    "true",
    "false",
    "NULL",
    "size_t",
    "int32_t",
    "int64_t",
    "uint32_t",
    "uint64_t",
    "INT64_C",
    "INT64_MIN",
    "INT64_MAX",
    "INFINITY",
    "NAN",
    "calloc",
    "malloc",
    "free",
    // libm functions the emitter calls
    "exp",
    "expf",
    "sqrt",
    "sqrtf",
    "log",
    "logf",
    "fabs",
    "fabsf",
    "fmax",
    "fmaxf",
    "fmin",
    "fminf",
    "floor",
    "floorf",
    "main", // ABI parameters
    "buffers",
    "params",
    "begin",
    "end",
    "ph",
];

/// Hands out unique C identifiers.
#[derive(Debug, Default, Clone)]
pub(crate) struct Names {
    taken: HashSet<String>,
}

impl Names {
    pub(crate) fn new() -> Names {
        Names::default()
    }

    /// Hands out no name in `extra` either (another language's keywords and built-ins).
    pub(crate) fn with_reserved(extra: &[&str]) -> Names {
        Names {
            taken: extra.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A fresh identifier close to `wanted`.
    pub(crate) fn fresh(&mut self, wanted: &str) -> String {
        let base = sanitize(wanted);
        let mut candidate = base.clone();
        let mut n = 2;
        while self.taken.contains(&candidate) || is_reserved(&candidate) {
            candidate = format!("{base}_{n}");
            n += 1;
        }
        self.taken.insert(candidate.clone());
        candidate
    }
}

fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        s.push('v');
    }
    let first = s.as_bytes()[0];
    let second = s.as_bytes().get(1).copied().unwrap_or(b'a');
    // Leading digits are invalid; `__x` and `_X` are reserved for the implementation.
    if first.is_ascii_digit() || (first == b'_' && (second == b'_' || second.is_ascii_uppercase()))
    {
        s.insert(0, 'v');
    }
    // The generated code's own helpers and macros start with these.
    if s.starts_with("sparsile_") || s.starts_with("SPARSILE_") {
        s.insert_str(0, "v_");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_valid() {
        let mut n = Names::new();
        assert_eq!(n.fresh("i"), "i");
        assert_eq!(n.fresh("i"), "i_2");
        assert_eq!(n.fresh("x.y"), "x_y");
        assert_eq!(n.fresh("float"), "float_2");
        assert_eq!(n.fresh("2d"), "v2d");
        assert_eq!(n.fresh("__x"), "v__x");
        assert_eq!(n.fresh(""), "v");
        assert_eq!(n.fresh("sparsile_x"), "v_sparsile_x");
        assert_eq!(n.fresh("end"), "end_2");
    }
}
