"""Sparsile: a sparse tensor compiler for NumPy, SciPy and PyTorch.

State *what* to compute in index notation, *how* sparse operands are stored (formats
composed from axes), and *how* to run it (schedules); Sparsile generates C, compiles it
into a cache and runs it in parallel. Ready operators (``spmm``, ``sddmm``, ``spmv``,
``mttkrp``, ``rgms``, batched variants) and PyTorch autograd functions
(:mod:`sparsile.torch`) are built on the compiler.

Example::

    >>> import numpy as np, scipy.sparse as sp, sparsile
    >>> A = sparsile.from_scipy(sp.random(100, 80, density=0.05, format="csr", dtype=np.float32))
    >>> X = np.random.rand(80, 16).astype(np.float32)
    >>> Y = sparsile.spmm(A, X)          # == A.to_scipy() @ X
"""

from ._cache import cache_info, clear_cache
from ._cuda import locate_nvrtc as _locate_nvrtc
from ._compile import Kernel, Schedule, compile
from ._native import InternalError, __version__
from ._explain import explain, recipes, tune
from ._placement import aligned
from ._ops import mttkrp, rgms, sddmm, spmm, spmm_batched, spmv, spmv_batched
from ._threads import get_num_threads, set_num_threads
from ._tensor import (
    Tensor,
    as_tensor,
    from_coo,
    from_coords,
    from_csr,
    from_dense,
    from_scipy,
    from_torch,
    load,
    save,
)

__all__ = [
    "InternalError",
    "Kernel",
    "Schedule",
    "Tensor",
    "__version__",
    "aligned",
    "as_tensor",
    "cache_info",
    "clear_cache",
    "compile",
    "explain",
    "from_coo",
    "from_coords",
    "from_csr",
    "from_dense",
    "from_scipy",
    "from_torch",
    "get_num_threads",
    "load",
    "mttkrp",
    "recipes",
    "rgms",
    "save",
    "set_num_threads",
    "sddmm",
    "spmm",
    "spmm_batched",
    "spmv",
    "spmv_batched",
    "tune",
]

# GPU kernels compile with the NVRTC of the user's CUDA wheels unless SPARSILE_NVRTC names one.
_locate_nvrtc()
