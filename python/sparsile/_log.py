"""Logging of compilation and of the automatic choice, through Python's ``logging``.

The package logs to the ``"sparsile"`` logger, which has no handler of its own (a
library's convention): nothing is printed unless the application configures logging.

- ``INFO``: a kernel compiled (program, target, kernel-cache hit or miss, seconds), and
  the first time each choice of format and recipe is made for an operator (with where it
  came from: the tuning database, the learned selector, the static rule, or a name).
- ``DEBUG``: the choice of every call.

Example::

    >>> import logging
    >>> logging.basicConfig()
    >>> logging.getLogger("sparsile").setLevel(logging.INFO)
    >>> # sparsile.spmm(A, X) now logs e.g.
    >>> # INFO:sparsile:spmm: csr + rowwise:partition=static (selector) for a 2708 x 2708 operand
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Optional, Set, Tuple

log = logging.getLogger("sparsile")

_SEEN: Set[Tuple[str, str, str, str]] = set()
_SEEN_LOCK = threading.Lock()


def _summary(program: str) -> str:
    """The statement of an index-notation program (its last non-empty line)."""
    lines = [l.strip() for l in program.strip().splitlines() if l.strip()]
    return lines[-1] if lines else program


def compiled(program: str, target: str, info: Optional[Tuple[str, float]]) -> None:
    """Logs that the kernel of ``program`` was built (``info``: ``(hit|miss, seconds)``)."""
    if not log.isEnabledFor(logging.INFO):
        return
    outcome, seconds = info if info is not None else ("?", 0.0)
    how = "from the kernel cache" if outcome == "hit" else "compiled"
    log.info("kernel %s for %s: %s in %.3f s", how, target, _summary(program), seconds)


def chose(op: str, kernel: Any, shape: Tuple[int, ...]) -> None:
    """Logs the choice ``kernel`` (a native AutoKernel) made on its last call: at INFO the
    first time this choice is made for this operator, at DEBUG every time."""
    if not log.isEnabledFor(logging.INFO):
        return
    last = kernel.last()
    if last is None:
        return
    choice = json.loads(last)
    fmt, recipe, source = choice.get("format", "?"), choice.get("recipe", "?"), choice.get("source", "?")
    dims = " x ".join(str(d) for d in shape)
    key = (op, fmt, recipe, source)
    with _SEEN_LOCK:
        first = key not in _SEEN
        _SEEN.add(key)
    level = logging.INFO if first else logging.DEBUG
    if log.isEnabledFor(level):
        log.log(level, "%s: %s + %s (%s) for a %s operand", op, fmt, recipe, source, dims)
