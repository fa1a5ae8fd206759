"""Type aliases of the public API, for signatures and IDEs.

- :data:`SparseLike`: a sparse operand — a :class:`sparsile.Tensor`, or a SciPy sparse
  matrix/array or a torch sparse tensor (converted on each call; convert once with
  :func:`sparsile.as_tensor` to avoid that);
- :data:`DenseLike`: a dense operand — a NumPy array, a torch tensor, a CuPy array, or any
  object with ``__dlpack__`` (float32 or float64, the sparse operand's dtype);
- :data:`DenseResult`: a dense result — a NumPy array, or a torch tensor when a dense input
  was one (a CuPy array for CuPy inputs on the GPU);
- :data:`IndexLike`: integer coordinates or structure arrays (int32 or int64) — a NumPy
  array, a torch tensor or a sequence of ints;
- :data:`DTypeLike`: a value type — a NumPy dtype (``np.float32``), a torch dtype
  (``torch.bfloat16``), or a name (``"float16"``, ``"bfloat16"``, ``"f32"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - names for type checkers only
    import scipy.sparse
    import torch

    from ._tensor import Tensor

SparseLike = Union["Tensor", "scipy.sparse.sparray", "scipy.sparse.spmatrix", "torch.Tensor"]
DenseLike = Union[np.ndarray, "torch.Tensor", Any]
DenseResult = Union[np.ndarray, "torch.Tensor"]
IndexLike = Union[np.ndarray, "torch.Tensor", Sequence[int]]
DTypeLike = Union[np.dtype, type, str, "torch.dtype"]
ScipySparse = Union["scipy.sparse.sparray", "scipy.sparse.spmatrix"]
