"""Dense operands: NumPy arrays, PyTorch CPU tensors and DLPack producers, without copies.

A dense operand is passed to a kernel as a C-contiguous float32/float64 NumPy array over
the caller's memory. PyTorch tensors and any other object with ``__dlpack__`` are viewed
through DLPack (``numpy.from_dlpack``); a strided (non-contiguous) operand is copied once
into a contiguous array, and only then. Wrong dtypes raise ``TypeError``, other wrong
inputs ``ValueError``; nothing reaches native code unchecked.

Example::

    >>> import numpy as np
    >>> x = np.ones((3, 2), dtype=np.float32)
    >>> as_array(x, "X")[0] is x
    True
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

#: Sparsile dtype names by NumPy dtype.
SPARSILE_DTYPE = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
#: NumPy dtypes by Sparsile dtype name.
NUMPY_DTYPE = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}


def is_torch_tensor(x: Any) -> bool:
    """Whether ``x`` is a ``torch.Tensor`` (without importing torch)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "layout")


def device_of(x: Any) -> str:
    """The device type of a torch tensor (``"cpu"``, ``"cuda"``, ...), ``"cuda"`` for
    another CUDA array (one with ``__cuda_array_interface__``, such as CuPy's, or one whose
    ``__dlpack_device__`` is CUDA, such as JAX's), ``"cpu"`` for anything else."""
    if is_torch_tensor(x):
        return x.device.type
    if hasattr(x, "__cuda_array_interface__"):
        return "cuda"
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        # kDLCUDA is 2 in dlpack.h.
        return "cuda" if int(x.__dlpack_device__()[0]) == 2 else "cpu"
    return "cpu"


def as_array(x: Any, name: str) -> Tuple[np.ndarray, bool]:
    """Returns ``(array, from_torch)``: ``x`` as a C-contiguous float32/float64 array
    sharing ``x``'s memory when it is contiguous, and whether ``x`` was a torch tensor.
    CUDA tensors are refused: the GPU path (``sparsile._cuda``) takes them."""
    from_torch = False
    if is_torch_tensor(x):
        import torch

        from_torch = True
        if x.layout != torch.strided:
            raise TypeError(f"{name} must be a dense tensor, got layout {x.layout}")
        if x.device.type != "cpu":
            raise ValueError(
                f"{name} is on device {x.device}, where this call takes host memory: pass "
                f"{name}.cpu(), or every dense operand on one CUDA device (target 'cuda')"
            )
        if x.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{name} must be float32 or float64, got {x.dtype}")
        x = x.detach()
        if x.is_conj() or x.is_neg():
            x = x.resolve_conj().resolve_neg()
        array = np.from_dlpack(x)
    elif isinstance(x, np.ndarray):
        array = x
    elif hasattr(x, "__dlpack__"):
        array = np.from_dlpack(x)
    else:
        array = np.asarray(x)
    if array.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be float32 or float64, got {array.dtype}")
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    return array, from_torch


def as_index_array(x: Any, name: str) -> np.ndarray:
    """``x`` as a 1-D C-contiguous int32 or int64 array (shared when already one)."""
    if is_torch_tensor(x):
        x = np.from_dlpack(x.detach())
    array = np.asarray(x)
    if array.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        if array.size == 0:
            array = array.astype(np.int32)
        else:
            raise TypeError(f"{name} must be an int32 or int64 array, got {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    return np.ascontiguousarray(array)


def as_values(x: Any, name: str) -> np.ndarray:
    """``x`` as a C-contiguous float32/float64 array (shared when already one)."""
    array, _ = as_array(x, name)
    return array


def wrap_output(array: np.ndarray, to_torch: bool) -> Any:
    """``array`` as a torch tensor sharing its memory when ``to_torch``, else itself."""
    if to_torch:
        import torch

        return torch.from_numpy(array)
    return array
