"""Sparsile's operators registered with ``torch.library``: what makes them work under
``torch.compile`` (and ``torch.export``) with gradients.

Custom operators take tensors, numbers and strings only, so the sparse operand travels as
its ``_handle``, a string naming a live :class:`~sparsile.Tensor` (``torch.compile``
treats it as a constant of the compiled graph and guards on it, so another matrix
recompiles rather than reuses a graph). The operators:

=====================================================  =====================================
``sparsile::spmm(X, values, A, transpose, ...)``       ``A @ X`` (``A.T @ X`` when
                                                       ``transpose``), A's values or
                                                       ``values`` (CSR order)
``sparsile::sddmm(X, Y, values, A, ...)``              ``values ⊙ (X @ Y.T)`` at A's stored
                                                       positions, a 1-D tensor in CSR order
``sparsile::stored_values(like, A)``                   A's values in CSR order, where
                                                       ``like`` is
``sparsile::mttkrp(C, D, B, perm, ...)``              MTTKRP of ``B`` with its modes in the
                                                       order ``perm``
``sparsile::rgms(X, W, A, transpose, ...)``            ``Σ_r A[r] X W[r]`` (``A[r]ᵀ`` when
                                                       ``transpose``)
``sparsile::relation_spmm(G, A, transpose, ...)``      ``Z[r] = A[r] G`` (``A[r]ᵀ G``)
``sparsile::sparse_attention(Q, K, V, mask, ...)``     ``(softmax(Q Kᵀ) V, weights)`` over the
                                                       mask's positions, one compiled program
``sparsile::edge_index(like, A)``                      the (row, column) of each stored value,
                                                       ``(2, nnz)`` int64
=====================================================  =====================================

Each has a fake (meta) implementation that gives the result's shape from the handle
without running anything, and ``spmm``, ``sddmm``, ``mttkrp`` and ``rgms`` have autograd
formulas made of the same operators (so a compiled backward pass runs Sparsile kernels
too):

- ``Y = A X``: ``dX = Aᵀ dY``, ``dvalues = pattern(A) ⊙ (dY Xᵀ)``;
- ``C = values ⊙ (X Yᵀ)``: ``dvalues = dC ⊙ (X Yᵀ)``, ``dX = (values ⊙ dC) Y``,
  ``dY = (values ⊙ dC)ᵀ X``;
- ``A[i,s] = Σ B[i,k,l] C[k,s] D[l,s]``: ``dC`` and ``dD`` are MTTKRPs of ``B`` with its
  modes reordered (``(k,i,l)`` with ``dA`` and ``D``; ``(l,i,k)`` with ``dA`` and ``C``);
- ``Y = Σ_r A[r] X W[r]``: ``dX = Σ_r A[r]ᵀ dY W[r]ᵀ`` (RGMS on the transposed relations)
  and ``dW[r] = Xᵀ (A[r]ᵀ dY)``.

The sparse operand is used in CSR: another format is converted once and cached on the
tensor, as is the transposed pattern with the permutation from A's value order to it.

Example::

    >>> import torch, sparsile, sparsile.torch  # registers the operators
    >>> A = sparsile.from_dense(torch.eye(2).numpy())
    >>> torch.ops.sparsile.spmm(torch.ones(2, 3), None, A._handle, False, None, "auto", None).tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
"""

from __future__ import annotations

import warnings
from typing import List, Optional, Tuple

import numpy as np
import torch

from . import _cuda, _ops
from ._tensor import Tensor, by_handle, from_coords


def operand(A: str, values: Optional[torch.Tensor]) -> Tensor:
    """The CSR form of the tensor with handle ``A``. ``values`` replacing A's are in the
    storage order of the tensor as given, which is CSR order only for a CSR tensor."""
    G = by_handle(A)
    if values is not None and G.format != "csr":
        raise ValueError(
            f"values= with gradients needs a csr operand (its values in CSR order), got {G.format}: "
            "convert it with A.to('csr') and pass values in that order"
        )
    return csr_of(G)


def csr_of(A: Tensor) -> Tensor:
    """``A`` in CSR (itself, or a conversion cached on it)."""
    if A.ndim != 2:
        raise ValueError(f"the sparse operand must be a matrix, got shape {A.shape}")
    if A.format == "csr":
        return A
    if "csr" not in A._cache:
        A._cache["csr"] = A.to("csr")
    return A._cache["csr"]


def transpose_plan(A: Tensor, device: Optional[torch.device] = None) -> Tuple[Tensor, torch.Tensor]:
    """The transposed CSR pattern of the CSR tensor ``A`` and the permutation taking A's
    value order to the transposed one, on ``device`` (cached on ``A``)."""
    if "T_perm" not in A._cache:
        # Number the stored values 1..nnz (exact in f64), transpose, read the numbers back.
        numbered = A.to("csr", dtype=np.float64).with_values(np.arange(1, A.nnz + 1, dtype=np.float64))
        T = numbered.transpose()
        perm = T.values.astype(np.int64) - 1
        A._cache["T_perm"] = (T.to("csr", dtype=A.dtype), torch.from_numpy(perm))
    T, perm = A._cache["T_perm"]
    if device is None or device.type == "cpu":
        return T, perm
    key = ("T_perm", str(device))
    if key not in A._cache:
        A._cache[key] = perm.to(device)
    return T, A._cache[key]


def _values_like(A: Tensor, like: torch.Tensor) -> torch.Tensor:
    """The CSR tensor ``A``'s values where ``like`` is (cached on ``A``)."""
    if like.is_cuda:
        return _cuda.tensor_values_on(A, like)
    if "torch_values" not in A._cache:
        with warnings.catch_warnings():
            # A read-only view of A's values: the kernels only read the tensor made of it.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            A._cache["torch_values"] = torch.from_numpy(A.values)
    return A._cache["torch_values"]


def _check_values(A: Tensor, values: torch.Tensor) -> None:
    if values.shape != (A.nnz,):
        raise ValueError(f"values must have shape ({A.nnz},) (one per stored value of A), got {tuple(values.shape)}")


def _as_torch(values, like: torch.Tensor) -> torch.Tensor:
    """SDDMM's values (a NumPy array off the GPU, a torch tensor on it) as a tensor of
    ``like``'s dtype."""
    if isinstance(values, torch.Tensor):
        return values
    return torch.from_numpy(values).to(like.dtype)


def _rows(A: Tensor, transpose: bool) -> int:
    return A.shape[1] if transpose else A.shape[0]


def spmm_body(X: torch.Tensor, values: Optional[torch.Tensor], A: str, transpose: bool,
              threads: Optional[int], recipe: str, target: Optional[str]) -> torch.Tensor:
    """What ``sparsile::spmm`` computes (and the eager path of :mod:`sparsile._torch_eager`)."""
    S = operand(A, values)
    inner = S.shape[0] if transpose else S.shape[1]
    if X.ndim != 2 or X.shape[0] != inner:
        raise ValueError(f"spmm: X must have shape ({inner}, k) for a sparse operand of shape "
                         f"{S.shape}{' (transposed)' if transpose else ''}, got {tuple(X.shape)}")
    if values is None:
        values = _values_like(S, X)
    _check_values(S, values)
    values = values.detach()
    X = X.detach().contiguous()
    if transpose:
        S, perm = transpose_plan(S, X.device)
        values = values[perm]
    return _ops.spmm_plain(S, X, values.contiguous(), threads, recipe, target)


@torch.library.custom_op("sparsile::spmm", mutates_args=())
def spmm(X: torch.Tensor, values: Optional[torch.Tensor], A: str, transpose: bool,
         threads: Optional[int], recipe: str, target: Optional[str]) -> torch.Tensor:
    """``A @ X`` (``A.T @ X`` when ``transpose``) for the tensor with handle ``A``."""
    return spmm_body(X, values, A, transpose, threads, recipe, target)


@spmm.register_fake
def _(X, values, A, transpose, threads, recipe, target):
    S = by_handle(A)
    return X.new_empty((_rows(S, transpose), X.shape[1]))


def sddmm_body(X: torch.Tensor, Y: torch.Tensor, values: Optional[torch.Tensor], A: str,
               threads: Optional[int], recipe: str, target: Optional[str]) -> torch.Tensor:
    """What ``sparsile::sddmm`` computes (and the eager path of :mod:`sparsile._torch_eager`)."""
    S = operand(A, values)
    m, n = S.shape
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != m or Y.shape[0] != n or X.shape[1] != Y.shape[1]:
        raise ValueError(f"sddmm: X must be ({m}, k) and Y ({n}, k) for a sparse operand of shape "
                         f"{S.shape}, got {tuple(X.shape)} and {tuple(Y.shape)}")
    if values is None:
        values = _values_like(S, X)
    _check_values(S, values)
    out = _ops.sddmm_values(S, X.detach().contiguous(), Y.detach().contiguous(),
                            values=values.detach().contiguous(), threads=threads, recipe=recipe,
                            target=target)
    out = _as_torch(out, X)
    # The operator's result must not share memory with an input.
    return out.clone() if out.data_ptr() == values.data_ptr() else out


@torch.library.custom_op("sparsile::sddmm", mutates_args=())
def sddmm(X: torch.Tensor, Y: torch.Tensor, values: Optional[torch.Tensor], A: str,
          threads: Optional[int], recipe: str, target: Optional[str]) -> torch.Tensor:
    """``values ⊙ (X @ Y.T)`` at the stored positions of the tensor with handle ``A``,
    in CSR order."""
    return sddmm_body(X, Y, values, A, threads, recipe, target)


@sddmm.register_fake
def _(X, Y, values, A, threads, recipe, target):
    return X.new_empty((csr_of(by_handle(A)).nnz,))


@torch.library.custom_op("sparsile::stored_values", mutates_args=())
def stored_values(like: torch.Tensor, A: str) -> torch.Tensor:
    """The values of the tensor with handle ``A`` in CSR order, on ``like``'s device."""
    return _values_like(csr_of(by_handle(A)), like).clone()


@stored_values.register_fake
def _(like, A):
    return like.new_empty((csr_of(by_handle(A)).nnz,))


# ``like`` only says where: no gradient flows to it.
stored_values.register_autograd(lambda ctx, grad: (None, None), setup_context=lambda ctx, inputs, output: None)


def permuted(B: Tensor, perm: Tuple[int, ...]) -> Tensor:
    """``B`` with its modes in the order ``perm``, as CSF (``B`` itself for the identity
    when ``B`` is CSF; cached on ``B``)."""
    perm = tuple(perm)
    if perm == tuple(range(B.ndim)):
        return B
    key = ("permuted", perm)
    if key not in B._cache:
        coords, values = B.coo()
        B._cache[key] = from_coords([coords[p] for p in perm], values, [B.shape[p] for p in perm],
                                    format="csf")
    return B._cache[key]


def _check_perm(perm, ndim: int) -> Tuple[int, ...]:
    if sorted(perm) != list(range(ndim)):
        raise ValueError(f"perm must order the {ndim} modes, got {list(perm)}")
    return tuple(perm)


@torch.library.custom_op("sparsile::mttkrp", mutates_args=())
def mttkrp(C: torch.Tensor, D: torch.Tensor, B: str, perm: List[int], threads: Optional[int], recipe: str,
           target: Optional[str]) -> torch.Tensor:
    """MTTKRP of the 3-D tensor with handle ``B``, its modes in the order ``perm``."""
    S = by_handle(B)
    S = permuted(S, _check_perm(perm, S.ndim))
    return _ops.mttkrp_plain(S, C.detach().contiguous(), D.detach().contiguous(), threads, recipe, target)


@mttkrp.register_fake
def _(C, D, B, perm, threads, recipe, target):
    return C.new_empty((by_handle(B).shape[perm[0]], C.shape[1]))


def _mttkrp_setup(ctx, inputs, output) -> None:
    C, D, B, perm, threads, recipe, target = inputs
    ctx.B, ctx.perm, ctx.threads, ctx.target = B, list(perm), threads, target
    ctx.tensor = by_handle(B)  # alive until the backward pass
    ctx.save_for_backward(C, D)


def _mttkrp_backward(ctx, dA):
    C, D = ctx.saved_tensors
    p = ctx.perm
    d_C = d_D = None
    if ctx.needs_input_grad[0]:
        d_C = torch.ops.sparsile.mttkrp(dA, D, ctx.B, [p[1], p[0], p[2]], ctx.threads, "auto", ctx.target)
    if ctx.needs_input_grad[1]:
        d_D = torch.ops.sparsile.mttkrp(dA, C, ctx.B, [p[2], p[0], p[1]], ctx.threads, "auto", ctx.target)
    return d_C, d_D, None, None, None, None, None


mttkrp.register_autograd(_mttkrp_backward, setup_context=_mttkrp_setup)


def _relations(A: str, transpose: bool) -> Tensor:
    S = by_handle(A)
    if S.ndim != 3:
        raise ValueError(f"the relations operand must have 3 dimensions (relations, m, n), got {S.shape}")
    return permuted(S, (0, 2, 1)) if transpose else S


@torch.library.custom_op("sparsile::rgms", mutates_args=())
def rgms(X: torch.Tensor, W: torch.Tensor, A: str, transpose: bool, threads: Optional[int], recipe: str,
         target: Optional[str]) -> torch.Tensor:
    """``Σ_r A[r] X W[r]`` (``A[r]ᵀ`` when ``transpose``) for the tensor with handle ``A``."""
    S = _relations(A, transpose)
    return _ops.rgms_plain(S, X.detach().contiguous(), W.detach().contiguous(), threads, recipe, target)


@rgms.register_fake
def _(X, W, A, transpose, threads, recipe, target):
    S = by_handle(A)
    return X.new_empty((S.shape[2] if transpose else S.shape[1], W.shape[2]))


@torch.library.custom_op("sparsile::relation_spmm", mutates_args=())
def relation_spmm(G: torch.Tensor, A: str, transpose: bool, threads: Optional[int],
                  target: Optional[str]) -> torch.Tensor:
    """``Z[r] = A[r] G`` (``A[r]ᵀ G`` when ``transpose``): ``(relations, rows, q)``."""
    S = _relations(A, transpose)
    return _ops.relation_spmm(S, G.detach().contiguous(), threads, target)


@relation_spmm.register_fake
def _(G, A, transpose, threads, target):
    S = by_handle(A)
    return G.new_empty((S.shape[0], S.shape[2] if transpose else S.shape[1], G.shape[1]))


def _rgms_setup(ctx, inputs, output) -> None:
    X, W, A, transpose, threads, recipe, target = inputs
    ctx.A, ctx.transpose, ctx.threads, ctx.target = A, transpose, threads, target
    ctx.tensor = by_handle(A)  # alive until the backward pass
    ctx.save_for_backward(X, W)


def _rgms_backward(ctx, dY):
    X, W = ctx.saved_tensors
    d_X = d_W = None
    if ctx.needs_input_grad[0]:
        d_X = torch.ops.sparsile.rgms(dY, W.transpose(1, 2).contiguous(), ctx.A, not ctx.transpose,
                                      ctx.threads, "auto", ctx.target)
    if ctx.needs_input_grad[1]:
        Z = torch.ops.sparsile.relation_spmm(dY, ctx.A, not ctx.transpose, ctx.threads, ctx.target)
        d_W = torch.einsum("jk,rjl->rkl", X, Z)
    return d_X, d_W, None, None, None, None, None


rgms.register_autograd(_rgms_backward, setup_context=_rgms_setup)


def pattern_of(A: Tensor) -> Tensor:
    """``A``'s CSR pattern with every value 1 (cached on ``A``)."""
    S = csr_of(A)
    if "pattern" not in S._cache:
        S._cache["pattern"] = S.with_values(np.ones(S.nnz, dtype=S.values.dtype))
    return S._cache["pattern"]


@torch.library.custom_op("sparsile::sparse_attention", mutates_args=())
def sparse_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, mask: str, threads: Optional[int],
                     target: Optional[str]) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(O, P)``: ``P`` the softmax of ``Q Kᵀ`` over each row's stored positions of the
    mask with handle ``mask`` (its values ignored; ``Q`` already scaled), in CSR order,
    and ``O = P V``, computed by one compiled program."""
    U = pattern_of(by_handle(mask))
    m, n = U.shape
    if Q.ndim != 2 or K.ndim != 2 or V.ndim != 2 or Q.shape[0] != m or K.shape[0] != n or V.shape[0] != n \
            or Q.shape[1] != K.shape[1]:
        raise ValueError(f"sparse_attention: Q must be ({m}, d), K ({n}, d) and V ({n}, e) for a mask of shape "
                         f"{U.shape}, got {tuple(Q.shape)}, {tuple(K.shape)} and {tuple(V.shape)}")
    O, P = _ops.attention_forward(U, Q.detach().contiguous(), K.detach().contiguous(), V.detach().contiguous(),
                                  threads, target)
    return O, P


@sparse_attention.register_fake
def _(Q, K, V, mask, threads, target):
    U = csr_of(by_handle(mask))
    return Q.new_empty((U.shape[0], V.shape[1])), Q.new_empty((U.nnz,))


def _attention_setup(ctx, inputs, output) -> None:
    Q, K, V, mask, threads, target = inputs
    ctx.U = pattern_of(by_handle(mask))  # alive until the backward pass
    ctx.threads, ctx.target = threads, target
    ctx.save_for_backward(Q, K, V, output[1])


def _attention_backward(ctx, dO, dP_out):
    Q, K, V, P = ctx.saved_tensors
    U, threads, target = ctx.U._handle, ctx.threads, ctx.target
    d_Q = d_K = d_V = None
    if ctx.needs_input_grad[2]:
        d_V = torch.ops.sparsile.spmm(dO, P, U, True, threads, "auto", target)
    if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
        # dP = dO Vᵀ at the stored positions; the softmax's backward per row.
        ones = torch.ones_like(P)
        dP = torch.ops.sparsile.sddmm(dO, V, ones, U, threads, "auto", target)
        if dP_out is not None:
            dP = dP + dP_out
        rows = torch.ops.sparsile.edge_index(P, U)[0]
        row_dot = P.new_zeros((ctx.U.shape[0],)).index_add(0, rows, P * dP)
        dS = P * (dP - row_dot[rows])
        if ctx.needs_input_grad[0]:
            d_Q = torch.ops.sparsile.spmm(K, dS, U, False, threads, "auto", target)
        if ctx.needs_input_grad[1]:
            d_K = torch.ops.sparsile.spmm(Q, dS, U, True, threads, "auto", target)
    return d_Q, d_K, d_V, None, None, None


sparse_attention.register_autograd(_attention_backward, setup_context=_attention_setup)


@torch.library.custom_op("sparsile::edge_index", mutates_args=())
def edge_index(like: torch.Tensor, A: str) -> torch.Tensor:
    """The (row, column) of every stored value of the tensor with handle ``A``, in CSR
    order: a ``(2, nnz)`` int64 tensor on ``like``'s device (PyG's ``edge_index``)."""
    S = csr_of(by_handle(A))
    key = ("edge_index", str(like.device))
    if key not in S._cache:
        rows = np.repeat(np.arange(S.shape[0], dtype=np.int64), np.diff(S.indptr))
        both = np.stack([rows, S.indices.astype(np.int64)])
        S._cache[key] = torch.from_numpy(both).to(like.device)
    return S._cache[key].clone()


@edge_index.register_fake
def _(like, A):
    return like.new_empty((2, csr_of(by_handle(A)).nnz), dtype=torch.int64)


def spmm_context(ctx, X, values, A: str, transpose: bool, threads, target) -> None:
    """Keeps on ``ctx`` what SpMM's backward pass (:func:`spmm_gradients`) needs."""
    ctx.A, ctx.transpose, ctx.threads, ctx.target = A, transpose, threads, target
    ctx.tensor = by_handle(A)  # alive until the backward pass
    ctx.save_for_backward(X, values)


def spmm_gradients(ctx, dY, spmm_op, sddmm_op):
    """SpMM's backward pass, ``dX = Aᵀ dY`` and ``dvalues = pattern(A) ⊙ (dY Xᵀ)``, run by
    ``spmm_op`` and ``sddmm_op``: the custom operators here, the eager path's in
    :mod:`sparsile._torch_eager`. The gradients of the operator's seven inputs."""
    X, values = ctx.saved_tensors
    A, transpose, threads, target = ctx.A, ctx.transpose, ctx.threads, ctx.target
    d_X = d_values = None
    if ctx.needs_input_grad[0]:
        d_X = spmm_op(dY, values, A, not transpose, threads, "auto", target)
    if ctx.needs_input_grad[1]:
        ones = dY.new_ones((csr_of(ctx.tensor).nnz,)) if values is None else torch.ones_like(values)
        if transpose:
            d_values = sddmm_op(X, dY, ones, A, threads, "auto", target)
        else:
            d_values = sddmm_op(dY, X, ones, A, threads, "auto", target)
    return d_X, d_values, None, None, None, None, None


def _spmm_setup(ctx, inputs, output) -> None:
    X, values, A, transpose, threads, recipe, target = inputs
    spmm_context(ctx, X, values, A, transpose, threads, target)


def _spmm_backward(ctx, dY):
    return spmm_gradients(ctx, dY, torch.ops.sparsile.spmm, torch.ops.sparsile.sddmm)


spmm.register_autograd(_spmm_backward, setup_context=_spmm_setup)


def sddmm_context(ctx, X, Y, values, A: str, threads, target) -> None:
    """Keeps on ``ctx`` what SDDMM's backward pass (:func:`sddmm_gradients`) needs."""
    ctx.A, ctx.threads, ctx.target = A, threads, target
    ctx.tensor = by_handle(A)  # alive until the backward pass
    ctx.save_for_backward(X, Y, values)


def sddmm_gradients(ctx, dC, spmm_op, sddmm_op):
    """SDDMM's backward pass, ``dvalues = dC ⊙ (X Yᵀ)``, ``dX = (values ⊙ dC) Y`` and
    ``dY = (values ⊙ dC)ᵀ X``, run by ``spmm_op`` and ``sddmm_op`` (as for
    :func:`spmm_gradients`). The gradients of the operator's seven inputs."""
    X, Y, values = ctx.saved_tensors
    A, threads, target = ctx.A, ctx.threads, ctx.target
    d_X = d_Y = d_values = None
    if ctx.needs_input_grad[2]:
        d_values = sddmm_op(X, Y, dC, A, threads, "auto", target)
    if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
        if values is None:
            values = torch.ops.sparsile.stored_values(dC, A)
        scaled = values * dC
        if ctx.needs_input_grad[0]:
            d_X = spmm_op(Y, scaled, A, False, threads, "auto", target)
        if ctx.needs_input_grad[1]:
            d_Y = spmm_op(X, scaled, A, True, threads, "auto", target)
    return d_X, d_Y, d_values, None, None, None, None


def _sddmm_setup(ctx, inputs, output) -> None:
    X, Y, values, A, threads, recipe, target = inputs
    sddmm_context(ctx, X, Y, values, A, threads, target)


def _sddmm_backward(ctx, dC):
    return sddmm_gradients(ctx, dC, torch.ops.sparsile.spmm, torch.ops.sparsile.sddmm)


sddmm.register_autograd(_sddmm_backward, setup_context=_sddmm_setup)
