"""Sparse tensors: construction from SciPy / arrays / files, conversion between formats,
and back to SciPy, against the dense matrices."""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsile

from conftest import random_csr

FORMATS = ["csr", "csc", "coo", "dcsr", "bsr:2x2", "bsr:4x3", "ell", "dia", "dense", "srbcrs:2x2", "ragged"]


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_from_scipy_csr_round_trip(rng, dtype, index_dtype):
    A = random_csr(rng, 37, 23, 0.15, dtype, index_dtype)
    T = sparsile.from_scipy(A)
    assert T.shape == (37, 23) and T.format == "csr" and T.nnz == A.nnz
    assert T.dtype == np.dtype(dtype) and T.index_type == np.dtype(index_dtype)
    B = T.to_scipy()
    assert B.format == "csr"
    np.testing.assert_array_equal(B.indptr, A.indptr)
    np.testing.assert_array_equal(B.indices, A.indices)
    np.testing.assert_array_equal(B.data, A.data)


@pytest.mark.parametrize("fmt", ["csc", "coo", "bsr", "lil", "dok"])
def test_from_scipy_other_formats(rng, fmt):
    A = random_csr(rng, 20, 16, 0.2, np.float64)
    S = A.asformat(fmt) if fmt != "bsr" else A.tobsr(blocksize=(4, 4))
    T = sparsile.from_scipy(S)
    np.testing.assert_array_equal(T.to_dense(), A.toarray())
    np.testing.assert_array_equal(T.to_scipy().toarray(), A.toarray())
    if fmt in ("csc", "bsr"):
        assert T.to_scipy().format == fmt


def test_from_scipy_sums_duplicates_and_sorts():
    A = sp.coo_matrix((np.array([1.0, 2.0, 4.0]), (np.array([1, 0, 1]), np.array([2, 1, 2]))), shape=(2, 3))
    T = sparsile.from_scipy(A)
    np.testing.assert_array_equal(T.to_dense(), [[0, 2, 0], [0, 0, 5]])
    csr = sp.csr_matrix((np.array([1.0, 2.0]), np.array([2, 0]), np.array([0, 2, 2])), shape=(2, 3))
    np.testing.assert_array_equal(sparsile.from_scipy(csr).to_dense(), csr.toarray())


@pytest.mark.parametrize("fmt", FORMATS)
def test_conversion_keeps_every_element(rng, fmt):
    A = random_csr(rng, 24, 18, 0.12, np.float64, empty_rows=(0, 5, 23))
    T = sparsile.from_scipy(A).to(fmt)
    assert T.format.split(":")[0] == fmt.split(":")[0]
    np.testing.assert_array_equal(T.to_dense(), A.toarray())
    np.testing.assert_array_equal(T.to_scipy().toarray(), A.toarray())
    back = T.to("csr")
    np.testing.assert_array_equal(back.to_dense(), A.toarray())


def test_to_changes_dtype_and_index_type(rng):
    A = random_csr(rng, 10, 10, 0.3, np.float64)
    T = sparsile.from_scipy(A).to("csr", dtype=np.float32, index_type=np.int64)
    assert T.dtype == np.float32 and T.index_type == np.int64
    np.testing.assert_allclose(T.to_dense(), A.toarray(), rtol=1e-6)
    with pytest.raises(TypeError):
        T.to("csr", index_type=np.int16)
    with pytest.raises(TypeError):
        T.to("csr", dtype=np.int32)


def test_from_coo_sums_duplicates():
    T = sparsile.from_coo([0, 1, 1], [2, 0, 0], np.array([1.0, 2.0, 3.0]), shape=(2, 3))
    np.testing.assert_array_equal(T.to_dense(), [[0, 0, 1], [5, 0, 0]])
    with pytest.raises(ValueError, match="duplicate"):
        sparsile.from_coo([0, 0], [1, 1], np.array([1.0, 2.0]), shape=(2, 2), sum_duplicates=False)


def test_from_coords_third_order(rng):
    dense = rng.random((4, 5, 6))
    dense[dense < 0.7] = 0
    idx = np.nonzero(dense)
    T = sparsile.from_coords(idx, dense[idx], dense.shape, format="csf")
    assert T.format == "csf" and T.ndim == 3
    np.testing.assert_array_equal(T.to_dense(), dense)
    coords, values = T.coo()
    np.testing.assert_array_equal(coords, np.array(idx))
    np.testing.assert_array_equal(values, dense[idx])


def test_from_dense_and_values(rng):
    dense = rng.random((6, 7)).astype(np.float32)
    dense[dense < 0.5] = 0
    T = sparsile.from_dense(dense)
    np.testing.assert_array_equal(T.to_dense(), dense)
    np.testing.assert_array_equal(T.values, dense[np.nonzero(dense)])
    doubled = T.with_values(T.values * 2)
    np.testing.assert_array_equal(doubled.to_dense(), dense * 2)
    with pytest.raises(ValueError, match="expected .* values"):
        T.with_values(np.ones(T.nnz + 1, dtype=np.float32))


def test_transpose(rng):
    A = random_csr(rng, 13, 9, 0.3, np.float64)
    T = sparsile.from_scipy(A)
    np.testing.assert_array_equal(T.T.to_dense(), A.toarray().T)
    assert T.T is T.transpose()


@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
def test_load_save_round_trip(rng, tmp_path, suffix):
    A = random_csr(rng, 15, 11, 0.2, np.float64)
    path = tmp_path / f"a{suffix}"
    sparsile.save(path, sparsile.from_scipy(A))
    T = sparsile.load(path, format="bsr:2x2", dtype=np.float64)
    assert T.format == "bsr:2x2"
    np.testing.assert_array_equal(T.to_dense(), A.toarray())


def test_load_bundled_cora():
    import pathlib

    cora = pathlib.Path(__file__).resolve().parents[2] / "data" / "cora.mtx"
    if not cora.exists():
        pytest.skip(f"{cora} not present (tests run outside the repository)")
    T = sparsile.load(cora)
    assert T.shape == (2708, 2708) and T.nnz == 10556 and T.dtype == np.float32


def test_repr_names_shape_format_and_nnz():
    T = sparsile.from_coo([0], [1], np.array([1.0]), shape=(2, 2))
    assert repr(T) == "sparsile.Tensor(shape=(2, 2), format=csr, dtype=float64, nnz=1)"
