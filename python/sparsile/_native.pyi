"""Type stubs of the native module ``sparsile._native`` (PyO3). The public API is the
``sparsile`` package, which wraps these; errors are ``ValueError`` (bad values: malformed
arrays, shapes, formats, programs, schedules) and ``TypeError`` (bad types)."""

from os import PathLike
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str

class InternalError(RuntimeError):
    """A bug in Sparsile (a Rust panic), raised as an ordinary exception."""

IndexArray = Union[npt.NDArray[np.int32], npt.NDArray[np.int64]]
ValueArray = Union[npt.NDArray[np.float16], npt.NDArray[np.float32], npt.NDArray[np.float64], npt.NDArray[np.uint16]]  # uint16: bfloat16 bits

class Tensor:
    """A sparse tensor: a format (axes with structure arrays) and values, owned."""

    @staticmethod
    def from_csr(shape: Tuple[int, int], indptr: IndexArray, indices: IndexArray, values: ValueArray,
                 sort_indices: bool = False, sum_duplicates: bool = False) -> Tensor:
        """A CSR matrix from SciPy-style arrays, checked."""
    @staticmethod
    def from_csc(shape: Tuple[int, int], indptr: IndexArray, indices: IndexArray, values: ValueArray,
                 sort_indices: bool = False, sum_duplicates: bool = False) -> Tensor:
        """A CSC matrix from SciPy-style arrays, checked."""
    @staticmethod
    def from_bsr(shape: Tuple[int, int], block: Tuple[int, int], indptr: IndexArray, indices: IndexArray,
                 values: ValueArray, sort_indices: bool = False, sum_duplicates: bool = False) -> Tensor:
        """A BSR matrix with ``block = (r, c)``; ``values`` holds r*c values per block."""
    @staticmethod
    def from_coo(shape: Sequence[int], coords: Sequence[IndexArray], values: ValueArray,
                 sort_indices: bool = False, sum_duplicates: bool = False) -> Tensor:
        """A COO tensor from one coordinate array per dimension, checked."""
    @staticmethod
    def from_dense(array: ValueArray) -> Tensor:
        """A ``dense`` tensor holding a copy of ``array``."""
    @property
    def shape(self) -> List[int]: ...
    @property
    def format(self) -> str: ...
    @property
    def dtype(self) -> str:
        """``f32``, ``f64``, ``f16`` or ``bf16``."""
    @property
    def nnz(self) -> int:
        """Stored values, padding included."""
    @property
    def index_type(self) -> str:
        """``i32`` or ``i64``."""
    def convert(self, format: str, dtype: Optional[str] = None, index_type: Optional[str] = None) -> Tensor:
        """The tensor in another format (and value / index type)."""
    def to_coo(self) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """``(coords (ndim, nnz), values)``, sorted, padding dropped."""
    def axes(self) -> List[Dict[str, object]]:
        """Per axis: ``kind``, ``length``, ``parent``, and copies of ``indptr`` / ``indices``."""
    def values(self) -> ValueArray:
        """A copy of the stored values."""
    def array_view(self, what: str, axis: int = 0) -> npt.NDArray[Any]:
        """A view (no copy) of the values or of an axis's indptr / indices array."""
    def same_pattern(self, indptr: IndexArray, indices: IndexArray) -> bool:
        """Whether the one compressed axis holds exactly ``indptr`` and ``indices``."""
    def with_values(self, values: ValueArray) -> Tensor:
        """This structure (shared) with a copy of ``values``."""
    def to_dense(self) -> npt.NDArray[np.float64]:
        """Every element as a dense f64 array."""

Input = Union[Tensor, Tuple[Tensor, ValueArray], ValueArray]

class DeviceArray:
    """An array in CUDA device memory the caller owns (no copy is made)."""

    def __init__(self, ptr: int, shape: Sequence[int], dtype: str, device: int,
                 strides: Optional[Sequence[int]] = None) -> None:
        """``ptr``: device address; ``dtype``: ``f32``, ``f64``, ``i32`` or ``i64``;
        ``device``: CUDA ordinal; ``strides`` in elements (checked to be C-contiguous)."""
    @property
    def ptr(self) -> int: ...
    @property
    def shape(self) -> List[int]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> int: ...

DeviceInput = Union[DeviceArray, Tensor, Tuple[Tensor, DeviceArray], Tuple[Tensor, DeviceArray, bool],
                    Tuple[Tensor, ValueArray]]
Alloc = Callable[[str, List[int], str], DeviceArray]

def infer_program(expr: str, sparse: Sequence[str], formats: Mapping[str, str], dtype: str = "f32") -> str:
    """The program of a lone statement with inferred declarations."""

def device_cache_stats() -> Tuple[int, int, int]:
    """``(structures, arrays, bytes)`` of sparse operands kept on the device."""
def device_cache_clear() -> None:
    """Frees what is kept on the device of sparse operands."""

class Kernel:
    """A compiled index-notation program."""

    def __init__(self, program: str, formats: Optional[Mapping[str, str]] = None, trace: Optional[str] = None,
                 index_like: Optional[Mapping[str, Tensor]] = None, target: str = "cpu") -> None:
        """Compiles ``program`` (GIL released): ``formats`` replaces declared formats,
        ``trace`` (JSON) replaces the default schedule, ``index_like`` fixes index types,
        ``target`` is ``cpu``, ``cuda`` or ``cuda-sim``."""
    def run(self, inputs: Mapping[str, Input], threads: Optional[int] = None,
            params: Optional[Mapping[str, int]] = None) -> Dict[str, Union[ValueArray, Tensor]]:
        """Runs on borrowed arrays (GIL released); outputs by tensor name."""
    def run_device(self, inputs: Mapping[str, DeviceInput], alloc: Alloc, stream: int,
                   params: Optional[Mapping[str, int]] = None,
                   structures: bool = False) -> Dict[str, Optional[Tensor]]:
        """Runs (target ``cuda``) on CUDA memory in place, on ``stream``; ``alloc`` makes
        the outputs. ``None`` per dense output, a structure per sparse one."""
    def ir(self, stage: str) -> str:
        """``stage1``, ``stage2``, ``stage3``, ``c`` or ``cuda`` (the generated source)."""
    @property
    def target(self) -> str: ...
    def compile_info(self) -> Tuple[str, float]:
        """``(hit | miss, seconds)``."""

class Schedule:
    """A program being scheduled, with its trace."""

    def __init__(self, program: str, formats: Optional[Mapping[str, str]] = None) -> None: ...
    def apply(self, step: str) -> None:
        """Applies one trace step given as JSON."""
    def split(self, block: str, var: str, factor: int, tail: str = "inner_fixed") -> Tuple[Tuple[str, str], Tuple[str, str]]:
        """Returns the outer and inner loops as ``(block, var)``."""
    def fuse(self, block: str, outer: str, inner: str) -> Tuple[str, str]:
        """Returns the fused loop as ``(block, var)``."""
    def trace(self) -> str:
        """The trace as JSON."""
    @staticmethod
    def replay(program: str, trace: str, formats: Optional[Mapping[str, str]] = None) -> Schedule: ...
    def ir(self) -> str:
        """Stage I before the first loop-level step, stage II after."""

def load(path: Union[str, PathLike[str]], format: str = "csr", dtype: str = "f32") -> Tensor:
    """Reads a Matrix Market file (plain or .gz)."""

def save(path: Union[str, PathLike[str]], tensor: Tensor) -> None:
    """Writes a Matrix Market ``coordinate real general`` file."""

def set_num_threads(threads: Optional[int]) -> None:
    """Sets the process-wide thread count of kernel calls (``None``: the default)."""
def num_threads_set() -> Optional[int]:
    """The thread count ``set_num_threads`` set, or ``None``."""
def default_num_threads() -> int:
    """The thread count without ``set_num_threads``: ``SPARSILE_NUM_THREADS`` or every core."""

def cache_info() -> Dict[str, Any]:
    """What the kernel cache folder holds (read only; the folder is never created)."""
def clear_cache() -> Dict[str, Any]:
    """Removes the compiled kernels from the kernel cache; what was removed."""

class AutoKernel:
    """A program whose schedule is chosen per input (or named once with ``recipe``)."""

    def __init__(self, program: str, recipe: str = "auto", target: str = "cpu") -> None: ...
    def run(self, inputs: Mapping[str, object], threads: Optional[int] = None) -> Dict[str, object]: ...
    def run_device(self, inputs: Mapping[str, DeviceInput], alloc: Alloc, stream: int,
                   params: Optional[Mapping[str, int]] = None,
                   structures: bool = False) -> Dict[str, Optional[Tensor]]:
        """See ``Kernel.run_device``."""
    def explain(self, inputs: Mapping[str, object], threads: int) -> str:
        """The choice for ``inputs`` as JSON, without running."""
    @property
    def recipe(self) -> Optional[str]: ...
    def last(self) -> Optional[str]: ...

def recipes() -> str:
    """Every named recipe, as JSON."""

def tune(
    a: Tensor,
    op: str,
    k: int,
    threads: int,
    strategy_name: str = "pruned",
    budget_s: Optional[float] = None,
    record: bool = True,
    rounds: int = 2,
    repeat: int = 5,
) -> str:
    """Tunes op on a in its own format; the report as JSON."""
