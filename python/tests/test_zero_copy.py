"""Dense operands and results cross between Python and Sparsile without copies, and
strided operands are copied exactly once, into a contiguous array."""

import numpy as np
import pytest

import sparsile
from sparsile._dense import as_array

from conftest import needs_torch, random_csr


def test_contiguous_numpy_operand_is_passed_as_is():
    x = np.ones((4, 3), np.float32)
    array, from_torch = as_array(x, "X")
    assert array is x and not from_torch


def test_strided_numpy_operand_is_copied_once():
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    view = base[:, ::2]
    array, _ = as_array(view, "X")
    assert array.flags.c_contiguous and not np.shares_memory(array, base)
    np.testing.assert_array_equal(array, view)


def test_values_pair_reads_the_callers_array(rng):
    A = random_csr(rng, 10, 10, 0.3, np.float64)
    T = sparsile.from_scipy(A)
    v = np.zeros(T.nnz)
    x = np.ones(10)
    assert not sparsile.spmv(T, x, values=v).any()
    v[:] = 1.0  # the kernel reads v itself, not a copy made earlier
    np.testing.assert_allclose(sparsile.spmv(T, x, values=v), np.diff(A.indptr).astype(float))


def test_numpy_result_owns_the_kernel_output(rng):
    A = sparsile.from_scipy(random_csr(rng, 8, 8, 0.3, np.float64))
    Y = sparsile.spmm(A, np.ones((8, 2)))
    assert Y.flags.c_contiguous and Y.flags.writeable
    # The array wraps Sparsile's output buffer (its base is the Rust-owned container).
    assert Y.base is not None and type(Y.base).__name__ == "PySliceContainer"


@needs_torch
def test_torch_operand_shares_memory_through_dlpack():
    import torch

    x = torch.ones(5, 3, dtype=torch.float32, requires_grad=True)
    array, from_torch = as_array(x, "X")
    assert from_torch and array.ctypes.data == x.data_ptr()
    t = torch.ones(6, 4, dtype=torch.float64).t()  # strided
    array, _ = as_array(t, "X")
    assert array.flags.c_contiguous and array.ctypes.data != t.data_ptr()
    np.testing.assert_array_equal(array, t.numpy())


@needs_torch
def test_torch_result_shares_memory_with_the_kernel_output(rng):
    import torch

    A = random_csr(rng, 9, 7, 0.3, np.float32)
    X = torch.randn(7, 3)
    Y = sparsile.spmm(sparsile.from_scipy(A), X)
    assert isinstance(Y, torch.Tensor)
    base = np.from_dlpack(Y)
    assert base.ctypes.data == Y.data_ptr()
    np.testing.assert_allclose(Y.numpy(), A @ X.numpy(), rtol=2e-5, atol=2e-5)
    Xs = torch.randn(3, 7).t()  # not contiguous: copied once, result still right
    np.testing.assert_allclose(sparsile.spmm(sparsile.from_scipy(A), Xs).numpy(), A @ Xs.numpy(), rtol=2e-5, atol=2e-5)


@needs_torch
def test_torch_errors():
    import torch

    A = sparsile.from_coo([0], [0], np.ones(1, np.float32), shape=(2, 3))
    with pytest.raises(TypeError, match=r"X must be float16, bfloat16 \(torch tensors\), float32 or float64, got torch.int64"):
        sparsile.spmm(A, torch.ones(3, 2, dtype=torch.int64))
    with pytest.raises(TypeError, match="X must be a dense tensor"):
        sparsile.spmm(A, torch.ones(3, 2).to_sparse())
