//! ndarray and sprs interop.

use half::f16;
use ndarray::{array, Array3, ArrayD, IxDyn};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::interop::{dense_arrays, sprs_matrices, Element, InteropError};
use sparsile_formats::{CooTensor, Format, SparseTensor};
use sprs::{CompressedStorage, CsMat, TriMat};

fn random_coo(rng: &mut ChaCha8Rng, rows: usize, cols: usize, density: f64) -> CooTensor {
    let mut t = Vec::new();
    for i in 0..rows {
        for j in 0..cols {
            if rng.random_bool(density) {
                t.push((i, j, rng.random_range(-4.0..4.0)));
            }
        }
    }
    CooTensor::from_triplets(vec![rows, cols], &t).unwrap()
}

fn transpose(coo: &CooTensor) -> CooTensor {
    let t: Vec<_> = (0..coo.nnz())
        .map(|e| (coo.coord(e)[1], coo.coord(e)[0], coo.values[e]))
        .collect();
    CooTensor::from_triplets(vec![coo.shape[1], coo.shape[0]], &t).unwrap()
}

#[test]
fn dense_view_borrows_standard_layout_arrays() {
    let a = array![[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let t = dense_arrays::from_array_view(a.view()).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    let stored = f64::slice(&t.values).unwrap();
    assert_eq!(
        stored.as_ptr(),
        a.as_ptr(),
        "no copy for a standard-layout view"
    );
    let back = dense_arrays::dense_view::<f64>(&t).unwrap();
    assert_eq!(back, a.view().into_dyn());
    assert_eq!(back.as_ptr(), a.as_ptr());
    assert_eq!(t.to_coo().unwrap().nnz(), 6);
}

#[test]
fn transposed_views_are_copied_in_logical_order() {
    let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let t = dense_arrays::from_array_view(a.t()).unwrap();
    assert_eq!(t.shape(), &[3, 2]);
    assert_eq!(t.values.to_f64_vec(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let owned = dense_arrays::from_array(&a.t()).unwrap();
    assert_eq!(owned, t.clone().into_owned());
}

#[test]
fn dense_view_checks_format_and_dtype() {
    let a = array![[1.0f32, 0.0], [0.0, 2.0]];
    let t = dense_arrays::from_array_view(a.view()).unwrap();
    assert_eq!(
        dense_arrays::dense_view::<f64>(&t).unwrap_err(),
        InteropError::DTypeMismatch {
            expected: sparsile_ir::DType::F64,
            found: sparsile_ir::DType::F32
        }
    );
    let csr = SparseTensor::from_coo(&t.to_coo().unwrap(), &Format::Csr).unwrap();
    assert!(matches!(
        dense_arrays::dense_view::<f64>(&csr),
        Err(InteropError::NotDense { .. })
    ));
    // `to_array` converts any format and dtype.
    let back: ArrayD<f64> = dense_arrays::to_array(&csr).unwrap();
    assert_eq!(back, array![[1.0, 0.0], [0.0, 2.0]].into_dyn());
    let back32: ArrayD<f32> = dense_arrays::to_array(&t).unwrap();
    assert_eq!(back32, a.into_dyn());
}

#[test]
fn half_precision_and_higher_order_arrays() {
    let a = Array3::from_shape_fn((2, 3, 4), |(i, j, k)| {
        f16::from_f64((i * 12 + j * 4 + k) as f64)
    });
    let t = dense_arrays::from_array(&a).unwrap();
    assert_eq!(t.dtype(), sparsile_ir::DType::F16);
    assert_eq!(t.shape(), &[2, 3, 4]);
    let v = dense_arrays::dense_view::<f16>(&t).unwrap();
    assert_eq!(v, a.view().into_dyn());
    let zero_d = ArrayD::<f64>::zeros(IxDyn(&[]));
    assert_eq!(
        dense_arrays::from_array(&zero_d).unwrap_err(),
        InteropError::ZeroDimensional
    );
}

#[test]
fn csr_matrices_round_trip_through_sprs() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..20 {
        let (m, n) = (rng.random_range(0..20), rng.random_range(0..20));
        let coo = random_coo(&mut rng, m, n, 0.2);
        let t = SparseTensor::from_coo(&coo, &Format::Csr).unwrap();
        let mat: CsMat<f64> = sprs_matrices::to_csmat(&t, CompressedStorage::CSR).unwrap();
        assert_eq!(mat.nnz(), coo.nnz());
        for e in 0..coo.nnz() {
            let c = coo.coord(e);
            assert_eq!(mat.get(c[0], c[1]), Some(&coo.values[e]));
        }
        let back = sprs_matrices::from_csmat(mat.view()).unwrap();
        assert_eq!(back, t);
        // The CSC form of A has the arrays of the CSR form of A^T.
        let csc_mat: CsMat<f64> = sprs_matrices::to_csmat(&t, CompressedStorage::CSC).unwrap();
        assert!(csc_mat.is_csc());
        let csc = sprs_matrices::from_csmat(csc_mat.view()).unwrap();
        assert_eq!(csc.format(), &Format::Csc);
        assert_eq!(csc.shape(), &[m, n]);
        let csr_t = SparseTensor::from_coo(&transpose(&coo), &Format::Csr).unwrap();
        assert_eq!(csc.structure.axes, csr_t.structure.axes);
        assert_eq!(csc.values, csr_t.values);
        assert_eq!(csc, sprs_matrices::csc_from_coo(&coo).unwrap());
        assert_eq!(csc.to_coo().unwrap(), coo);
        // Any other format goes through COO.
        let bsr = SparseTensor::from_coo(&coo, &Format::Bsr { r: 2, c: 3 }).unwrap();
        let from_bsr: CsMat<f64> = sprs_matrices::to_csmat(&bsr, CompressedStorage::CSR).unwrap();
        assert_eq!(from_bsr, mat);
        let csr_from_csc: CsMat<f64> =
            sprs_matrices::to_csmat(&csc, CompressedStorage::CSR).unwrap();
        assert_eq!(csr_from_csc, mat);
        let again: CsMat<f64> = sprs_matrices::to_csmat(&csc, CompressedStorage::CSC).unwrap();
        assert_eq!(again, csc_mat);
    }
}

#[test]
fn sliced_sprs_views_and_f32_values() {
    let mat = CsMat::new(
        (4, 3),
        vec![0, 1, 3, 3, 4],
        vec![2, 0, 1, 2],
        vec![1.0f32, 2.0, 3.0, 4.0],
    );
    // Rows 1..4: an indptr that does not start at 0.
    let rows = mat.slice_outer(1..4);
    let t = sprs_matrices::from_csmat(rows).unwrap();
    assert_eq!(t.dtype(), sparsile_ir::DType::F32);
    assert_eq!(
        t.to_coo().unwrap(),
        CooTensor::from_triplets(vec![3, 3], &[(0, 0, 2.0), (0, 1, 3.0), (2, 2, 4.0)]).unwrap()
    );
}

#[test]
fn triplets_sum_duplicates() {
    let mut tri = TriMat::new((3, 3));
    tri.add_triplet(2, 1, 1.0);
    tri.add_triplet(0, 2, 2.0);
    tri.add_triplet(2, 1, 0.5);
    let coo = sprs_matrices::from_trimat(&tri);
    assert_eq!(
        coo,
        CooTensor::from_triplets(vec![3, 3], &[(0, 2, 2.0), (2, 1, 1.5)]).unwrap()
    );
    let back = sprs_matrices::to_trimat(&coo).unwrap();
    let csr: CsMat<f64> = back.to_csr();
    let t = SparseTensor::from_coo(&coo, &Format::Csr).unwrap();
    assert_eq!(
        csr,
        sprs_matrices::to_csmat::<f64>(&t, CompressedStorage::CSR).unwrap()
    );
    assert!(matches!(
        sprs_matrices::to_trimat(&CooTensor::empty(vec![2, 2, 2])),
        Err(InteropError::NotMatrix { ndim: 3 })
    ));
}
