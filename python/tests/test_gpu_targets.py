"""GPU targets from Python: ``target="cuda-sim"`` runs the GPU recipes in the SIMT
interpreter (which checks races and barriers) and matches SciPy; ``target="cuda"`` on a
machine without a GPU fails with the driver's message; wrong targets and mismatched
sources are named errors."""

import numpy as np
import pytest

import sparsile

from conftest import random_csr

SPMM = "tensor A: f32[m, n] csr\ntensor X: f32[n, k]\ntensor Y: f32[m, k]\nY[i,k] = A[i,j] * X[j,k]\n"


@pytest.mark.parametrize("recipe", ["auto", "gpu_rowwise", "gpu_nnz", "gpu_hyb:k=2"])
def test_spmm_on_the_simt_interpreter_matches_scipy(rng, recipe):
    A = random_csr(rng, 37, 29, 0.15, empty_rows=(0, 5))
    X = rng.standard_normal((29, 20)).astype(np.float32)
    Y = sparsile.spmm(sparsile.from_scipy(A), X, target="cuda-sim", recipe=recipe)
    np.testing.assert_allclose(Y, A @ X, rtol=1e-4, atol=1e-4)


def test_float16_on_the_gpu_recipes_matches_the_cpu(rng):
    """f16 operands and results on the GPU rule's recipes (summed in f32, rounded once
    when stored), in the SIMT interpreter, against the CPU target; bfloat16 is tested
    with torch in test_cuda_zero_copy.py."""
    A = sparsile.from_scipy(random_csr(rng, 37, 290, 0.15, empty_rows=(0, 5))).astype("float16")
    X = rng.standard_normal((290, 20)).astype(np.float16)
    x = X[:, 0].copy()
    Xs = rng.standard_normal((37, 20)).astype(np.float16)
    tol = dict(rtol=2e-3, atol=2e-3)
    for got, want in [
        (sparsile.spmm(A, X, target="cuda-sim"), sparsile.spmm(A, X)),
        (sparsile.spmv(A, x, target="cuda-sim"), sparsile.spmv(A, x)),
    ]:
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **tol)
    C = sparsile.sddmm(A, Xs, X, target="cuda-sim")
    assert C.dtype == np.float16
    np.testing.assert_allclose(C.todense().astype(np.float32),
                               sparsile.sddmm(A, Xs, X).todense().astype(np.float32), **tol)


def test_spmv_and_sddmm_on_the_simt_interpreter_match_scipy(rng):
    A = random_csr(rng, 23, 31, 0.2, empty_rows=(3,))
    x = rng.standard_normal(31).astype(np.float32)
    np.testing.assert_allclose(
        sparsile.spmv(sparsile.from_scipy(A), x, target="cuda-sim"), A @ x, rtol=1e-4, atol=1e-4
    )
    X = rng.standard_normal((23, 8)).astype(np.float32)
    Y = rng.standard_normal((31, 8)).astype(np.float32)
    C = sparsile.sddmm(sparsile.from_scipy(A), X, Y, target="cuda-sim")
    expected = A.multiply(X @ Y.T).tocsr()
    np.testing.assert_allclose(C.to_scipy().toarray(), expected.toarray(), rtol=1e-4, atol=1e-4)


def test_targets_are_checked():
    A = sparsile.from_scipy(random_csr(np.random.default_rng(1), 5, 5, 0.5))
    X = np.ones((5, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="target must be one of cpu, cuda, cuda-sim, got 'tpu'"):
        sparsile.spmm(A, X, target="tpu")
    with pytest.raises(ValueError, match="the schedule makes a CPU function"):
        sparsile.spmm(A, X, target="cuda-sim", recipe="rowwise")
    with pytest.raises(ValueError, match="the schedule makes a GPU function"):
        sparsile.spmm(A, X, recipe="gpu_rowwise")


def test_cuda_without_a_gpu_names_the_driver():
    A = sparsile.from_scipy(random_csr(np.random.default_rng(2), 9, 9, 0.3))
    X = np.ones((9, 4), dtype=np.float32)
    try:
        Y = sparsile.spmm(A, X, target="cuda")
    except ValueError as e:
        assert "CUDA" in str(e) or "NVRTC" in str(e), e
    else:
        np.testing.assert_allclose(Y, A.to_scipy() @ X, rtol=1e-4, atol=1e-4)


def test_compile_with_a_gpu_target_refuses_a_cpu_schedule_and_names_sources():
    with pytest.raises(ValueError, match="target cuda-sim: the schedule makes a CPU function"):
        sparsile.compile(SPMM, target="cuda-sim")
    k = sparsile.compile(SPMM)
    assert "for (int64_t" in k.source()
    with pytest.raises(ValueError, match="this kernel's target is cpu, whose source is c, not 'cuda'"):
        k.source("cuda")
