"""The compiler from Python: ``compile(program, formats=..., schedule=...)``, kernels
called with keyword tensors, and schedules whose traces save and load as JSON.

A :class:`Kernel` compiles lazily for the index types (int32 / int64) of the sparse
tensors it is called with, and keeps one native kernel per combination. Compiling and
running release the GIL.

Example::

    >>> import numpy as np, sparsile
    >>> k = sparsile.compile("tensor A: f32[m, n] csr\\ntensor x: f32[n]\\ntensor y: f32[m]\\n"
    ...                      "y[i] = A[i,j] * x[j]\\n")
    >>> sch = k.schedule()
    >>> outer, inner = sch.split("y/i_2", 4)
    >>> fast = sparsile.compile(k.program, schedule=sch)
"""

from __future__ import annotations

import functools
import json
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _cuda, _log, _native
import numpy as np

from ._dense import SPARSILE_DTYPE, as_array, device_of, is_torch_tensor, wrap_output
from ._ops import TARGETS
from ._tensor import Tensor, as_tensor
from ._threads import call_threads

LoopLike = Union[str, Tuple[str, str]]


def _loop_dict(loop: LoopLike) -> Dict[str, str]:
    if isinstance(loop, str):
        block, sep, var = loop.partition("/")
        if not sep or not block or not var:
            raise ValueError(f"a loop is written BLOCK/VAR (e.g. C/i_2), got {loop!r}")
        return {"block": block, "var": var}
    if isinstance(loop, (tuple, list)) and len(loop) == 2:
        return {"block": str(loop[0]), "var": str(loop[1])}
    raise TypeError(f"a loop is a 'BLOCK/VAR' string or a (block, var) pair, got {loop!r}")


def _loop_str(pair: Tuple[str, str]) -> str:
    return f"{pair[0]}/{pair[1]}"


_LOOP_KEYS = ("target", "outer", "inner")


class Schedule:
    """A program being scheduled; every primitive call is recorded in its trace.

    Loops are named ``"BLOCK/VAR"`` (``kernel.ir("stage2")`` shows them). Every schedule
    primitive of Sparsile is available: the typed methods below, and any other one as
    ``sch.NAME(**arguments)`` (the arguments of its trace step).
    """

    def __init__(self, program: str, formats: Optional[Mapping[str, str]] = None) -> None:
        self.program = program
        self.formats = dict(formats or {})
        self._native = _native.Schedule(program, self.formats)

    def apply(self, step: Mapping[str, Any]) -> None:
        """Applies one trace step, e.g. ``{"step": "parallel", "target": "C/i_2"}``."""
        step = dict(step)
        for key in _LOOP_KEYS:
            if key in step and not isinstance(step[key], dict):
                step[key] = _loop_dict(step[key])
        if "loops" in step:
            step["loops"] = [l if isinstance(l, dict) else _loop_dict(l) for l in step["loops"]]
        self._native.apply(json.dumps(step))

    def split(self, loop: LoopLike, factor: int, tail: str = "inner_fixed") -> Tuple[str, str]:
        """Splits ``loop`` by ``factor`` (``tail``: ``inner_fixed`` or ``outer_fixed``);
        returns the outer and inner loops."""
        l = _loop_dict(loop)
        outer, inner = self._native.split(l["block"], l["var"], int(factor), tail)
        return _loop_str(outer), _loop_str(inner)

    def fuse(self, outer: LoopLike, inner: LoopLike) -> str:
        """Fuses ``outer`` with ``inner`` (directly inside it); returns the fused loop."""
        o, i = _loop_dict(outer), _loop_dict(inner)
        if o["block"] != i["block"]:
            raise ValueError(f"fuse: loops of different blocks ({o['block']} and {i['block']})")
        return _loop_str(self._native.fuse(o["block"], o["var"], i["var"]))

    def reorder(self, loops: List[LoopLike]) -> None:
        """Reorders perfectly nested loops into the given order."""
        self.apply({"step": "reorder", "loops": list(loops)})

    def parallel(self, loop: LoopLike) -> None:
        """Runs ``loop``'s iterations in parallel."""
        self.apply({"step": "parallel", "target": loop})

    def vectorize(self, loop: LoopLike) -> None:
        """Vectorizes ``loop``."""
        self.apply({"step": "vectorize", "target": loop})

    def unroll(self, loop: LoopLike) -> None:
        """Unrolls ``loop``."""
        self.apply({"step": "unroll", "target": loop})

    def bound(self, loop: LoopLike, extent: int) -> None:
        """Declares ``loop``'s constant extent."""
        self.apply({"step": "bound", "target": loop, "extent": int(extent)})

    def sparse_reorder(self, iteration: str, order: List[str]) -> None:
        """Stage I: visits the axes of ``iteration`` in ``order`` (axis names)."""
        self.apply({"step": "sparse_reorder", "iteration": iteration, "order": list(order)})

    def sparse_fuse(self, iteration: str, axes: List[str]) -> None:
        """Stage I: iterates the nonzeros of the group ``axes`` of ``iteration`` directly."""
        self.apply({"step": "sparse_fuse", "iteration": iteration, "axes": list(axes)})

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)

        def primitive(**arguments: Any) -> None:
            self.apply({"step": name, **arguments})

        primitive.__name__ = name
        primitive.__doc__ = f"Applies the schedule primitive `{name}` (trace step arguments)."
        return primitive

    def trace(self) -> str:
        """The trace so far, as JSON."""
        return self._native.trace()

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the trace as JSON to ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.trace())

    @classmethod
    def load(cls, path: Union[str, os.PathLike], program: str,
             formats: Optional[Mapping[str, str]] = None) -> "Schedule":
        """Replays the trace saved at ``path`` on ``program``."""
        with open(path, encoding="utf-8") as f:
            return cls.replay(f.read(), program, formats)

    @classmethod
    def replay(cls, trace: str, program: str,
               formats: Optional[Mapping[str, str]] = None) -> "Schedule":
        """Replays a JSON trace on ``program``."""
        sch = cls.__new__(cls)
        sch.program = program
        sch.formats = dict(formats or {})
        sch._native = _native.Schedule.replay(program, trace, sch.formats)
        return sch

    def ir(self) -> str:
        """The current IR: stage I before the first loop-level step, stage II after."""
        return self._native.ir()

    def compile(self) -> "Kernel":
        """Compiles the program with this schedule."""
        return Kernel(self.program, self.formats, self.trace())


def _trace_text(schedule: Any) -> Optional[str]:
    if schedule is None:
        return None
    if isinstance(schedule, Schedule):
        return schedule.trace()
    if isinstance(schedule, os.PathLike):
        with open(schedule, encoding="utf-8") as f:
            return f.read()
    if isinstance(schedule, str):
        if schedule.lstrip().startswith("{"):
            return schedule
        with open(schedule, encoding="utf-8") as f:
            return f.read()
    if isinstance(schedule, (list, dict)):
        return json.dumps(schedule if isinstance(schedule, dict) else {"steps": schedule})
    raise TypeError(f"schedule must be a Schedule, a JSON trace or a path, got {type(schedule).__name__}")


def _is_lone_statement(program: str) -> bool:
    """Whether ``program`` is one statement without ``tensor`` declarations."""
    lines = [l.split("#", 1)[0].strip() for l in program.splitlines()]
    lines = [l for l in lines if l]
    return len(lines) == 1 and not lines[0].startswith("tensor ")


@functools.lru_cache(maxsize=256)
def _infer_cached(expr: str, formats: Tuple[Tuple[str, str], ...], dtype: str) -> str:
    try:
        return _native.infer_program(expr, [n for n, f in formats if f != "dense"], dict(formats), dtype)
    except ValueError as e:
        raise ValueError(f"{e}\n  in: {expr}") from None


def _infer(expr: str, formats: Mapping[str, str], dtype: str) -> str:
    """The program of the lone statement ``expr`` with inferred declarations: tensors
    named in ``formats`` with a sparse format are sparse, the others dense. ``expr`` is
    the program's last line verbatim (see :func:`_point_into`)."""
    return _infer_cached(expr.strip(), tuple(sorted(formats.items())), dtype)


def _point_into(message: str, expr: str, program: Optional[str]) -> str:
    """``line L, column C: ...`` of the inferred ``program`` as a column of ``expr``."""
    import re

    m = re.match(r"line (\d+), column (\d+): (.*)", message, re.S)
    if program is None or m is None:
        return f"{message}\n  in: {expr}"
    line, col, rest = int(m.group(1)), int(m.group(2)), m.group(3)
    if line != len(program.splitlines()):
        return f"{rest}\n  in the declarations inferred for {expr!r}:\n{program}"
    return f"column {col}: {rest}\n  {expr}\n  {' ' * (col - 1)}^"


class Kernel:
    """A compiled index-notation program. Call it with tensors by name:
    ``kernel(A=A, X=X)`` returns the outputs by name (dense ones as NumPy arrays, or torch
    tensors when a dense input was one; sparse ones as :class:`Tensor`).

    A program that is one statement without declarations (``"Y[i,k] = A[i,j] * X[j,k]"``)
    has them inferred per call: the tensors passed sparse are sparse in their own format
    (unless ``formats`` names another), the others dense, the element type that of the
    operands (as the CLI's ``--expr`` does)."""

    def __init__(self, program: str, formats: Optional[Mapping[str, str]] = None,
                 trace: Optional[str] = None, target: str = "cpu", dtype: str = "f32") -> None:
        if not isinstance(program, str):
            raise TypeError(f"program must be index notation text, got {type(program).__name__}")
        if target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
        self.formats = dict(formats or {})
        self._expr = program.strip() if _is_lone_statement(program) else None
        self._dtype = dtype
        self.program = _infer(self._expr, self.formats, dtype) if self._expr else program
        self.trace = trace
        self.target = target
        self._compiled: Dict[Tuple, _native.Kernel] = {}
        self._last: Optional[_native.Kernel] = None
        self._lock = threading.Lock()

    def _program_for(self, sparse: Dict[str, Tensor], dtype: Optional[str]) -> Tuple[str, Tuple]:
        """The program for these operands, and what it depends on (inferred programs only)."""
        if self._expr is None:
            return self.program, ()
        formats = {n: t.format for n, t in sparse.items()}
        formats.update(self.formats)
        dtype = dtype or self._dtype
        key = (tuple(sorted(formats.items())), dtype)
        return _infer(self._expr, formats, dtype), key

    def _native_for(self, sparse: Dict[str, Tensor], dtype: Optional[str] = None) -> "_native.Kernel":
        program, inferred = self._program_for(sparse, dtype)
        key = tuple(sorted((n, t._native.index_type) for n, t in sparse.items())) + inferred
        with self._lock:
            k = self._compiled.get(key)
            if k is None:
                formats = {} if self._expr is not None else self.formats
                try:
                    k = _native.Kernel(program, formats, self.trace,
                                       {n: t._native for n, t in sparse.items()}, self.target)
                except ValueError as e:
                    if self._expr is None:
                        raise
                    raise ValueError(_point_into(str(e), self._expr, program)) from None
                self._compiled[key] = k
                _log.compiled(program, self.target, k.compile_info() if self.target == "cpu" else None)
            self._last = k
            return k

    def _default(self) -> "_native.Kernel":
        return self._last if self._last is not None else self._native_for({})

    def __call__(self, threads: Optional[int] = None, **tensors: Any) -> Dict[str, Any]:
        return self.run(tensors, threads)

    def run(self, tensors: Mapping[str, Any], threads: Optional[int] = None,
            to_torch: bool = False) -> Dict[str, Any]:
        """Like calling the kernel, with the tensors in a mapping. Dense outputs are torch
        tensors when ``to_torch`` or when a dense input was a torch tensor. With CUDA
        arrays (torch CUDA tensors, CuPy arrays) a kernel of the ``cuda`` target reads
        them in place and returns outputs on their device (see :mod:`sparsile._cuda`)."""
        args: Dict[str, Any] = {}
        sparse: Dict[str, Tensor] = {}
        on_gpu = [n for n, v in tensors.items()
                  if device_of(v[1] if isinstance(v, tuple) and len(v) == 2 else v) == "cuda"]
        if on_gpu:
            return self._run_cuda(tensors, on_gpu[0])
        for name, value in tensors.items():
            if isinstance(value, tuple) and len(value) == 2:
                t = as_tensor(value[0], name)
                vals, tt = as_array(value[1], f"values of {name}")
                sparse[name] = t
                args[name] = (t._native, vals)
                to_torch |= tt
            elif isinstance(value, Tensor) or _is_sparse(value):
                t = as_tensor(value, name)
                sparse[name] = t
                args[name] = t._native
            else:
                array, tt = as_array(value, name)
                args[name] = array
                to_torch |= tt
        dtype = next((t._native.dtype for t in sparse.values()), None) or next(
            (SPARSILE_DTYPE.get(a.dtype) for a in args.values() if isinstance(a, np.ndarray)), None)
        outputs = self._native_for(sparse, dtype).run(args, call_threads(threads))
        return {
            n: (Tensor(v) if isinstance(v, _native.Tensor) else wrap_output(v, to_torch))
            for n, v in outputs.items()
        }

    def _run_cuda(self, tensors: Mapping[str, Any], first: str) -> Dict[str, Any]:
        if self.target != "cuda":
            raise ValueError(
                f"{first} is a CUDA array: run it with a kernel of target 'cuda' "
                f"(sparsile.compile(..., target='cuda')), not {self.target!r}"
            )
        sparse: Dict[str, Tensor] = {}
        dense: Dict[str, Any] = {}
        values: Dict[str, Any] = {}
        for name, value in tensors.items():
            if isinstance(value, tuple) and len(value) == 2:
                sparse[name] = as_tensor(value[0], name)
                values[name] = value[1]
            elif isinstance(value, Tensor) or _is_sparse(value):
                sparse[name] = as_tensor(value, name)
            else:
                dense[name] = value
        outputs, structures = _cuda.run(self._native_for(sparse), sparse, dense, values, structures=True)
        result: Dict[str, Any] = {}
        for name, out in outputs.items():
            if name in structures:
                host = out.cpu().numpy() if is_torch_tensor(out) else out.get()
                result[name] = Tensor(structures[name].with_values(host))
            else:
                result[name] = out
        return result

    def ir(self, stage: str) -> str:
        """The IR of ``stage1``, ``stage2``, ``stage3``, or the generated source (``c``
        for the CPU target, ``cuda`` for the GPU targets)."""
        return self._default().ir(stage)

    def source(self, language: Optional[str] = None) -> str:
        """The generated source: C for the ``cpu`` target, CUDA C++ for ``cuda`` and
        ``cuda-sim`` (``language``, when given, must say which)."""
        has = "c" if self.target == "cpu" else "cuda"
        if language not in (None, "c", "cuda"):
            raise ValueError(f"unknown source language {language!r} (c or cuda)")
        if language is not None and language != has:
            raise ValueError(
                f"this kernel's target is {self.target}, whose source is {has}, not {language!r}"
                + (" (compile with target='cuda' for CUDA)" if language == "cuda" else "")
            )
        return self._default().ir(has)

    def compile_info(self) -> Tuple[str, float]:
        """``(outcome, seconds)`` of the last native build: ``hit`` (kernel cache) or ``miss``."""
        return self._default().compile_info()

    def schedule(self) -> Schedule:
        """A fresh schedule of this kernel's program (and formats)."""
        return Schedule(self.program, self.formats)


def _is_sparse(value: Any) -> bool:
    if type(value).__module__.startswith("scipy.sparse"):
        return True
    layout = getattr(value, "layout", None)
    return layout is not None and "sparse" in str(layout)


def compile(program: str, formats: Optional[Mapping[str, str]] = None,
            schedule: Any = None, target: str = "cpu", dtype: str = "f32") -> Kernel:
    """Compiles ``program`` (index notation). ``formats`` replaces declared formats by
    tensor name; ``schedule`` (a :class:`Schedule`, a JSON trace, or the path of one)
    replaces the default schedule. ``target``: ``"cpu"``, or ``"cuda"`` / ``"cuda-sim"``
    for a schedule from a GPU recipe (``sparsile.recipes()``: ``gpu`` true). Errors in the
    program raise ``ValueError`` at once.

    ``program`` may be a lone statement without declarations, as the CLI's ``--expr``
    takes: ``compile("Y[i,k] = A[i,j] * X[j,k]")`` infers them per call from the operands
    (sparse ones in their format, dense ones dense; ``dtype`` is the element type assumed
    before a call, ``"f32"`` or ``"f64"``), and an error points at the column of what was
    written.

    Example::

        >>> import numpy as np, sparsile
        >>> A = sparsile.from_coo([0, 1], [1, 0], np.array([2.0, 3.0], dtype=np.float32), shape=(2, 2))
        >>> k = sparsile.compile("y[i] = A[i,j] * x[j]")
        >>> k(A=A, x=np.ones(2, dtype=np.float32))["y"].tolist()
        [2.0, 3.0]
    """
    k = Kernel(program, formats, _trace_text(schedule), target, dtype)
    k._default()
    return k


_CACHE: Dict[Tuple, Kernel] = {}
_CACHE_LOCK = threading.Lock()


def cached_kernel(program: str) -> Kernel:
    """The kernel of ``program``, compiled once per process (per index types)."""
    with _CACHE_LOCK:
        k = _CACHE.get((program,))
        if k is None:
            k = Kernel(program)
            _CACHE[(program,)] = k
        return k
