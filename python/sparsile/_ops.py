"""Ready operators, each an index-notation program compiled once per (format, dtype,
index type) and cached for the process.

=================  ===============================================  =========================
operator           computes                                         shapes
=================  ===============================================  =========================
``spmm(A, X)``     ``Y[i,k] = A[i,j] * X[j,k]``                     (m,n) x (n,k) -> (m,k)
``spmv(A, x)``     ``y[i] = A[i,j] * x[j]``                         (m,n) x (n,) -> (m,)
``sddmm(A,X,Y)``   ``C[i,j] = A[i,j] * X[i,k] * Y[j,k]``            (m,k), (n,k): A's pattern
``spmm_batched``   ``Y[b,i,k] = A[i,j] * X[b,j,k]``                 (m,n) x (b,n,k) -> (b,m,k)
``spmv_batched``   ``Y[b,i] = A[i,j] * X[b,j]``                     (m,n) x (b,n) -> (b,m)
``mttkrp(B,C,D)``  ``A[i,r] = B[i,k,l] * C[k,r] * D[l,r]``          3-D sparse B
``rgms(A,X,W)``    ``Y[i,l] = A[r,i,j] * X[j,k] * W[r,k,l]``        relations r, 3-D sparse A
=================  ===============================================  =========================

With a torch input that requires a gradient (and grad mode on), ``spmm``, ``spmv``,
``spmm_batched``, ``spmv_batched`` and ``A @ X`` run as autograd functions
(:mod:`sparsile.torch`; the sparse operand as CSR) and return a tensor with a
``grad_fn``; ``sddmm``, whose result is a :class:`~sparsile.Tensor`, ``mttkrp`` and
``rgms`` refuse such inputs rather than drop the gradient (use
:func:`sparsile.torch.sddmm`, or detach the inputs).

Every operator takes ``recipe=``: ``"auto"`` (the default) runs what the tuning
database, the learned selector or the static rule chooses for the input (see
:func:`sparsile.explain`); a recipe spec such as ``"rowwise"`` or
``"daspmm:balance=nnz"`` runs that one (:func:`sparsile.recipes` lists them).

Every operator takes ``target=``: ``"cpu"``, ``"cuda"`` (an NVIDIA GPU) or
``"cuda-sim"`` (the GPU kernel run by the SIMT interpreter on the CPU, which checks it
for races: slow, for testing). By default a dense operand in CUDA memory (a torch CUDA
tensor, a CuPy array) selects ``"cuda"``, anything else ``"cpu"``. GPU targets run GPU
recipes (the GPU rule's by default). CUDA operands are used without copies: the kernel
reads them in place and writes a result allocated by the same library on the same
device, on its current stream (see :mod:`sparsile._cuda`); host operands with
``target="cuda"`` are copied to the GPU and back around the call. Gradients (see
:mod:`sparsile.torch`) run where the tensors are: on the GPU for CUDA tensors.

Sparse operands are :class:`~sparsile.Tensor` (or SciPy / torch sparse, converted);
dense ones NumPy arrays or torch CPU tensors of the sparse operand's dtype, used without
copies when contiguous. Results are NumPy arrays (torch tensors when a dense input was a
torch tensor) or :class:`~sparsile.Tensor` for SDDMM.

Example::

    >>> import numpy as np, sparsile
    >>> A = sparsile.from_coo([0, 1], [1, 0], np.array([2.0, 3.0], dtype=np.float32), shape=(2, 2))
    >>> sparsile.spmv(A, np.ones(2, dtype=np.float32)).tolist()
    [2.0, 3.0]
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Tuple

from . import _cuda, _native
from ._dense import SPARSILE_DTYPE, as_array, device_of, is_torch_tensor, value_dtype, wrap_output
from ._tensor import Tensor, as_tensor
from ._threads import call_threads

_KERNELS: Dict[Tuple[str, str, str], "_native.AutoKernel"] = {}
TARGETS = ("cpu", "cuda", "cuda-sim")
_KERNELS_LOCK = threading.Lock()


def _program(template: str, A: Tensor) -> str:
    return template.format(d=SPARSILE_DTYPE[A.dtype], f=A.format)


def auto_kernel(program: str, recipe: str = "auto", target: str = "cpu") -> "_native.AutoKernel":
    """The kernel of ``program`` with ``recipe`` (``"auto"``: chosen per input) for
    ``target``, made once per process."""
    if not isinstance(recipe, str):
        raise TypeError(f"recipe must be a recipe spec string such as 'rowwise' or 'auto', got {type(recipe).__name__}")
    with _KERNELS_LOCK:
        k = _KERNELS.get((program, recipe, target))
        if k is None:
            k = _native.AutoKernel(program, recipe, target)
            _KERNELS[(program, recipe, target)] = k
        return k


def _target(target: Optional[str], *xs: Any) -> Tuple[str, str]:
    """The target to run on and where the operands are: ``target`` when given (one of
    :data:`TARGETS`), else ``"cuda"`` when an operand is in CUDA memory (a torch CUDA
    tensor, a CuPy array), else ``"cpu"``."""
    devices = {device_of(x) for x in xs if x is not None} - {"cpu"}
    if len(devices) > 1 or devices - {"cuda"}:
        raise ValueError(f"operands on devices {sorted(devices)}: Sparsile runs CPU and CUDA tensors")
    device = "cuda" if devices else "cpu"
    if target is None:
        return device, device
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    if device == "cuda" and target != "cuda":
        raise ValueError(f"an operand is a CUDA tensor: run it with target='cuda', not {target!r}")
    return target, device


def _args(template: str, sparse: Dict[str, Tensor], dense: Dict[str, Any],
          values: Optional[Any]) -> Tuple[str, Dict[str, Any], bool]:
    key = next(iter(sparse))
    A = sparse[key]
    args: Dict[str, Any] = {}
    to_torch = False
    for name, value in dense.items():
        array, tt = as_array(value, name)
        if value_dtype(array) != A.dtype:
            raise TypeError(f"{name} is {value_dtype(array)} but {key} is {A.dtype}; pass {name} as {A.dtype}")
        args[name] = array
        to_torch |= tt
    for name, t in sparse.items():
        if values is not None and name == key:
            vals, tt = as_array(values, "values")
            if value_dtype(vals) != A.dtype:
                raise TypeError(f"values are {value_dtype(vals)} but {key} is {A.dtype}")
            args[name] = (t._native, vals)
            to_torch |= tt
        else:
            args[name] = t._native
    return _program(template, A), args, to_torch


def _run(template: str, sparse: Dict[str, Tensor], dense: Dict[str, Any], output: str,
         threads: Optional[int], values: Optional[Any] = None, recipe: str = "auto",
         target: Optional[str] = None, raw: bool = False):
    """Runs the operator; a sparse output is a :class:`Tensor`, or with ``raw`` its
    values only (a CUDA array on the GPU path, a NumPy array otherwise)."""
    target, device = _target(target, values, *dense.values())
    A = sparse[next(iter(sparse))]
    if device == "cuda":
        kernel = auto_kernel(_program(template, A), recipe, target)
        outputs, _ = _cuda.run(kernel, sparse, dense, None if values is None else {next(iter(sparse)): values})
        out = outputs[output]
        if raw or template != SDDMM:
            return out
        # A Tensor lives in host memory: its values come back from the device.
        host = out.cpu().numpy() if is_torch_tensor(out) else out.get()
        return Tensor(A._native.with_values(host))
    program, args, to_torch = _args(template, sparse, dense, values)
    out = auto_kernel(program, recipe, target).run(args, call_threads(threads))[output]
    if isinstance(out, _native.Tensor):
        return out.values() if raw else Tensor(out)
    return wrap_output(out, to_torch)


def _wants_grad(*xs: Any) -> bool:
    """Whether a torch tensor among ``xs`` requires a gradient with grad mode on."""
    if not any(is_torch_tensor(x) for x in xs):
        return False
    import torch

    return torch.is_grad_enabled() and any(is_torch_tensor(x) and x.requires_grad for x in xs)


def _autograd(op: str, A: Any, dense: Any, values: Any, threads: Optional[int], recipe: str,
              target: Optional[str]):
    """``op`` of :mod:`sparsile.torch`: the differentiable form of an operator."""
    from . import torch as _st

    return getattr(_st, op)(A, dense, values, threads=threads, recipe=recipe, target=target)


def sddmm_values(A: Tensor, X: Any, Y: Any, values: Any = None, threads: Optional[int] = None,
                 recipe: str = "auto", target: Optional[str] = None):
    """SDDMM's values only, in A's storage order: a CUDA array for CUDA operands (no copy
    to the host), else a NumPy array."""
    _check_order(A, 2, "sddmm")
    return _run(SDDMM, {"A": A}, {"X": X, "Y": Y}, "C", threads, values, recipe, target, raw=True)


def _refuse_grad(op: str, instead: str, *xs: Any) -> None:
    if _wants_grad(*xs):
        raise ValueError(
            f"{op}: an input requires a gradient, which {op} cannot carry; {instead}, "
            "or detach the inputs (or run under torch.no_grad())"
        )


def _check_order(A: Tensor, ndim: int, op: str) -> None:
    if A.ndim != ndim:
        raise ValueError(f"{op}: the sparse operand must have {ndim} dimensions, got shape {A.shape}")


SPMM = "tensor A: {d}[m, n] {f}\ntensor X: {d}[n, k]\ntensor Y: {d}[m, k]\nY[i,k] = A[i,j] * X[j,k]\n"
SPMV = "tensor A: {d}[m, n] {f}\ntensor x: {d}[n]\ntensor y: {d}[m]\ny[i] = A[i,j] * x[j]\n"
SDDMM = ("tensor A: {d}[m, n] {f}\ntensor X: {d}[m, k]\ntensor Y: {d}[n, k]\ntensor C: {d}[m, n] {f}\n"
         "C[i,j] = A[i,j] * X[i,k] * Y[j,k]\n")
SPMM_BATCHED = ("tensor A: {d}[m, n] {f}\ntensor X: {d}[b, n, k]\ntensor Y: {d}[b, m, k]\n"
                "Y[b,i,k] = A[i,j] * X[b,j,k]\n")
SPMV_BATCHED = "tensor A: {d}[m, n] {f}\ntensor X: {d}[b, n]\ntensor Y: {d}[b, m]\nY[b,i] = A[i,j] * X[b,j]\n"
MTTKRP = ("tensor B: {d}[m, p, q] {f}\ntensor C: {d}[p, r]\ntensor D: {d}[q, r]\ntensor A: {d}[m, r]\n"
          "A[i,s] = B[i,k,l] * C[k,s] * D[l,s]\n")
RGMS = ("tensor A: {d}[nr, m, n] {f}\ntensor X: {d}[n, p]\ntensor W: {d}[nr, p, q]\ntensor Y: {d}[m, q]\n"
        "Y[i,l] = A[r,i,j] * X[j,k] * W[r,k,l]\n")


def spmm(A: Any, X: Any, *, threads: Optional[int] = None, values: Any = None, recipe: str = "auto",
         target: Optional[str] = None):
    """``A @ X`` for a sparse matrix ``A`` and a dense matrix ``X``. ``values`` replaces
    A's stored values (same storage order) without copying them."""
    if _wants_grad(X, values):
        return _autograd("spmm", A, X, values, threads, recipe, target)
    A = as_tensor(A)
    _check_order(A, 2, "spmm")
    return _run(SPMM, {"A": A}, {"X": X}, "Y", threads, values, recipe, target)


def spmv(A: Any, x: Any, *, threads: Optional[int] = None, values: Any = None, recipe: str = "auto",
         target: Optional[str] = None):
    """``A @ x`` for a sparse matrix ``A`` and a dense vector ``x``."""
    if _wants_grad(x, values):
        return _autograd("spmv", A, x, values, threads, recipe, target)
    A = as_tensor(A)
    _check_order(A, 2, "spmv")
    return _run(SPMV, {"A": A}, {"x": x}, "y", threads, values, recipe, target)


def sddmm(A: Any, X: Any, Y: Any, *, threads: Optional[int] = None, values: Any = None,
          recipe: str = "auto", target: Optional[str] = None) -> Tensor:
    """``A * (X @ Y.T)`` at the stored positions of ``A`` (sampled dense-dense matmul, DGL's
    ``u_dot_v``): ``X`` is (m, k), ``Y`` is (n, k), one row per column of ``A``. Returns a
    :class:`Tensor` with A's pattern and format."""
    _refuse_grad("sddmm", "sparsile.torch.sddmm(A, X, Y) returns a differentiable tensor of the values", X, Y, values)
    A = as_tensor(A)
    _check_order(A, 2, "sddmm")
    return _run(SDDMM, {"A": A}, {"X": X, "Y": Y}, "C", threads, values, recipe, target)


def spmm_batched(A: Any, X: Any, *, threads: Optional[int] = None, values: Any = None,
                 recipe: str = "auto", target: Optional[str] = None):
    """``A @ X[b]`` for every ``b``: ``X`` has shape ``(batch, n, k)``."""
    if _wants_grad(X, values):
        return _autograd("spmm_batched", A, X, values, threads, recipe, target)
    A = as_tensor(A)
    _check_order(A, 2, "spmm_batched")
    return _run(SPMM_BATCHED, {"A": A}, {"X": X}, "Y", threads, values, recipe, target)


def spmv_batched(A: Any, X: Any, *, threads: Optional[int] = None, values: Any = None,
                 recipe: str = "auto", target: Optional[str] = None):
    """``A @ X[b]`` for every ``b``: ``X`` has shape ``(batch, n)``."""
    if _wants_grad(X, values):
        return _autograd("spmv_batched", A, X, values, threads, recipe, target)
    A = as_tensor(A)
    _check_order(A, 2, "spmv_batched")
    return _run(SPMV_BATCHED, {"A": A}, {"X": X}, "Y", threads, values, recipe, target)


def mttkrp(B: Any, C: Any, D: Any, *, threads: Optional[int] = None, recipe: str = "auto",
           target: Optional[str] = None):
    """Matricized tensor times Khatri-Rao product of a 3-D sparse ``B`` (e.g. ``csf``)
    with dense ``C`` (p, r) and ``D`` (q, r): ``A[i,s] = sum B[i,k,l] C[k,s] D[l,s]``."""
    _refuse_grad("mttkrp", "it has no autograd formula yet", C, D)
    B = as_tensor(B, "B")
    _check_order(B, 3, "mttkrp")
    return _run(MTTKRP, {"B": B}, {"C": C, "D": D}, "A", threads, recipe=recipe, target=target)


def rgms(A: Any, X: Any, W: Any, *, threads: Optional[int] = None, recipe: str = "auto",
         target: Optional[str] = None):
    """Relational gather-matmul-scatter (RGCN layers): ``A`` holds one sparse adjacency
    per relation (shape ``(relations, m, n)``), ``W`` one weight per relation
    (``(relations, p, q)``): ``Y = sum_r A[r] @ X @ W[r]``."""
    _refuse_grad("rgms", "it has no autograd formula yet", X, W)
    A = as_tensor(A)
    _check_order(A, 3, "rgms")
    return _run(RGMS, {"A": A}, {"X": X, "W": W}, "Y", threads, recipe=recipe, target=target)
