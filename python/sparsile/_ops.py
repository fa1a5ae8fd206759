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

With a torch input that requires a gradient (and grad mode on), or under
``torch.compile``, ``spmm``, ``spmv``, ``spmm_batched``, ``spmv_batched``, ``mttkrp``,
``rgms`` and ``A @ X`` run the ``torch.library`` operators of :mod:`sparsile.torch` and
return a tensor with a ``grad_fn``; ``sddmm``, whose result is a
:class:`~sparsile.Tensor`, refuses such inputs rather than drop the gradient (use
:func:`sparsile.torch.sddmm`, which returns the values as a tensor, or detach the inputs).

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

import sys
import threading
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from . import _cuda, _log, _native
from ._dense import (NUMPY_DTYPE, SPARSILE_DTYPE, as_array, device_of, is_torch_tensor, value_dtype,
                     wrap_output)
from ._tensor import Tensor, as_tensor
from ._threads import call_threads
from ._types import DenseLike, DenseResult, SparseLike

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


# The kernels of the plain path (see `_plain_args`), by (template, value type, format,
# recipe): found without formatting the program text again.
_PLAIN_KERNELS: Dict[Tuple[str, str, str, str], "_native.AutoKernel"] = {}


def _plain_args(sparse: Dict[str, Tensor], dense: Dict[str, Any]) -> Optional[Tuple[Dict[str, Any], bool]]:
    """The native arguments of the most common calls, and whether the result goes back
    as a torch tensor; ``None`` for any other call. Common: every dense operand a
    C-contiguous NumPy array (not a subclass), or a contiguous torch CPU tensor that
    requires no gradient, of the sparse operand's value type (not bfloat16), which needs
    no conversion and no other check. A call on small operands costs about as much in
    such checks as in its kernel, so they are made here with as few Python operations as
    will do; every other call takes the general path, which checks and converts all."""
    args: Dict[str, Any] = {}
    want = None
    for name, t in sparse.items():
        if type(t) is not Tensor:
            return None
        native = t._native
        if want is None:
            want = NUMPY_DTYPE[native.dtype]
            if type(want) is str:  # bfloat16: NumPy holds its bits only
                return None
        args[name] = native
    to_torch = False
    torch = None
    for name, x in dense.items():
        if type(x) is np.ndarray:
            if x.dtype != want or not x.flags.c_contiguous:
                return None
            args[name] = x
            continue
        if torch is None:
            torch = sys.modules.get("torch")
            if torch is None:
                return None
        if (type(x) is not torch.Tensor or x.dtype is not _torch_dtype(torch, want) or not x.is_cpu
                or x.requires_grad or x.layout is not torch.strided or x.is_neg() or not x.is_contiguous()):
            return None
        args[name] = x.numpy()
        to_torch = True
    return args, to_torch


_TORCH_DTYPES: Dict[Any, Any] = {}


def _torch_dtype(torch: Any, dtype: np.dtype) -> Any:
    """The torch dtype of NumPy ``dtype`` (float16, float32 or float64), looked up once."""
    if not _TORCH_DTYPES:
        _TORCH_DTYPES.update({np.dtype(np.float16): torch.float16, np.dtype(np.float32): torch.float32,
                              np.dtype(np.float64): torch.float64})
    return _TORCH_DTYPES[dtype]


def _plain_kernel(template: str, native: "_native.Tensor", recipe: str) -> "_native.AutoKernel":
    """:func:`auto_kernel` of ``template`` for an operand like ``native``, found by key."""
    key = (template, native.dtype, native.format, recipe)
    kernel = _PLAIN_KERNELS.get(key)
    if kernel is None:
        kernel = auto_kernel(template.format(d=key[1], f=key[2]), recipe, "cpu")
        _PLAIN_KERNELS[key] = kernel
    return kernel


def _target(target: Optional[str], *xs: Any) -> Tuple[str, str]:
    """The target to run on and where the operands are: ``target`` when given (one of
    :data:`TARGETS`), else ``"cuda"`` when an operand is in CUDA memory (a torch CUDA
    tensor, a CuPy array), else ``"cpu"``."""
    # NumPy arrays (and absent operands) are host memory: only the others are asked.
    devices = {device_of(x) for x in xs if x is not None and not isinstance(x, np.ndarray)} - {"cpu"}
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


def _out_array(out: Any, shape: Tuple[int, ...], dtype: Any, inputs: Dict[str, Any]) -> np.ndarray:
    """``out`` (a NumPy array or a torch CPU tensor) as the NumPy array the kernel writes
    into: of ``shape`` and ``dtype`` (the sparse operand's) exactly, sharing no memory
    with ``inputs``."""
    if is_torch_tensor(out):
        import torch

        if out.requires_grad:
            raise ValueError("out= takes no tensor that requires a gradient (it cannot carry one)")
        if out.device.type != "cpu":
            raise ValueError(f"out is on device {out.device}: out= is taken on the CPU")
        out = out.detach()
        array = out.view(torch.int16).numpy().view(np.uint16) if out.dtype == torch.bfloat16 else out.numpy()
        given = "bfloat16" if out.dtype == torch.bfloat16 else array.dtype
    elif isinstance(out, np.ndarray):
        array = out
        given = array.dtype
    else:
        raise TypeError(f"out must be a NumPy array or a torch CPU tensor, got {type(out).__name__}")
    if given != dtype:
        raise TypeError(f"out is {given} but the result is {dtype}")
    if tuple(array.shape) != tuple(shape):
        raise ValueError(f"out must have the result's shape {tuple(shape)}, got {tuple(array.shape)}")
    for name, x in inputs.items():
        if isinstance(x, np.ndarray) and np.shares_memory(array, x):
            raise ValueError(f"out shares memory with the input {name}: the kernel reads it while writing out")
    return array


def _run(template: str, sparse: Dict[str, Tensor], dense: Dict[str, Any], output: str,
         threads: Optional[int], values: Optional[Any] = None, recipe: str = "auto",
         target: Optional[str] = None, raw: bool = False, out: Any = None,
         out_shape: Tuple[int, ...] = ()):
    """Runs the operator; a sparse output is a :class:`Tensor`, or with ``raw`` its
    values only (a CUDA array on the GPU path, a NumPy array otherwise). With ``out``
    (of ``out_shape``), the result is written there and ``out`` returned."""
    plain = (_plain_args(sparse, dense)
             if values is None and out is None and target is None and type(recipe) is str else None)
    A = sparse[next(iter(sparse))]
    if plain is not None:
        args, to_torch = plain
        kernel = _plain_kernel(template, A._native, recipe)
    else:
        target, device = _target(target, values, *dense.values())
        if out is not None and (device == "cuda" or target != "cpu"):
            raise ValueError(f"out= is taken by the cpu target, not {target}")
        if device == "cuda":
            kernel = auto_kernel(_program(template, A), recipe, target)
            outputs, _ = _cuda.run(kernel, sparse, dense, None if values is None else {next(iter(sparse)): values})
            out = outputs[output]
            if raw or template != SDDMM:
                return out
            # A Tensor lives in host memory: its values come back from the device.
            if is_torch_tensor(out):
                import torch

                # NumPy has no bfloat16: its bits, as a Tensor holds them.
                bf16 = out.dtype == torch.bfloat16
                host = out.view(torch.int16).cpu().numpy().view(np.uint16) if bf16 else out.cpu().numpy()
            else:
                host = out.get()
            return Tensor(A._native.with_values(host))
        program, args, to_torch = _args(template, sparse, dense, values)
        kernel = auto_kernel(program, recipe, target)
        if out is not None:
            inputs = {n: (v[1] if isinstance(v, tuple) else v) for n, v in args.items()}
            array = _out_array(out, out_shape, A.dtype, inputs)
            kernel.run(args, call_threads(threads), {output: array})
            _log.chose(_OP_NAMES.get(template, "op"), kernel, A.shape)
            return out
    result = kernel.run(args, call_threads(threads))[output]
    _log.chose(_OP_NAMES.get(template, "op"), kernel, A.shape)
    if isinstance(result, _native.Tensor):
        return result.values() if raw else Tensor(result)
    return wrap_output(result, to_torch)


def _wants_grad(*xs: Any) -> bool:
    """Whether a torch tensor among ``xs`` requires a gradient with grad mode on, or is
    being traced by ``torch.compile`` (which runs the ``torch.library`` operators of
    :mod:`sparsile.torch`). Asked on every call, so it asks torch as little as it can."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    tensor = torch.Tensor
    found = False
    for x in xs:
        if isinstance(x, tensor):
            if x.requires_grad and torch.is_grad_enabled():
                return True
            found = True
    return found and torch.compiler.is_compiling()


def _autograd(op: str, A: Any, dense: Any, values: Any, threads: Optional[int], recipe: str,
              target: Optional[str]):
    """``op`` of :mod:`sparsile.torch`: the differentiable form of an operator."""
    from . import torch as _st

    return getattr(_st, op)(A, dense, values, threads=threads, recipe=recipe, target=target)


def _check_sddmm_shapes(A: Tensor, X: Any, Y: Any) -> None:
    """SDDMM's operands are ``X`` ``(m, k)`` and ``Y`` ``(n, k)`` (DGL's convention): a
    mismatch says so, and how to pass a ``(k, n)`` operand."""
    m, n = A.shape
    xs, ys = tuple(getattr(X, "shape", ())), tuple(getattr(Y, "shape", ()))
    if len(xs) != 2 or xs[0] != m:
        raise ValueError(f"sddmm: X must be (m, k) = ({m}, k), one row per row of A {A.shape}; got {xs}")
    if len(ys) != 2 or ys[0] != n or ys[1] != xs[1]:
        hint = " (a (k, n) operand is passed as Y.T)" if ys == (xs[1], n) else ""
        raise ValueError(f"sddmm: Y must be (n, k) = ({n}, {xs[1]}), one row per column of A {A.shape}, "
                         f"as X is (m, k); got {ys}{hint}")


def sddmm_values(A: Tensor, X: Any, Y: Any, values: Any = None, threads: Optional[int] = None,
                 recipe: str = "auto", target: Optional[str] = None):
    """SDDMM's values only, in A's storage order: a CUDA array for CUDA operands (no copy
    to the host), else a NumPy array."""
    _check_order(A, 2, "sddmm")
    _check_sddmm_shapes(A, X, Y)
    return _run(SDDMM, {"A": A}, {"X": X, "Y": Y}, "C", threads, values, recipe, target, raw=True)


def spmm_plain(A: Tensor, X: Any, values: Any, threads: Optional[int], recipe: str,
               target: Optional[str]):
    """SpMM without the autograd routing (the body of the ``sparsile::spmm`` operator)."""
    _check_order(A, 2, "spmm")
    return _run(SPMM, {"A": A}, {"X": X}, "Y", threads, values, recipe, target)


def mttkrp_plain(B: Tensor, C: Any, D: Any, threads: Optional[int], recipe: str, target: Optional[str]):
    """MTTKRP without the autograd routing (the body of ``sparsile::mttkrp``)."""
    _check_order(B, 3, "mttkrp")
    return _run(MTTKRP, {"B": B}, {"C": C, "D": D}, "A", threads, recipe=recipe, target=target)


def rgms_plain(A: Tensor, X: Any, W: Any, threads: Optional[int], recipe: str, target: Optional[str]):
    """RGMS without the autograd routing (the body of ``sparsile::rgms``)."""
    _check_order(A, 3, "rgms")
    return _run(RGMS, {"A": A}, {"X": X, "W": W}, "Y", threads, recipe=recipe, target=target)


def relation_spmm(A: Tensor, G: Any, threads: Optional[int], target: Optional[str]):
    """``Z[r] = A[r] @ G`` for every relation ``r`` of a 3-D sparse ``A`` (RGMS's weight
    gradient needs it with the transposed relations)."""
    _check_order(A, 3, "relation_spmm")
    return _run(RELATION_SPMM, {"A": A}, {"G": G}, "Z", threads, target=target)


def attention_forward(U: Tensor, Q: Any, K: Any, V: Any, threads: Optional[int],
                      target: Optional[str]) -> Tuple[Any, Any]:
    """Sparse attention's forward pass by the one-program kernel (:data:`SPARSE_ATTENTION`)
    on the pattern ``U`` (CSR, values 1): ``(O, P)`` with the weights ``P`` in CSR order."""
    _check_order(U, 2, "sparse_attention")
    target, device = _target(target, Q, K, V)
    if device == "cuda" or target != "cpu":
        raise ValueError("the one-program sparse attention runs on the cpu target")
    program, args, to_torch = _args(SPARSE_ATTENTION, {"U": U}, {"Q": Q, "K": K, "V": V}, None)
    # The automatic choice runs `rowwise` for this program (it classifies no single
    # operator): every statement row by row, the scores' dot products batched, V's rows
    # summed in a local row; 3-6x the default schedule.
    kernel = auto_kernel(program, "auto", target)
    outputs = kernel.run(args, call_threads(threads))
    _log.chose("sparse_attention", kernel, U.shape)
    return wrap_output(outputs["O"], to_torch), wrap_output(outputs["P"].values(), to_torch)


def _refuse_out(out: Any) -> None:
    """``out=`` on the autograd path (an input requires a gradient, or torch.compile
    traces the call): refused, as PyTorch refuses it."""
    if out is not None:
        raise ValueError("out= is not taken where gradients flow or under torch.compile "
                         "(inputs that require a gradient, or a traced call): drop out= there")


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
RELATION_SPMM = ("tensor A: {d}[nr, n, m] {f}\ntensor G: {d}[m, q]\ntensor Z: {d}[nr, n, q]\n"
                 "Z[r,j,l] = A[r,j,i] * G[i,l]\n")
# Sparse attention's forward pass as one program: scores at the mask's positions (U: the
# mask's pattern, every value 1; Q already scaled), each row's max, the exponentials, their
# sums, the weights, and the weighted sum of V's rows. Its outputs O and the weights P.
SPARSE_ATTENTION = ("tensor U: {d}[m, n] {f}\ntensor Q: {d}[m, c]\ntensor K: {d}[n, c]\ntensor V: {d}[n, e]\n"
                    "tensor S: {d}[m, n] {f}\ntensor R: {d}[m]\ntensor E: {d}[m, n] {f}\ntensor Z: {d}[m]\n"
                    "tensor P: {d}[m, n] {f}\ntensor O: {d}[m, e]\n"
                    "S[i,j] = U[i,j] * Q[i,c] * K[j,c]\n"
                    "R[i] max= S[i,j]\n"
                    "E[i,j] = U[i,j] * exp(S[i,j] - R[i])\n"
                    "Z[i] = E[i,j]\n"
                    "P[i,j] = E[i,j] / Z[i]\n"
                    "O[i,e] = P[i,j] * V[j,e]\n")
SPMM_BATCHED = ("tensor A: {d}[m, n] {f}\ntensor X: {d}[b, n, k]\ntensor Y: {d}[b, m, k]\n"
                "Y[b,i,k] = A[i,j] * X[b,j,k]\n")
SPMV_BATCHED = "tensor A: {d}[m, n] {f}\ntensor X: {d}[b, n]\ntensor Y: {d}[b, m]\nY[b,i] = A[i,j] * X[b,j]\n"
MTTKRP = ("tensor B: {d}[m, p, q] {f}\ntensor C: {d}[p, r]\ntensor D: {d}[q, r]\ntensor A: {d}[m, r]\n"
          "A[i,s] = B[i,k,l] * C[k,s] * D[l,s]\n")
RGMS = ("tensor A: {d}[nr, m, n] {f}\ntensor X: {d}[n, p]\ntensor W: {d}[nr, p, q]\ntensor Y: {d}[m, q]\n"
        "Y[i,l] = A[r,i,j] * X[j,k] * W[r,k,l]\n")


_OP_NAMES = {SPMM: "spmm", SPMV: "spmv", SDDMM: "sddmm", SPMM_BATCHED: "spmm_batched",
             SPMV_BATCHED: "spmv_batched", MTTKRP: "mttkrp", RGMS: "rgms"}


def spmm(A: SparseLike, X: DenseLike, *, threads: Optional[int] = None, values: Optional[DenseLike] = None,
         recipe: str = "auto", target: Optional[str] = None, out: Optional[DenseLike] = None) -> DenseResult:
    """Sparse times dense matrix: ``Y = A @ X``.

    Args:
        A: sparse matrix of shape ``(m, n)``: float16, bfloat16, float32 or float64 values.
        X: dense matrix ``(n, k)`` of A's dtype (C-contiguous ones are used without a copy).
        threads: worker threads (default: :func:`sparsile.get_num_threads`).
        values: replaces A's stored values, one per stored position in A's storage order
            (a 1-D array of A's dtype), without copying them; with gradients, A must be CSR.
        recipe: ``"auto"`` (chosen per input) or a recipe spec (:func:`sparsile.recipes`).
        target: ``"cpu"``, ``"cuda"`` or ``"cuda-sim"`` (default: where the operands are).
        out: a C-contiguous array (NumPy, or a torch CPU tensor) of the result's shape and
            dtype to write the result into and return, instead of a new one (CPU target;
            not with inputs that require a gradient).

    Returns:
        ``Y``, dense ``(m, k)`` of A's dtype: a torch tensor when ``X`` is one (with a
        ``grad_fn`` when ``X`` or ``values`` requires a gradient), else a NumPy array.

    Example::

        >>> import numpy as np, sparsile
        >>> A = sparsile.from_coo([0, 1], [1, 0], np.array([2.0, 3.0]), shape=(2, 2))
        >>> sparsile.spmm(A, np.ones((2, 3))).tolist()
        [[2.0, 2.0, 2.0], [3.0, 3.0, 3.0]]
    """
    if _wants_grad(X, values, out):
        _refuse_out(out)
        return _autograd("spmm", A, X, values, threads, recipe, target)
    A = as_tensor(A)
    _check_order(A, 2, "spmm")
    return _run(SPMM, {"A": A}, {"X": X}, "Y", threads, values, recipe, target, out=out,
                out_shape=(A.shape[0],) + tuple(getattr(X, "shape", (0, 0)))[1:])


def spmv(A: SparseLike, x: DenseLike, *, threads: Optional[int] = None, values: Optional[DenseLike] = None,
         recipe: str = "auto", target: Optional[str] = None, out: Optional[DenseLike] = None) -> DenseResult:
    """Sparse matrix times dense vector: ``y = A @ x``.

    Args:
        A: sparse matrix ``(m, n)``: float16, bfloat16, float32 or float64 values.
        x: dense vector ``(n,)`` of A's dtype.
        threads: worker threads (default: :func:`sparsile.get_num_threads`).
        values: replaces A's stored values, one per stored position in A's storage order
            (a 1-D array of A's dtype), without copying them; with gradients, A must be CSR.
        recipe: ``"auto"`` (chosen per input) or a recipe spec (:func:`sparsile.recipes`).
        target: ``"cpu"``, ``"cuda"`` or ``"cuda-sim"`` (default: where the operands are).
        out: a C-contiguous array (NumPy, or a torch CPU tensor) of the result's shape and
            dtype to write the result into and return, instead of a new one (CPU target;
            not with inputs that require a gradient).

    Returns:
        ``y``, dense ``(m,)`` (a torch tensor when ``x`` is one).

    Example::

        >>> import numpy as np, sparsile
        >>> A = sparsile.from_coo([0, 1], [1, 0], np.array([2.0, 3.0]), shape=(2, 2))
        >>> sparsile.spmv(A, np.array([1.0, 10.0])).tolist()
        [20.0, 3.0]
    """
    if _wants_grad(x, values, out):
        _refuse_out(out)
        return _autograd("spmv", A, x, values, threads, recipe, target)
    A = as_tensor(A)
    _check_order(A, 2, "spmv")
    return _run(SPMV, {"A": A}, {"x": x}, "y", threads, values, recipe, target, out=out,
                out_shape=(A.shape[0],))


def sddmm(A: SparseLike, X: DenseLike, Y: DenseLike, *, threads: Optional[int] = None,
          values: Optional[DenseLike] = None, recipe: str = "auto", target: Optional[str] = None,
          out: Optional[DenseLike] = None) -> Union[Tensor, DenseResult]:
    """Sampled dense-dense matmul: ``C = A ⊙ (X @ Y.T)`` at the stored positions of ``A``
    (DGL's ``u_dot_v``). Both dense operands are row-major with one row per row / column of
    ``A``, as DGL takes them.

    Args:
        A: sparse matrix ``(m, n)`` (its values scale the result).
        X: dense ``(m, k)`` of A's dtype.
        Y: dense ``(n, k)`` of A's dtype.
        threads: worker threads (default: :func:`sparsile.get_num_threads`).
        values: replaces A's stored values, one per stored position in A's storage order
            (a 1-D array of A's dtype), without copying them; with gradients, A must be CSR.
        recipe: ``"auto"`` (chosen per input) or a recipe spec (:func:`sparsile.recipes`).
        target: ``"cpu"``, ``"cuda"`` or ``"cuda-sim"`` (default: where the operands are).
        out: a C-contiguous array (NumPy, or a torch CPU tensor) of the result's shape and
            dtype to write the result into and return, instead of a new one (CPU target;
            not with inputs that require a gradient).

    Returns:
        A :class:`Tensor` with A's pattern and format; with ``out`` (a 1-D array of
        ``A.nnz`` values), its values written there, and ``out``. For gradients use
        :func:`sparsile.torch.sddmm`, which returns the values as a differentiable tensor.

    Example::

        >>> import numpy as np, sparsile
        >>> A = sparsile.from_coo([0, 1], [1, 0], np.array([1.0, 1.0]), shape=(2, 2))
        >>> sparsile.sddmm(A, np.array([[1.0], [2.0]]), np.array([[3.0], [4.0]])).values.tolist()
        [4.0, 6.0]
    """
    _refuse_grad("sddmm", "sparsile.torch.sddmm(A, X, Y) returns a differentiable tensor of the values", X, Y, values,
                 out)
    A = as_tensor(A)
    _check_order(A, 2, "sddmm")
    _check_sddmm_shapes(A, X, Y)
    return _run(SDDMM, {"A": A}, {"X": X, "Y": Y}, "C", threads, values, recipe, target, out=out,
                out_shape=(A.nnz,))


def spmm_batched(A: SparseLike, X: DenseLike, *, threads: Optional[int] = None,
                 values: Optional[DenseLike] = None, recipe: str = "auto",
                 target: Optional[str] = None, out: Optional[DenseLike] = None) -> DenseResult:
    """``Y[b] = A @ X[b]`` for every ``b`` (one sparse matrix, a batch of dense ones).

    Args:
        A: sparse matrix ``(m, n)``.
        X: dense ``(batch, n, k)`` of A's dtype.
        threads: worker threads (default: :func:`sparsile.get_num_threads`).
        values: replaces A's stored values, one per stored position in A's storage order
            (a 1-D array of A's dtype), without copying them; with gradients, A must be CSR.
        recipe: ``"auto"`` (chosen per input) or a recipe spec (:func:`sparsile.recipes`).
        target: ``"cpu"``, ``"cuda"`` or ``"cuda-sim"`` (default: where the operands are).
        out: a C-contiguous array (NumPy, or a torch CPU tensor) of the result's shape and
            dtype to write the result into and return, instead of a new one (CPU target;
            not with inputs that require a gradient).

    Returns:
        ``Y``, dense ``(batch, m, k)``.

    Example::

        >>> import numpy as np, sparsile
        >>> A = sparsile.from_coo([0], [1], np.array([2.0]), shape=(1, 2))
        >>> sparsile.spmm_batched(A, np.ones((3, 2, 4))).shape
        (3, 1, 4)
    """
    if _wants_grad(X, values, out):
        _refuse_out(out)
        return _autograd("spmm_batched", A, X, values, threads, recipe, target)
    A = as_tensor(A)
    _check_order(A, 2, "spmm_batched")
    xs = tuple(getattr(X, "shape", (0, 0, 0)))
    return _run(SPMM_BATCHED, {"A": A}, {"X": X}, "Y", threads, values, recipe, target, out=out,
                out_shape=(xs[0], A.shape[0]) + xs[2:])


def spmv_batched(A: SparseLike, X: DenseLike, *, threads: Optional[int] = None,
                 values: Optional[DenseLike] = None, recipe: str = "auto",
                 target: Optional[str] = None, out: Optional[DenseLike] = None) -> DenseResult:
    """``Y[b] = A @ X[b]`` for every ``b`` (a batch of vectors).

    Args:
        A: sparse matrix ``(m, n)``.
        X: dense ``(batch, n)`` of A's dtype.
        threads: worker threads (default: :func:`sparsile.get_num_threads`).
        values: replaces A's stored values, one per stored position in A's storage order
            (a 1-D array of A's dtype), without copying them; with gradients, A must be CSR.
        recipe: ``"auto"`` (chosen per input) or a recipe spec (:func:`sparsile.recipes`).
        target: ``"cpu"``, ``"cuda"`` or ``"cuda-sim"`` (default: where the operands are).
        out: a C-contiguous array (NumPy, or a torch CPU tensor) of the result's shape and
            dtype to write the result into and return, instead of a new one (CPU target;
            not with inputs that require a gradient).

    Returns:
        ``Y``, dense ``(batch, m)``.

    Example::

        >>> import numpy as np, sparsile
        >>> A = sparsile.from_coo([0], [1], np.array([2.0]), shape=(1, 2))
        >>> sparsile.spmv_batched(A, np.ones((3, 2))).tolist()
        [[2.0], [2.0], [2.0]]
    """
    if _wants_grad(X, values, out):
        _refuse_out(out)
        return _autograd("spmv_batched", A, X, values, threads, recipe, target)
    A = as_tensor(A)
    _check_order(A, 2, "spmv_batched")
    xs = tuple(getattr(X, "shape", (0, 0)))
    return _run(SPMV_BATCHED, {"A": A}, {"X": X}, "Y", threads, values, recipe, target, out=out,
                out_shape=(xs[0], A.shape[0]))


def mttkrp(B: SparseLike, C: DenseLike, D: DenseLike, *, threads: Optional[int] = None, recipe: str = "auto",
           target: Optional[str] = None, out: Optional[DenseLike] = None) -> DenseResult:
    """Matricized tensor times Khatri-Rao product (CP decomposition's kernel):
    ``A[i,s] = Σ_kl B[i,k,l] C[k,s] D[l,s]``.

    Args:
        B: 3-D sparse tensor ``(m, p, q)`` (``csf`` suits it; see :func:`sparsile.from_coords`).
        C: dense ``(p, r)`` of B's dtype.
        D: dense ``(q, r)`` of B's dtype.
        threads, recipe, target, out: as for :func:`spmm`.

    Returns:
        ``A``, dense ``(m, r)``; with torch inputs that require a gradient, a tensor with a
        ``grad_fn`` (see :func:`sparsile.torch.mttkrp`).

    Example::

        >>> import numpy as np, sparsile
        >>> B = sparsile.from_coords([[0], [1], [2]], np.array([2.0]), shape=(1, 2, 3), format="csf")
        >>> sparsile.mttkrp(B, np.ones((2, 4)), np.ones((3, 4))).tolist()
        [[2.0, 2.0, 2.0, 2.0]]
    """
    if _wants_grad(C, D, out):
        _refuse_out(out)
        from . import torch as _st

        return _st.mttkrp(B, C, D, threads=threads, recipe=recipe, target=target)
    B = as_tensor(B, "B")
    _check_order(B, 3, "mttkrp")
    return _run(MTTKRP, {"B": B}, {"C": C, "D": D}, "A", threads, recipe=recipe, target=target, out=out,
                out_shape=(B.shape[0],) + tuple(getattr(C, "shape", (0, 0)))[1:])


def rgms(A: SparseLike, X: DenseLike, W: DenseLike, *, threads: Optional[int] = None, recipe: str = "auto",
         target: Optional[str] = None, out: Optional[DenseLike] = None) -> DenseResult:
    """Relational gather-matmul-scatter (RGCN layers): ``Y = Σ_r A[r] @ X @ W[r]``.

    Args:
        A: 3-D sparse ``(relations, m, n)``, one adjacency per relation.
        X: dense ``(n, p)`` node features, A's dtype.
        W: dense ``(relations, p, q)``, one weight per relation.
        threads, recipe, target, out: as for :func:`spmm`.

    Returns:
        ``Y``, dense ``(m, q)``; with torch inputs that require a gradient, a tensor with a
        ``grad_fn`` (see :func:`sparsile.torch.rgms`).

    Example::

        >>> import numpy as np, sparsile
        >>> A = sparsile.from_coords([[0, 1], [0, 0], [1, 0]], np.array([1.0, 1.0]), shape=(2, 1, 2), format="csf")
        >>> sparsile.rgms(A, np.ones((2, 3)), np.ones((2, 3, 2))).tolist()
        [[6.0, 6.0]]
    """
    if _wants_grad(X, W, out):
        _refuse_out(out)
        from . import torch as _st

        return _st.rgms(A, X, W, threads=threads, recipe=recipe, target=target)
    A = as_tensor(A)
    _check_order(A, 3, "rgms")
    return _run(RGMS, {"A": A}, {"X": X, "W": W}, "Y", threads, recipe=recipe, target=target, out=out,
                out_shape=(A.shape[1],) + tuple(getattr(W, "shape", (0, 0, 0)))[2:])
