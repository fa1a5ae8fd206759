"""A SciPy or torch matrix passed again reuses its kept conversion, and only when its
arrays still equal it: values, structure changed in place, and new matrices at a freed
address all give the results of a fresh conversion."""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsile
from sparsile import _converted


def _matrix(seed, m=40, n=30, density=0.2):
    A = sp.random(m, n, density=density, format="csr", dtype=np.float32, random_state=seed)
    A.sort_indices()
    return A


def _dense(seed, n, k=5):
    return np.random.default_rng(seed).random((n, k), dtype=np.float32)


def test_repeated_calls_reuse_the_conversion_and_see_new_values():
    _converted.forget()
    A = _matrix(0)
    X = _dense(1, A.shape[1])
    first = sparsile.as_tensor(A)
    again = sparsile.as_tensor(A)
    assert again._native is not first._native
    assert len(_converted._kept) == 1  # one conversion kept, the second call reused it
    np.testing.assert_allclose(sparsile.spmm(A, X), A @ X, rtol=1e-5, atol=1e-6)
    A.data *= -2.0  # values changed in place
    np.testing.assert_allclose(sparsile.spmm(A, X), A @ X, rtol=1e-5, atol=1e-6)


def test_a_structure_changed_in_place_is_converted_afresh():
    _converted.forget()
    A = _matrix(2)
    X = _dense(3, A.shape[1])
    np.testing.assert_allclose(sparsile.spmm(A, X), A @ X, rtol=1e-5, atol=1e-6)
    # Move one stored entry to another column of its row, in place (same arrays).
    row = int(np.flatnonzero(np.diff(A.indptr) == 1)[0])
    pos = A.indptr[row]
    free = sorted(set(range(A.shape[1])) - {int(A.indices[pos])})
    A.indices[pos] = free[0]
    assert A.has_sorted_indices
    np.testing.assert_allclose(sparsile.spmm(A, X), A @ X, rtol=1e-5, atol=1e-6)


def test_a_new_matrix_at_a_freed_address_is_not_mistaken_for_the_old():
    _converted.forget()
    X = _dense(4, 30)
    for seed in range(6):
        A = _matrix(10 + seed)  # the previous one's arrays are freed: addresses recur
        np.testing.assert_allclose(sparsile.spmm(A, X), A @ X, rtol=1e-5, atol=1e-6)
    assert len(_converted._kept) <= _converted.CAPACITY


def test_unsorted_input_is_sorted_every_time_and_not_kept():
    _converted.forget()
    A = _matrix(5)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    order = np.lexsort((-A.indices, rows))  # every row's columns descending
    U = sp.csr_matrix((A.data[order], A.indices[order], A.indptr), shape=A.shape)
    X = _dense(6, A.shape[1])
    for _ in range(2):
        np.testing.assert_allclose(sparsile.spmm(U, X), A @ X, rtol=1e-5, atol=1e-6)
    assert not _converted._kept


def test_more_matrices_than_kept_stay_correct():
    _converted.forget()
    mats = [_matrix(20 + i) for i in range(_converted.CAPACITY + 3)]
    X = _dense(7, 30)
    for _ in range(2):
        for A in mats:
            np.testing.assert_allclose(sparsile.spmm(A, X), A @ X, rtol=1e-5, atol=1e-6)
    assert len(_converted._kept) == _converted.CAPACITY


def test_torch_csr_reuses_and_sees_changes():
    torch = pytest.importorskip("torch")
    _converted.forget()
    A = _matrix(8)
    T = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                torch.from_numpy(A.indices.astype(np.int64)),
                                torch.from_numpy(A.data.copy()), size=A.shape)
    X = _dense(9, A.shape[1])
    want = A @ X
    for _ in range(2):
        np.testing.assert_allclose(sparsile.spmm(T, X), want, rtol=1e-5, atol=1e-6)
    T.values().mul_(3.0)
    np.testing.assert_allclose(sparsile.spmm(T, X), 3.0 * want, rtol=1e-5, atol=1e-5)


def test_explicit_conversions_are_not_kept():
    """from_scipy / from_torch keep no structure alive once the user drops the tensor
    (its device copies go with it); the operators' own conversions are kept."""
    _converted.forget()
    A = _matrix(12)
    X = _dense(13, A.shape[1])
    T = sparsile.from_scipy(A)
    assert not _converted._kept
    np.testing.assert_allclose(sparsile.spmm(T, X), A @ X, rtol=1e-5, atol=1e-6)
    assert not _converted._kept
    sparsile.spmm(A, X)
    assert len(_converted._kept) == 1
    again = sparsile.from_scipy(A)  # reuses the kept conversion, adds none
    assert again.nnz == A.nnz and len(_converted._kept) == 1


def test_same_pattern_compares_every_entry():
    A = _matrix(11)
    t = sparsile.from_scipy(A)._native
    assert t.same_pattern(A.indptr, A.indices)
    changed = A.indices.copy()
    changed[-1] = (changed[-1] + 1) % A.shape[1]
    assert not t.same_pattern(A.indptr, changed)
    assert not t.same_pattern(A.indptr.astype(np.int64), A.indices.astype(np.int64))
    assert not sparsile.from_dense(np.eye(3, dtype=np.float32))._native.same_pattern(
        np.zeros(4, np.int32), np.zeros(0, np.int32))
