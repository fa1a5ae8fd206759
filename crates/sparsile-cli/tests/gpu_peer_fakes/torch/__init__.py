"""A NumPy stand-in for the parts of torch the GPU peers call (see ../README.md)."""

import contextlib

import numpy as np

import fake_clock

__version__ = "0.0-fake"
int32, int64, float32 = np.int32, np.int64, np.float32


class version:
    cuda = "12.fake"


class device:
    def __init__(self, kind, index=0):
        self.type, self.index = kind, index


class Tensor:
    def __init__(self, a):
        self.a = np.asarray(a)

    def to(self, dev=None, dtype=None):
        assert dev is None or isinstance(dev, device), dev
        return Tensor(self.a.astype(dtype) if dtype is not None else self.a.copy())

    def t(self):
        return Tensor(self.a.T)

    def view(self, *shape):
        return Tensor(self.a.reshape(shape))

    def reshape(self, *shape):
        return Tensor(self.a.reshape(shape))

    def cpu(self):
        return self

    def numpy(self):
        return self.a

    def __mul__(self, other):
        fake_clock.tick()
        return Tensor(self.a * other.a)


class SparseCsr:
    def __init__(self, crow, col, values, size):
        self.crow, self.col, self.vals, self.size = crow.a, col.a, values.a, size
        assert self.crow.dtype == self.col.dtype, "crow and col of one index type"

    def dense(self):
        out = np.zeros(self.size, dtype=np.float64)
        for i in range(self.size[0]):
            for p in range(self.crow[i], self.crow[i + 1]):
                out[i, self.col[p]] += self.vals[p]
        return out

    def values(self):
        return Tensor(self.vals)


def from_numpy(a):
    return Tensor(a)


def sparse_csr_tensor(crow, col, values, size):
    return SparseCsr(crow, col, values, size)


def mv(a, x):
    fake_clock.tick()
    return Tensor((a.dense() @ x.a).astype(np.float32))


@contextlib.contextmanager
def inference_mode():
    yield


class sparse:
    @staticmethod
    def mm(a, x):
        fake_clock.tick()
        return Tensor((a.dense() @ x.a).astype(np.float32))

    @staticmethod
    def sampled_addmm(a, x, yt, beta, alpha):
        assert beta == 0.0 and alpha == 1.0
        fake_clock.tick()
        full = x.a.astype(np.float64) @ yt.a.astype(np.float64)
        rows = np.repeat(np.arange(a.size[0]), np.diff(a.crow))
        vals = full[rows, a.col].astype(np.float32)
        return SparseCsr(Tensor(a.crow), Tensor(a.col), Tensor(vals), a.size)


class cuda:
    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.at = None

        def record(self):
            self.at = fake_clock.now()

        def synchronize(self):
            assert self.at is not None, "synchronize on an event never recorded"

        def elapsed_time(self, end):
            assert self.at is not None and end.at is not None
            return end.at - self.at

    @staticmethod
    def is_available():
        return fake_clock.devices() > 0

    @staticmethod
    def device_count():
        return fake_clock.devices()

    @staticmethod
    def set_device(dev):
        assert dev.index < fake_clock.devices()

    @staticmethod
    def synchronize(dev=None):
        pass

    @staticmethod
    def get_device_name(dev=None):
        return "Fake GPU"
