"""PyTorch autograd for Sparsile's SpMM, SpMV (also batched) and SDDMM.

``sparsile.torch.spmm(A, X, values=None)`` and ``sparsile.torch.sddmm(A, X, Y,
values=None)`` are ``torch.autograd.Function``s: gradients flow to the dense inputs and,
when ``values`` (A's stored values in CSR order, a 1-D tensor) is given, to the sparse
values too. ``spmv``, ``spmm_batched`` and ``spmv_batched`` are SpMM on a reshaped dense
operand. ``sparsile.spmm``, ``sparsile.spmv``, the batched operators and ``A @ X`` come
here by themselves when a torch input requires a gradient (and grad mode is on). The
forward and backward passes all run Sparsile kernels:

- SpMM ``Y = A X``: ``dX = Aᵀ dY`` (SpMM with the transposed pattern) and
  ``dA = (dY Xᵀ) ⊙ pattern(A)`` (SDDMM);
- SDDMM ``C = A ⊙ (X Y)``: ``dA = dC ⊙ (X Y)`` (SDDMM), ``dX = (A ⊙ dC) Yᵀ`` and
  ``dY = Xᵀ (A ⊙ dC)`` (SpMMs).

Tensors are used without copies (DLPack) when contiguous; the sparse operand is converted
to CSR once and cached. Both work inside ``torch.nn.Module``s (see :class:`GraphConv`).

On the GPU: with CUDA tensors, the forward and backward passes run GPU kernels (target
``cuda``) on the tensors in place, on PyTorch's current stream, and every result is a
CUDA tensor allocated by PyTorch on the same device; the sparse operand's structure (and
the transposed one the backward pass uses) is copied to the device once and kept there,
its values once per device (see :mod:`sparsile._cuda`). ``target=`` picks another target
for CPU tensors (``"cuda-sim"`` runs the GPU kernels, forward and backward, in the SIMT
interpreter).

Example::

    >>> import torch, sparsile, sparsile.torch as st
    >>> A = sparsile.from_dense(torch.eye(3).numpy())
    >>> X = torch.ones(3, 2, requires_grad=True)
    >>> st.spmm(A, X).sum().backward()
    >>> X.grad.tolist()
    [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from . import _cuda
from ._ops import sddmm_values as _sddmm_values
from ._ops import spmm as _spmm
from ._tensor import Tensor, as_tensor

__all__ = ["spmm", "spmv", "spmm_batched", "spmv_batched", "sddmm", "SpMM", "SDDMM", "GraphConv"]


def _csr(A: Any) -> Tensor:
    A = as_tensor(A)
    if A.ndim != 2:
        raise ValueError(f"the sparse operand must be a matrix, got shape {A.shape}")
    return A if A.format == "csr" else A._cache.setdefault("csr", A.to("csr"))


def _transpose_plan(A: Tensor, device: Optional[torch.device] = None):
    """The transposed CSR pattern of ``A`` and the permutation taking A's value order to
    the transposed one, on ``device`` (cached on ``A``)."""
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


def _values(A: Tensor, values: Optional[torch.Tensor], X: torch.Tensor) -> torch.Tensor:
    if values is None:
        if X.is_cuda:
            # A's values on X's device, copied once (cached on A).
            return _cuda.tensor_values_on(A, X)
        if "torch_values" not in A._cache:
            A._cache["torch_values"] = torch.from_numpy(A.values)
        return A._cache["torch_values"]
    if not isinstance(values, torch.Tensor):
        if not isinstance(values, np.ndarray):
            raise TypeError(f"values must be a torch.Tensor or NumPy array, got {type(values).__name__}")
        values = torch.from_numpy(values)
    if values.shape != (A.nnz,):
        raise ValueError(f"values must have shape ({A.nnz},) (one per stored value of A), got {tuple(values.shape)}")
    return values


def _check_dense(x: Any, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _as_torch(values: Any, like: torch.Tensor) -> torch.Tensor:
    """SDDMM's values (a NumPy array off the GPU, a torch tensor on it) as a tensor of
    ``like``'s dtype."""
    if isinstance(values, torch.Tensor):
        return values
    return torch.from_numpy(values).to(like.dtype)


def _ones(A: Tensor, like: torch.Tensor) -> Any:
    """``A.nnz`` ones where ``like`` is (cached on ``A`` per CUDA device)."""
    if not like.is_cuda:
        return np.ones(A.nnz, dtype=A.dtype)
    key = ("ones", str(like.device))
    if key not in A._cache:
        A._cache[key] = torch.ones(A.nnz, dtype=like.dtype, device=like.device)
    return A._cache[key]


class SpMM(torch.autograd.Function):
    """``Y = A @ X`` with gradients for ``values`` (A's CSR values) and ``X``."""

    @staticmethod
    def forward(ctx, values: torch.Tensor, X: torch.Tensor, A: Tensor,
                threads: Optional[int] = None, recipe: str = "auto",
                target: Optional[str] = None) -> torch.Tensor:
        ctx.A = A
        ctx.threads = threads
        ctx.target = target
        ctx.save_for_backward(values, X)
        return _spmm(A, X.contiguous(), values=values.detach(), threads=threads, recipe=recipe,
                     target=target)

    @staticmethod
    def backward(ctx, dY: torch.Tensor):
        values, X = ctx.saved_tensors
        A, threads, target = ctx.A, ctx.threads, ctx.target
        dY = dY.contiguous()
        d_values = d_X = None
        if ctx.needs_input_grad[1]:
            T, perm = _transpose_plan(A, dY.device)
            d_X = _spmm(T, dY, values=values.detach()[perm].contiguous(), threads=threads, target=target)
        if ctx.needs_input_grad[0]:
            C = _sddmm_values(A, dY, X.detach().contiguous(), values=_ones(A, dY), threads=threads,
                              target=target)
            d_values = _as_torch(C, dY)
        return d_values, d_X, None, None, None, None


class SDDMM(torch.autograd.Function):
    """``C = A ⊙ (X @ Yᵀ)`` (the values at A's stored positions, in CSR order) with
    gradients for ``values``, ``X`` and ``Y``."""

    @staticmethod
    def forward(ctx, values: torch.Tensor, X: torch.Tensor, Y: torch.Tensor, A: Tensor,
                threads: Optional[int] = None, recipe: str = "auto",
                target: Optional[str] = None) -> torch.Tensor:
        ctx.A = A
        ctx.threads = threads
        ctx.target = target
        ctx.save_for_backward(values, X, Y)
        C = _sddmm_values(A, X.contiguous(), Y.contiguous(), values=values.detach(), threads=threads,
                          recipe=recipe, target=target)
        return _as_torch(C, X)

    @staticmethod
    def backward(ctx, dC: torch.Tensor):
        values, X, Y = ctx.saved_tensors
        A, threads, target = ctx.A, ctx.threads, ctx.target
        dC = dC.contiguous()
        X = X.detach().contiguous()
        Y = Y.detach().contiguous()
        d_values = d_X = d_Y = None
        if ctx.needs_input_grad[0]:
            d_values = _as_torch(_sddmm_values(A, X, Y, values=dC, threads=threads, target=target), dC)
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            scaled = (values.detach() * dC).contiguous()
            if ctx.needs_input_grad[1]:
                d_X = _spmm(A, Y, values=scaled, threads=threads, target=target)
            if ctx.needs_input_grad[2]:
                T, perm = _transpose_plan(A, dC.device)
                d_Y = _spmm(T, X, values=scaled[perm].contiguous(), threads=threads, target=target)
        return d_values, d_X, d_Y, None, None, None, None


def _grad_operand(A: Any, values: Any) -> Tensor:
    """The CSR operand of a differentiable call. ``values`` are in the storage order of the
    operand as given, which is CSR order only for a CSR operand: refused otherwise."""
    given = as_tensor(A)
    if values is not None and given.format != "csr":
        raise ValueError(
            f"values= with gradients needs a csr operand (its values in CSR order), got {given.format}: "
            "convert it with A.to('csr') and pass values in that order"
        )
    return _csr(given)


def spmm(A: Any, X: torch.Tensor, values: Optional[torch.Tensor] = None, *,
         threads: Optional[int] = None, recipe: str = "auto", target: Optional[str] = None) -> torch.Tensor:
    """``A @ X`` as an autograd function. ``A``: a sparsile, SciPy or torch sparse matrix
    (its pattern, and its values unless ``values`` is given); ``X``: a dense CPU or CUDA
    tensor (``values``, when given, on the same device). ``target``: where the kernels
    run (default: ``cuda`` for CUDA tensors, else ``cpu``)."""
    A = _grad_operand(A, values)
    X = _check_dense(X, "X")
    return SpMM.apply(_values(A, values, X), X, A, threads, recipe, target)


def spmv(A: Any, x: torch.Tensor, values: Optional[torch.Tensor] = None, *,
         threads: Optional[int] = None, recipe: str = "auto", target: Optional[str] = None) -> torch.Tensor:
    """``A @ x`` for a dense vector ``x``, differentiable (SpMM with one column)."""
    x = _check_dense(x, "x")
    if x.ndim != 1:
        raise ValueError(f"spmv: x must be a vector, got shape {tuple(x.shape)}")
    return spmm(A, x.unsqueeze(1), values, threads=threads, recipe=recipe, target=target).squeeze(1)


def spmm_batched(A: Any, X: torch.Tensor, values: Optional[torch.Tensor] = None, *,
                 threads: Optional[int] = None, recipe: str = "auto",
                 target: Optional[str] = None) -> torch.Tensor:
    """``A @ X[b]`` for every ``b`` (``X``: (batch, n, k)), differentiable: one SpMM over
    the batches side by side, ``(n, batch * k)``."""
    X = _check_dense(X, "X")
    if X.ndim != 3:
        raise ValueError(f"spmm_batched: X must have shape (batch, n, k), got {tuple(X.shape)}")
    b, n, k = X.shape
    wide = X.permute(1, 0, 2).reshape(n, b * k)
    Y = spmm(A, wide, values, threads=threads, recipe=recipe, target=target)
    return Y.reshape(Y.shape[0], b, k).permute(1, 0, 2).contiguous()


def spmv_batched(A: Any, X: torch.Tensor, values: Optional[torch.Tensor] = None, *,
                 threads: Optional[int] = None, recipe: str = "auto",
                 target: Optional[str] = None) -> torch.Tensor:
    """``A @ X[b]`` for every ``b`` (``X``: (batch, n)), differentiable: ``(A Xᵀ)ᵀ``."""
    X = _check_dense(X, "X")
    if X.ndim != 2:
        raise ValueError(f"spmv_batched: X must have shape (batch, n), got {tuple(X.shape)}")
    return spmm(A, X.t(), values, threads=threads, recipe=recipe, target=target).t().contiguous()


def sddmm(A: Any, X: torch.Tensor, Y: torch.Tensor, values: Optional[torch.Tensor] = None, *,
          threads: Optional[int] = None, recipe: str = "auto", target: Optional[str] = None) -> torch.Tensor:
    """``A ⊙ (X @ Yᵀ)`` at A's stored positions (``X``: (m, k), ``Y``: (n, k)), as a 1-D
    tensor in A's CSR order (on X's device), with gradients for ``values``, ``X`` and
    ``Y``."""
    A = _grad_operand(A, values)
    X = _check_dense(X, "X")
    Y = _check_dense(Y, "Y")
    return SDDMM.apply(_values(A, values, X), X, Y, A, threads, recipe, target)


class GraphConv(torch.nn.Module):
    """A graph convolution ``Â X W (+ b)`` with a fixed sparse ``Â`` and Sparsile's SpMM."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features, bias=False)
        self.bias = torch.nn.Parameter(torch.zeros(out_features)) if bias else None

    def forward(self, A: Tensor, X: torch.Tensor) -> torch.Tensor:
        out = spmm(A, self.linear(X))
        return out + self.bias if self.bias is not None else out
