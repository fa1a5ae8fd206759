"""The eager path of the differentiable SpMM and SDDMM of :mod:`sparsile.torch`.

Purpose: a ``torch.library`` custom operator costs about 25 µs a call in dispatch alone
(its schema, the autograd kernel, the Python implementation behind the dispatcher), and
about 55 µs more with a gradient to record: more than the kernel on graphs of a few
thousand nodes (Cora's SpMM at K=16 runs in about 12 µs). Outside ``torch.compile``, the
same computation runs as ``torch.autograd.Function`` classes around the operators' bodies
(:func:`~sparsile._torch_library.spmm_body`, :func:`~sparsile._torch_library.sddmm_body`)
with the same backward passes (``spmm_gradients``, ``sddmm_gradients``, given this
module's operators); under ``torch.compile`` (and ``torch.export``) the
custom operators of :mod:`sparsile._torch_library` run, since only they can be traced.
Both paths give the same results and gradients (the tests compare them).

Preconditions: those of the operators: ``A`` is the handle of a live
:class:`~sparsile.Tensor`, ``values`` (when given) are in its CSR order.

Example::

    >>> import torch, sparsile
    >>> from sparsile import _torch_eager
    >>> A = sparsile.from_dense(torch.eye(2).numpy())
    >>> X = torch.ones(2, 3, requires_grad=True)
    >>> _torch_eager.spmm(X, None, A._handle, False, None, "auto", None).sum().backward()
    >>> X.grad.tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from ._torch_library import (sddmm_body, sddmm_context, sddmm_gradients, spmm_body, spmm_context,
                             spmm_gradients)


def spmm(X: torch.Tensor, values: Optional[torch.Tensor], A: str, transpose: bool,
         threads: Optional[int], recipe: str, target: Optional[str]) -> torch.Tensor:
    """``A @ X`` (``A.T @ X`` when ``transpose``), differentiable in ``X`` and ``values``:
    the custom operator ``sparsile::spmm`` under ``torch.compile``, else :class:`_SpMM`."""
    if torch.compiler.is_compiling():
        return torch.ops.sparsile.spmm(X, values, A, transpose, threads, recipe, target)
    return _SpMM.apply(X, values, A, transpose, threads, recipe, target)


def sddmm(X: torch.Tensor, Y: torch.Tensor, values: Optional[torch.Tensor], A: str,
          threads: Optional[int], recipe: str, target: Optional[str]) -> torch.Tensor:
    """``values ⊙ (X @ Y.T)`` at A's stored positions (CSR order), differentiable in ``X``,
    ``Y`` and ``values``: ``sparsile::sddmm`` under ``torch.compile``, else
    :class:`_SDDMM`."""
    if torch.compiler.is_compiling():
        return torch.ops.sparsile.sddmm(X, Y, values, A, threads, recipe, target)
    return _SDDMM.apply(X, Y, values, A, threads, recipe, target)


class _SpMM(torch.autograd.Function):
    """``Y = A X`` (gradients: :func:`~sparsile._torch_library.spmm_gradients`)."""

    @staticmethod
    def forward(ctx: Any, X, values, A, transpose, threads, recipe, target):  # type: ignore[override]
        # The context is set up here, not in `setup_context`: with one, `apply` binds the
        # arguments to the signature (`inspect`) on every call, about 25 µs.
        spmm_context(ctx, X, values, A, transpose, threads, target)
        return spmm_body(X, values, A, transpose, threads, recipe, target)

    @staticmethod
    def backward(ctx: Any, dY: torch.Tensor):  # type: ignore[override]
        return spmm_gradients(ctx, dY, spmm, sddmm)


class _SDDMM(torch.autograd.Function):
    """``C = values ⊙ (X Yᵀ)`` (gradients: :func:`~sparsile._torch_library.sddmm_gradients`)."""

    @staticmethod
    def forward(ctx: Any, X, Y, values, A, threads, recipe, target):  # type: ignore[override]
        sddmm_context(ctx, X, Y, values, A, threads, target)
        return sddmm_body(X, Y, values, A, threads, recipe, target)

    @staticmethod
    def backward(ctx: Any, dC: torch.Tensor):  # type: ignore[override]
        return sddmm_gradients(ctx, dC, spmm, sddmm)
