"""Dense operands placed as Sparsile places its own buffers: :func:`aligned`.

A kernel that gathers rows of a dense operand (SpMM's ``X``, SDDMM's ``Y``) reads whole
cache lines. NumPy places a large array 16 bytes past a page, so a row of 32 float32
values spans three lines instead of two and each vector load of it is split: Flickr SpMM
at K = 32 ran 1.4x slower on two threads with X placed that way. Arrays Sparsile returns,
and torch's CPU tensors, already start on a 64-byte line. ``aligned`` copies an array
once into memory starting on a line, and, from 8 MiB on (Linux), into a mapping of its own
on a 2 MiB boundary marked for transparent huge pages, as Sparsile's allocator does.

Example::

    >>> import numpy as np
    >>> x = aligned(np.ones((1000, 32), dtype=np.float32))
    >>> x.ctypes.data % 64
    0
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

#: The alignment of every array :func:`aligned` returns: one cache line.
LINE = 64
#: Arrays of at least this many bytes get a mapping of their own, on huge pages.
HUGE = 8 << 20
_HUGE_PAGE = 2 << 20


def _empty(nbytes: int) -> np.ndarray:
    """``nbytes`` uninitialised bytes placed as the module docs say."""
    if nbytes >= HUGE and hasattr(mmap, "MADV_HUGEPAGE") and hasattr(mmap, "MAP_PRIVATE"):
        region = mmap.mmap(-1, nbytes + _HUGE_PAGE,
                           flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        raw = np.frombuffer(region, dtype=np.uint8)
        start = (-raw.ctypes.data) % _HUGE_PAGE
        length = min((nbytes + _HUGE_PAGE - 1) // _HUGE_PAGE * _HUGE_PAGE, len(region) - start)
        region.madvise(mmap.MADV_HUGEPAGE, start, length)
    else:
        raw = np.empty(nbytes + LINE, dtype=np.uint8)
        start = (-raw.ctypes.data) % LINE
    return raw[start:start + nbytes]


def aligned(array: Any) -> np.ndarray:
    """A C-contiguous copy of ``array`` (anything ``numpy.asarray`` takes) whose data
    starts on a 64-byte cache line (see the module docs); same dtype, shape and values.
    Make it once for an operand used in many calls."""
    a = np.asarray(array)
    out = _empty(a.nbytes).view(a.dtype).reshape(a.shape)
    out[...] = a
    return out
