//! Exact structure arrays of every format for one small matrix, index types and
//! conversion errors.

use sparsile_formats::{CooTensor, Format, FormatError, SparseTensor};
use sparsile_ir::{AxisKind, DType, IndexType};

/// 5 x 7:
/// ```text
/// . 1 2 . . . .
/// . . . . . . .
/// 3 . . . . . 4
/// . . . 5 . . .
/// . . . . 6 7 8
/// ```
fn sample() -> CooTensor {
    CooTensor::from_triplets(
        vec![5, 7],
        &[
            (0, 1, 1.0),
            (0, 2, 2.0),
            (2, 0, 3.0),
            (2, 6, 4.0),
            (3, 3, 5.0),
            (4, 4, 6.0),
            (4, 5, 7.0),
            (4, 6, 8.0),
        ],
    )
    .unwrap()
}

fn build(f: &str) -> SparseTensor<'static> {
    let t = SparseTensor::from_coo(&sample(), &f.parse().unwrap()).unwrap();
    assert_eq!(t.to_coo().unwrap(), sample(), "{f}");
    t
}

fn indptr(t: &SparseTensor<'_>, axis: usize) -> Vec<usize> {
    t.structure.axes[axis].indptr.as_ref().unwrap().to_usizes()
}

fn indices(t: &SparseTensor<'_>, axis: usize) -> Vec<usize> {
    t.structure.axes[axis].indices.as_ref().unwrap().to_usizes()
}

#[test]
fn csr_csc_dcsr() {
    let csr = build("csr");
    assert_eq!(indptr(&csr, 1), vec![0, 2, 2, 4, 5, 8]);
    assert_eq!(indices(&csr, 1), vec![1, 2, 0, 6, 3, 4, 5, 6]);
    let csc = build("csc");
    assert_eq!(indptr(&csc, 1), vec![0, 1, 2, 3, 4, 5, 6, 8]);
    assert_eq!(indices(&csc, 1), vec![2, 0, 0, 3, 4, 4, 2, 4]);
    assert_eq!(
        csc.values.to_f64_vec(),
        vec![3., 1., 2., 5., 6., 7., 4., 8.]
    );
    let dcsr = build("dcsr");
    assert_eq!(indices(&dcsr, 0), vec![0, 2, 3, 4]);
    assert_eq!(dcsr.structure.axes[0].nnz_per_parent, Some(4));
    assert_eq!(indptr(&dcsr, 1), vec![0, 2, 4, 5, 8]);
}

#[test]
fn coo_axes() {
    let coo = build("coo");
    let axes = &coo.structure.axes;
    assert_eq!(axes[0].kind, AxisKind::SparseFixed);
    assert!(!axes[0].unique);
    assert_eq!((axes[0].npos, axes[0].nnz_per_parent), (8, Some(8)));
    assert_eq!((axes[1].parent, axes[1].nnz_per_parent), (Some(0), Some(1)));
    assert_eq!(indices(&coo, 0), vec![0, 0, 2, 2, 3, 4, 4, 4]);
    assert_eq!(indices(&coo, 1), vec![1, 2, 0, 6, 3, 4, 5, 6]);
}

#[test]
fn ell_pads_with_the_sentinel() {
    let ell = build("ell");
    assert_eq!(ell.structure.axes[1].nnz_per_parent, Some(3));
    assert_eq!(
        indices(&ell, 1),
        vec![1, 2, 7, 7, 7, 7, 0, 6, 7, 3, 7, 7, 4, 5, 6]
    );
    let v = ell.values.to_f64_vec();
    assert_eq!(
        v,
        vec![1., 2., 0., 0., 0., 0., 3., 4., 0., 5., 0., 0., 6., 7., 8.]
    );
    let wide = build("ell:4");
    assert_eq!(wide.nnz_stored(), 20);
    assert_eq!(
        SparseTensor::from_coo(&sample(), &Format::Ell { k: Some(2) }).unwrap_err(),
        FormatError::EllRowTooLong {
            row: 4,
            length: 3,
            width: 2
        }
    );
}

#[test]
fn dia_stores_shifted_offsets() {
    let dia = build("dia");
    assert_eq!(dia.structure.axes[0].length, 11);
    assert_eq!(indices(&dia, 0), vec![2, 4, 5, 6, 8]);
    let mut expected = vec![0.0; 25];
    for (p, i, v) in [
        (0, 2, 3.),
        (1, 3, 5.),
        (1, 4, 6.),
        (2, 0, 1.),
        (2, 4, 7.),
        (3, 0, 2.),
        (3, 4, 8.),
        (4, 2, 4.),
    ] {
        expected[p * 5 + i] = v;
    }
    assert_eq!(dia.values.to_f64_vec(), expected);
}

#[test]
fn bsr_blocks_past_the_edge() {
    let bsr = build("bsr:3x2");
    assert_eq!(bsr.structure.axes[0].length, 2);
    assert_eq!(bsr.structure.axes[1].length, 4);
    assert_eq!(indptr(&bsr, 1), vec![0, 3, 6]);
    assert_eq!(indices(&bsr, 1), vec![0, 1, 3, 1, 2, 3]);
    let v = bsr.values.to_f64_vec();
    assert_eq!(v.len(), 36);
    assert_eq!((v[1], v[4], v[16], v[32]), (1., 3., 4., 8.));
    assert_eq!(v.iter().filter(|&&x| x != 0.0).count(), 8);
    let dbsr = build("dbsr:2x2");
    assert_eq!(indices(&dbsr, 0), vec![0, 1, 2]);
    assert_eq!(indptr(&dbsr, 1), vec![0, 2, 5, 7]);
}

#[test]
fn srbcrs_groups_tiles() {
    let sr = build("srbcrs:2x2");
    let axes = &sr.structure.axes;
    assert_eq!(axes[1].kind, AxisKind::DenseVariable);
    assert_eq!(axes[1].length, 4);
    assert_eq!(indptr(&sr, 1), vec![0, 1, 3, 5]);
    assert_eq!(indices(&sr, 2), vec![1, 2, 0, 3, 6, 7, 4, 5, 6, 7]);
    let mut expected = vec![0.0; 20];
    for (off, v) in [
        (0, 1.),
        (2, 2.),
        (4, 3.),
        (7, 5.),
        (8, 4.),
        (12, 6.),
        (14, 7.),
        (16, 8.),
    ] {
        expected[off] = v;
    }
    assert_eq!(sr.values.to_f64_vec(), expected);
}

#[test]
fn ragged_rows_are_dense_runs() {
    let ragged = build("ragged");
    assert_eq!(indptr(&ragged, 1), vec![0, 3, 3, 10, 14, 21]);
    assert_eq!(ragged.values.to_f64_vec()[..3], [0., 1., 2.]);
    assert_eq!(ragged.shape(), &[5, 7]);
}

#[test]
fn index_types() {
    let coo = sample();
    for f in ["csr", "coo", "ell", "srbcrs:2x2", "dia"] {
        let format: Format = f.parse().unwrap();
        let auto = SparseTensor::from_coo(&coo, &format).unwrap();
        assert!(auto
            .structure
            .axes
            .iter()
            .all(|a| a.index_type() == IndexType::I32));
        for it in [IndexType::I32, IndexType::I64] {
            let t = SparseTensor::from_coo_with_index(&coo, &format, DType::F32, Some(it)).unwrap();
            for a in t.structure.axes.iter().filter(|a| a.indices.is_some()) {
                assert_eq!(a.index_type(), it, "{f}");
            }
            assert_eq!(t.to_coo().unwrap(), coo);
        }
    }
    let wide =
        CooTensor::from_triplets(vec![2, 3_000_000_000], &[(1, 2_999_999_999, 1.0)]).unwrap();
    let t = SparseTensor::from_coo(&wide, &Format::Csr).unwrap();
    assert_eq!(t.structure.axes[1].index_type(), IndexType::I64);
    assert_eq!(t.to_coo().unwrap(), wide);
    assert_eq!(
        SparseTensor::from_coo_with_index(&wide, &Format::Csr, DType::F64, Some(IndexType::I32))
            .unwrap_err(),
        FormatError::ShapeTooLarge {
            dim: 1,
            size: 3_000_000_000,
            index_type: IndexType::I32
        }
    );
}

#[test]
fn conversion_errors() {
    let coo = sample();
    assert_eq!(
        SparseTensor::from_coo_with(&coo, &Format::Csr, DType::I32).unwrap_err(),
        FormatError::UnsupportedDType { dtype: DType::I32 }
    );
    let cube = CooTensor::empty(vec![2, 2, 2]);
    assert_eq!(
        SparseTensor::from_coo(&cube, &Format::Csr).unwrap_err(),
        FormatError::UnsupportedOrder {
            format: "csr".into(),
            ndim: 3
        }
    );
    let bad = CooTensor {
        shape: vec![2, 2],
        coords: vec![0, 5],
        values: vec![1.0],
    };
    assert_eq!(
        SparseTensor::from_coo(&bad, &Format::Csr).unwrap_err(),
        FormatError::CoordinateOutOfRange {
            entry: 0,
            axis: 1,
            coordinate: 5,
            dim: 2
        }
    );
    let dup = CooTensor {
        shape: vec![2, 2],
        coords: vec![1, 1, 0, 0, 1, 1],
        values: vec![1.0, 2.0, 3.0],
    };
    assert_eq!(
        SparseTensor::from_coo(&dup, &Format::Csr).unwrap_err(),
        FormatError::DuplicateCoordinate {
            coordinate: vec![1, 1],
            first: 0,
            second: 2
        }
    );
    let huge = CooTensor::empty(vec![1 << 40, 1 << 40]);
    assert_eq!(
        SparseTensor::from_coo(&huge, &Format::Dense).unwrap_err(),
        FormatError::ShapeOverflow {
            shape: vec![1 << 40, 1 << 40]
        }
    );
}

#[test]
fn dense_helpers() {
    let t = SparseTensor::dense_from_f64(&[2, 3], &[1., 0., 2., 0., 0., 3.], DType::BF16).unwrap();
    assert_eq!(t.to_dense_f64(), vec![1., 0., 2., 0., 0., 3.]);
    assert_eq!(t.to_coo().unwrap().nnz(), 3);
    assert_eq!(
        SparseTensor::dense_from_f64(&[2, 3], &[1.0], DType::F32).unwrap_err(),
        FormatError::ValuesLength {
            found: 1,
            expected: 6
        }
    );
    assert_eq!(
        build("srbcrs:3x2").to_dense_f64(),
        build("dense").to_dense_f64()
    );
}
