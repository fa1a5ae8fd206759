"""cupyx.scipy.sparse of the stand-in: csr_matrix @ dense (result column-major, as
CuPy's cuSPARSE path returns it)."""

import numpy as np

import cupy
import fake_clock


class csr_matrix:
    def __init__(self, parts, shape):
        self.data, self.indices, self.indptr = (np.asarray(p) for p in parts)
        self.shape = shape

    def dense(self):
        out = np.zeros(self.shape)
        for i in range(self.shape[0]):
            for p in range(self.indptr[i], self.indptr[i + 1]):
                out[i, self.indices[p]] += self.data[p]
        return out

    def __matmul__(self, x):
        fake_clock.tick()
        y = (self.dense() @ np.asarray(x, dtype=np.float64)).astype(np.float32)
        return cupy.asfortranarray(y) if y.ndim == 2 else cupy.asarray(y)
