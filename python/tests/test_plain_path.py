"""The operators' plain path (``_ops._plain_args``): calls whose dense operands are
C-contiguous NumPy arrays or contiguous torch CPU tensors of the sparse operand's type
skip the general path's conversions. Both paths must give the same results, and every
other call (strided, subclassed, other dtype, gradients) must still take the general one."""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsile
from sparsile import _ops


class Marked(np.ndarray):
    """An ndarray subclass: not taken by the plain path."""


def operands(dtype, fmt, seed):
    rng = np.random.default_rng(seed)
    A = sp.random(37, 29, density=0.15, format="csr", dtype=dtype, random_state=seed)
    # An empty row and an empty column.
    rows, cols = np.ones(37, dtype), np.ones(29, dtype)
    rows[3], cols[5] = 0, 0
    A = (sp.diags(rows) @ A @ sp.diags(cols)).tocsr()
    A.eliminate_zeros()
    return A.asformat(fmt), rng


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_plain_and_general_paths_agree(dtype, fmt):
    A, rng = operands(dtype, fmt, 7)
    S = sparsile.from_scipy(A)
    X = rng.random((29, 5)).astype(dtype)
    x = rng.random(29).astype(dtype)
    P, Q = rng.random((37, 5)).astype(dtype), rng.random((29, 5)).astype(dtype)
    assert _ops._plain_args({"A": S}, {"X": X}) is not None
    plain = sparsile.spmm(S, X)
    general = sparsile.spmm(S, np.asfortranarray(X))  # strided: the general path
    assert _ops._plain_args({"A": S}, {"X": np.asfortranarray(X)}) is None
    np.testing.assert_allclose(plain, A @ X, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(plain, general)
    assert type(plain) is np.ndarray
    np.testing.assert_allclose(sparsile.spmv(S, x), A @ x, rtol=1e-5, atol=1e-5)
    C = sparsile.sddmm(S, P, Q)
    assert isinstance(C, sparsile.Tensor)
    D = sp.csr_matrix(A).multiply(P @ Q.T).toarray()
    np.testing.assert_allclose(C.to_dense(), D, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_ops.sddmm_values(S, P, Q), C.values, rtol=1e-6)


def test_other_calls_take_the_general_path():
    A, rng = operands(np.float32, "csr", 3)
    S = sparsile.from_scipy(A)
    X = rng.random((29, 4)).astype(np.float32)
    assert _ops._plain_args({"A": S}, {"X": X.view(Marked)}) is None
    assert _ops._plain_args({"A": S}, {"X": X.astype(np.float64)}) is None
    assert _ops._plain_args({"A": S}, {"X": X[:, ::2]}) is None
    np.testing.assert_allclose(sparsile.spmm(S, X.view(Marked)), A @ X, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="X is float64 but A is float32"):
        sparsile.spmm(S, X.astype(np.float64))
    with pytest.raises(ValueError):
        sparsile.spmm(S, rng.random((28, 4)).astype(np.float32))


def test_torch_tensors_on_the_plain_path():
    torch = pytest.importorskip("torch")
    A, rng = operands(np.float32, "csr", 5)
    S = sparsile.from_scipy(A)
    X = torch.from_numpy(rng.random((29, 6)).astype(np.float32))
    assert _ops._plain_args({"A": S}, {"X": X}) is not None
    Y = sparsile.spmm(S, X)
    assert isinstance(Y, torch.Tensor)
    np.testing.assert_allclose(Y.numpy(), A @ X.numpy(), rtol=1e-5, atol=1e-5)
    # A tensor that requires a gradient, a transposed one and one of another dtype: not.
    G = X.clone().requires_grad_(True)
    assert _ops._plain_args({"A": S}, {"X": G}) is None
    assert _ops._plain_args({"A": S}, {"X": X.t().contiguous().t()}) is None
    assert _ops._plain_args({"A": S}, {"X": X.double()}) is None
    Z = sparsile.spmm(S, G)
    assert Z.grad_fn is not None
    Z.sum().backward()
    assert G.grad is not None
    with torch.no_grad():
        W = sparsile.spmm(S, G)
    assert W.grad_fn is None
    np.testing.assert_allclose(W.numpy(), Y.numpy(), rtol=1e-6)
