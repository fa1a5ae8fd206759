//! Differential tests: every kernel × format through the stage-I interpreter and
//! through the lowering pipeline (executed by `common::flat_eval`), on seeded random
//! inputs with empty rows, empty matrices, single rows, long rows and block sizes that
//! do not divide the shape.

mod common;

use common::{differential, Pattern};

const FORMATS_2D: [&str; 11] = [
    "csr",
    "csc",
    "coo",
    "dcsr",
    "bsr:2x2",
    "dbsr:2x3",
    "ell",
    "ell:7",
    "dia",
    "srbcrs:2x2",
    "ragged",
];

const PATTERNS: [Pattern; 4] = [
    Pattern::Random(0.35),
    Pattern::EmptyRows(0.5),
    Pattern::Empty,
    Pattern::LongRow(0.2),
];

#[test]
fn spmv_every_format() {
    for (s, f) in FORMATS_2D.iter().enumerate() {
        let text = format!(
            "tensor A: f64[m, n] {f}\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n"
        );
        for (p, pat) in PATTERNS.iter().enumerate() {
            differential(&text, &[("m", 7), ("n", 5)], *pat, (s * 10 + p) as u64);
        }
    }
}
