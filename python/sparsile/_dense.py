"""Dense operands: NumPy arrays, PyTorch CPU tensors and DLPack producers, without copies.

A dense operand is passed to a kernel as a C-contiguous float16/float32/float64 NumPy
array over the caller's memory. PyTorch tensors and any other object with ``__dlpack__``
are viewed through DLPack (``numpy.from_dlpack``); a strided (non-contiguous) operand is
copied once into a contiguous array, and only then. Wrong dtypes raise ``TypeError``,
other wrong inputs ``ValueError``; nothing reaches native code unchecked.

bfloat16: NumPy has no such type, so ``torch.bfloat16`` tensors are viewed (not copied)
as uint16 arrays of their bits, which native code reads as bfloat16; bfloat16 results
come back as torch tensors viewing the result's bits. A NumPy uint16 array is never taken
for bfloat16 values: only torch tensors are.

Example::

    >>> import numpy as np
    >>> x = np.ones((3, 2), dtype=np.float32)
    >>> as_array(x, "X")[0] is x
    True
"""

from __future__ import annotations

import sys
from typing import Any, Tuple

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))

#: How a bfloat16 dtype is named (``Tensor.dtype`` of a bfloat16 tensor): NumPy has none.
BFLOAT16 = "bfloat16"
#: The NumPy type holding bfloat16 values: their bits.
BF16_BITS = np.dtype(np.uint16)

#: Sparsile dtype names by NumPy dtype (and by ``BFLOAT16``).
SPARSILE_DTYPE = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
                  np.dtype(np.float64): "f64", BFLOAT16: "bf16"}
#: NumPy dtypes by Sparsile dtype name (``BFLOAT16`` for bf16).
NUMPY_DTYPE = {"f16": np.dtype(np.float16), "f32": np.dtype(np.float32),
               "f64": np.dtype(np.float64), "bf16": BFLOAT16}
#: What the accepted value types are, for error messages.
DTYPES_TEXT = "float16, bfloat16 (torch tensors), float32 or float64"


class Bf16Bits:
    """A uint16 array marked as the bits of bfloat16 values, which :func:`as_array` takes
    as it is (for callers inside the package that have no torch tensor to pass)."""

    __slots__ = ("bits",)

    def __init__(self, bits: np.ndarray) -> None:
        self.bits = np.asarray(bits, dtype=BF16_BITS)


def value_dtype(array: np.ndarray) -> Any:
    """The value type ``array`` holds, as :attr:`sparsile.Tensor.dtype` names it:
    ``BFLOAT16`` for bfloat16 bits (what :func:`as_array` makes of a torch.bfloat16
    tensor), else the array's dtype."""
    return BFLOAT16 if array.dtype == BF16_BITS else array.dtype


def is_torch_tensor(x: Any) -> bool:
    """Whether ``x`` is a ``torch.Tensor`` (its subclasses included), without importing
    torch: where torch was never imported, nothing is one. Cheap (an ``isinstance``): a
    call on CUDA tensors asks it about twenty times."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def device_of(x: Any) -> str:
    """The device type of a torch tensor (``"cpu"``, ``"cuda"``, ...), ``"cuda"`` for
    another CUDA array (one with ``__cuda_array_interface__``, such as CuPy's, or one whose
    ``__dlpack_device__`` is CUDA, such as JAX's), ``"cpu"`` for anything else."""
    if is_torch_tensor(x):
        # `is_cpu` is a fifth of `device.type`'s cost, and CPU tensors are the common case.
        return "cpu" if x.is_cpu else x.device.type
    if hasattr(x, "__cuda_array_interface__"):
        return "cuda"
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        # kDLCUDA is 2 in dlpack.h.
        return "cuda" if int(x.__dlpack_device__()[0]) == 2 else "cpu"
    return "cpu"


_TORCH_FLOATS: Tuple[Any, ...] = ()


def _torch_floats(torch: Any) -> Tuple[Any, ...]:
    """torch's float dtypes that Sparsile takes, looked up once."""
    global _TORCH_FLOATS
    if not _TORCH_FLOATS:
        _TORCH_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
    return _TORCH_FLOATS


def as_array(x: Any, name: str) -> Tuple[np.ndarray, bool]:
    """Returns ``(array, from_torch)``: ``x`` as a C-contiguous float16/float32/float64
    array sharing ``x``'s memory when it is contiguous (a torch.bfloat16 tensor as a
    uint16 array of its bits), and whether ``x`` was a torch tensor. CUDA tensors are
    refused: the GPU path (``sparsile._cuda``) takes them."""
    from_torch = False
    bf16 = False
    if isinstance(x, Bf16Bits):
        return np.ascontiguousarray(x.bits), False
    if is_torch_tensor(x):
        import torch

        from_torch = True
        if x.layout != torch.strided:
            raise TypeError(f"{name} must be a dense tensor, got layout {x.layout}")
        if not x.is_cpu:
            raise ValueError(
                f"{name} is on device {x.device}, where this call takes host memory: pass "
                f"{name}.cpu(), or every dense operand on one CUDA device (target 'cuda')"
            )
        if x.dtype not in _torch_floats(torch):
            raise TypeError(f"{name} must be {DTYPES_TEXT}, got {x.dtype}")
        if x.requires_grad:
            x = x.detach()
        if x.is_conj() or x.is_neg():
            x = x.resolve_conj().resolve_neg()
        bf16 = x.dtype == torch.bfloat16
        # NumPy has no bfloat16: the bits, viewed as int16. (`Tensor.numpy` shares the
        # memory as DLPack does, at a third of its cost per call.)
        array = x.view(torch.int16).numpy().view(BF16_BITS) if bf16 else x.numpy()
    elif isinstance(x, np.ndarray):
        array = x
    elif hasattr(x, "__dlpack__"):
        array = np.from_dlpack(x)
    else:
        array = np.asarray(x)
    if array.dtype not in FLOAT_DTYPES and not bf16:
        raise TypeError(f"{name} must be {DTYPES_TEXT}, got {array.dtype}")
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
    """``x`` as a C-contiguous float16/float32/float64 array, or bfloat16 bits from a
    torch tensor (shared when already one)."""
    array, _ = as_array(x, name)
    return array


def wrap_output(array: np.ndarray, to_torch: bool) -> Any:
    """``array`` as a torch tensor sharing its memory when ``to_torch`` (bfloat16 bits as
    a torch.bfloat16 tensor), else itself (bfloat16 as its uint16 bits)."""
    if to_torch:
        import torch

        if array.dtype == BF16_BITS:
            return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(array)
    return array
