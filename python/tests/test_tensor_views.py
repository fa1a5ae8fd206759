"""Read-only views of a tensor's arrays (no copies), pattern-only construction with the
permutation from input order to storage order, astype / todense."""

import gc

import numpy as np
import pytest
import scipy.sparse as sp

import sparsile


def test_values_indptr_indices_are_read_only_views_without_copies(rng):
    M = sp.random(30, 20, density=0.2, format="csr", dtype=np.float64, random_state=rng)
    A = sparsile.from_scipy(M)
    for arr, want in ((A.values, M.data), (A.indptr, M.indptr), (A.indices, M.indices)):
        np.testing.assert_array_equal(arr, want)
        assert arr.base is not None and not arr.flags.writeable and not arr.flags.owndata
        with pytest.raises(ValueError, match="read-only"):
            arr[...] = 0
    assert A.values is A.values  # the same view every time, no copy per access
    # A view keeps the tensor's memory alive after the tensor is gone.
    v = A.values
    del A
    gc.collect()
    np.testing.assert_array_equal(v, M.data)


def test_views_per_format(rng):
    M = sp.random(12, 16, density=0.3, format="csr", dtype=np.float32, random_state=rng)
    C = sparsile.from_scipy(M.tocsc())
    np.testing.assert_array_equal(C.indptr, M.tocsc().indptr)
    B = sparsile.from_scipy(M).to("bsr:4x4")
    np.testing.assert_array_equal(B.indptr, B.to_scipy().indptr)
    with pytest.raises(ValueError, match="not ell"):
        sparsile.from_scipy(M).to("ell").indptr
    # Results handed to other libraries are theirs to change.
    S = B.to_scipy()
    S.data[...] = 0
    assert np.any(B.values != 0)


def test_from_coo_pattern_only_and_permutation(rng):
    m, n, e = 7, 9, 40
    rows = rng.integers(0, m, e)
    cols = rng.integers(0, n, e)
    A, perm = sparsile.from_coo(rows, cols, shape=(m, n), return_permutation=True)
    assert A.dtype == np.float32 and perm.shape == (e,) and perm.dtype == np.int64
    dense = np.zeros((m, n))
    np.add.at(dense, (rows, cols), 1.0)
    np.testing.assert_array_equal(A.to_dense(), dense)  # duplicates summed: counts
    # Per-edge data in input order lines up with storage order through perm.
    data = rng.standard_normal(e)
    stored = np.zeros(A.nnz)
    np.add.at(stored, perm, data)
    dense_data = np.zeros((m, n))
    np.add.at(dense_data, (rows, cols), data)
    np.testing.assert_allclose(A.with_values(stored).to_dense(), dense_data)
    # Each position's coordinates are the input's.
    coo_rows = np.repeat(np.arange(m), np.diff(A.indptr))
    np.testing.assert_array_equal(coo_rows[perm], rows)
    np.testing.assert_array_equal(A.indices[perm], cols)


def test_from_coo_permutation_edge_cases():
    A, perm = sparsile.from_coo([], [], shape=(3, 0), return_permutation=True, dtype=np.float64)
    assert A.nnz == 0 and perm.shape == (0,) and A.dtype == np.float64
    _, perm = sparsile.from_coo([2, 0], [0, 0], np.array([1.0, 0.0]), shape=(3, 1), return_permutation=True)
    assert perm.tolist() == [1, 0]  # an explicit zero is stored, and counted
    with pytest.raises(ValueError, match="return_permutation needs format csr or coo"):
        sparsile.from_coo([0], [0], shape=(1, 1), format="ell", return_permutation=True)
    with pytest.raises(TypeError, match="needs shape"):
        sparsile.from_coo([0], [0])
    with pytest.raises(ValueError, match="same length"):
        sparsile.from_coo([0, 1], [0], shape=(2, 2))


def test_astype_and_todense(rng):
    A = sparsile.from_scipy(sp.random(5, 6, density=0.5, format="csr", dtype=np.float64, random_state=rng))
    B = A.astype(np.float32)
    assert B.dtype == np.float32 and B.format == A.format
    np.testing.assert_allclose(B.todense(), A.to_dense(), rtol=1e-6)
