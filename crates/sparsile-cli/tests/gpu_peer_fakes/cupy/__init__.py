"""A NumPy stand-in for the parts of CuPy the cuSPARSE peer calls (see ../README.md).
Arrays are NumPy arrays whose `.data.ptr` is their address, registered so that the
stand-in cuSPARSE bindings find them again."""

import numpy as np

from cupy import cuda  # noqa: F401

__version__ = "0.0-fake"
float32, float64, uint8, int32 = np.float32, np.float64, np.uint8, np.int32

# address -> array, for the cuSPARSE stand-in
registry = {}


class _Ptr:
    def __init__(self, ptr):
        self.ptr = ptr


class ndarray(np.ndarray):
    @property
    def data(self):
        address = self.__array_interface__["data"][0]
        registry[address] = self
        return _Ptr(address)


def _dev(a):
    return np.asarray(a).view(ndarray)


def asarray(a):
    return _dev(np.array(a, copy=True))


def zeros(shape, dtype=np.float64, order="C"):
    return _dev(np.zeros(shape, dtype=dtype, order=order))


def empty(shape, dtype=np.float64):
    return _dev(np.empty(shape, dtype=dtype))


def zeros_like(a):
    return _dev(np.zeros_like(np.asarray(a)))


def asfortranarray(a):
    return _dev(np.asfortranarray(np.asarray(a)))


def ascontiguousarray(a):
    return _dev(np.ascontiguousarray(np.asarray(a)))


def asnumpy(a):
    return np.array(np.asarray(a))


def max(a):  # noqa: A001
    return np.max(np.asarray(a))


def abs(a):  # noqa: A001
    return np.abs(np.asarray(a))
