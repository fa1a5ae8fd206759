"""A NumPy stand-in for torch_sparse's SparseTensor and matmul (see ../README.md)."""

import os

import numpy as np

import fake_clock
import torch

if os.environ.get("FAKE_NO_TORCH_SPARSE") == "1":
    raise ImportError("No module named 'torch_sparse'")

__version__ = "0.0-fake"


class SparseTensor:
    def __init__(self, rowptr, col, value, sparse_sizes, is_sorted=False, trust_data=False):
        assert rowptr.a.dtype == np.int64 and col.a.dtype == np.int64, "torch_sparse takes i64"
        self.csr = torch.SparseCsr(rowptr, col, value, sparse_sizes)


def matmul(adj, x, reduce="sum"):
    assert reduce == "sum"
    assert x.a.ndim == 2, "torch_sparse.matmul takes a matrix"
    fake_clock.tick()
    return torch.Tensor((adj.csr.dense() @ x.a).astype(np.float32))
