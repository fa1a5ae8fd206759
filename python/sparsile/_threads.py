"""How many threads a kernel call uses.

A call's ``threads=`` argument wins; else the count set with :func:`set_num_threads`;
else, when PyTorch is already imported, ``torch.get_num_threads()`` (so Sparsile and
PyTorch in one training loop use the same cores, and ``torch.set_num_threads`` governs
both); else ``SPARSILE_NUM_THREADS``, else every core.

Example::

    >>> import sparsile
    >>> sparsile.set_num_threads(1)
    >>> sparsile.get_num_threads()
    1
    >>> sparsile.set_num_threads(None)   # back to the default
"""

from __future__ import annotations

import sys
from typing import Optional

from . import _native


def set_num_threads(threads: Optional[int]) -> None:
    """Sets the thread count of every later kernel call that does not pass ``threads=``;
    ``None`` returns to the default. Raises ``ValueError`` below 1 or above 1024."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
        raise TypeError(f"threads must be an int or None, got {type(threads).__name__}")
    _native.set_num_threads(threads)


def get_num_threads() -> int:
    """The thread count a kernel call uses when it does not pass ``threads=``."""
    return call_threads(None)


def call_threads(threads: Optional[int]) -> int:
    """The thread count of a call that passed ``threads`` (maybe ``None``)."""
    if threads is not None:
        return threads
    chosen = _native.num_threads_set()
    if chosen is not None:
        return chosen
    torch = sys.modules.get("torch")
    get = getattr(torch, "get_num_threads", None) if torch is not None else None
    if get is not None:
        try:
            n = int(get())
        except Exception:  # a half-imported or mocked torch: ignore it
            n = 0
        if n >= 1:
            return n
    return _native.default_num_threads()
