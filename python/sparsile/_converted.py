"""The structures of recently converted SciPy and torch matrices, kept for the next call.

``sparsile.spmm(A, X)`` with a SciPy or torch matrix converts ``A`` on every call: a copy
of its index arrays, a check of every index, and then, because the copy is a new
structure, the automatic choice reads its pattern again (fingerprint and features) and
the kernel checks it again. On ogbn-arxiv (1.2 M non-zeros) that was 14 ms per call
around a 6 ms kernel.

This module remembers the last few conversions that the operators make by themselves
(``as_tensor``); an explicit ``from_scipy`` or ``from_torch`` reuses a kept one but keeps
none, so a tensor the user drops frees its structure (and its copies on a GPU) at once.
A call with arrays at the same address, of the same shape, format and types, is
compared entry by entry with the kept structure (a ``memcmp`` of the index arrays,
about 0.3 ms on ogbn-arxiv); only when they are equal is the kept structure reused,
with a fresh copy of the values. Equal arrays mean the caller's matrix has that
structure, stored in that order, so reuse can never change a result; an array changed
in place, or a new array at a freed address, fails the comparison and is converted
afresh. The addresses only pick which entry to compare.

Preconditions: the kept tensors were built from exactly the arrays they are compared
with (no sorting or summing changed them), which ``same_pattern`` verifies anyway.

Example::

    >>> import numpy as np, scipy.sparse as sp, sparsile
    >>> from sparsile._converted import reuse_or_convert
    >>> A = sp.random(50, 40, density=0.1, format="csr", dtype=np.float32, random_state=0)
    >>> args = ("csr", A.shape, A.indptr, A.indices, A.data)
    >>> convert = lambda: sparsile._native.Tensor.from_csr(A.shape, A.indptr, A.indices, A.data)
    >>> t1 = reuse_or_convert(*args, convert)  # converted and kept
    >>> t2 = reuse_or_convert(*args, convert)  # compared, then the kept structure reused
    >>> t2.nnz == A.nnz
    True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Tuple

import numpy as np

from . import _native

#: Conversions kept, least recently used dropped first.
CAPACITY = 8

_lock = threading.Lock()
_kept: "OrderedDict[Tuple[Any, ...], _native.Tensor]" = OrderedDict()


def _key(fmt: str, shape: Tuple[int, ...], indptr: np.ndarray, indices: np.ndarray,
         values: np.ndarray) -> Tuple[Any, ...]:
    def where(a: np.ndarray) -> Tuple[int, int, str]:
        return (a.__array_interface__["data"][0], a.size, a.dtype.str)

    return (fmt, tuple(shape), where(indptr), where(indices), values.dtype.str, values.size)


def reuse_or_convert(fmt: str, shape: Tuple[int, ...], indptr: np.ndarray, indices: np.ndarray,
                     values: np.ndarray, convert: Callable[[], "_native.Tensor"],
                     keep: bool = True) -> "_native.Tensor":
    """The kept tensor of these arrays with a copy of ``values`` when its structure equals
    ``indptr`` and ``indices``; otherwise ``convert()``, kept for the next call when
    ``keep``."""
    key = _key(fmt, shape, indptr, indices, values)
    with _lock:
        kept = _kept.get(key)
        if kept is not None:
            _kept.move_to_end(key)
    if kept is not None and kept.same_pattern(indptr, indices):
        return kept.with_values(values)
    fresh = convert()
    if keep and fresh.same_pattern(indptr, indices):
        with _lock:
            _kept[key] = fresh
            _kept.move_to_end(key)
            while len(_kept) > CAPACITY:
                _kept.popitem(last=False)
    return fresh


def forget() -> int:
    """Drops every kept conversion; returns how many there were."""
    with _lock:
        n = len(_kept)
        _kept.clear()
    return n
