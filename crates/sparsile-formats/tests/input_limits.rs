//! Sizes that a few bytes of input declare: refused with named errors, without allocating
//! what they declare. Regression tests of the aborts found by probing the readers.

use std::io::Read;

use sparsile_formats::mtx::{self, MtxError, MtxReadOptions, MAX_LINE_BYTES};
use sparsile_formats::{CooTensor, Format, FormatError, MatrixStats, SparseTensor};

/// The peak resident memory of this process, in bytes (Linux), or `None`.
fn peak_resident() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

#[test]
fn a_short_dense_header_allocates_nothing_it_declares() {
    let before = peak_resident();
    // 53 bytes declaring 10^8 values (800 MB as f64).
    let text = "%%MatrixMarket matrix array real general\n10000 10000\n";
    let err = mtx::read(text.as_bytes(), &MtxReadOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            MtxError::TooFewEntries {
                found: 0,
                declared: 100_000_000,
                ..
            }
        ),
        "{err}"
    );
    if let (Some(a), Some(b)) = (before, peak_resident()) {
        assert!(b - a < 64 << 20, "peak grew by {} MB", (b - a) >> 20);
    }
    // A complete small array file still reads, symmetric ones too.
    let text = "%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n";
    let data = mtx::read(text.as_bytes(), &MtxReadOptions::default()).unwrap();
    let mtx::MtxData::Dense { values, .. } = data else {
        panic!("an array file is dense")
    };
    assert_eq!(values, vec![1.0, 2.0, 2.0, 3.0]);
}

#[test]
fn an_endless_line_is_an_error_not_an_endless_buffer() {
    // `--input A=/dev/zero`: zero bytes and no line end, ever.
    let zeros = std::io::repeat(0).take(1 << 34);
    let err = mtx::read(zeros, &MtxReadOptions::default()).unwrap_err();
    assert_eq!(
        err,
        MtxError::LineTooLong {
            line: 1,
            max: MAX_LINE_BYTES
        }
    );
    // A comment line that never ends, after a valid banner.
    let endless = "%%MatrixMarket matrix coordinate real general\n%"
        .as_bytes()
        .chain(std::io::repeat(b'x').take(1 << 34));
    let err = mtx::read(endless, &MtxReadOptions::default()).unwrap_err();
    assert!(
        matches!(err, MtxError::LineTooLong { line: 2, .. }),
        "{err}"
    );
    // Long but bounded lines (and CRLF ends) are fine.
    let mut text = "%%MatrixMarket matrix coordinate real general\r\n%".to_string();
    text.push_str(&"c".repeat(MAX_LINE_BYTES - 1));
    text.push_str("\r\n1 1 1\r\n1 1 2.5\r\n");
    let data = mtx::read(text.as_bytes(), &MtxReadOptions::default()).unwrap();
    assert_eq!(data.shape(), &[1, 1]);
}

#[test]
fn a_matrix_of_a_trillion_rows_is_a_named_error_where_it_needs_memory() {
    let text =
        "%%MatrixMarket matrix coordinate real general\n1000000000000 1000000000000 1\n1 1 1\n";
    let data = mtx::read(text.as_bytes(), &MtxReadOptions::default()).unwrap();
    let coo = data.into_coo();
    // The statistics need a table per row: refused, not aborted.
    let err = MatrixStats::of(&coo).unwrap_err();
    assert!(matches!(err, FormatError::MemoryTooLarge { .. }), "{err}");
    assert!(
        err.to_string().contains("more than the memory available"),
        "{err}"
    );
    // Formats with a row array too.
    let err = SparseTensor::from_coo(&coo, &Format::Csr).unwrap_err();
    assert!(matches!(err, FormatError::StorageTooLarge { .. }), "{err}");
    // COO holds just the entry.
    let t = SparseTensor::from_coo(&coo, &Format::Coo).unwrap();
    assert_eq!(t.nnz_stored(), 1);
    // A dense copy of it is refused.
    let err = t.try_to_dense_f64().unwrap_err();
    assert!(matches!(err, FormatError::MemoryTooLarge { .. }), "{err}");
}

#[test]
fn a_dense_copy_larger_than_memory_is_refused() {
    let coo = CooTensor::from_triplets(vec![1_000_000, 1_000_000], &[(5, 7, 1.0)]).unwrap();
    let csr = SparseTensor::from_coo(&coo, &Format::Csr).unwrap();
    let err = csr.try_to_dense_f64().unwrap_err();
    assert!(
        err.to_string().starts_with("a dense copy needs 7450.6 GiB"),
        "{err}"
    );
    let small = CooTensor::from_triplets(vec![3, 4], &[(1, 2, 5.0)]).unwrap();
    let dense = SparseTensor::from_coo(&small, &Format::Csr)
        .unwrap()
        .try_to_dense_f64()
        .unwrap();
    assert_eq!(dense[6], 5.0);
}

/// A 55-byte array file declaring 0 x 22,222,222,222: reading, writing back and the
/// statistics finish at once (writing looped over every empty column; the statistics
/// kept a table per column).
#[test]
fn a_matrix_of_no_rows_and_billions_of_columns_is_quick() {
    let text = "%%MatrixMarket matrix array real general\n0 22222222222\n";
    let start = std::time::Instant::now();
    let data = mtx::read(text.as_bytes(), &MtxReadOptions::default()).unwrap();
    let mut out = Vec::new();
    mtx::write(
        &mut out,
        &data,
        &mtx::MtxWriteOptions::general(mtx::MtxField::Real),
    )
    .unwrap();
    assert_eq!(
        mtx::read(&out[..], &MtxReadOptions::default()).unwrap(),
        data
    );
    let stats = MatrixStats::of(&data.into_coo()).unwrap();
    assert_eq!(stats.empty_cols, 22_222_222_222);
    assert!(start.elapsed().as_secs() < 5, "{:?}", start.elapsed());
}
