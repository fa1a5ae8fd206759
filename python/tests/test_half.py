"""float16 (NumPy and torch) and bfloat16 (torch) values: construction, conversion, the
operators against an f32 computation on the same rounded values, result dtypes, and
errors for mixed dtypes.

The kernels read half-precision values exactly, sum in float32 and round each result
once, so they differ from the float32 computation by at most half a unit in the last
place of the result: relative 2**-11 (float16) or 2**-8 (bfloat16). The tolerances are
twice that, plus a small absolute term for results near zero.
"""

import numpy as np
import pytest

import sparsile

from conftest import needs_torch, random_csr

F16_TOL = dict(rtol=2.0**-10, atol=1e-4)
BF16_TOL = dict(rtol=2.0**-7, atol=1e-3)


def f16_operand(rng, m, n, density=0.2, empty_rows=(1, 5)):
    """A float16 CSR tensor and its values as a float32 dense matrix (exact)."""
    A = random_csr(rng, m, n, density, np.float64, empty_rows=empty_rows)
    T = sparsile.from_scipy(A).to("csr", dtype=np.float16)
    return T, T.to_dense().astype(np.float32)


def test_float16_tensor_dtype_and_values(rng):
    T, dense = f16_operand(rng, 9, 7)
    assert T.dtype == np.float16
    assert T.values.dtype == np.float16
    assert T.to_dense().dtype == np.float16
    coords, values = T.coo()
    assert values.dtype == np.float16
    # Constructors take float16 values directly.
    for U in (
        sparsile.from_coo(coords[0], coords[1], values, shape=T.shape),
        sparsile.from_dense(T.to_dense()),
        sparsile.from_csr(T.axes()[1]["indptr"], T.axes()[1]["indices"], T.values, T.shape),
    ):
        assert U.dtype == np.float16
        np.testing.assert_array_equal(U.to_dense(), T.to_dense())
    # SciPy holds no float16: to_scipy gives float32, exactly.
    S = T.to_scipy()
    assert S.dtype == np.float32
    np.testing.assert_array_equal(S.toarray(), dense)
    assert T.to("csr", dtype=np.float32).dtype == np.float32


def test_float16_load(tmp_path, rng):
    T, dense = f16_operand(rng, 6, 5)
    path = tmp_path / "a.mtx"
    sparsile.save(path, T)
    U = sparsile.load(path, dtype=np.float16)
    assert U.dtype == np.float16
    np.testing.assert_array_equal(U.to_dense().astype(np.float32), dense)


@pytest.mark.parametrize("k", [1, 7, 33])
def test_float16_numpy_operators(rng, k):
    T, A = f16_operand(rng, 23, 19)
    X = rng.standard_normal((19, k)).astype(np.float16)
    Y = sparsile.spmm(T, X)
    assert isinstance(Y, np.ndarray) and Y.dtype == np.float16 and Y.shape == (23, k)
    np.testing.assert_allclose(Y.astype(np.float32), A @ X.astype(np.float32), **F16_TOL)

    x = X[:, 0].copy()
    y = sparsile.spmv(T, x)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), A @ x.astype(np.float32), **F16_TOL)

    P = rng.standard_normal((23, k)).astype(np.float16)
    Q = rng.standard_normal((19, k)).astype(np.float16)
    C = sparsile.sddmm(T, P, Q)
    assert isinstance(C, sparsile.Tensor) and C.dtype == np.float16 and C.format == "csr"
    want = A * (P.astype(np.float32) @ Q.astype(np.float32).T)
    np.testing.assert_allclose(C.to_dense().astype(np.float32), want, **F16_TOL)

    B = rng.standard_normal((3, 19, k)).astype(np.float16)
    Yb = sparsile.spmm_batched(T, B)
    assert Yb.dtype == np.float16 and Yb.shape == (3, 23, k)
    np.testing.assert_allclose(Yb.astype(np.float32), A @ B.astype(np.float32), **F16_TOL)
    yb = sparsile.spmv_batched(T, B[:, :, 0].copy())
    assert yb.dtype == np.float16 and yb.shape == (3, 23)
    np.testing.assert_allclose(yb.astype(np.float32), (A @ B[:, :, 0].astype(np.float32).T).T, **F16_TOL)


def test_float16_long_row_sums_in_float32():
    # 4096 ones in one row: an f16 running sum would stop at 2048.
    n = 4096
    T = sparsile.from_coo(np.zeros(n, dtype=np.int64), np.arange(n), np.ones(n, dtype=np.float16), shape=(2, n))
    y = sparsile.spmv(T, np.ones(n, dtype=np.float16))
    assert y.tolist() == [4096.0, 0.0]


def test_empty_float16_matrix(rng):
    T = sparsile.from_coo([], [], np.zeros(0, dtype=np.float16), shape=(0, 4))
    Y = sparsile.spmm(T, np.ones((4, 3), dtype=np.float16))
    assert Y.dtype == np.float16 and Y.shape == (0, 3)


def test_mixed_dtypes_are_errors_naming_both(rng):
    T, _ = f16_operand(rng, 5, 4, empty_rows=(1,))
    with pytest.raises(TypeError, match="X is float32 but A is float16"):
        sparsile.spmm(T, np.ones((4, 2), dtype=np.float32))
    with pytest.raises(TypeError, match="x is float64 but A is float16"):
        sparsile.spmv(T, np.ones(4))
    T32 = T.to("csr", dtype=np.float32)
    with pytest.raises(TypeError, match="X is float16 but A is float32"):
        sparsile.spmm(T32, np.ones((4, 2), dtype=np.float16))
    # NumPy has no bfloat16, and a uint16 array is not taken for one.
    with pytest.raises(TypeError, match="bfloat16"):
        sparsile.spmm(T, np.ones((4, 2), dtype=np.uint16))
    with pytest.raises(TypeError, match="float16, bfloat16"):
        T.to("csr", dtype=np.int32)


@needs_torch
@pytest.mark.parametrize("dtype_name, tol", [("float16", F16_TOL), ("bfloat16", BF16_TOL)])
def test_torch_half_operators(rng, dtype_name, tol):
    import torch

    dtype = getattr(torch, dtype_name)
    T, _ = f16_operand(rng, 21, 17)
    T = T.to("csr", dtype=dtype)
    A = torch.from_numpy(T.to_dense().astype(np.float32))
    assert T.dtype == (np.float16 if dtype_name == "float16" else "bfloat16")
    X = torch.randn(17, 9, dtype=torch.float32).to(dtype)
    Y = sparsile.spmm(T, X)
    assert isinstance(Y, torch.Tensor) and Y.dtype == dtype and Y.shape == (21, 9)
    torch.testing.assert_close(Y.float(), A @ X.float(), **tol)
    y = sparsile.spmv(T, X[:, 0])
    assert y.dtype == dtype
    torch.testing.assert_close(y.float(), A @ X[:, 0].float(), **tol)
    P = torch.randn(21, 9).to(dtype)
    Q = torch.randn(17, 9).to(dtype)
    C = sparsile.sddmm(T, P, Q)
    assert C.dtype == T.dtype
    want = A * (P.float() @ Q.float().T)
    torch.testing.assert_close(torch.from_numpy(C.to_dense().astype(np.float32)), want, **tol)
    B = torch.randn(2, 17, 9).to(dtype)
    Yb = sparsile.spmm_batched(T, B)
    assert Yb.dtype == dtype and Yb.shape == (2, 21, 9)
    torch.testing.assert_close(Yb.float(), A @ B.float(), **tol)
    yb = sparsile.spmv_batched(T, B[:, :, 0])
    assert yb.dtype == dtype
    torch.testing.assert_close(yb.float(), (A @ B[:, :, 0].float().T).T, **tol)
    # A strided operand is copied once, not refused.
    Xs = torch.randn(9, 17).to(dtype).T
    torch.testing.assert_close(sparsile.spmm(T, Xs).float(), A @ Xs.float(), **tol)


@needs_torch
def test_bfloat16_tensor_presentation(rng):
    import torch

    T, dense = f16_operand(rng, 8, 6)
    B = T.to("csr", dtype=torch.bfloat16)
    assert B.dtype == "bfloat16" and "bfloat16" in repr(B)
    bits = B.values
    assert bits.dtype == np.uint16
    as_torch = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    np.testing.assert_array_equal(as_torch.float().numpy(), B.coo()[1])
    assert B.to_dense().dtype == np.float32
    assert B.to_scipy().dtype == np.float32
    assert B.to_torch().dtype == torch.bfloat16
    # Through "bfloat16" and back to float32: values rounded to bfloat16.
    assert B.to("csr", dtype="bfloat16").dtype == "bfloat16"
    np.testing.assert_array_equal(
        B.to("csr", dtype=np.float32).to_dense(), torch.from_numpy(dense).to(torch.bfloat16).float().numpy()
    )
    assert B.T.dtype == "bfloat16"


@needs_torch
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_torch_half_constructors(rng, dtype_name):
    import torch

    dtype = getattr(torch, dtype_name)
    D = torch.randn(7, 5) * (torch.rand(7, 5) < 0.4)
    D = D.to(dtype)
    want = D.float().numpy()
    for t in (D.to_sparse(), D.to_sparse_csr()):
        T = sparsile.from_torch(t)
        assert str(T.dtype) == dtype_name
        np.testing.assert_array_equal(T.to_dense().astype(np.float32), want)
    T = sparsile.from_dense(D)
    assert str(T.dtype) == dtype_name and T.nnz == int((D != 0).sum())
    np.testing.assert_array_equal(T.to_dense().astype(np.float32), want)


@needs_torch
def test_torch_mixed_dtypes_are_errors(rng):
    import torch

    T, _ = f16_operand(rng, 5, 4, empty_rows=(1,))
    B = T.to("csr", dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="X is float16 but A is bfloat16"):
        sparsile.spmm(B, torch.ones(4, 2, dtype=torch.float16))
    with pytest.raises(TypeError, match="X is bfloat16 but A is float16"):
        sparsile.spmm(T, torch.ones(4, 2, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="X is float32 but A is bfloat16"):
        sparsile.spmm(B, torch.ones(4, 2))
    with pytest.raises(TypeError, match="float16, bfloat16"):
        sparsile.spmm(B, torch.ones(4, 2, dtype=torch.int32))


@needs_torch
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_explain_and_tune_on_half(rng, tmp_path, monkeypatch, dtype_name):
    import torch

    monkeypatch.setenv("SPARSILE_TUNING_DB", str(tmp_path / "db.jsonl"))
    T, _ = f16_operand(rng, 60, 50)
    T = T.to("csr", dtype=getattr(torch, dtype_name))
    for op in ("spmm", "spmv", "sddmm"):
        assert sparsile.explain(T, op, 8)["op"] == op
    result = sparsile.tune(T, "spmm", 8, budget=2.0)
    assert result["best"].startswith("csr/rowwise")
