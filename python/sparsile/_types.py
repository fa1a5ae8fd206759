"""Type aliases of the public API, for signatures and IDEs.

- :data:`SparseLike`: a sparse operand — a :class:`sparsile.Tensor`, or a SciPy sparse
  matrix/array or a torch sparse tensor (converted on each call; convert once with
  :func:`sparsile.as_tensor` to avoid that);
- :data:`DenseLike`: a dense operand — a NumPy array, a torch tensor, a CuPy array, or any
  object with ``__dlpack__`` (float32 or float64, the sparse operand's dtype);
- :data:`DenseResult`: a dense result — a NumPy array, or a torch tensor when a dense input
  was one (a CuPy array for CuPy inputs on the GPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - names for type checkers only
    import scipy.sparse
    import torch

    from ._tensor import Tensor

SparseLike = Union["Tensor", "scipy.sparse.sparray", "scipy.sparse.spmatrix", "torch.Tensor"]
DenseLike = Union[np.ndarray, "torch.Tensor", Any]
DenseResult = Union[np.ndarray, "torch.Tensor"]
