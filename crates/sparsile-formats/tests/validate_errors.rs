//! One test per malformed input, each with its exact error; fixes and zero-copy.

use std::borrow::Cow;

use sparsile_formats::{
    AxisStorage, CheckOptions, CooTensor, Format, FormatError, IndexArray, SparseTensor, Values,
};
use sparsile_ir::{AxisKind, IndexType};

fn ia(v: &[i32]) -> IndexArray<'static> {
    IndexArray::I32(Cow::Owned(v.to_vec()))
}

fn fv(v: &[f64]) -> Values<'static> {
    Values::F64(Cow::Owned(v.to_vec()))
}

const STRICT: CheckOptions = CheckOptions {
    sort_indices: false,
    sum_duplicates: false,
};

/// CSR 3 x 4 with the given arrays and 3 values.
fn csr(indptr: &[i32], indices: &[i32]) -> Result<SparseTensor<'static>, FormatError> {
    SparseTensor::from_csr([3, 4], ia(indptr), ia(indices), fv(&[1., 2., 3.]), STRICT)
}

#[test]
fn valid_csr_borrows_the_arrays() {
    let (p, i, v) = ([0i32, 2, 2, 3], [0i32, 3, 1], [1.0f32, 2.0, 3.0]);
    let t = SparseTensor::from_csr(
        [3, 4],
        IndexArray::I32(Cow::Borrowed(&p)),
        IndexArray::I32(Cow::Borrowed(&i)),
        Values::F32(Cow::Borrowed(&v)),
        STRICT,
    )
    .unwrap();
    assert!(matches!(
        t.structure.axes[1].indices,
        Some(IndexArray::I32(Cow::Borrowed(_)))
    ));
    assert!(matches!(t.values, Values::F32(Cow::Borrowed(_))));
    assert_eq!(
        t.to_coo().unwrap(),
        CooTensor::from_triplets(vec![3, 4], &[(0, 0, 1.), (0, 3, 2.), (2, 1, 3.)]).unwrap()
    );
}

#[test]
fn indptr_wrong_length() {
    assert_eq!(
        csr(&[0, 2, 3], &[0, 3, 1]).unwrap_err(),
        FormatError::IndptrLength {
            axis: 1,
            found: 3,
            expected: 4
        }
    );
}

#[test]
fn indptr_not_starting_at_zero() {
    assert_eq!(
        csr(&[1, 2, 2, 3], &[0, 3, 1]).unwrap_err(),
        FormatError::IndptrStart { axis: 1, found: 1 }
    );
}

#[test]
fn indptr_decreasing() {
    assert_eq!(
        csr(&[0, 2, 1, 3], &[0, 3, 1]).unwrap_err(),
        FormatError::IndptrDecreasing {
            axis: 1,
            entry: 2,
            value: 1,
            previous: 2
        }
    );
}

#[test]
fn indptr_end_not_number_of_indices() {
    assert_eq!(
        csr(&[0, 2, 2, 4], &[0, 3, 1]).unwrap_err(),
        FormatError::IndptrEnd {
            axis: 1,
            found: 4,
            expected: 3
        }
    );
}

#[test]
fn negative_index() {
    assert_eq!(
        csr(&[0, 2, 2, 3], &[0, -1, 1]).unwrap_err(),
        FormatError::NegativeIndex {
            axis: 1,
            position: 1,
            value: -1
        }
    );
}

#[test]
fn index_out_of_range() {
    assert_eq!(
        csr(&[0, 2, 2, 3], &[0, 1, 4]).unwrap_err(),
        FormatError::IndexOutOfRange {
            axis: 1,
            parent: 2,
            position: 2,
            value: 4,
            dim: 4
        }
    );
}

#[test]
fn unsorted_indices() {
    assert_eq!(
        csr(&[0, 2, 2, 3], &[3, 0, 1]).unwrap_err(),
        FormatError::UnsortedIndices {
            axis: 1,
            parent: 0,
            position: 1
        }
    );
}

#[test]
fn duplicate_index() {
    assert_eq!(
        csr(&[0, 2, 2, 3], &[2, 2, 1]).unwrap_err(),
        FormatError::DuplicateIndex {
            axis: 1,
            parent: 0,
            position: 1,
            value: 2
        }
    );
}

#[test]
fn values_length_mismatch() {
    assert_eq!(
        SparseTensor::from_csr([3, 4], ia(&[0, 2, 2, 3]), ia(&[0, 3, 1]), fv(&[1.]), STRICT)
            .unwrap_err(),
        FormatError::ValuesLength {
            found: 1,
            expected: 3
        }
    );
}

#[test]
fn mixed_index_types() {
    let indptr = IndexArray::I64(Cow::Owned(vec![0, 2, 2, 3]));
    assert_eq!(
        SparseTensor::from_csr([3, 4], indptr, ia(&[0, 3, 1]), fv(&[1., 2., 3.]), STRICT)
            .unwrap_err(),
        FormatError::MixedIndexTypes {
            axis: 1,
            indptr: IndexType::I64,
            indices: IndexType::I32
        }
    );
}

#[test]
fn shape_too_large_for_the_index_type() {
    let r = SparseTensor::from_csr(
        [3, 3_000_000_000],
        ia(&[0, 0, 0, 0]),
        ia(&[]),
        fv(&[]),
        STRICT,
    );
    assert_eq!(
        r.unwrap_err(),
        FormatError::ShapeTooLarge {
            dim: 1,
            size: 3_000_000_000,
            index_type: IndexType::I32
        }
    );
}

#[test]
fn sorting_and_summing_fix_and_copy() {
    let sort = CheckOptions {
        sort_indices: true,
        sum_duplicates: false,
    };
    let both = CheckOptions {
        sort_indices: true,
        sum_duplicates: true,
    };
    let run = |indices: &[i32], opts| {
        SparseTensor::from_csr(
            [3, 4],
            ia(&[0, 2, 2, 3]),
            ia(indices),
            fv(&[1., 2., 3.]),
            opts,
        )
    };
    let t = run(&[3, 0, 1], sort).unwrap();
    assert_eq!(
        t.structure.axes[1].indices.as_ref().unwrap().to_usizes(),
        vec![0, 3, 1]
    );
    assert_eq!(t.values.to_f64_vec(), vec![2., 1., 3.]);
    assert_eq!(
        run(&[2, 2, 1], sort).unwrap_err(),
        FormatError::DuplicateIndex {
            axis: 1,
            parent: 0,
            position: 1,
            value: 2
        }
    );
    let summed = run(&[2, 2, 1], both).unwrap();
    assert_eq!(
        summed.structure.axes[1]
            .indptr
            .as_ref()
            .unwrap()
            .to_usizes(),
        vec![0, 1, 1, 2]
    );
    assert_eq!(summed.values.to_f64_vec(), vec![3., 3.]);
    assert!(matches!(
        summed.structure.axes[1].indices,
        Some(IndexArray::I32(Cow::Owned(_)))
    ));
}

#[test]
fn csc_checks_rows() {
    // 3 x 2: column 0 holds rows 0 and 2, column 1 row 1.
    let t = SparseTensor::from_csc(
        [3, 2],
        ia(&[0, 2, 3]),
        ia(&[0, 2, 1]),
        fv(&[1., 2., 3.]),
        STRICT,
    )
    .unwrap();
    assert_eq!(t.to_dense_f64(), vec![1., 0., 0., 3., 2., 0.]);
    assert_eq!(
        SparseTensor::from_csc(
            [2, 3],
            ia(&[0, 2, 3]),
            ia(&[0, 2, 1]),
            fv(&[1., 2., 3.]),
            STRICT
        )
        .unwrap_err(),
        FormatError::IndptrLength {
            axis: 1,
            found: 3,
            expected: 4
        }
    );
}

#[test]
fn bsr_blocks() {
    // 4 x 4 with 2x2 blocks at block (0, 1) and (1, 0).
    let values: Vec<f64> = (1..=8).map(f64::from).collect();
    let t = SparseTensor::from_bsr(
        [4, 4],
        (2, 2),
        ia(&[0, 1, 2]),
        ia(&[1, 0]),
        fv(&values),
        STRICT,
    )
    .unwrap();
    assert_eq!(
        t.to_dense_f64(),
        vec![0., 0., 1., 2., 0., 0., 3., 4., 5., 6., 0., 0., 7., 8., 0., 0.]
    );
    // A block column equal to the number of block columns (a padding sentinel, which
    // ELL may store) names no block: kernels read block coordinates unguarded.
    assert_eq!(
        SparseTensor::from_bsr(
            [4, 4],
            (2, 2),
            ia(&[0, 1, 2]),
            ia(&[1, 2]),
            fv(&values),
            STRICT
        )
        .unwrap_err(),
        FormatError::IndexOutOfRange {
            axis: 1,
            parent: 1,
            position: 1,
            value: 2,
            dim: 2
        }
    );
    assert_eq!(
        SparseTensor::from_bsr([4, 4], (0, 2), ia(&[0]), ia(&[]), fv(&[]), STRICT).unwrap_err(),
        FormatError::BlockSizeZero { r: 0, c: 2 }
    );
    assert_eq!(
        SparseTensor::from_bsr([4, 5], (2, 2), ia(&[0, 0, 0]), ia(&[]), fv(&[]), STRICT)
            .unwrap_err(),
        FormatError::BlockSizeNotDividing {
            dim: 1,
            size: 5,
            block: 2
        }
    );
    assert_eq!(
        SparseTensor::from_bsr(
            [4, 4],
            (2, 2),
            ia(&[0, 1, 2]),
            ia(&[1, 0]),
            fv(&values[..7]),
            STRICT
        )
        .unwrap_err(),
        FormatError::ValuesLength {
            found: 7,
            expected: 8
        }
    );
}

fn coo(
    rows: &[i32],
    cols: &[i32],
    opts: CheckOptions,
) -> Result<SparseTensor<'static>, FormatError> {
    let values: Vec<f64> = (1..=rows.len()).map(|v| v as f64).collect();
    SparseTensor::from_coo_arrays(&[3, 4], vec![ia(rows), ia(cols)], fv(&values), opts)
}

#[test]
fn coo_arrays_errors() {
    assert_eq!(
        SparseTensor::from_coo_arrays(&[3, 4], vec![ia(&[0])], fv(&[1.]), STRICT).unwrap_err(),
        FormatError::CoordinateArrayCount {
            found: 1,
            expected: 2
        }
    );
    assert_eq!(
        SparseTensor::from_coo_arrays(&[3, 4], vec![ia(&[0, 1]), ia(&[0])], fv(&[1.]), STRICT)
            .unwrap_err(),
        FormatError::LengthMismatch {
            what: "coordinate array 1".into(),
            found: 1,
            expected: 2
        }
    );
    assert_eq!(
        SparseTensor::from_coo_arrays(&[3, 4], vec![ia(&[0]), ia(&[0])], fv(&[1., 2.]), STRICT)
            .unwrap_err(),
        FormatError::ValuesLength {
            found: 2,
            expected: 1
        }
    );
    assert_eq!(
        coo(&[0, 1], &[0, -3], STRICT).unwrap_err(),
        FormatError::NegativeIndex {
            axis: 1,
            position: 1,
            value: -3
        }
    );
    assert_eq!(
        coo(&[0, 3], &[0, 0], STRICT).unwrap_err(),
        FormatError::CoordinateOutOfRange {
            entry: 1,
            axis: 0,
            coordinate: 3,
            dim: 3
        }
    );
    assert_eq!(
        coo(&[1, 0], &[0, 0], STRICT).unwrap_err(),
        FormatError::UnsortedEntries { entry: 1 }
    );
    assert_eq!(
        coo(&[1, 1], &[2, 2], STRICT).unwrap_err(),
        FormatError::DuplicateCoordinate {
            coordinate: vec![1, 2],
            first: 0,
            second: 1
        }
    );
    let fixed = coo(
        &[2, 1, 2],
        &[0, 3, 0],
        CheckOptions {
            sort_indices: true,
            sum_duplicates: true,
        },
    )
    .unwrap();
    assert_eq!(
        fixed.to_coo().unwrap(),
        CooTensor::from_triplets(vec![3, 4], &[(1, 3, 2.), (2, 0, 4.)]).unwrap()
    );
}

fn ell_axes(cols: &[i32]) -> Vec<AxisStorage<'static>> {
    vec![
        AxisStorage::dense_fixed(2),
        AxisStorage {
            kind: AxisKind::SparseFixed,
            parent: Some(0),
            length: 3,
            npos: 4,
            nnz_per_parent: Some(2),
            indptr: None,
            indices: Some(ia(cols)),
            unique: true,
        },
    ]
}

#[test]
fn parts_ell() {
    let ok = SparseTensor::from_parts(
        Format::Ell { k: Some(2) },
        &[2, 3],
        ell_axes(&[0, 3, 1, 2]),
        fv(&[1., 0., 2., 3.]),
    )
    .unwrap();
    assert_eq!(ok.to_dense_f64(), vec![1., 0., 0., 0., 2., 3.]);
    assert_eq!(
        SparseTensor::from_parts(
            Format::Ell { k: Some(2) },
            &[2, 3],
            ell_axes(&[3, 0, 1, 2]),
            fv(&[0., 1., 2., 3.])
        )
        .unwrap_err(),
        FormatError::PaddingNotTrailing {
            axis: 1,
            parent: 0,
            position: 1
        }
    );
    assert_eq!(
        SparseTensor::from_parts(
            Format::Ell { k: Some(3) },
            &[2, 3],
            ell_axes(&[0, 3, 1, 2]),
            fv(&[1., 0., 2., 3.])
        )
        .unwrap_err(),
        FormatError::AxisMismatch {
            format: "ell:3".into(),
            axis: 1,
            field: "nnz_per_parent",
            found: "2".into(),
            expected: "3".into()
        }
    );
    assert_eq!(
        SparseTensor::from_parts(
            Format::Ell { k: None },
            &[2, 3],
            ell_axes(&[0, 3, 1, 2]),
            fv(&[1.])
        )
        .unwrap_err(),
        FormatError::ValuesLength {
            found: 1,
            expected: 4
        }
    );
}

#[test]
fn parts_layout_mismatches() {
    let csr_axes = |cols: &[i32]| {
        vec![
            AxisStorage::dense_fixed(2),
            AxisStorage {
                kind: AxisKind::SparseVariable,
                parent: Some(0),
                length: 3,
                npos: cols.len(),
                nnz_per_parent: None,
                indptr: Some(ia(&[0, 1, cols.len() as i32])),
                indices: Some(ia(cols)),
                unique: true,
            },
        ]
    };
    assert_eq!(
        SparseTensor::from_parts(Format::Csr, &[2, 3], csr_axes(&[0, 3]), fv(&[1., 2.]))
            .unwrap_err(),
        FormatError::IndexOutOfRange {
            axis: 1,
            parent: 1,
            position: 1,
            value: 3,
            dim: 3
        }
    );
    assert_eq!(
        SparseTensor::from_parts(Format::Csr, &[2, 4], csr_axes(&[0, 2]), fv(&[1., 2.]))
            .unwrap_err(),
        FormatError::AxisMismatch {
            format: "csr".into(),
            axis: 1,
            field: "length",
            found: "3".into(),
            expected: "4".into()
        }
    );
    assert_eq!(
        SparseTensor::from_parts(Format::Csc, &[3, 2], csr_axes(&[0, 2]), fv(&[1., 2.])).unwrap(),
        SparseTensor::from_csc([3, 2], ia(&[0, 1, 2]), ia(&[0, 2]), fv(&[1., 2.]), STRICT).unwrap()
    );
    assert_eq!(
        SparseTensor::from_parts(Format::Dcsr, &[2, 3], csr_axes(&[0, 2]), fv(&[1., 2.]))
            .unwrap_err(),
        FormatError::AxisMismatch {
            format: "dcsr".into(),
            axis: 0,
            field: "kind",
            found: "DenseFixed".into(),
            expected: "SparseFixed".into()
        }
    );
    assert_eq!(
        SparseTensor::from_parts(
            Format::Bsr { r: 2, c: 2 },
            &[2, 3],
            csr_axes(&[0, 2]),
            fv(&[1., 2.])
        )
        .unwrap_err(),
        FormatError::AxisCount {
            format: "bsr:2x2".into(),
            found: 2,
            expected: 4
        }
    );
    let mut short = csr_axes(&[0, 2]);
    short[1].indices = Some(ia(&[0]));
    assert_eq!(
        SparseTensor::from_parts(Format::Csr, &[2, 3], short, fv(&[1., 2.])).unwrap_err(),
        FormatError::LengthMismatch {
            what: "indices of axis 1".into(),
            found: 1,
            expected: 2
        }
    );
}

#[test]
fn parts_ragged_row_too_long() {
    let axes = vec![
        AxisStorage::dense_fixed(2),
        AxisStorage {
            kind: AxisKind::DenseVariable,
            parent: Some(0),
            length: 3,
            npos: 5,
            nnz_per_parent: None,
            indptr: Some(ia(&[0, 1, 5])),
            indices: None,
            unique: true,
        },
    ];
    assert_eq!(
        SparseTensor::from_parts(Format::Ragged, &[2, 3], axes, fv(&[1.; 5])).unwrap_err(),
        FormatError::RangeTooLong {
            axis: 1,
            parent: 1,
            count: 4,
            length: 3
        }
    );
}

#[test]
fn parts_coo_entries_must_be_distinct_and_sorted() {
    let axes = |rows: &[i32], cols: &[i32]| {
        let n = rows.len();
        vec![
            AxisStorage {
                kind: AxisKind::SparseFixed,
                parent: None,
                length: 3,
                npos: n,
                nnz_per_parent: Some(n),
                indptr: None,
                indices: Some(ia(rows)),
                unique: false,
            },
            AxisStorage {
                kind: AxisKind::SparseFixed,
                parent: Some(0),
                length: 4,
                npos: n,
                nnz_per_parent: Some(1),
                indptr: None,
                indices: Some(ia(cols)),
                unique: true,
            },
        ]
    };
    let ok = SparseTensor::from_parts(Format::Coo, &[3, 4], axes(&[1, 1], &[0, 3]), fv(&[1., 2.]));
    assert_eq!(ok.unwrap().to_dense_f64()[4..8], [1., 0., 0., 2.]);
    assert_eq!(
        SparseTensor::from_parts(Format::Coo, &[3, 4], axes(&[1, 1], &[3, 3]), fv(&[1., 2.]))
            .unwrap_err(),
        FormatError::DuplicateCoordinate {
            coordinate: vec![1, 3],
            first: 0,
            second: 1
        }
    );
    assert_eq!(
        SparseTensor::from_parts(Format::Coo, &[3, 4], axes(&[1, 1], &[3, 0]), fv(&[1., 2.]))
            .unwrap_err(),
        FormatError::UnsortedEntries { entry: 1 }
    );
    assert_eq!(
        SparseTensor::from_parts(Format::Coo, &[3, 4], axes(&[1, 0], &[3, 0]), fv(&[1., 2.]))
            .unwrap_err(),
        FormatError::UnsortedIndices {
            axis: 0,
            parent: 0,
            position: 1
        }
    );
}

#[test]
fn bsr_blocks_are_sorted_as_units() {
    // 2 x 4 with 1x2 blocks given in the order (0, 1), (0, 0).
    let opts = CheckOptions {
        sort_indices: true,
        sum_duplicates: false,
    };
    let t = SparseTensor::from_bsr(
        [2, 4],
        (1, 2),
        ia(&[0, 2, 2]),
        ia(&[1, 0]),
        fv(&[3., 4., 1., 2.]),
        opts,
    )
    .unwrap();
    assert_eq!(t.values.to_f64_vec(), vec![1., 2., 3., 4.]);
    assert_eq!(t.to_dense_f64(), vec![1., 2., 3., 4., 0., 0., 0., 0.]);
}

#[test]
fn valid_coo_arrays_are_borrowed() {
    let (rows, cols, vals) = ([0i64, 2], [1i64, 0], [1.0f64, 2.0]);
    let t = SparseTensor::from_coo_arrays(
        &[3, 2],
        vec![
            IndexArray::I64(Cow::Borrowed(&rows)),
            IndexArray::I64(Cow::Borrowed(&cols)),
        ],
        Values::F64(Cow::Borrowed(&vals)),
        STRICT,
    )
    .unwrap();
    assert!(t
        .structure
        .axes
        .iter()
        .all(|a| matches!(a.indices, Some(IndexArray::I64(Cow::Borrowed(_))))));
    assert_eq!(t.to_dense_f64(), vec![0., 1., 0., 0., 2., 0.]);
}

#[test]
fn huge_empty_dense_is_read_quickly() {
    let t = SparseTensor::dense_from_f64(&[1 << 40, 0], &[], sparsile_ir::DType::F32).unwrap();
    assert_eq!(t.to_coo().unwrap().nnz(), 0);
    assert!(t.to_dense_f64().is_empty());
}
