"""The thread count of kernel calls: ``set_num_threads`` / ``get_num_threads``, checked
values, the PyTorch default, and the same results whatever the count."""

import numpy as np
import pytest

import sparsile
from conftest import needs_torch, random_csr


@pytest.fixture(autouse=True)
def reset_threads():
    yield
    sparsile.set_num_threads(None)


def test_set_and_reset():
    sparsile.set_num_threads(3)
    assert sparsile.get_num_threads() == 3
    sparsile.set_num_threads(None)
    assert sparsile.get_num_threads() >= 1


@pytest.mark.parametrize("bad", [0, -1, 2**31, 1025])
def test_out_of_range_counts_are_value_errors(bad):
    with pytest.raises(ValueError, match="thread count"):
        sparsile.set_num_threads(bad)


@pytest.mark.parametrize("bad", ["2", 2.0, True])
def test_non_integers_are_type_errors(bad):
    with pytest.raises(TypeError, match="threads must be an int"):
        sparsile.set_num_threads(bad)


def test_results_do_not_depend_on_the_thread_count(rng):
    A = random_csr(rng, 300, 200, 0.05, empty_rows=[0, 7, 299])
    X = rng.random((200, 16), dtype=np.float32)
    want = A @ X
    for t in [1, 2, 3]:
        sparsile.set_num_threads(t)
        np.testing.assert_allclose(sparsile.spmm(A, X), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(sparsile.spmm(A, X, threads=1), want, rtol=1e-5, atol=1e-5)


@needs_torch
def test_inside_pytorch_the_default_follows_torch():
    import torch

    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert sparsile.get_num_threads() == 1
        # An explicit count wins over torch's.
        sparsile.set_num_threads(2)
        assert sparsile.get_num_threads() == 2
    finally:
        torch.set_num_threads(old)


def test_without_torch_the_default_is_the_native_one(monkeypatch):
    import sys

    from sparsile import _native

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert sparsile.get_num_threads() == _native.default_num_threads()
