//! A format whose storage cannot be allocated is an error, not an abort.

use sparsile_formats::{CooTensor, Format, FormatError, SparseTensor};

#[test]
fn padded_storage_too_large_for_memory_is_an_error() {
    let n = 1usize << 40;
    // Two entries on the two extreme diagonals: DIA needs 2 * 2^40 slots; every other
    // format needs at least one counter or slot per row or column.
    let coo = CooTensor::from_triplets(vec![n, n], &[(0, n - 1, 1.0), (n - 1, 0, 2.0)]).unwrap();
    for format in [
        Format::Dia,
        Format::Ell { k: None },
        Format::Csr,
        Format::Csc,
        Format::Csf,
        Format::Bsr { r: 2, c: 2 },
        Format::SrBcrs { t: 2, g: 2 },
        Format::Ragged,
        Format::Dense,
    ] {
        match SparseTensor::from_coo(&coo, &format) {
            Err(FormatError::StorageTooLarge { elements, gib, .. }) => {
                assert!(elements >= n / 2, "{format}: {elements}");
                assert!(gib > 1000.0);
            }
            // The dense element count does not even fit in the address space.
            Err(FormatError::ShapeOverflow { .. }) if format == Format::Dense => {}
            other => panic!("{format}: expected StorageTooLarge, got {other:?}"),
        }
    }
}
