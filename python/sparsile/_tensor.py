"""Sparse tensors: construction from SciPy, PyTorch and plain arrays; conversion back.

A :class:`Tensor` holds a format (a list of axes: ``csr``, ``bsr:4x4``, ``ell``, ``csf``,
...) with its structure arrays and values, owned by Sparsile. Constructors copy the
arrays once, then check the copy (``ValueError`` naming the problem and its position
otherwise), so an array changed by another thread meanwhile cannot slip an unchecked index
in; kernels then run on the tensor without further copies.

Example::

    >>> import numpy as np, sparsile
    >>> A = sparsile.from_coo([0, 1, 1], [2, 0, 2], np.array([1.0, 2.0, 3.0]), shape=(2, 3))
    >>> A.format, A.shape, A.nnz
    ('csr', (2, 3), 3)
    >>> A.to("ell").to_dense().tolist()
    [[0.0, 0.0, 1.0], [2.0, 0.0, 3.0]]
"""

from __future__ import annotations

import errno
import itertools
import os
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:  # pragma: no cover - names for type checkers only
    import torch

import numpy as np

from . import _native
from ._converted import reuse_or_convert
from ._types import DenseLike, DTypeLike, IndexLike, ScipySparse, SparseLike
from ._dense import (BF16_BITS, BFLOAT16, DTYPES_TEXT, NUMPY_DTYPE, SPARSILE_DTYPE, as_index_array,
                     as_values, is_torch_tensor)


def _dtype_name(dtype: Any) -> str:
    """The Sparsile name (``f16``, ``bf16``, ``f32``, ``f64``) of a value type given as a
    NumPy dtype, a torch dtype, a Sparsile name or ``"bfloat16"``."""
    if dtype is None:
        raise TypeError("dtype must be given")
    if isinstance(dtype, str) and dtype in NUMPY_DTYPE:
        return dtype
    if is_torch_tensor_dtype(dtype):
        dtype = str(dtype).replace("torch.", "")
    if isinstance(dtype, str) and dtype == BFLOAT16:
        return SPARSILE_DTYPE[BFLOAT16]
    d = np.dtype(dtype)
    if d not in SPARSILE_DTYPE:
        raise TypeError(f"values must be {DTYPES_TEXT}, not {d}")
    return SPARSILE_DTYPE[d]


def _array_dtype(dtype: Any) -> np.dtype:
    """The NumPy type that holds values of ``dtype`` readably: float32 for bfloat16."""
    return np.dtype(np.float32) if isinstance(dtype, str) and dtype == BFLOAT16 else dtype


def is_torch_tensor_dtype(dtype: Any) -> bool:
    return type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype"


class Tensor:
    """A sparse tensor in a Sparsile format.

    Build one with :func:`from_scipy`, :func:`from_torch`, :func:`from_coo`,
    :func:`from_csr`, :func:`from_dense` or :func:`load`.
    """

    __slots__ = ("_native", "_cache", "_handle", "_shape", "__weakref__")

    def __init__(self, native: "_native.Tensor") -> None:
        if not isinstance(native, _native.Tensor):
            raise TypeError(
                "Tensor wraps a native tensor; build one with sparsile.from_scipy, "
                "from_torch, from_coo, from_csr, from_dense or load"
            )
        self._native = native
        self._cache: Dict[Any, Any] = {}
        # Plain Python data, which torch.compile reads (and guards on) without a break.
        self._shape: Tuple[int, ...] = tuple(native.shape)
        # A name for this tensor given to the torch.library operators (which take tensors,
        # numbers and strings only). A string, because torch.compile keeps strings constant
        # (guarding on them) where it would turn a changing number into a symbol.
        self._handle = f"t{next(_HANDLE_COUNTER)}"
        _HANDLES[self._handle] = self

    @property
    def shape(self) -> Tuple[int, ...]:
        """The logical shape."""
        return self._shape

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    @property
    def format(self) -> str:
        """The format string (``csr``, ``bsr:4x4``, ``ell:8``, ``csf``, ...)."""
        return self._native.format

    @property
    def dtype(self) -> Any:
        """The value type: a NumPy dtype (float16, float32 or float64), or the string
        ``'bfloat16'``, which NumPy lacks. A bfloat16 tensor's :attr:`values` are the
        uint16 bits of its values (``torch.from_numpy(v.view(numpy.int16)).view(torch.bfloat16)``
        reads them); :meth:`coo`, :meth:`to_dense` and :meth:`to_scipy` give its values
        as float32 (exactly), :meth:`to_torch` as torch.bfloat16."""
        return NUMPY_DTYPE[self._native.dtype]

    @property
    def index_type(self) -> np.dtype:
        """The type of the structure arrays (int32 or int64)."""
        return np.dtype(np.int32 if self._native.index_type == "i32" else np.int64)

    @property
    def nnz(self) -> int:
        """Stored values, padding included (as SciPy counts BSR blocks)."""
        return self._native.nnz

    @property
    def values(self) -> np.ndarray:
        """The stored values in storage order (padding included): a read-only view of the
        tensor's memory, not a copy (``.copy()`` it to change it, or build a new tensor
        with :meth:`with_values`); bfloat16 values as their uint16 bits."""
        return self._view("values")

    @property
    def indptr(self) -> np.ndarray:
        """The compressed axis's row (CSR, BSR) or column (CSC) pointers, as SciPy has
        them: a read-only view, not a copy. Other formats: see :meth:`axes`."""
        return self._view("indptr")

    @property
    def indices(self) -> np.ndarray:
        """The compressed axis's column (CSR, BSR) or row (CSC) indices, as SciPy has
        them: a read-only view, not a copy. Other formats: see :meth:`axes`."""
        return self._view("indices")

    def _view(self, what: str) -> np.ndarray:
        key = ("view", what)
        v = self._cache.get(key)
        if v is None:
            if what == "values":
                v = self._native.array_view("values")
                if self._native.dtype == "f16":
                    v = v.view(np.float16)
            else:
                fmt = self.format
                if fmt not in ("csr", "csc") and not fmt.startswith("bsr:"):
                    raise ValueError(f"{what} is defined for csr, csc and bsr tensors, not {fmt}; "
                                     "see Tensor.axes() for the arrays of every axis")
                v = self._native.array_view(what, 1)
            v.flags.writeable = False
            self._cache[key] = v
        return v

    def astype(self, dtype: DTypeLike) -> "Tensor":
        """The same tensor (format and pattern) with values of ``dtype``."""
        return self.to(self.format, dtype=dtype)

    def todense(self) -> np.ndarray:
        """Every element as a dense array (SciPy's name for :meth:`to_dense`)."""
        return self.to_dense()

    def with_values(self, values: DenseLike) -> "Tensor":
        """This structure (shared) with other values, one per stored position."""
        return Tensor(self._native.with_values(as_values(values, "values")))

    def to(self, format: str, dtype: Optional[DTypeLike] = None, index_type: Optional[DTypeLike] = None) -> "Tensor":
        """The same tensor in ``format``, optionally with other value / index types.

        ``dtype``: float16, bfloat16 (``"bfloat16"`` or ``torch.bfloat16``), float32 or
        float64 (values rounded to nearest); ``index_type``: int32 or int64 (default:
        the narrowest that fits)."""
        d = None if dtype is None else _dtype_name(dtype)
        it = None
        if index_type is not None:
            it = {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}.get(np.dtype(index_type))
            if it is None:
                raise TypeError(f"index_type must be int32 or int64, not {index_type}")
        if d is None and it is None and format == self.format:
            return self
        return Tensor(self._native.convert(format, d, it))

    def coo(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(coords, values)``: int64 coordinates of shape ``(ndim, nnz)`` sorted
        lexicographically, and the values (in this tensor's dtype, bfloat16 as float32);
        padding dropped."""
        coords, values = self._native.to_coo()
        return coords, values.astype(_array_dtype(self.dtype), copy=False)

    def to_dense(self) -> np.ndarray:
        """Every element, as a dense array of this tensor's dtype (bfloat16 as float32)."""
        return self._native.to_dense().astype(_array_dtype(self.dtype), copy=False)

    def axes(self) -> list:
        """The axes: dicts with ``kind``, ``length``, ``parent`` and, where the axis has
        them, copies of its ``indptr`` and ``indices`` arrays."""
        return self._native.axes()

    def to_scipy(self):
        """A SciPy sparse array: CSR, CSC or BSR when this tensor is stored so (same
        arrays), else CSR. float16 and bfloat16 values (which SciPy does not hold) come
        as float32."""
        import scipy.sparse as sp

        if self.dtype == BFLOAT16 or self.dtype == np.float16:
            return self.to(self.format, dtype=np.float32).to_scipy()
        fmt = self.format
        if self.ndim != 2:
            raise ValueError(f"to_scipy needs a matrix; this tensor has shape {self.shape}")
        if fmt in ("csr", "csc"):
            axes = self.axes()
            cls = sp.csr_array if fmt == "csr" else sp.csc_array
            return cls((self.values.copy(), axes[1]["indices"], axes[1]["indptr"]), shape=self.shape)
        if fmt.startswith("bsr:"):
            r, c = (int(v) for v in fmt[4:].split("x"))
            if self.shape[0] % r == 0 and self.shape[1] % c == 0:
                axes = self.axes()
                data = self.values.reshape(-1, r, c).copy()
                return sp.bsr_array((data, axes[1]["indices"], axes[1]["indptr"]), shape=self.shape)
        return self.to("csr").to_scipy()

    def to_torch(self, layout: Optional[str] = None):
        """A torch sparse tensor: ``sparse_csr`` for matrices (``sparse_csc`` /
        ``sparse_bsr`` when stored so, or as ``layout`` asks), ``sparse_coo`` otherwise."""
        with warnings.catch_warnings():
            # torch warns that its compressed layouts are in beta on every construction.
            warnings.filterwarnings("ignore", message="Sparse (CSR tensor support is in beta|invariant checks)")
            if self.dtype == BFLOAT16:
                import torch

                return self.to(self.format, dtype=np.float32)._to_torch(layout).to(torch.bfloat16)
            return self._to_torch(layout)

    def _to_torch(self, layout: Optional[str]):
        import torch

        fmt = self.format
        if layout is None:
            layout = "coo" if self.ndim != 2 else ("csc" if fmt == "csc" else "bsr" if fmt.startswith("bsr:") else "csr")
        if layout == "coo":
            coords, values = self.coo()
            return torch.sparse_coo_tensor(
                torch.from_numpy(coords), torch.from_numpy(values), self.shape
            ).coalesce()
        if self.ndim != 2:
            raise ValueError(f"layout {layout} needs a matrix; this tensor has shape {self.shape}")
        if layout == "csr":
            t = self.to("csr")
            a = t.axes()[1]
            return torch.sparse_csr_tensor(
                torch.from_numpy(a["indptr"]), torch.from_numpy(a["indices"]),
                torch.from_numpy(t.values.copy()), self.shape,
            )
        if layout == "csc":
            t = self.to("csc")
            a = t.axes()[1]
            return torch.sparse_csc_tensor(
                torch.from_numpy(a["indptr"]), torch.from_numpy(a["indices"]),
                torch.from_numpy(t.values.copy()), self.shape,
            )
        if layout == "bsr":
            if not fmt.startswith("bsr:"):
                raise ValueError(f"layout bsr needs a tensor stored as bsr:RxC, not {fmt}")
            b = self.to_scipy()
            if b.format != "bsr":
                raise ValueError(f"torch BSR needs the block size to divide the shape {self.shape}")
            return torch.sparse_bsr_tensor(
                torch.from_numpy(b.indptr), torch.from_numpy(b.indices),
                torch.from_numpy(b.data), self.shape,
            )
        raise ValueError(f"unknown layout {layout!r} (expected coo, csr, csc or bsr)")

    def transpose(self) -> "Tensor":
        """The transposed matrix, in CSR (cached)."""
        if "T" not in self._cache:
            if self.ndim != 2:
                raise ValueError(f"transpose needs a matrix; this tensor has shape {self.shape}")
            coords, values = self._native.to_coo()
            t = _native.Tensor.from_coo(
                [self.shape[1], self.shape[0]], [coords[1], coords[0]],
                values.astype(_array_dtype(self.dtype)), sort_indices=True,
            )
            self._cache["T"] = Tensor(t).to("csr", dtype=self.dtype)
        return self._cache["T"]

    @property
    def T(self) -> "Tensor":
        """The transposed matrix (see :meth:`transpose`)."""
        return self.transpose()

    def __matmul__(self, other: Any):
        from ._ops import spmm, spmv

        ndim = getattr(other, "ndim", None)
        return spmv(self, other) if ndim == 1 else spmm(self, other)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        """``torch.matmul(A, X)`` / ``torch.mm`` / ``torch.mv`` with a sparse ``A`` run
        ``A @ X``, and so does ``A @ X`` under ``torch.compile`` (which reaches here as
        ``X.matmul(A)`` with the operands swapped). A dense matrix times a sparsile tensor
        (``X @ A``) is not supported: write ``(A.T @ X.T).T``. Other torch functions do
        not take a sparsile tensor."""
        import torch

        if kwargs or len(args) != 2:
            return NotImplemented
        a, b = args
        if isinstance(a, Tensor) and func in (torch.matmul, torch.mm, torch.mv):
            return a.__matmul__(b)
        if isinstance(b, Tensor) and func is torch.Tensor.__rmatmul__:
            return b.__matmul__(a)
        if isinstance(b, Tensor) and func is torch._C.TensorBase.matmul and torch.compiler.is_compiling():
            if a.ndim >= 1 and a.shape[0] != b.shape[-1]:
                raise TypeError(f"a dense {tuple(a.shape)} times a sparsile tensor of shape {b.shape} is "
                                "not supported: write (A.T @ X.T).T")
            return b.__matmul__(a)
        return NotImplemented

    def __repr__(self) -> str:
        return (
            f"sparsile.Tensor(shape={self.shape}, format={self.format}, "
            f"dtype={self.dtype}, nnz={self.nnz})"
        )


_HANDLE_COUNTER = itertools.count(1)
_HANDLES: "weakref.WeakValueDictionary[str, Tensor]" = weakref.WeakValueDictionary()


def by_handle(handle: str) -> Tensor:
    """The live tensor whose ``_handle`` is ``handle``."""
    t = _HANDLES.get(handle)
    if t is None:
        raise ValueError(f"no live sparsile.Tensor has handle {handle} (it was freed)")
    return t


def _opts(sort_indices: bool, sum_duplicates: bool) -> Dict[str, bool]:
    return {"sort_indices": sort_indices, "sum_duplicates": sum_duplicates}


def _shape2(shape: Any) -> Tuple[int, int]:
    try:
        m, n = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be two non-negative integers, got {shape!r}") from None
    if m < 0 or n < 0:
        raise ValueError(f"shape must be non-negative, got {shape!r}")
    return m, n


def from_csr(indptr: IndexLike, indices: IndexLike, values: DenseLike, shape: Sequence[int], *,
             sort_indices: bool = False, sum_duplicates: bool = False) -> Tensor:
    """A CSR matrix from SciPy-style arrays (int32 or int64 indices, float32/float64
    values). Unsorted or duplicate indices are errors unless asked to be fixed."""
    return Tensor(_native.Tensor.from_csr(
        _shape2(shape), as_index_array(indptr, "indptr"), as_index_array(indices, "indices"),
        as_values(values, "values"), **_opts(sort_indices, sum_duplicates)))


def from_coo(rows: IndexLike, cols: IndexLike, values: Optional[DenseLike] = None,
             shape: Optional[Sequence[int]] = None, *,
             format: str = "csr", sum_duplicates: bool = True, dtype: DTypeLike = np.float32,
             return_permutation: bool = False) -> Union[Tensor, Tuple[Tensor, np.ndarray]]:
    """A matrix from coordinates (any order), stored in ``format`` (default CSR).

    ``values=None`` builds the pattern alone (every value 1, of ``dtype``). Duplicates
    are summed unless ``sum_duplicates=False`` (then an error). With
    ``return_permutation=True`` (CSR and COO only) also returns ``perm``, an int64 array
    with one entry per input coordinate: the position of its stored value, so per-edge
    data given in input order lines up with the tensor's storage order as
    ``data[perm]``-scattered (``out = np.zeros(A.nnz); np.add.at(out, perm, data)``, or
    ``out[perm] = data`` when there are no duplicates).

    Example::

        >>> A, perm = from_coo([1, 0, 1], [0, 2, 1], shape=(2, 3), return_permutation=True)
        >>> perm.tolist()
        [1, 0, 2]
    """
    if shape is None:
        raise TypeError("from_coo needs shape=(rows, columns)")
    m, n = _shape2(shape)
    r = as_index_array(rows, "rows")
    c = as_index_array(cols, "cols")
    if values is None:
        if r.shape != c.shape:
            raise ValueError(f"rows and cols must have the same length, got {r.shape[0]} and {c.shape[0]}")
        name = _dtype_name(dtype)
        # Ones are exact in every value type: made in float32 for bfloat16, converted after.
        values = np.ones(r.shape[0], dtype=np.float32 if name == "bf16" else NUMPY_DTYPE[name])
        t = Tensor(_native.Tensor.from_coo(
            [m, n], [r, c], as_values(values, "values"), sort_indices=True,
            sum_duplicates=sum_duplicates)).to(format, dtype=name)
    else:
        t = Tensor(_native.Tensor.from_coo(
            [m, n], [r, c], as_values(values, "values"), sort_indices=True,
            sum_duplicates=sum_duplicates)).to(format)
    if not return_permutation:
        return t
    if format not in ("csr", "coo"):
        raise ValueError(f"return_permutation needs format csr or coo (storage in row-major order), not {format}")
    # The constructor checked every coordinate against the shape: row * n + col is exact.
    keys = r.astype(np.int64) * max(n, 1) + c.astype(np.int64)
    _, perm = np.unique(keys, return_inverse=True)
    return t, perm.astype(np.int64, copy=False).reshape(-1)


def from_coords(coords: Sequence[IndexLike], values: DenseLike, shape: Sequence[int], *,
                format: str = "coo", sum_duplicates: bool = True) -> Tensor:
    """A tensor of any order from one coordinate array per dimension, in ``format``
    (e.g. ``csf`` for MTTKRP / RGMS operands)."""
    t = _native.Tensor.from_coo(
        [int(s) for s in shape], [as_index_array(c, f"coordinate array {d}") for d, c in enumerate(coords)],
        as_values(values, "values"), sort_indices=True, sum_duplicates=sum_duplicates)
    return Tensor(t).to(format)


def from_dense(array: DenseLike, format: str = "csr") -> Tensor:
    """The nonzeros of a dense array, stored in ``format``."""
    a, _ = _dense_array(array)
    idx = np.nonzero(a & 0x7FFF if a.dtype == BF16_BITS else a)  # bfloat16 bits: -0 is zero
    t = _native.Tensor.from_coo(list(a.shape), [i.astype(np.int64) for i in idx],
                                np.ascontiguousarray(a[idx]))
    return Tensor(t).to(format)


def _dense_array(array: Any):
    from ._dense import as_array

    return as_array(array, "array")


def from_scipy(A: ScipySparse, format: Optional[str] = None) -> Tensor:
    """A SciPy sparse matrix or array (CSR, CSC, BSR, COO, or anything ``tocsr()``
    converts) as a Sparsile tensor, in its own format or in ``format``. Like SciPy,
    unsorted indices are sorted and duplicates summed."""
    return _from_scipy(A, format, keep=False)


def _from_scipy(A: ScipySparse, format: Optional[str], keep: bool) -> Tensor:
    """:func:`from_scipy`; with ``keep``, a fresh conversion is kept for the next call
    with the same arrays (``_converted``): the operators' implicit conversions are, a
    user's explicit one is not (its structure, and the device copies of it, must go when
    the user drops the tensor)."""
    import scipy.sparse as sp

    if not sp.issparse(A):
        raise TypeError(f"from_scipy expects a scipy.sparse matrix or array, got {type(A).__name__}")
    if A.dtype not in (np.float16, np.float32, np.float64):
        raise TypeError(f"values must be float16, float32 or float64, got {A.dtype} (convert with A.astype)")
    fix = _opts(True, True)
    shape = _shape2(A.shape)
    if A.format in ("csr", "csc", "bsr"):
        block = tuple(A.blocksize) if A.format == "bsr" else None
        data = np.ascontiguousarray(A.data).reshape(-1) if block else as_values(A.data, "data")
        t = _compressed(A.format, shape, as_index_array(A.indptr, "indptr"),
                        as_index_array(A.indices, "indices"), data, block, keep)
    elif A.format == "coo":
        rows, cols = (A.row, A.col) if hasattr(A, "row") else A.coords
        t = _native.Tensor.from_coo(list(shape), [as_index_array(rows, "row"), as_index_array(cols, "col")],
                                    as_values(A.data, "data"), **fix)
    else:
        return _from_scipy(A.tocsr(), format, keep)
    out = Tensor(t)
    return out.to(format) if format is not None else out


def _compressed(kind: str, shape: Tuple[int, int], indptr: np.ndarray, indices: np.ndarray,
                values: np.ndarray, block: Optional[Tuple[int, int]], keep: bool) -> "_native.Tensor":
    """A ``csr``, ``csc`` or ``bsr`` (``block`` = (r, c)) tensor from SciPy-style arrays,
    sorted and summed as SciPy does; a kept conversion of the same arrays is reused, and
    with ``keep`` a fresh one is kept (see ``_converted``)."""
    fix = _opts(True, True)
    if kind == "bsr":
        fmt = f"bsr:{block[0]}x{block[1]}"
        convert = lambda: _native.Tensor.from_bsr(shape, block, indptr, indices, values, **fix)  # noqa: E731
    else:
        fmt = kind
        ctor = _native.Tensor.from_csr if kind == "csr" else _native.Tensor.from_csc
        convert = lambda: ctor(shape, indptr, indices, values, **fix)  # noqa: E731
    return reuse_or_convert(fmt, shape, indptr, indices, values, convert, keep)


def from_torch(t: "torch.Tensor", format: Optional[str] = None) -> Tensor:
    """A torch sparse tensor (``sparse_coo``, ``sparse_csr``, ``sparse_csc`` or
    ``sparse_bsr``, on the CPU) as a Sparsile tensor, in its own format or ``format``."""
    return _from_torch(t, format, keep=False)


def _from_torch(t: "torch.Tensor", format: Optional[str], keep: bool) -> Tensor:
    """:func:`from_torch`; ``keep`` as for :func:`_from_scipy`."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"from_torch expects a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"the tensor is on device {t.device}; Sparsile reads CPU tensors")
    t = t.detach()
    if t.layout == torch.strided:
        raise TypeError("from_torch expects a sparse tensor; use sparsile.from_dense for a dense one")
    if t.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise TypeError(f"values must be {DTYPES_TEXT}, got {t.dtype}")
    if t.layout == torch.sparse_coo:
        t = t.coalesce()
        if t.dense_dim() != 0:
            raise ValueError("hybrid sparse tensors (with dense dimensions) are not supported")
        idx = t.indices().numpy()
        out = _native.Tensor.from_coo(list(t.shape), [np.ascontiguousarray(r) for r in idx],
                                      as_values(t.values(), "values"), sort_indices=True, sum_duplicates=True)
    elif t.layout in (torch.sparse_csr, torch.sparse_bsr):
        vals = t.values()
        block = (int(vals.shape[1]), int(vals.shape[2])) if t.layout == torch.sparse_bsr else None
        out = _compressed("bsr" if block else "csr", _shape2(t.shape),
                          as_index_array(t.crow_indices(), "crow_indices"),
                          as_index_array(t.col_indices(), "col_indices"),
                          as_values(vals.contiguous().reshape(-1) if block else vals, "values"), block,
                          keep)
    elif t.layout == torch.sparse_csc:
        out = _compressed("csc", _shape2(t.shape), as_index_array(t.ccol_indices(), "ccol_indices"),
                          as_index_array(t.row_indices(), "row_indices"), as_values(t.values(), "values"),
                          None, keep)
    else:
        raise TypeError(f"unsupported torch layout {t.layout}")
    res = Tensor(out)
    return res.to(format) if format is not None else res


def as_tensor(A: SparseLike, name: str = "A") -> Tensor:
    """``A`` as a :class:`Tensor`: itself, or converted from SciPy or torch."""
    if isinstance(A, Tensor):
        return A
    if is_torch_tensor(A):
        return _from_torch(A, None, keep=True)
    if type(A).__module__.startswith("scipy.sparse"):
        return _from_scipy(A, None, keep=True)
    raise TypeError(
        f"{name} must be a sparsile.Tensor, a scipy.sparse matrix or a torch sparse tensor, "
        f"got {type(A).__name__}"
    )


def load(path: Union[str, os.PathLike], format: str = "csr", dtype: DTypeLike = np.float32) -> Tensor:
    """Reads a Matrix Market file (plain or ``.gz``) into a tensor of ``format``.
    A missing file is ``FileNotFoundError`` (a folder ``IsADirectoryError``); a malformed
    one ``ValueError`` naming the line."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    return Tensor(_native.load(path, format, _dtype_name(dtype)))


def save(path: Union[str, os.PathLike], A: SparseLike) -> None:
    """Writes ``A`` as a Matrix Market ``coordinate real general`` file (gzip when the
    path ends in ``.gz``)."""
    _native.save(os.fspath(path), as_tensor(A)._native)
