//! Matrix statistics against hand-computed small matrices.

use sparsile_formats::stats::{RowLengthBucket, BLOCK_SIZES};
use sparsile_formats::{CooTensor, MatrixStats};

fn coo(shape: [usize; 2], entries: &[(usize, usize)]) -> CooTensor {
    let t: Vec<_> = entries
        .iter()
        .enumerate()
        .map(|(k, &(i, j))| (i, j, k as f64 + 1.0))
        .collect();
    CooTensor::from_triplets(shape.to_vec(), &t).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn six_by_six_by_hand() {
    let m = coo(
        [6, 6],
        &[(0, 0), (0, 1), (1, 0), (1, 1), (2, 5), (5, 0), (5, 5)],
    );
    let s = MatrixStats::of(&m).unwrap();
    assert_eq!((s.rows, s.cols, s.nnz), (6, 6, 7));
    assert!(close(s.density, 7.0 / 36.0));
    // Row lengths 2, 2, 1, 0, 0, 2.
    assert!(close(s.row_length_mean, 7.0 / 6.0));
    assert!(close(s.row_length_std, (174.0f64 / 216.0).sqrt()));
    assert_eq!((s.row_length_min, s.row_length_max), (0, 2));
    assert_eq!(
        s.row_length_histogram,
        vec![
            RowLengthBucket {
                lo: 0,
                hi: 0,
                rows: 2
            },
            RowLengthBucket {
                lo: 1,
                hi: 1,
                rows: 1
            },
            RowLengthBucket {
                lo: 2,
                hi: 3,
                rows: 3
            },
        ]
    );
    assert_eq!((s.empty_rows, s.empty_cols), (2, 3));
    assert_eq!(s.bandwidth, 5);
    // Rows 0..: first columns 0, 0, 5, -, -, 0 -> 0 + 1 + 0 + 5.
    assert_eq!(s.profile, 6);
    assert_eq!(s.structurally_symmetric, Some(false));
    assert_eq!(s.numerically_symmetric, Some(false));
    let rs: Vec<usize> = s.blocks.iter().map(|b| b.r).collect();
    assert_eq!(rs, BLOCK_SIZES.to_vec());
    // r = 4: blocks (0,0), (0,1), (1,0), (1,1).
    assert_eq!(s.blocks[0].nonempty_blocks, 4);
    assert!(close(s.blocks[0].fill_ratio, 7.0 / 64.0));
    assert!(close(s.blocks[0].dense_block_fraction, 0.0));
    // r = 8, 16, 32: one block.
    for b in &s.blocks[1..] {
        assert_eq!(b.nonempty_blocks, 1);
        assert!(close(b.fill_ratio, 7.0 / (b.r * b.r) as f64));
    }
}

#[test]
fn dense_blocks_are_counted() {
    let mut entries: Vec<(usize, usize)> =
        (0..4).flat_map(|i| (0..4).map(move |j| (i, j))).collect();
    entries.push((7, 7));
    let s = MatrixStats::of(&coo([8, 8], &entries)).unwrap();
    let b4 = &s.blocks[0];
    assert_eq!(b4.nonempty_blocks, 2);
    assert!(close(b4.fill_ratio, 17.0 / 32.0));
    assert!(close(b4.dense_block_fraction, 16.0 / 17.0));
    let b8 = &s.blocks[1];
    assert_eq!(b8.nonempty_blocks, 1);
    assert!(close(b8.dense_block_fraction, 0.0));
    assert_eq!(s.row_length_histogram.last().unwrap().rows, 4); // rows of length 4..=7
}

#[test]
fn cut_edge_blocks_are_never_dense() {
    // A full 5 x 5 matrix: with r = 4 only block (0, 0) is complete.
    let entries: Vec<(usize, usize)> = (0..5).flat_map(|i| (0..5).map(move |j| (i, j))).collect();
    let s = MatrixStats::of(&coo([5, 5], &entries)).unwrap();
    assert_eq!(s.blocks[0].nonempty_blocks, 4);
    assert!(close(s.blocks[0].dense_block_fraction, 16.0 / 25.0));
    assert!(close(s.density, 1.0));
    assert_eq!(s.bandwidth, 4);
    assert_eq!(s.profile, 10);
    assert_eq!(s.structurally_symmetric, Some(true));
    // Values 1..=25 in row-major order are not symmetric.
    assert_eq!(s.numerically_symmetric, Some(false));
}

#[test]
fn symmetry_flags() {
    let sym = CooTensor::from_triplets(
        vec![3, 3],
        &[(0, 0, 1.0), (0, 2, 2.0), (2, 0, 2.0), (1, 1, -1.0)],
    )
    .unwrap();
    let s = MatrixStats::of(&sym).unwrap();
    assert_eq!(s.structurally_symmetric, Some(true));
    assert_eq!(s.numerically_symmetric, Some(true));
    let unsym_values = CooTensor::from_triplets(vec![3, 3], &[(0, 2, 2.0), (2, 0, 3.0)]).unwrap();
    let s = MatrixStats::of(&unsym_values).unwrap();
    assert_eq!(s.structurally_symmetric, Some(true));
    assert_eq!(s.numerically_symmetric, Some(false));
    let rect = CooTensor::from_triplets(vec![2, 3], &[(0, 2, 2.0)]).unwrap();
    let s = MatrixStats::of(&rect).unwrap();
    assert_eq!(s.structurally_symmetric, None);
    assert_eq!(s.numerically_symmetric, None);
}

#[test]
fn empty_matrices() {
    let s = MatrixStats::of(&CooTensor::empty(vec![0, 0])).unwrap();
    assert_eq!((s.nnz, s.bandwidth, s.profile), (0, 0, 0));
    assert_eq!(s.density, 0.0);
    assert_eq!(
        s.row_length_histogram,
        vec![RowLengthBucket {
            lo: 0,
            hi: 0,
            rows: 0
        }]
    );
    let s = MatrixStats::of(&CooTensor::empty(vec![3, 4])).unwrap();
    assert_eq!((s.empty_rows, s.empty_cols), (3, 4));
    assert!(s
        .blocks
        .iter()
        .all(|b| b.nonempty_blocks == 0 && b.fill_ratio == 0.0));
}

#[test]
fn non_canonical_input_is_canonicalised() {
    let m = CooTensor {
        shape: vec![2, 2],
        coords: vec![1, 1, 0, 0, 1, 1],
        values: vec![1.0, 2.0, 3.0],
    };
    let s = MatrixStats::of(&m).unwrap();
    assert_eq!(s.nnz, 2);
    assert_eq!(s.row_length_max, 1);
}

#[test]
fn rejects_non_matrices_and_bad_coordinates() {
    assert!(MatrixStats::of(&CooTensor::empty(vec![2, 2, 2])).is_err());
    let bad = CooTensor {
        shape: vec![2, 2],
        coords: vec![2, 0],
        values: vec![1.0],
    };
    assert!(MatrixStats::of(&bad).is_err());
}

#[test]
fn serializes_to_json() {
    let s = MatrixStats::of(&coo([2, 2], &[(0, 1)])).unwrap();
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["nnz"], 1);
    assert_eq!(json["blocks"][0]["r"], 4);
    assert_eq!(json["structurally_symmetric"], false);
    assert!(s.to_string().contains("shape            2 x 2"));
}
