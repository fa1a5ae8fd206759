"""What runs when an operator is called with ``recipe="auto"``, and the recipes there are.

Example::

    >>> import numpy as np, scipy.sparse as sp, sparsile
    >>> A = sparsile.from_scipy(sp.random(50, 40, density=0.1, format="csr", dtype=np.float32))
    >>> info = sparsile.explain(A, op="spmm", k=32)
    >>> sorted(info) == ['features', 'format', 'note', 'op', 'recipe', 'source', 'trial', 'width']
    True
    >>> any(r["name"] == "rowwise" for r in sparsile.recipes())
    True
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import numpy as np

from . import _native
from ._dense import BFLOAT16, Bf16Bits
from ._ops import SDDMM, SPMM, SPMV, _args, auto_kernel
from ._tensor import as_tensor
from ._threads import call_threads

_TEMPLATES = {"spmm": SPMM, "spmv": SPMV, "sddmm": SDDMM}


def recipes() -> List[Dict[str, Any]]:
    """Every named recipe: ``name``, ``summary``, ``ops`` and ``formats`` (of the sparse
    operand: ``any``, or a family such as ``bsr``) it applies to, ``params`` (each
    ``name``, ``default``, ``doc``), ``source`` and ``gpu`` (whether it makes a GPU
    function, for the ``cuda`` and ``cuda-sim`` targets)."""
    return json.loads(_native.recipes())


def explain(A: Any, op: str = "spmm", k: int = 32, threads: Optional[int] = None) -> Dict[str, Any]:
    """What ``recipe="auto"`` runs for ``op`` (``spmm``, ``spmv`` or ``sddmm``) on ``A``
    with dense width ``k``: ``op``, ``format``, ``recipe``, ``source`` (``tuning
    database``, ``selector`` or ``rule``), ``note`` (why a better source was not used,
    or what a first call's trial timed), ``width``, ``trial`` (the candidates a first call
    on this structure times before settling on the fastest, the selector's pick first;
    empty once a call has settled, or when the selector predicts nothing close to its
    pick) and the input's ``features``. Nothing is compiled or run."""
    if op not in _TEMPLATES:
        raise ValueError(f"op must be one of {', '.join(_TEMPLATES)}, got {op!r}")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    A = as_tensor(A)
    if A.ndim != 2:
        raise ValueError(f"explain: the sparse operand must have 2 dimensions, got shape {A.shape}")
    m, n = A.shape
    if A.dtype == BFLOAT16:  # NumPy has no bfloat16: the operands' bits
        z = lambda *shape: Bf16Bits(np.zeros(shape, dtype=np.uint16))  # noqa: E731
    else:
        z = lambda *shape: np.zeros(shape, dtype=A.dtype)  # noqa: E731
    dense = {"spmm": {"X": z(n, k)}, "spmv": {"x": z(n)}, "sddmm": {"X": z(m, k), "Y": z(n, k)}}[op]
    program, args, _ = _args(_TEMPLATES[op], {"A": A}, dense, None)
    return json.loads(auto_kernel(program).explain(args, call_threads(threads)))


def tune(
    A: Any,
    op: str = "spmm",
    k: int = 32,
    strategy: str = "pruned",
    threads: Optional[int] = None,
    budget: Optional[float] = None,
    record: bool = True,
) -> Dict[str, Any]:
    """Measures the candidates of ``op`` (``spmm``, ``spmv`` or ``sddmm``) with dense
    width ``k`` on ``A`` in its own format and records the best in the tuning database:
    later ``recipe="auto"`` calls on a tensor of the same structure, width and thread
    count run it (``sparsile.explain`` then says ``source: "tuning database"``).

    ``strategy``: ``"pruned"`` (the candidates the selector predicts within 1.2 times
    its best prediction, at most a fifth of them; the default), ``"exhaustive"`` (every
    candidate), ``"select"`` (measures nothing and records nothing: the report shows
    the ranking alone) or ``"stile"`` (``spmm``: the pruned choice plus
    the decompositions of ``A`` into dense square tiles at nested levels and scattered
    non-zeros that a tile-cost model calibrated on this machine keeps, listed under
    ``"tiles"``; the fastest candidate wins, so a matrix without dense blocks keeps
    its single format); ``budget`` bounds the measuring in seconds. Returns the report: every candidate's
    estimate, prediction, median time or failure, the ``best``, and the time split."""
    if op not in _TEMPLATES:
        raise ValueError(f"op must be one of {', '.join(_TEMPLATES)}, got {op!r}")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    A = as_tensor(A)
    if A.ndim != 2:
        raise ValueError(f"tune: the sparse operand must have 2 dimensions, got shape {A.shape}")
    report = _native.tune(
        A._native, op, k, call_threads(threads), strategy_name=strategy, budget_s=budget, record=record
    )
    return json.loads(report)
