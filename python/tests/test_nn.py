"""GNN and sparse-attention building blocks (sparsile.nn) against dense PyTorch
references, with gradchecks, empty rows, heads, and torch.compile."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

torch = pytest.importorskip("torch")
import sparsile  # noqa: E402
import sparsile.nn as snn  # noqa: E402


def _graph(rng, m, n, density, dtype=np.float64, empty_rows=(), full_row=None):
    M = sp.random(m, n, density=density, format="lil", dtype=dtype, random_state=rng)
    for r in empty_rows:
        M[r, :] = 0
    if full_row is not None:
        M[full_row, :] = rng.random(n) + 0.1
    return sparsile.from_scipy(M.tocsr())


def _dense_mask(A):
    return torch.from_numpy(A.with_values(np.ones(A.nnz, dtype=A.dtype)).to_dense()) != 0


def test_add_self_loops_and_gcn_norm(rng):
    A = _graph(rng, 9, 9, 0.3)
    A = sparsile.from_scipy(A.to_scipy().tolil()).to("csr")
    dense = A.to_dense()
    L = snn.add_self_loops(A, fill_value=2.0)
    want = dense.copy()
    missing = np.flatnonzero(np.diag(dense) == 0)
    want[missing, missing] = 2.0
    np.testing.assert_allclose(L.to_dense(), want)
    assert L.format == "csr" and np.all(np.diff(L.indices[L.indptr[0]:L.indptr[1]]) > 0)
    N = snn.gcn_norm(A)
    hat = dense.copy()
    hat[missing, missing] = 1.0
    d = hat.sum(1)
    inv = np.where(d > 0, 1 / np.sqrt(np.where(d > 0, d, 1)), 0)
    np.testing.assert_allclose(N.to_dense(), inv[:, None] * hat * inv[None, :], rtol=1e-12)
    with pytest.raises(ValueError, match="square"):
        snn.add_self_loops(_graph(rng, 3, 4, 0.5))


def _dense_softmax(mask, dense_scores):
    s = dense_scores.masked_fill(~mask, -math.inf)
    p = torch.softmax(s, dim=1)
    return torch.nan_to_num(p, nan=0.0)  # rows with no stored entry


@pytest.mark.parametrize("heads", [None, 3])
def test_edge_softmax_matches_masked_dense_softmax(rng, heads):
    A = _graph(rng, 12, 10, 0.3, empty_rows=(0, 5), full_row=7)
    rows, cols = snn.edge_index(A)
    shape = (A.nnz,) if heads is None else (A.nnz, heads)
    scores = (torch.randn(*shape, dtype=torch.float64) * 30).requires_grad_()  # large: needs the max
    got = snn.edge_softmax(A, scores)
    mask = _dense_mask(A)
    for h in range(1 if heads is None else heads):
        s = scores if heads is None else scores[:, h]
        dense = torch.zeros(12, 10, dtype=torch.float64)
        dense[rows, cols] = s.detach()
        want = _dense_softmax(mask, dense)[rows, cols]
        torch.testing.assert_close(got if heads is None else got[:, h], want)
    assert torch.isfinite(got).all()
    assert torch.autograd.gradcheck(lambda s: snn.edge_softmax(A, s), (scores / 30,))


def test_heads_sddmm_and_spmm_match_dense_and_gradcheck(rng):
    A = _graph(rng, 8, 6, 0.4, empty_rows=(2,))
    rows, cols = snn.edge_index(A)
    dense_A = torch.from_numpy(A.to_dense())
    X = torch.randn(8, 2, 5, dtype=torch.float64, requires_grad=True)
    Y = torch.randn(6, 2, 5, dtype=torch.float64, requires_grad=True)
    E = torch.randn(A.nnz, 2, dtype=torch.float64, requires_grad=True)
    Z = torch.randn(6, 2, 3, dtype=torch.float64, requires_grad=True)
    s = snn.sddmm_heads(A, X, Y)
    for h in range(2):
        torch.testing.assert_close(s[:, h], (dense_A * (X[:, h] @ Y[:, h].T))[rows, cols])
    out = snn.spmm_heads(A, E, Z)
    for h in range(2):
        W = torch.zeros(8, 6, dtype=torch.float64)
        W[rows, cols] = E[:, h].detach()
        torch.testing.assert_close(out[:, h], W @ Z[:, h])
    assert torch.autograd.gradcheck(lambda x, y: snn.sddmm_heads(A, x, y), (X, Y))
    assert torch.autograd.gradcheck(lambda e, z: snn.spmm_heads(A, e, z), (E, Z))
    assert snn.sddmm_heads(A, X[:, 0], Y[:, 0]).shape == (A.nnz,)
    with pytest.raises(ValueError, match="heads"):
        snn.spmm_heads(A, E, torch.randn(6, 3, 3, dtype=torch.float64))


def _dense_attention(mask, Q, K, V, scale):
    s = (Q @ K.T) * scale
    return _dense_softmax(mask, s) @ V


@pytest.mark.parametrize("heads", [None, 2])
def test_sparse_attention_matches_dense_masked_attention(rng, heads):
    m, n, d = 10, 12, 4
    mask = _graph(rng, m, n, 0.3, empty_rows=(3,))
    mask = mask.with_values(np.ones(mask.nnz))
    dims = (lambda r, k: (r, k)) if heads is None else (lambda r, k: (r, heads, k))
    Q = torch.randn(*dims(m, d), dtype=torch.float64, requires_grad=True)
    K = torch.randn(*dims(n, d), dtype=torch.float64, requires_grad=True)
    V = torch.randn(*dims(n, 3), dtype=torch.float64, requires_grad=True)
    got = snn.sparse_attention(mask, Q, K, V)
    dm = _dense_mask(mask)
    for h in range(1 if heads is None else heads):
        q, k, v = (Q, K, V) if heads is None else (Q[:, h], K[:, h], V[:, h])
        want = _dense_attention(dm, q, k, v, 1 / math.sqrt(d))
        torch.testing.assert_close(got if heads is None else got[:, h], want)
    assert torch.all(got[3] == 0)
    assert torch.autograd.gradcheck(lambda q, k, v: snn.sparse_attention(mask, q, k, v), (Q, K, V))


def _dense_gat(layer, dense_mask, X):
    h = layer.linear(X).view(-1, layer.heads, layer.out_features)
    a_dst = (h * layer.att_dst).sum(-1)
    a_src = (h * layer.att_src).sum(-1)
    outs = []
    for k in range(layer.heads):
        e = torch.nn.functional.leaky_relu(a_dst[:, k, None] + a_src[None, :, k], layer.negative_slope)
        outs.append(_dense_softmax(dense_mask, e) @ h[:, k])
    out = torch.stack(outs, 1)
    out = out.reshape(X.shape[0], -1) if layer.concat else out.mean(1)
    return out + layer.bias


@pytest.mark.parametrize("concat", [True, False])
def test_gat_layer_matches_dense_reference_and_gradcheck(rng, concat):
    torch.manual_seed(0)
    A = snn.add_self_loops(_graph(rng, 15, 15, 0.2))
    layer = snn.GATConv(6, 4, heads=3, concat=concat).double()
    X = torch.randn(15, 6, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(layer(A, X), _dense_gat(layer, _dense_mask(A), X))
    params = dict(layer.named_parameters())

    def f(x, w, a_src, a_dst):
        return torch.func.functional_call(layer, {**params, "linear.weight": w, "att_src": a_src,
                                                  "att_dst": a_dst}, (A, x))

    assert torch.autograd.gradcheck(f, (X, params["linear.weight"], params["att_src"], params["att_dst"]))


def test_compiled_gat_and_sparse_attention_match_eager(rng):
    torch.manual_seed(1)
    A = snn.add_self_loops(_graph(rng, 30, 30, 0.1, dtype=np.float32))
    X = torch.randn(30, 8)
    for model in (snn.GATConv(8, 4, heads=2), snn.SparseAttention(8, heads=2)):
        ref = model(A, X)
        ref.square().sum().backward()
        expected = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        out = torch.compile(model, fullgraph=True)(A, X)
        out.square().sum().backward()
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
        for p, e in zip(model.parameters(), expected):
            torch.testing.assert_close(p.grad, e, rtol=1e-4, atol=1e-4)


def test_sparse_attention_is_one_program_with_checked_operator(rng):
    mask = _graph(rng, 9, 11, 0.3, empty_rows=(4,))  # values other than 1: only the pattern counts
    Q = torch.randn(9, 3, dtype=torch.float64, requires_grad=True)
    K = torch.randn(11, 3, dtype=torch.float64, requires_grad=True)
    V = torch.randn(11, 2, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(torch.ops.sparsile.sparse_attention.default, (Q, K, V, mask._handle, 1, None))
    ones = mask.with_values(np.ones(mask.nnz))
    torch.testing.assert_close(snn.sparse_attention(mask, Q, K, V), snn.sparse_attention(ones, Q, K, V))
    # The forward pass is the one-program kernel: its statements are all in one program.
    from sparsile import _ops

    program = _ops._program(_ops.SPARSE_ATTENTION, mask.to("csr"))
    assert program.count("\n") == 16 and "R[i] max= S[i,j]" in program
    O, P = torch.ops.sparsile.sparse_attention(Q.detach(), K.detach(), V.detach(), mask._handle, 1, None)
    rows, _ = snn.edge_index(mask)
    sums = torch.zeros(9, dtype=torch.float64).index_add(0, rows, P)
    torch.testing.assert_close(sums[sums != 0], torch.ones(8, dtype=torch.float64))  # row 4 is empty
