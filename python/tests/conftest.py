"""Shared fixtures: seeded random sparse matrices, and the torch availability check
(torch tests skip, saying why, only when torch cannot be imported)."""

import numpy as np
import pytest
import scipy.sparse as sp

try:
    import torch  # noqa: F401

    HAVE_TORCH = True
    TORCH_REASON = ""
except ImportError as e:  # pragma: no cover - depends on the environment
    HAVE_TORCH = False
    TORCH_REASON = f"torch is not installed ({e})"

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason=TORCH_REASON)


def pytest_report_header(config):
    return "torch: " + ("available" if HAVE_TORCH else f"SKIPPED TESTS: {TORCH_REASON}")


def random_csr(rng, m, n, density, dtype=np.float32, index_dtype=np.int32, empty_rows=()):
    """A random CSR matrix with sorted indices; rows in ``empty_rows`` are emptied."""
    A = sp.random(m, n, density=density, format="csr", dtype=np.float64, random_state=rng).astype(dtype)
    if len(empty_rows):
        A = A.tolil()
        for r in empty_rows:
            A[r, :] = 0
        A = A.tocsr()
    A.sort_indices()
    A.indptr = A.indptr.astype(index_dtype)
    A.indices = A.indices.astype(index_dtype)
    return A


@pytest.fixture
def rng():
    return np.random.default_rng(20260322)
