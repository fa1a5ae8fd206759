"""out=: results written into the caller's array (NumPy or torch), reused across calls,
for every operator; what out= refuses, by name."""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsile


def _matrix(rng, m, n, density, dtype=np.float64, empty_rows=()):
    M = sp.random(m, n, density=density, format="lil", dtype=dtype, random_state=rng)
    for r in empty_rows:
        M[r, :] = 0
    return M.tocsr()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_operator_writes_into_out_and_returns_it(rng, dtype):
    M = _matrix(rng, 33, 20, 0.2, dtype, empty_rows=(0, 7))
    A = sparsile.from_scipy(M)
    X = rng.standard_normal((20, 5)).astype(dtype)
    x = rng.standard_normal(20).astype(dtype)
    Xb = rng.standard_normal((3, 20, 5)).astype(dtype)
    cases = [
        (lambda o: sparsile.spmm(A, X, out=o), (33, 5), M @ X),
        (lambda o: sparsile.spmv(A, x, out=o), (33,), M @ x),
        (lambda o: sparsile.spmm_batched(A, Xb, out=o), (3, 33, 5), np.stack([M @ b for b in Xb])),
        (lambda o: sparsile.spmv_batched(A, Xb[:, :, 0].copy(), out=o), (3, 33),
         np.stack([M @ b for b in Xb[:, :, 0]])),
    ]
    for run, shape, want in cases:
        out = np.full(shape, 99.0, dtype=dtype)  # stale contents: zeroed by the run
        for _ in range(2):  # reused across calls
            got = run(out)
            assert got is out
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    P = rng.standard_normal((33, 4)).astype(dtype)
    Q = rng.standard_normal((20, 4)).astype(dtype)
    vals = np.full(A.nnz, 5.0, dtype=dtype)
    assert sparsile.sddmm(A, P, Q, out=vals) is vals
    np.testing.assert_allclose(vals, sparsile.sddmm(A, P, Q).values, rtol=1e-6)


def test_mttkrp_and_rgms_write_into_out(rng):
    B = sparsile.from_coords([rng.integers(0, s, 40) for s in (6, 4, 5)], rng.random(40), (6, 4, 5), format="csf")
    C, D = rng.random((4, 3)), rng.random((5, 3))
    out = np.empty((6, 3))
    assert sparsile.mttkrp(B, C, D, out=out) is out
    np.testing.assert_allclose(out, np.einsum("ikl,ks,ls->is", B.to_dense(), C, D))
    A = sparsile.from_coords([rng.integers(0, s, 30) for s in (2, 5, 4)], rng.random(30), (2, 5, 4), format="csf")
    X, W = rng.random((4, 3)), rng.random((2, 3, 2))
    out = np.empty((5, 2))
    sparsile.rgms(A, X, W, out=out)
    np.testing.assert_allclose(out, np.einsum("rij,jk,rkl->il", A.to_dense(), X, W))


def test_torch_out_tensors_including_half(rng):
    torch = pytest.importorskip("torch")
    M = _matrix(rng, 12, 9, 0.3, np.float32)
    A = sparsile.from_scipy(M)
    X = torch.randn(9, 4)
    out = torch.empty(12, 4)
    assert sparsile.spmm(A, X, out=out) is out
    torch.testing.assert_close(out, torch.from_numpy(M @ X.numpy()), rtol=1e-5, atol=1e-5)
    for dt in (torch.float16, torch.bfloat16):
        Ah = A.to("csr", dtype=dt)
        Xh = X.to(dt)
        outh = torch.empty(12, 4, dtype=dt)
        assert sparsile.spmm(Ah, Xh, out=outh) is outh
        torch.testing.assert_close(outh, sparsile.spmm(Ah, Xh))


def test_out_refusals(rng):
    A = sparsile.from_scipy(_matrix(rng, 6, 5, 0.5, np.float32))
    X = rng.random((5, 3)).astype(np.float32)
    with pytest.raises(ValueError, match=r"result's shape \(6, 3\), got \(3, 6\)"):
        sparsile.spmm(A, X, out=np.empty((3, 6), np.float32))
    with pytest.raises(TypeError, match="out is float64 but the result is float32"):
        sparsile.spmm(A, X, out=np.empty((6, 3)))
    with pytest.raises(ValueError, match="C-contiguous"):
        sparsile.spmm(A, X, out=np.empty((6, 6), np.float32)[:, ::2])
    ro = np.empty((6, 3), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        sparsile.spmm(A, X, out=ro)
    big = rng.random((6, 6)).astype(np.float32)
    with pytest.raises(ValueError, match="shares memory with the input x"):
        sparsile.spmv(A, big[0, 1:], out=big[0])
    with pytest.raises(TypeError, match="NumPy array or a torch CPU tensor"):
        sparsile.spmm(A, X, out=[[0.0] * 3] * 6)
    with pytest.raises(ValueError, match="cpu target"):
        sparsile.spmm(A, X, out=np.empty((6, 3), np.float32), target="cuda-sim")


def test_out_refused_where_gradients_flow(rng):
    torch = pytest.importorskip("torch")
    A = sparsile.from_scipy(_matrix(rng, 6, 5, 0.5, np.float32))
    X = torch.randn(5, 3, requires_grad=True)
    with pytest.raises(ValueError, match="out= is not taken where gradients flow"):
        sparsile.spmm(A, X, out=torch.empty(6, 3))
    with pytest.raises(ValueError, match="out= is not taken where gradients flow"):
        sparsile.spmm(A, X.detach(), out=torch.empty(6, 3, requires_grad=True))


def test_results_and_converted_operands_start_on_a_cache_line(rng):
    # Large buffers the extension allocates (results, converted values) start on a
    # 64-byte line, so a gathered row of 32 f32 values spans two lines, not three.
    A = sp.random(2000, 1500, density=0.01, format="csr", dtype=np.float32, random_state=rng)
    X = rng.standard_normal((1500, 32)).astype(np.float32)
    for _ in range(4):
        Y = sparsile.spmm(sparsile.from_scipy(A), X)
        assert Y.ctypes.data % 64 == 0
        np.testing.assert_allclose(Y, A @ X, rtol=1e-4, atol=1e-4)
    T = sparsile.from_scipy(A.astype(np.float64)).astype(np.float32)
    assert T.values.ctypes.data % 64 == 0


@pytest.mark.parametrize("shape,dtype", [((1000, 32), np.float32), ((7, 3), np.float64),
                                         ((0, 5), np.float32), ((70000, 32), np.float32)])
def test_aligned_copies_onto_a_cache_line(rng, shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    y = sparsile.aligned(x)
    assert y.ctypes.data % 64 == 0 or y.size == 0
    assert y.dtype == x.dtype and y.shape == x.shape and y.flags.c_contiguous
    np.testing.assert_array_equal(y, x)
    assert not np.shares_memory(x, y)
    # A strided input is copied contiguously; the copy is an ordinary operand.
    A = sp.random(50, shape[0], density=0.1, format="csr", dtype=dtype, random_state=rng)
    if shape[0] > 0 and len(shape) == 2:
        np.testing.assert_allclose(sparsile.spmm(sparsile.from_scipy(A), y), A @ x,
                                   rtol=1e-4, atol=1e-4)
    z = sparsile.aligned(x.T)
    np.testing.assert_array_equal(z, x.T)
    assert z.flags.c_contiguous
