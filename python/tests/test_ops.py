"""Operators against SciPy / NumPy on seeded random inputs: formats, dtypes, index types,
empty rows, strided operands."""

import numpy as np
import pytest

import sparsile

from conftest import random_csr

FORMATS = ["csr", "csc", "coo", "bsr:4x4", "ell", "dia", "dcsr"]


def tol(dtype):
    return dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spmm_matches_scipy(rng, fmt, dtype):
    A = random_csr(rng, 41, 29, 0.1, dtype, empty_rows=(3, 40))
    X = rng.standard_normal((29, 7)).astype(dtype)
    T = sparsile.from_scipy(A).to(fmt)
    Y = sparsile.spmm(T, X)
    assert Y.dtype == dtype and Y.shape == (41, 7)
    np.testing.assert_allclose(Y, A @ X, **tol(dtype))
    np.testing.assert_allclose(T @ X, A @ X, **tol(dtype))


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_spmm_index_types(rng, index_dtype):
    A = random_csr(rng, 30, 30, 0.1, np.float32, index_dtype)
    X = rng.standard_normal((30, 5)).astype(np.float32)
    np.testing.assert_allclose(sparsile.spmm(sparsile.from_scipy(A), X), A @ X, rtol=2e-5, atol=2e-5)


def test_spmm_strided_operand(rng):
    A = random_csr(rng, 20, 16, 0.2, np.float64)
    big = rng.standard_normal((8, 16 * 2))
    X = big.T[::2]  # (16, 8), not contiguous
    assert not X.flags.c_contiguous
    np.testing.assert_allclose(sparsile.spmm(sparsile.from_scipy(A), X), A @ X, rtol=1e-12)
    Xf = np.asfortranarray(rng.standard_normal((16, 3)))
    np.testing.assert_allclose(sparsile.spmm(sparsile.from_scipy(A), Xf), A @ Xf, rtol=1e-12)


def test_spmm_empty_matrix(rng):
    T = sparsile.from_coo([], [], np.zeros(0), shape=(5, 4))
    np.testing.assert_array_equal(sparsile.spmm(T, np.ones((4, 3))), np.zeros((5, 3)))


@pytest.mark.parametrize("fmt", ["csr", "ell", "bsr:2x2"])
def test_spmv_matches_scipy(rng, fmt):
    A = random_csr(rng, 33, 27, 0.15, np.float64)
    x = rng.standard_normal(27)
    T = sparsile.from_scipy(A).to(fmt)
    np.testing.assert_allclose(sparsile.spmv(T, x), A @ x, rtol=1e-12)
    np.testing.assert_allclose(T @ x, A @ x, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sddmm_matches_numpy(rng, dtype):
    A = random_csr(rng, 25, 19, 0.2, dtype, empty_rows=(0,))
    X = rng.standard_normal((25, 6)).astype(dtype)
    Y = rng.standard_normal((19, 6)).astype(dtype)
    C = sparsile.sddmm(sparsile.from_scipy(A), X, Y)
    assert isinstance(C, sparsile.Tensor) and C.format == "csr" and C.nnz == A.nnz
    expected = A.multiply(X @ Y.T).toarray()
    np.testing.assert_allclose(C.to_dense(), expected, **tol(dtype))
    # Values come back in A's storage order.
    rows = np.repeat(np.arange(25), np.diff(A.indptr))
    np.testing.assert_allclose(C.values, A.data * (X @ Y.T)[rows, A.indices], **tol(dtype))


def test_sddmm_with_values_argument(rng):
    A = random_csr(rng, 12, 10, 0.3, np.float64)
    T = sparsile.from_scipy(A)
    X, Y = rng.standard_normal((12, 4)), rng.standard_normal((10, 4))
    v = rng.standard_normal(T.nnz)
    C = sparsile.sddmm(T, X, Y, values=v)
    np.testing.assert_allclose(C.to_dense(), T.with_values(v).to_scipy().multiply(X @ Y.T).toarray(), rtol=1e-12)


def test_batched(rng):
    A = random_csr(rng, 21, 17, 0.2, np.float32)
    T = sparsile.from_scipy(A)
    X = rng.standard_normal((3, 17, 5)).astype(np.float32)
    np.testing.assert_allclose(sparsile.spmm_batched(T, X), np.stack([A @ x for x in X]), rtol=2e-5, atol=2e-5)
    V = rng.standard_normal((4, 17)).astype(np.float32)
    np.testing.assert_allclose(sparsile.spmv_batched(T, V), np.stack([A @ v for v in V]), rtol=2e-5, atol=2e-5)


def random_sparse3(rng, shape, density):
    dense = rng.standard_normal(shape)
    dense[rng.random(shape) > density] = 0
    return dense


@pytest.mark.parametrize("fmt", ["csf", "coo"])
def test_mttkrp_matches_einsum(rng, fmt):
    dense = random_sparse3(rng, (7, 6, 5), 0.25)
    idx = np.nonzero(dense)
    B = sparsile.from_coords(idx, dense[idx], dense.shape, format=fmt)
    C, D = rng.standard_normal((6, 4)), rng.standard_normal((5, 4))
    np.testing.assert_allclose(sparsile.mttkrp(B, C, D), np.einsum("ikl,kr,lr->ir", dense, C, D), rtol=1e-10, atol=1e-12)


def test_rgms_matches_einsum(rng):
    dense = random_sparse3(rng, (3, 9, 8), 0.2)
    idx = np.nonzero(dense)
    A = sparsile.from_coords(idx, dense[idx], dense.shape, format="csf")
    X, W = rng.standard_normal((8, 5)), rng.standard_normal((3, 5, 4))
    expected = sum(dense[r] @ X @ W[r] for r in range(3))
    np.testing.assert_allclose(sparsile.rgms(A, X, W), expected, rtol=1e-10, atol=1e-12)


def test_operators_accept_scipy_directly(rng):
    A = random_csr(rng, 9, 8, 0.3, np.float64)
    X = rng.standard_normal((8, 2))
    np.testing.assert_allclose(sparsile.spmm(A, X), A @ X, rtol=1e-12)


def test_threads_option(rng):
    A = random_csr(rng, 64, 64, 0.1, np.float64)
    X = rng.standard_normal((64, 8))
    for threads in (1, 2, 3):
        np.testing.assert_allclose(sparsile.spmm(A, X, threads=threads), A @ X, rtol=1e-12)
