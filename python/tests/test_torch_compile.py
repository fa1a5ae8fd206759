"""Sparsile's torch.library operators: PyTorch's own operator checks (schema, fake
implementation, autograd registration), and torch.compile(fullgraph=True) of models
using them, forward and backward, against eager PyTorch."""

import numpy as np
import pytest
import scipy.sparse as sp

torch = pytest.importorskip("torch")
import sparsile  # noqa: E402
import sparsile.torch as st  # noqa: E402


def _matrix(rng, m, n, density, dtype=np.float64, empty_rows=()):
    M = sp.random(m, n, density=density, format="lil", dtype=dtype, random_state=rng)
    for r in empty_rows:
        M[r, :] = 0
    return sparsile.from_scipy(M.tocsr())


@pytest.mark.parametrize("transpose", [False, True])
def test_opcheck_spmm(rng, transpose):
    A = _matrix(rng, 9, 7, 0.3, empty_rows=(0, 4))
    X = torch.randn(7 if not transpose else 9, 5, dtype=torch.float64, requires_grad=True)
    values = torch.from_numpy(A.values.copy()).requires_grad_()
    for vals in (values, None):
        torch.library.opcheck(torch.ops.sparsile.spmm.default,
                              (X, vals, A._handle, transpose, 1, "auto", None))


def test_opcheck_sddmm_and_stored_values(rng):
    A = _matrix(rng, 9, 7, 0.3, empty_rows=(2,))
    X = torch.randn(9, 4, dtype=torch.float64, requires_grad=True)
    Y = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)
    values = torch.from_numpy(A.values.copy()).requires_grad_()
    for vals in (values, None):
        torch.library.opcheck(torch.ops.sparsile.sddmm.default, (X, Y, vals, A._handle, 1, "auto", None))
    torch.library.opcheck(torch.ops.sparsile.stored_values.default, (X, A._handle))


def test_operators_refuse_bad_shapes_and_freed_tensors(rng):
    A = _matrix(rng, 6, 5, 0.4)
    with pytest.raises(ValueError, match=r"X must have shape \(5, k\)"):
        torch.ops.sparsile.spmm(torch.ones(6, 2, dtype=torch.float64), None, A._handle, False, None, "auto", None)
    with pytest.raises(ValueError, match="values must have shape"):
        torch.ops.sparsile.spmm(torch.ones(5, 2, dtype=torch.float64), torch.ones(1, dtype=torch.float64),
                                A._handle, False, None, "auto", None)
    with pytest.raises(ValueError, match="no live sparsile.Tensor"):
        torch.ops.sparsile.spmm(torch.ones(5, 2), None, "t0", False, None, "auto", None)


class _GCN(torch.nn.Module):
    def __init__(self, k_in, k_hidden, k_out):
        super().__init__()
        self.l1 = torch.nn.Linear(k_in, k_hidden)
        self.l2 = torch.nn.Linear(k_hidden, k_out)

    def forward(self, A, X):
        h = torch.relu(st.spmm(A, self.l1(X)))
        return A @ self.l2(h)  # the plain operator, routed to the same torch.library op


def _grads(model):
    return [p.grad.clone() for p in model.parameters()]


def test_compiled_gcn_matches_eager_forward_and_backward(rng):
    torch.manual_seed(0)
    A = _matrix(rng, 60, 60, 0.08, dtype=np.float32, empty_rows=(3, 17))
    X = torch.randn(60, 12)
    model = _GCN(12, 16, 4)
    ref = model(A, X)
    ref.square().sum().backward()
    expected = _grads(model)
    model.zero_grad()

    compiled = torch.compile(model, fullgraph=True)
    out = compiled(A, X)
    out.square().sum().backward()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    for got, want in zip(_grads(model), expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)

    # Another matrix (another handle): recompiled, not answered from the first graph.
    B = _matrix(rng, 60, 60, 0.2, dtype=np.float32)
    torch.testing.assert_close(compiled(B, X), model(B, X), rtol=1e-4, atol=1e-5)


def test_compiled_sddmm_spmv_batched_and_values_gradients(rng):
    A = _matrix(rng, 20, 15, 0.2, empty_rows=(0,))
    values = torch.from_numpy(A.values.copy()).requires_grad_()
    X = torch.randn(20, 6, dtype=torch.float64, requires_grad=True)
    Y = torch.randn(15, 6, dtype=torch.float64, requires_grad=True)
    x = torch.randn(15, dtype=torch.float64, requires_grad=True)
    Xb = torch.randn(3, 15, 2, dtype=torch.float64, requires_grad=True)

    def f(A, values, X, Y, x, Xb):
        e = st.sddmm(A, X, Y, values)
        return (e.sin().sum() + st.spmm(A, Y, e).square().sum() + st.spmv(A, x, values).sum()
                + st.spmm_batched(A, Xb).sum() + sparsile.spmv(A, x).sum())

    inputs = (values, X, Y, x, Xb)
    ref = f(A, *inputs)
    expected = torch.autograd.grad(ref, inputs)
    compiled = torch.compile(f, fullgraph=True)
    out = compiled(A, *inputs)
    got = torch.autograd.grad(out, inputs)
    torch.testing.assert_close(out, ref)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
