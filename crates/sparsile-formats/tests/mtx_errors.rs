//! One test per malformed-input error of the Matrix Market reader (and writer), each
//! checking the reported line number.

use std::io::Write;

use sparsile_formats::mtx::{
    self, MtxData, MtxError, MtxField, MtxReadOptions, MtxSymmetry, MtxWriteOptions,
};
use sparsile_formats::CooTensor;

fn err(text: &str) -> MtxError {
    mtx::read(text.as_bytes(), &MtxReadOptions::default()).unwrap_err()
}

const GENERAL: &str = "%%MatrixMarket matrix coordinate real general\n";

#[test]
fn empty_input() {
    let e = err("");
    assert!(matches!(e, MtxError::BadHeader { line: 1, .. }), "{e}");
}

#[test]
fn missing_banner() {
    let e = err("3 3 1\n1 1 1\n");
    assert!(matches!(e, MtxError::BadHeader { line: 1, .. }), "{e}");
    assert!(e.to_string().contains("%%MatrixMarket"), "{e}");
}

#[test]
fn banner_with_missing_word() {
    let e = err("%%MatrixMarket matrix coordinate real\n1 1 0\n");
    assert!(matches!(e, MtxError::BadHeader { line: 1, .. }), "{e}");
}

#[test]
fn unknown_format_field_and_symmetry() {
    for banner in [
        "%%MatrixMarket matrix sparse real general\n",
        "%%MatrixMarket matrix coordinate quaternion general\n",
        "%%MatrixMarket matrix coordinate real upper\n",
        "%%MatrixMarket matrix array pattern general\n",
        "%%MatrixMarket matrix coordinate pattern skew-symmetric\n",
    ] {
        let e = err(&format!("{banner}1 1 0\n"));
        assert!(matches!(e, MtxError::BadHeader { line: 1, .. }), "{e}");
    }
}

#[test]
fn complex_hermitian_and_vectors_are_not_supported() {
    for banner in [
        "%%MatrixMarket matrix coordinate complex general\n",
        "%%MatrixMarket matrix coordinate real hermitian\n",
        "%%MatrixMarket vector coordinate real general\n",
    ] {
        let e = err(&format!("{banner}1 1 0\n"));
        assert!(matches!(e, MtxError::Unsupported { line: 1, .. }), "{e}");
        assert!(e.to_string().contains("not supported"), "{e}");
    }
}

#[test]
fn missing_size_line() {
    let e = err(&format!("{GENERAL}% only a comment\n"));
    assert!(matches!(e, MtxError::BadSizeLine { line: 3, .. }), "{e}");
}

#[test]
fn size_line_with_wrong_field_count() {
    let e = err(&format!("{GENERAL}% c\n3 3\n"));
    assert!(matches!(e, MtxError::BadSizeLine { line: 3, .. }), "{e}");
    let e = err("%%MatrixMarket matrix array real general\n3 3 9\n");
    assert!(matches!(e, MtxError::BadSizeLine { line: 2, .. }), "{e}");
}

#[test]
fn size_line_with_bad_number() {
    let e = err(&format!("{GENERAL}3 -3 1\n"));
    assert!(matches!(e, MtxError::BadSizeLine { line: 2, .. }), "{e}");
    let e = err(&format!("{GENERAL}3 3 x\n"));
    assert!(matches!(e, MtxError::BadSizeLine { line: 2, .. }), "{e}");
}

#[test]
fn symmetric_size_line_must_be_square() {
    let e = err("%%MatrixMarket matrix coordinate real symmetric\n3 4 1\n1 1 1\n");
    assert!(matches!(e, MtxError::BadSizeLine { line: 2, .. }), "{e}");
}

#[test]
fn too_many_entries() {
    let e = err(&format!("{GENERAL}2 2 1\n1 1 1\n\n2 2 2\n"));
    assert_eq!(
        e,
        MtxError::TooManyEntries {
            line: 5,
            declared: 1
        }
    );
}

#[test]
fn too_few_entries() {
    let e = err(&format!("{GENERAL}2 2 3\n1 1 1\n2 2 2\n"));
    assert_eq!(
        e,
        MtxError::TooFewEntries {
            line: 4,
            found: 2,
            declared: 3
        }
    );
    assert!(e.to_string().contains("line 4"), "{e}");
}

#[test]
fn wrong_number_of_fields_in_an_entry() {
    let e = err(&format!("{GENERAL}2 2 2\n1 1 1\n2 2\n"));
    assert!(matches!(e, MtxError::BadEntry { line: 4, .. }), "{e}");
    let e = err("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1\n");
    assert!(matches!(e, MtxError::BadEntry { line: 3, .. }), "{e}");
}

#[test]
fn index_zero() {
    let e = err(&format!("{GENERAL}2 2 1\n0 1 1\n"));
    assert_eq!(
        e,
        MtxError::IndexOutOfRange {
            line: 3,
            axis: "row",
            index: 0,
            dim: 2
        }
    );
}

#[test]
fn index_out_of_range() {
    let e = err(&format!("{GENERAL}2 3 2\n1 1 1\n1 4 1\n"));
    assert_eq!(
        e,
        MtxError::IndexOutOfRange {
            line: 4,
            axis: "column",
            index: 4,
            dim: 3
        }
    );
}

#[test]
fn unparsable_index() {
    let e = err(&format!("{GENERAL}2 2 1\n1.0 1 1\n"));
    assert!(matches!(e, MtxError::BadEntry { line: 3, .. }), "{e}");
    let e = err(&format!("{GENERAL}2 2 1\n-1 1 1\n"));
    assert!(matches!(e, MtxError::BadEntry { line: 3, .. }), "{e}");
}

#[test]
fn unparsable_value() {
    let e = err(&format!("{GENERAL}2 2 1\n1 1 one\n"));
    assert!(matches!(e, MtxError::BadEntry { line: 3, .. }), "{e}");
    assert!(e.to_string().contains("`one`"), "{e}");
    let e = err("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n");
    assert!(matches!(e, MtxError::BadEntry { line: 3, .. }), "{e}");
}

#[test]
fn nan_values_are_kept() {
    let data = mtx::read(
        format!("{GENERAL}1 1 1\n1 1 nan\n").as_bytes(),
        &MtxReadOptions::default(),
    )
    .unwrap();
    let MtxData::Sparse(coo) = data else {
        panic!("sparse")
    };
    assert!(coo.values[0].is_nan());
}

#[test]
fn duplicate_entries_name_both_lines() {
    let e = err(&format!("{GENERAL}3 3 3\n2 2 1\n% c\n1 1 1\n2 2 5\n"));
    assert_eq!(
        e,
        MtxError::DuplicateEntry {
            first_line: 3,
            second_line: 6,
            row: 2,
            col: 2
        }
    );
}

#[test]
fn duplicate_after_symmetric_expansion() {
    let e = err("%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 1\n1 2 1\n");
    assert_eq!(
        e,
        MtxError::DuplicateEntry {
            first_line: 3,
            second_line: 4,
            row: 1,
            col: 2
        }
    );
}

#[test]
fn diagonal_in_skew_symmetric_file() {
    let e = err("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1\n3 3 1\n");
    assert_eq!(e, MtxError::SkewDiagonal { line: 4, index: 3 });
}

#[test]
fn array_entry_errors() {
    let array = "%%MatrixMarket matrix array real general\n";
    let e = err(&format!("{array}2 1\n1\n"));
    assert_eq!(
        e,
        MtxError::TooFewEntries {
            line: 3,
            found: 1,
            declared: 2
        }
    );
    let e = err(&format!("{array}1 1\n1\n2\n"));
    assert_eq!(
        e,
        MtxError::TooManyEntries {
            line: 4,
            declared: 1
        }
    );
    let e = err(&format!("{array}2 1\n1 2\n"));
    assert!(matches!(e, MtxError::BadEntry { line: 3, .. }), "{e}");
}

fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("sparsile-mtx-err-{}-{name}", std::process::id()))
}

#[test]
fn truncated_gzip_is_an_io_error_naming_the_path() {
    let mut text = String::from(GENERAL);
    text.push_str("1000 1000 1000\n");
    for k in 1..=1000 {
        text.push_str(&format!("{k} {} {}.25\n", 1001 - k, k));
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    let bytes = gz.finish().unwrap();
    let path = temp_path("truncated.mtx.gz");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let e = mtx::read_path(&path, &MtxReadOptions::default()).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    match &e {
        MtxError::Io { path: p, line, .. } => {
            assert!(p.ends_with("truncated.mtx.gz"), "{e}");
            assert!(*line > 2, "{e}");
        }
        other => panic!("expected an I/O error, got {other}"),
    }
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let path = temp_path("does-not-exist.mtx");
    let e = mtx::read_path(&path, &MtxReadOptions::default()).unwrap_err();
    assert!(matches!(e, MtxError::Io { line: 0, .. }), "{e}");
    assert!(e.to_string().contains("does-not-exist.mtx"), "{e}");
}

#[test]
fn writing_checks_symmetry_field_and_order() {
    let coo = CooTensor::from_triplets(vec![2, 2], &[(0, 1, 1.0), (1, 0, 2.0)]).unwrap();
    let sym = MtxWriteOptions {
        field: MtxField::Real,
        symmetry: MtxSymmetry::Symmetric,
        comments: vec![],
    };
    let e = mtx::write_coo(Vec::new(), &coo, &sym).unwrap_err();
    assert!(matches!(e, MtxError::Write { .. }), "{e}");
    let half = CooTensor::from_triplets(vec![2, 2], &[(0, 0, 1.5)]).unwrap();
    let e = mtx::write_coo(
        Vec::new(),
        &half,
        &MtxWriteOptions::general(MtxField::Integer),
    )
    .unwrap_err();
    assert!(e.to_string().contains("not an integer"), "{e}");
    let cube = CooTensor::empty(vec![2, 2, 2]);
    let e =
        mtx::write_coo(Vec::new(), &cube, &MtxWriteOptions::general(MtxField::Real)).unwrap_err();
    assert!(e.to_string().contains("order 3"), "{e}");
    let e = mtx::write_dense(
        Vec::new(),
        &[2, 2],
        &[1.0, 2.0, 3.0],
        &MtxWriteOptions::general(MtxField::Real),
    )
    .unwrap_err();
    assert!(matches!(e, MtxError::Write { .. }), "{e}");
}
