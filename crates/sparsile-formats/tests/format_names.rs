//! Format strings: the names parse, unknown and wrongly cased names are errors that say
//! what to write.

use sparsile_formats::{Format, FormatError};

fn reason(text: &str) -> String {
    match text.parse::<Format>() {
        Err(FormatError::BadFormatString { reason, .. }) => reason,
        other => panic!("`{text}` parsed as {other:?}"),
    }
}

#[test]
fn lower_case_names_parse_with_surrounding_space() {
    for text in ["csr", " csc ", "bsr:4x4", "ell:8", "srbcrs:16x4", "dense"] {
        let f: Format = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(f.to_string(), text.trim());
    }
}

#[test]
fn wrongly_cased_names_are_refused_with_the_right_spelling() {
    assert_eq!(reason("CSR"), "format names are lower case: write `csr`");
    assert_eq!(
        reason("Bsr:4X4"),
        "format names are lower case: write `bsr:4x4`"
    );
}

#[test]
fn unknown_names_are_refused() {
    assert!(
        reason("cssr").contains("unknown format"),
        "{}",
        reason("cssr")
    );
}
