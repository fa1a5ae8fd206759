"""PyTorch interop: sparse tensors in and out, and autograd SpMM / SDDMM whose gradients
match dense PyTorch (and torch.autograd.gradcheck)."""

import numpy as np
import pytest

from conftest import HAVE_TORCH, TORCH_REASON, random_csr

if not HAVE_TORCH:
    pytest.skip(TORCH_REASON, allow_module_level=True)

import torch  # noqa: E402

import sparsile  # noqa: E402
import sparsile.torch as st  # noqa: E402


def dense_of(T, values):
    """A dense torch matrix with ``values`` at T's stored (CSR) positions, differentiable."""
    coords, _ = T.coo()
    M = torch.zeros(T.shape, dtype=values.dtype)
    return M.index_put((torch.from_numpy(coords[0]), torch.from_numpy(coords[1])), values)


@pytest.mark.parametrize("layout", ["coo", "csr", "csc", "bsr"])
def test_from_torch_and_back(rng, layout):
    A = random_csr(rng, 12, 8, 0.3, np.float32)
    dense = torch.from_numpy(A.toarray())
    t = {"coo": dense.to_sparse(), "csr": dense.to_sparse_csr(), "csc": dense.to_sparse_csc(),
         "bsr": dense.to_sparse_bsr((4, 2))}[layout]
    T = sparsile.from_torch(t)
    np.testing.assert_array_equal(T.to_dense(), A.toarray())
    back = T.to_torch()
    torch.testing.assert_close(back.to_dense(), dense)
    torch.testing.assert_close(T.to_torch("coo").to_dense(), dense)


def test_from_torch_errors():
    with pytest.raises(TypeError, match="expects a sparse tensor"):
        sparsile.from_torch(torch.ones(2, 2))
    with pytest.raises(TypeError, match="float32 or float64"):
        sparsile.from_torch(torch.ones(2, 2, dtype=torch.int32).to_sparse())
    with pytest.raises(TypeError, match="expects a torch.Tensor"):
        sparsile.from_torch(np.ones(2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_spmm_forward_and_gradients_match_dense(rng, dtype):
    A = random_csr(rng, 30, 20, 0.15, np.float64, empty_rows=(2,))
    T = sparsile.from_scipy(A).to("csr", dtype=dtype)
    values = torch.tensor(T.values).requires_grad_()
    X = torch.randn(20, 6, dtype=dtype, generator=torch.Generator().manual_seed(0), requires_grad=True)
    Y = st.spmm(T, X, values=values)
    W = torch.randn(30, 6, dtype=dtype, generator=torch.Generator().manual_seed(1))
    (Y * W).sum().backward()

    values_ref = values.detach().clone().requires_grad_()
    X_ref = X.detach().clone().requires_grad_()
    Y_ref = dense_of(T, values_ref) @ X_ref
    (Y_ref * W).sum().backward()
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(Y, Y_ref, **tol)
    torch.testing.assert_close(X.grad, X_ref.grad, **tol)
    torch.testing.assert_close(values.grad, values_ref.grad, **tol)


def test_spmm_gradcheck(rng):
    T = sparsile.from_scipy(random_csr(rng, 9, 7, 0.3, np.float64))
    values = torch.tensor(T.values).requires_grad_()
    X = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v, x: st.spmm(T, x, values=v), (values, X))


def test_sddmm_gradcheck_and_dense_match(rng):
    T = sparsile.from_scipy(random_csr(rng, 8, 9, 0.3, np.float64))
    values = torch.tensor(T.values).requires_grad_()
    X = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    Y = torch.randn(9, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v, x, y: st.sddmm(T, x, y, values=v), (values, X, Y))
    coords, _ = T.coo()
    expected = values * (X @ Y.T)[torch.from_numpy(coords[0]), torch.from_numpy(coords[1])]
    torch.testing.assert_close(st.sddmm(T, X, Y, values=values), expected)


def test_eager_path_and_custom_operators_agree(rng):
    """Outside torch.compile, st.spmm / st.sddmm run autograd Functions around the bodies
    of the torch.library operators (cheaper to call): results and gradients, first and
    second order, equal those of the operators themselves."""
    from sparsile import _torch_eager

    T = sparsile.from_scipy(random_csr(rng, 11, 9, 0.3, np.float64, empty_rows=(3,)))
    h = T._handle
    g = torch.Generator().manual_seed(2)
    values = torch.tensor(T.values).requires_grad_()
    X = torch.randn(9, 4, dtype=torch.float64, generator=g, requires_grad=True)
    Xr = torch.randn(11, 4, dtype=torch.float64, generator=g, requires_grad=True)
    W = torch.randn(11, 4, dtype=torch.float64, generator=g)

    Y = st.spmm(T, X, values=values)
    assert type(Y.grad_fn).__name__ == "_SpMMBackward"
    C = st.sddmm(T, Xr, X, values=values)
    assert type(C.grad_fn).__name__ == "_SDDMMBackward"
    for eager, op in [
        (lambda v, x, xr: _torch_eager.spmm(x, v, h, False, None, "auto", None),
         lambda v, x, xr: torch.ops.sparsile.spmm(x, v, h, False, None, "auto", None)),
        (lambda v, x, xr: _torch_eager.spmm(xr, v, h, True, None, "auto", None),
         lambda v, x, xr: torch.ops.sparsile.spmm(xr, v, h, True, None, "auto", None)),
        (lambda v, x, xr: _torch_eager.sddmm(xr, x, v, h, None, "auto", None),
         lambda v, x, xr: torch.ops.sparsile.sddmm(xr, x, v, h, None, "auto", None)),
    ]:
        got, want = eager(values, X, Xr), op(values, X, Xr)
        torch.testing.assert_close(got, want)
        weight = torch.randn(got.shape, dtype=torch.float64, generator=g)
        grads = torch.autograd.grad((got * weight).sum(), (values, X, Xr), allow_unused=True)
        grads_op = torch.autograd.grad((want * weight).sum(), (values, X, Xr), allow_unused=True)
        for a, b in zip(grads, grads_op):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b)
    assert torch.autograd.gradgradcheck(lambda v, x: (st.spmm(T, x, values=v) * W).sum(), (values, X))


def test_non_csr_operands_are_used_through_csr(rng):
    A = random_csr(rng, 16, 16, 0.2, np.float32)
    T = sparsile.from_scipy(A).to("bsr:4x4")
    X = torch.randn(16, 3, requires_grad=True)
    st.spmm(T, X).sum().backward()
    torch.testing.assert_close(X.grad, torch.from_numpy(np.asarray(A.sum(axis=0)).reshape(-1, 1)).expand(16, 3).float(),
                               rtol=1e-5, atol=1e-5)
    torch_csr = torch.from_numpy(A.toarray()).to_sparse_csr()
    torch.testing.assert_close(st.spmm(torch_csr, X.detach()), torch.from_numpy(A @ X.detach().numpy()),
                               rtol=1e-5, atol=1e-5)


def test_autograd_errors(rng):
    T = sparsile.from_scipy(random_csr(rng, 5, 4, 0.5, np.float32))
    with pytest.raises(TypeError, match="X must be a torch.Tensor"):
        st.spmm(T, np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match=r"values must have shape \(\d+,\)"):
        st.spmm(T, torch.ones(4, 2), values=torch.ones(T.nnz + 1))


def test_inside_a_module_training_reduces_the_loss(rng):
    torch.manual_seed(0)
    A = random_csr(rng, 40, 40, 0.1, np.float32)
    T = sparsile.from_scipy(A)
    X = torch.randn(40, 8)
    target = torch.randn(40, 4)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = st.GraphConv(8, 4)

        def forward(self, x):
            return self.conv(T, x)

    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(X), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.9
    # Same gradients as the dense formulation.
    net.zero_grad()
    torch.nn.functional.mse_loss(net(X), target).backward()
    g = net.conv.linear.weight.grad.clone()
    net.zero_grad()
    dense = torch.from_numpy(A.toarray())
    torch.nn.functional.mse_loss(dense @ net.conv.linear(X) + net.conv.bias, target).backward()
    torch.testing.assert_close(g, net.conv.linear.weight.grad, rtol=1e-4, atol=1e-5)


def test_plain_operators_carry_gradients(rng):
    """sparsile.spmm / spmv / the batched ones and ``A @ X`` with an input that requires a
    gradient return tensors with a grad_fn (never a silently detached result), and the
    gradients match dense PyTorch."""
    T = sparsile.from_scipy(random_csr(rng, 11, 7, 0.3, np.float64, empty_rows=(3,)))
    dense = torch.from_numpy(T.to_dense())
    gen = torch.Generator().manual_seed(2)
    X = torch.randn(7, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    x = torch.randn(7, dtype=torch.float64, generator=gen, requires_grad=True)
    Xb = torch.randn(3, 7, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    xb = torch.randn(3, 7, dtype=torch.float64, generator=gen, requires_grad=True)
    cases = [
        (lambda t: sparsile.spmm(T, t), lambda t: dense @ t, X),
        (lambda t: T @ t, lambda t: dense @ t, X),
        (lambda t: sparsile.spmv(T, t), lambda t: dense @ t, x),
        (lambda t: T @ t, lambda t: dense @ t, x),
        (lambda t: sparsile.spmm_batched(T, t), lambda t: dense @ t, Xb),
        (lambda t: sparsile.spmv_batched(T, t), lambda t: t @ dense.T, xb),
    ]
    for ours, ref, inp in cases:
        out = ours(inp)
        assert out.grad_fn is not None
        expected = ref(inp.detach())
        torch.testing.assert_close(out.detach(), expected)
        assert torch.autograd.gradcheck(ours, (inp,))
    with torch.no_grad():
        assert sparsile.spmm(T, X).grad_fn is None


def test_plain_operators_gradients_for_values(rng):
    T = sparsile.from_scipy(random_csr(rng, 6, 5, 0.4, np.float64))
    values = torch.tensor(T.values).requires_grad_()
    x = torch.randn(5, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda v: sparsile.spmv(T, x, values=v), (values,))
    B = T.to("bsr:2x2")
    with pytest.raises(ValueError, match="needs a csr operand"):
        sparsile.spmm(B, torch.ones(5, 2, dtype=torch.float64), values=torch.ones(B.nnz, dtype=torch.float64,
                                                                             requires_grad=True))


def test_operators_without_gradients_refuse_instead_of_detaching(rng):
    T = sparsile.from_scipy(random_csr(rng, 6, 5, 0.4, np.float32))
    X = torch.randn(6, 3, requires_grad=True)
    Y = torch.randn(5, 3)
    with pytest.raises(ValueError, match=r"sddmm: an input requires a gradient.*sparsile\.torch\.sddmm"):
        sparsile.sddmm(T, X, Y)
    with torch.no_grad():
        C = sparsile.sddmm(T, X, Y)
    torch.testing.assert_close(torch.tensor(C.values), st.sddmm(T, X.detach(), Y), rtol=1e-5, atol=1e-5)


def _sparse3(rng, shape, nnz, empty_first=True):
    coords = [rng.integers(1 if (d == 0 and empty_first) else 0, s, nnz) for d, s in enumerate(shape)]
    return sparsile.from_coords(coords, rng.random(nnz), shape, format="csf")


def test_mttkrp_gradients_match_dense_and_gradcheck(rng):
    B = _sparse3(rng, (5, 4, 6), 30)  # slice 0 of the first mode empty
    C = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    D = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    dense = torch.from_numpy(B.to_dense())
    out = sparsile.mttkrp(B, C, D)  # routed to sparsile.torch.mttkrp by the gradient
    torch.testing.assert_close(out, torch.einsum("ikl,ks,ls->is", dense, C, D))
    assert out.grad_fn is not None
    assert torch.autograd.gradcheck(lambda c, d: st.mttkrp(B, c, d), (C, D))
    # Modes reordered (k, i, l): the first factor is then indexed by B's first mode.
    G = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(torch.ops.sparsile.mttkrp.default, (G, D, B._handle, [1, 0, 2], 1, "auto", None))
    torch.testing.assert_close(torch.ops.sparsile.mttkrp(G, D, B._handle, [1, 0, 2], 1, "auto", None),
                               torch.einsum("ikl,is,ls->ks", dense, G, D))


def test_rgms_gradients_match_dense_and_gradcheck(rng):
    A = _sparse3(rng, (3, 5, 4), 40)
    X = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    W = torch.randn(3, 2, 3, dtype=torch.float64, requires_grad=True)
    dense = torch.from_numpy(A.to_dense())
    out = sparsile.rgms(A, X, W)
    torch.testing.assert_close(out, torch.einsum("rij,jk,rkl->il", dense, X, W))
    assert torch.autograd.gradcheck(lambda x, w: st.rgms(A, x, w), (X, W))
    torch.library.opcheck(torch.ops.sparsile.rgms.default, (X, W, A._handle, False, 1, "auto", None))
    G = torch.randn(5, 2, dtype=torch.float64)
    torch.library.opcheck(torch.ops.sparsile.relation_spmm.default, (G, A._handle, True, 1, None))
    torch.testing.assert_close(torch.ops.sparsile.relation_spmm(G, A._handle, True, 1, None),
                               torch.einsum("rij,il->rjl", dense, G))
