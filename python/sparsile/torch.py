"""PyTorch for Sparsile's operators: autograd, ``torch.compile`` and ``nn.Module``s.

``spmm(A, X, values=None)``, ``sddmm(A, X, Y, values=None)``, ``mttkrp(B, C, D)`` and
``rgms(A, X, W)`` call operators registered with ``torch.library`` (see
:mod:`sparsile._torch_library`): gradients flow to the dense inputs and, when ``values``
(A's stored values in CSR order, a 1-D tensor) is given, to the sparse values too; fake
implementations let ``torch.compile(fullgraph=True)`` trace them, forward and backward.
``spmv``, ``spmm_batched`` and ``spmv_batched`` are SpMM on a reshaped dense operand.
Outside ``torch.compile``, ``spmm`` and ``sddmm`` (and the operators built on them) run
the same bodies and gradient formulas as ``torch.autograd.Function`` classes instead
(:mod:`sparsile._torch_eager`): a custom operator's dispatch costs more than the kernel
on small graphs. ``sparsile.spmm``, ``sparsile.spmv``, the batched operators,
``mttkrp``, ``rgms`` and ``A @ X`` come here by themselves when a torch input requires a
gradient (and grad mode is on) or under ``torch.compile``. The forward and backward
passes all run Sparsile kernels:

- SpMM ``Y = A X``: ``dX = Aᵀ dY`` (SpMM with the transposed pattern) and
  ``dA = (dY Xᵀ) ⊙ pattern(A)`` (SDDMM);
- SDDMM ``C = A ⊙ (X Y)``: ``dA = dC ⊙ (X Y)`` (SDDMM), ``dX = (A ⊙ dC) Yᵀ`` and
  ``dY = Xᵀ (A ⊙ dC)`` (SpMMs);
- MTTKRP and RGMS: MTTKRPs along the other modes, RGMS on the transposed relations.

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

import torch

from . import _torch_eager
from . import _torch_library  # noqa: F401  (registers the torch.library operators)
from ._tensor import Tensor, as_tensor

__all__ = ["spmm", "spmv", "spmm_batched", "spmv_batched", "sddmm", "mttkrp", "rgms", "GraphConv"]


def _check_dense(x: Any, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _operand(A: Any, values: Optional[torch.Tensor]) -> Tensor:
    """The sparse operand as a :class:`~sparsile.Tensor` (converted from SciPy / torch
    sparse). ``values`` are in the storage order of the operand as given, which is CSR
    order only for a CSR operand: the operators refuse others."""
    if not isinstance(A, Tensor):
        A = as_tensor(A)
    if values is not None and not isinstance(values, torch.Tensor):
        raise TypeError(f"values must be a torch.Tensor, got {type(values).__name__}")
    return A


def spmm(A: Any, X: torch.Tensor, values: Optional[torch.Tensor] = None, *,
         threads: Optional[int] = None, recipe: str = "auto", target: Optional[str] = None) -> torch.Tensor:
    """``A @ X`` as an autograd function. ``A``: a sparsile, SciPy or torch sparse matrix
    (its pattern, and its values unless ``values`` is given); ``X``: a dense CPU or CUDA
    tensor (``values``, when given, on the same device). ``target``: where the kernels
    run (default: ``cuda`` for CUDA tensors, else ``cpu``)."""
    X = _check_dense(X, "X")
    A = _operand(A, values)
    return _torch_eager.spmm(X, values, A._handle, False, threads, recipe, target)


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
    X = _check_dense(X, "X")
    Y = _check_dense(Y, "Y")
    A = _operand(A, values)
    return _torch_eager.sddmm(X, Y, values, A._handle, threads, recipe, target)


def mttkrp(B: Any, C: torch.Tensor, D: torch.Tensor, *, threads: Optional[int] = None, recipe: str = "auto",
           target: Optional[str] = None) -> torch.Tensor:
    """MTTKRP ``A[i,s] = Σ B[i,k,l] C[k,s] D[l,s]`` of a 3-D sparse ``B`` with gradients for
    ``C`` ``(p, r)`` and ``D`` ``(q, r)`` (MTTKRPs along B's other modes)."""
    C = _check_dense(C, "C")
    D = _check_dense(D, "D")
    B = _operand(B, None)
    return torch.ops.sparsile.mttkrp(C, D, B._handle, [0, 1, 2], threads, recipe, target)


def rgms(A: Any, X: torch.Tensor, W: torch.Tensor, *, threads: Optional[int] = None, recipe: str = "auto",
         target: Optional[str] = None) -> torch.Tensor:
    """RGMS ``Y = Σ_r A[r] X W[r]`` (``A``: ``(relations, m, n)`` sparse, ``X``: ``(n, p)``,
    ``W``: ``(relations, p, q)``) with gradients for ``X`` and ``W``."""
    X = _check_dense(X, "X")
    W = _check_dense(W, "W")
    A = _operand(A, None)
    return torch.ops.sparsile.rgms(X, W, A._handle, False, threads, recipe, target)


class GraphConv(torch.nn.Module):
    """A graph convolution ``Â X W (+ b)`` with a fixed sparse ``Â`` and Sparsile's SpMM."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features, bias=False)
        self.bias = torch.nn.Parameter(torch.zeros(out_features)) if bias else None

    def forward(self, A: Tensor, X: torch.Tensor) -> torch.Tensor:
        out = spmm(A, self.linear(X))
        return out + self.bias if self.bias is not None else out
