//! Damaged `.spt` files: every byte changed, every truncation, header fields rewritten.
//! Reading gives an error or a tensor that passes the checked constructors' validation
//! and reads back without a panic; it never panics itself.

use sparsile_formats::{container, CooTensor, Format, FormatError, SparseTensor};
use sparsile_ir::DType;

fn sample() -> CooTensor {
    CooTensor::from_triplets(
        vec![5, 6],
        &[
            (0, 1, 1.5),
            (0, 4, -2.0),
            (2, 0, 3.0),
            (2, 5, 4.0),
            (3, 3, 5.0),
            (4, 1, 6.0),
            (4, 2, 7.0),
        ],
    )
    .unwrap()
}

fn formats() -> Vec<Format> {
    [
        "dense",
        "csr",
        "csc",
        "coo",
        "dcsr",
        "bsr:2x2",
        "dbsr:1x3",
        "ell",
        "dia",
        "srbcrs:2x2",
        "ragged",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect()
}

fn file_of(format: &Format, dtype: DType) -> Vec<u8> {
    let t = SparseTensor::from_coo_with(&sample(), format, dtype).unwrap();
    let mut bytes = Vec::new();
    container::write(&mut bytes, &t).unwrap();
    bytes
}

/// Reads `bytes`; an accepted tensor must be readable every way there is.
fn read_and_use(bytes: &[u8]) -> Result<(), FormatError> {
    let t = container::read(&mut &bytes[..])?;
    let coo = t
        .to_coo()
        .unwrap_or_else(|e| panic!("a validated {} converts to COO: {e}", t.format()));
    assert!(coo.nnz() <= t.nnz_stored());
    if t.shape().iter().product::<usize>() <= 1 << 16 {
        assert_eq!(t.to_dense_f64().len(), t.shape().iter().product::<usize>());
    }
    let back = t.convert(&Format::Coo).unwrap().to_coo().unwrap();
    assert_eq!((&back.shape, &back.coords), (&coo.shape, &coo.coords));
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&back.values), bits(&coo.values));
    Ok(())
}

#[test]
fn every_changed_byte_is_an_error_or_a_valid_tensor() {
    for format in formats() {
        for dtype in [DType::F32, DType::F64] {
            let good = file_of(&format, dtype);
            read_and_use(&good).unwrap();
            let mut accepted = 0;
            for at in 0..good.len() {
                for new in [0u8, 0xff, good[at].wrapping_add(1), good[at] ^ 0x80, b'9'] {
                    if new == good[at] {
                        continue;
                    }
                    let mut bad = good.clone();
                    bad[at] = new;
                    accepted += usize::from(read_and_use(&bad).is_ok());
                }
            }
            // Changed values are still valid tensors; the check is that nothing panicked.
            assert!(accepted > 0, "{format}");
        }
    }
}

#[test]
fn every_truncation_is_an_error() {
    for format in formats() {
        let good = file_of(&format, DType::F64);
        for len in 0..good.len() {
            assert!(read_and_use(&good[..len]).is_err(), "{format} cut at {len}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(
            read_and_use(&longer).is_err(),
            "{format} with a trailing byte"
        );
    }
}

/// Rewrites `"field":value` in the header line with `new`.
fn with_field(file: &[u8], field: &str, nth: usize, new: &str) -> Option<Vec<u8>> {
    let text = String::from_utf8_lossy(file).into_owned();
    let header_start = text.find('\n')? + 1;
    let header_end = header_start + text[header_start..].find('\n')?;
    let header = &text[header_start..header_end];
    let key = format!("\"{field}\":");
    let at = header.match_indices(&key).nth(nth)?.0 + key.len();
    let end = if header[at..].starts_with('[') {
        at + header[at..].find(']')? + 1
    } else {
        at + header[at..].find([',', '}'])?
    };
    let mut out = file[..header_start + at].to_vec();
    out.extend_from_slice(new.as_bytes());
    out.extend_from_slice(&file[header_start + end..]);
    Some(out)
}

#[test]
fn rewritten_header_fields_are_errors_or_valid_tensors() {
    let values = [
        "0",
        "1",
        "2",
        "7",
        "100",
        "4294967296",
        "18446744073709551615",
        "-1",
        "null",
        "true",
        "\"x\"",
        "[]",
        "[1000000000000,1000000000000]",
    ];
    let fields = [
        "kind",
        "parent",
        "length",
        "npos",
        "nnz_per_parent",
        "unique",
        "index_type",
        "indptr_len",
        "indices_len",
        "values_len",
        "shape",
        "format",
        "dtype",
    ];
    for format in formats() {
        let good = file_of(&format, DType::F64);
        for field in fields {
            for nth in 0..4 {
                for v in values {
                    if let Some(bad) = with_field(&good, field, nth, v) {
                        let _ = read_and_use(&bad);
                    }
                }
            }
        }
    }
}

/// The mutations that used to panic `sparsile info` (index out of bounds while walking
/// the structure) or let `convert --check` lose an entry: each is now a named error.
#[test]
fn structure_damage_found_by_the_probe_is_a_named_error() {
    let csr = file_of(&"csr".parse().unwrap(), DType::F64);
    // An indptr entry past the end of the indices.
    let bad = with_field(&csr, "npos", 1, "3").unwrap();
    let err = read_and_use(&bad).unwrap_err();
    assert!(
        err.to_string().starts_with("indptr of axis 1 ends at 7"),
        "{err}"
    );
    // The shape says fewer rows than the indptr has.
    let bad = with_field(&csr, "shape", 0, "[4,6]").unwrap();
    let err = read_and_use(&bad).unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::AxisMismatch {
                field: "length",
                ..
            }
        ),
        "{err}"
    );
    // A column index out of range (the last index array entry, as an i32 of 60).
    let t = SparseTensor::from_coo(&sample(), &"csr".parse().unwrap()).unwrap();
    let mut bytes = Vec::new();
    container::write(&mut bytes, &t).unwrap();
    let values_bytes = 8 * t.values.len();
    let last_index = bytes.len() - values_bytes - 4;
    bytes[last_index..last_index + 4].copy_from_slice(&60i32.to_le_bytes());
    let err = read_and_use(&bytes).unwrap_err();
    assert!(
        matches!(err, FormatError::IndexOutOfRange { value: 60, .. }),
        "{err}"
    );
    // Two equal column indices in a row (entries (4,1) and (4,2) become (4,1) twice).
    bytes[last_index..last_index + 4].copy_from_slice(&1i32.to_le_bytes());
    let err = read_and_use(&bytes).unwrap_err();
    assert!(matches!(err, FormatError::DuplicateIndex { .. }), "{err}");
}

#[test]
fn an_endless_header_line_is_refused_without_reading_it_all() {
    let mut bytes = b"SPARSILE-TENSOR 1\n".to_vec();
    bytes.extend(std::iter::repeat_n(
        b' ',
        (container::MAX_HEADER_BYTES + 10) as usize,
    ));
    let err = container::read(&mut &bytes[..]).unwrap_err();
    assert!(err.to_string().contains("longer than"), "{err}");
    // A first line that never ends.
    let endless = std::io::repeat(b'S');
    let err = container::read(&mut endless.take_bytes()).unwrap_err();
    assert!(err.to_string().contains("line 1"), "{err}");
}

trait TakeBytes {
    fn take_bytes(self) -> std::io::Take<std::io::Repeat>;
}

impl TakeBytes for std::io::Repeat {
    /// At most 1 GB of the byte: the reader must stop long before.
    fn take_bytes(self) -> std::io::Take<std::io::Repeat> {
        std::io::Read::take(self, 1 << 30)
    }
}
