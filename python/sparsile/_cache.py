"""The on-disk kernel cache: what it holds, and clearing it.

Sparsile compiles each kernel once into a private cache folder (``SPARSILE_CACHE_DIR``,
else ``$XDG_CACHE_HOME/sparsile`` or ``~/.cache/sparsile``) and loads it from there in
later processes. :func:`cache_info` describes the folder; :func:`clear_cache` removes the
compiled kernels (CPU and CUDA objects with their sources, integrity records and logs),
only files the cache itself writes, never following a symbolic link. The tuning
database and anything else in the folder stay. The folder is read from the environment
at each call. Kernels already loaded in a process keep working after a clear; new
processes recompile them.

Example::

    >>> import sparsile
    >>> info = sparsile.cache_info()
    >>> info["dir"], info["kernels"], info["bytes"]            # doctest: +SKIP
    ('/home/me/.cache/sparsile', 12, 301544)
    >>> sparsile.clear_cache()["kernels_removed"]             # doctest: +SKIP
    12
"""

from __future__ import annotations

from typing import Any, Dict

from . import _native


def cache_info() -> Dict[str, Any]:
    """What the kernel cache folder holds, read without creating or changing it.

    Keys: ``dir`` (the folder), ``exists``, ``checks_pass`` (whether the folder passes
    the cache's ownership and permission checks: a folder only you can write),
    ``problem`` (why it fails them, or ``None``), ``kernels``, ``cpu_kernels``,
    ``cuda_kernels``, ``files`` (objects, sources, records, logs), ``bytes``,
    ``oldest`` and ``newest`` (modification times of the kernel objects in seconds
    since the epoch, or ``None``) and ``skipped`` (entries named like cache files that
    are links or not your regular files; never counted or removed).
    """
    return _native.cache_info()


def clear_cache() -> Dict[str, Any]:
    """Removes the compiled kernels from the kernel cache.

    Returns ``dir``, ``kernels_removed``, ``files_removed``, ``bytes_removed`` and
    ``skipped``. Raises ``ValueError`` naming the problem when the folder fails the
    cache's checks (it is then left untouched) or a file cannot be removed.
    """
    return _native.clear_cache()
