"""Graph neural network and sparse attention building blocks on Sparsile's kernels.

Functions (differentiable, usable under ``torch.compile(fullgraph=True)``):

=============================================  ==============================================
``add_self_loops(A, fill_value=1.0)``          ``A`` with a diagonal entry in every row that
                                               lacks one (square ``A``)
``gcn_norm(A, self_loops=True)``               ``D^-1/2 (A + I) D^-1/2`` (Kipf & Welling)
``edge_index(A)``                              (row, column) of every stored entry
``edge_softmax(A, scores)``                    softmax of ``scores`` over each row's stored
                                               entries, max-subtracted (DGL's
                                               ``edge_softmax``, PyG's ``softmax``)
``sddmm_heads(A, X, Y)``                       ``A ⊙ (X_h Y_hᵀ)`` per head (DGL's
                                               ``u_dot_v``): ``(nnz, heads)``
``spmm_heads(A, E, X)``                        ``Σ_j E[ij,h] X[j,h,:]`` (DGL's
                                               ``u_mul_e_sum``): ``(m, heads, d)``
``sparse_attention(mask, Q, K, V)``            ``softmax(Q Kᵀ / √d) V`` over the stored
                                               positions of ``mask``, one compiled
                                               program per head
=============================================  ==============================================

Modules: :class:`GATConv` (a graph attention layer) and :class:`SparseAttention`
(multi-head attention restricted to a sparse mask).

Per-edge tensors (``scores``, ``E``, attention weights) are in the CSR order of the
sparse operand (:func:`sparsile.from_coo` with ``return_permutation=True`` maps edges given
in another order), with an optional trailing heads dimension. Score and weighted-sum steps
run Sparsile's SDDMM and SpMM kernels (:mod:`sparsile.torch`); the softmax runs PyTorch's
scatter reductions over the rows. Empty rows give empty softmax groups and zero output
rows.

Example::

    >>> import torch, sparsile, sparsile.nn as snn
    >>> A = sparsile.from_coo([0, 0, 1], [0, 1, 1], shape=(2, 2))
    >>> snn.edge_softmax(A, torch.tensor([1.0, 1.0, 5.0])).tolist()
    [0.5, 0.5, 1.0]
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import torch

from . import torch as st
from ._tensor import Tensor, as_tensor, from_csr

__all__ = ["add_self_loops", "gcn_norm", "edge_index", "edge_softmax", "sddmm_heads", "spmm_heads", "sparse_attention",
           "GATConv", "SparseAttention"]


def add_self_loops(A: Any, fill_value: float = 1.0) -> Tensor:
    """``A`` (square, CSR result) with the entry ``(i, i) = fill_value`` added to every
    row ``i`` that has no stored diagonal entry; stored diagonal entries are kept."""
    A = as_tensor(A).to("csr")
    m, n = A.shape
    if m != n:
        raise ValueError(f"add_self_loops needs a square matrix, got shape {A.shape}")
    indptr = A.indptr.astype(np.int64)
    rows = np.repeat(np.arange(m), np.diff(indptr))
    has_diag = np.zeros(m, dtype=bool)
    has_diag[rows[A.indices == rows]] = True
    missing = np.flatnonzero(~has_diag)
    all_rows = np.concatenate([rows, missing])
    all_cols = np.concatenate([A.indices.astype(np.int64), missing])
    all_vals = np.concatenate([A.values, np.full(missing.size, fill_value, dtype=A.dtype)])
    order = np.lexsort((all_cols, all_rows))
    counts = np.bincount(all_rows, minlength=m)
    new_indptr = np.concatenate([[0], np.cumsum(counts)])
    return from_csr(new_indptr, all_cols[order], all_vals[order], (m, n))


def gcn_norm(A: Any, self_loops: bool = True) -> Tensor:
    """The symmetric normalisation of graph convolutions: ``D^-1/2 Â D^-1/2`` with
    ``Â = A + I`` (missing diagonal entries added, see :func:`add_self_loops`) and ``D``
    the row sums of ``Â``'s values. Rows whose sum is zero stay zero."""
    A = add_self_loops(A) if self_loops else as_tensor(A).to("csr")
    deg = np.zeros(A.shape[0], dtype=np.float64)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    np.add.at(deg, rows, A.values)
    with np.errstate(divide="ignore"):
        inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    values = A.values * inv[rows] * inv[A.indices]
    return A.with_values(values.astype(A.dtype))


def edge_index(A: Any, like: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The ``(2, nnz)`` int64 (row, column) of A's stored entries in CSR order (PyG's
    ``edge_index``), on ``like``'s device (the CPU by default)."""
    A = st._operand(A, None)
    return torch.ops.sparsile.edge_index(torch.empty(0) if like is None else like, A._handle)


def edge_softmax(A: Any, scores: torch.Tensor) -> torch.Tensor:
    """Softmax of ``scores`` (``(nnz,)`` or ``(nnz, heads)``, CSR order) over the stored
    entries of each row of ``A``: ``exp(s - max_row) / Σ_row exp(s - max_row)``."""
    A = st._operand(A, None)
    if scores.ndim not in (1, 2):
        raise ValueError(f"scores must be (nnz,) or (nnz, heads), got shape {tuple(scores.shape)}")
    rows = torch.ops.sparsile.edge_index(scores, A._handle)[0]
    index = rows.view(-1, *([1] * (scores.ndim - 1))).expand_as(scores)
    shape = (A.shape[0],) + tuple(scores.shape[1:])
    # The max is a per-row constant the softmax does not depend on: no gradient through it.
    row_max = scores.new_full(shape, -math.inf).scatter_reduce(0, index, scores.detach(), "amax")
    e = torch.exp(scores - row_max.gather(0, index))
    denom = scores.new_zeros(shape).index_add(0, rows, e)
    return e / denom.gather(0, index)


def _heads(x: torch.Tensor, name: str) -> torch.Tensor:
    if x.ndim == 2:
        return x.unsqueeze(1)
    if x.ndim != 3:
        raise ValueError(f"{name} must be (rows, d) or (rows, heads, d), got shape {tuple(x.shape)}")
    return x


def sddmm_heads(A: Any, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Per head ``h``, ``A ⊙ (X[:, h] Y[:, h]ᵀ)`` at A's stored positions: ``X`` is
    ``(m, heads, d)``, ``Y`` ``(n, heads, d)``; returns ``(nnz, heads)`` in CSR order
    (``(nnz,)`` for 2-D ``X`` and ``Y``)."""
    A = st._operand(A, None)
    Xh, Yh = _heads(X, "X"), _heads(Y, "Y")
    if Xh.shape[1] != Yh.shape[1]:
        raise ValueError(f"X has {Xh.shape[1]} heads and Y {Yh.shape[1]}")
    out = torch.stack([st.sddmm(A, Xh[:, h].contiguous(), Yh[:, h].contiguous())
                       for h in range(Xh.shape[1])], dim=1)
    return out if X.ndim == 3 else out.squeeze(1)


def spmm_heads(A: Any, E: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """Per head ``h``, ``Y[i, h] = Σ_j E[(i,j), h] X[j, h]``: the pattern of ``A`` with the
    edge weights ``E`` (``(nnz, heads)``, CSR order) times ``X`` (``(n, heads, d)``);
    returns ``(m, heads, d)`` (2-D for ``(nnz,)`` weights and 2-D ``X``)."""
    A = st._operand(A, None)
    Xh = _heads(X, "X")
    Eh = E.unsqueeze(1) if E.ndim == 1 else E
    if Eh.ndim != 2 or Eh.shape[1] != Xh.shape[1]:
        raise ValueError(f"E must be (nnz, heads) with {Xh.shape[1]} heads, got shape {tuple(E.shape)}")
    out = torch.stack([st.spmm(A, Xh[:, h].contiguous(), Eh[:, h].contiguous())
                       for h in range(Xh.shape[1])], dim=1)
    return out if X.ndim == 3 else out.squeeze(1)


def sparse_attention(mask: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor,
                     scale: Optional[float] = None) -> torch.Tensor:
    """``softmax(Q Kᵀ · scale) V`` with the softmax over each row's stored positions of
    ``mask`` (its pattern: positions not stored take no part, stored values are not used;
    a row with none gives zeros). ``Q``: ``(m, [heads,] d)``, ``K``: ``(n, [heads,] d)``,
    ``V``: ``(n, [heads,] dv)``; ``scale`` defaults to ``1/√d``. Returns ``(m, [heads,]
    dv)``.

    On the CPU each head's forward pass is one compiled program (scores, each row's max,
    exponentials, their sums and the normalised weighted sum of ``V``'s rows, the weights
    kept for the backward pass); elsewhere (``target`` of CUDA tensors) it is composed of
    SDDMM, :func:`edge_softmax` and SpMM."""
    mask = st._operand(mask, None)
    if scale is None:
        scale = 1.0 / math.sqrt(Q.shape[-1])
    Qh, Kh, Vh = _heads(Q, "Q"), _heads(K, "K"), _heads(V, "V")
    if not (Qh.shape[1] == Kh.shape[1] == Vh.shape[1]):
        raise ValueError(f"Q, K and V have {Qh.shape[1]}, {Kh.shape[1]} and {Vh.shape[1]} heads")
    if Q.is_cuda:
        ones = torch.ones_like(torch.ops.sparsile.stored_values(Q, mask._handle))
        heads = []
        for h in range(Qh.shape[1]):
            s = st.sddmm(mask, Qh[:, h].contiguous(), Kh[:, h].contiguous(), ones) * scale
            heads.append(st.spmm(mask, Vh[:, h].contiguous(), edge_softmax(mask, s)))
    else:
        heads = [torch.ops.sparsile.sparse_attention((Qh[:, h] * scale).contiguous(), Kh[:, h].contiguous(),
                                                     Vh[:, h].contiguous(), mask._handle, None, None)[0]
                 for h in range(Qh.shape[1])]
    out = torch.stack(heads, dim=1)
    return out if Q.ndim == 3 else out.squeeze(1)


class GATConv(torch.nn.Module):
    """A graph attention layer (Veličković et al.): per head, ``α_ij = softmax_j
    LeakyReLU(aₗ·W xᵢ + aᵣ·W xⱼ)`` over the stored neighbours ``j`` of ``i`` in ``A``,
    then ``hᵢ = Σ_j α_ij W xⱼ``; heads concatenated (or averaged with ``concat=False``)."""

    def __init__(self, in_features: int, out_features: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2) -> None:
        super().__init__()
        self.heads, self.out_features, self.concat = heads, out_features, concat
        self.linear = torch.nn.Linear(in_features, heads * out_features, bias=False)
        self.att_src = torch.nn.Parameter(torch.empty(1, heads, out_features))
        self.att_dst = torch.nn.Parameter(torch.empty(1, heads, out_features))
        self.bias = torch.nn.Parameter(torch.zeros(heads * out_features if concat else out_features))
        self.negative_slope = negative_slope
        torch.nn.init.xavier_uniform_(self.att_src)
        torch.nn.init.xavier_uniform_(self.att_dst)

    def forward(self, A: Tensor, X: torch.Tensor) -> torch.Tensor:
        h = self.linear(X).view(-1, self.heads, self.out_features)
        a_dst = (h * self.att_dst).sum(-1)  # (n, heads): the receiving row i
        a_src = (h * self.att_src).sum(-1)  # (n, heads): the neighbour j
        # a_dst[i] + a_src[j] at every stored edge (i, j).
        A = st._operand(A, None)
        rows, cols = torch.ops.sparsile.edge_index(X, A._handle)
        e = torch.nn.functional.leaky_relu(a_dst[rows] + a_src[cols], self.negative_slope)
        out = spmm_heads(A, edge_softmax(A, e), h)
        out = out.reshape(-1, self.heads * self.out_features) if self.concat else out.mean(dim=1)
        return out + self.bias


class SparseAttention(torch.nn.Module):
    """Multi-head attention whose scores exist only at the stored positions of a sparse
    ``mask`` (sliding windows, global tokens, random links: BigBird, Longformer):
    projections, :func:`sparse_attention` per head, output projection."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not a multiple of heads {heads}")
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, mask: Tensor, X: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(X).view(X.shape[0], 3, self.heads, self.head_dim).unbind(1)
        return self.out(sparse_attention(mask, q, k, v).reshape(X.shape[0], -1))
