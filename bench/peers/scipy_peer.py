"""SciPy peer: `A @ X` for SpMM and SpMV (single-threaded, as SciPy is); SDDMM as a
user writes it: gather the rows of X and Y for a chunk of nonzeros, `einsum` the dot
products, scale by A's values."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import numpy as np  # noqa: E402

# Nonzeros per SDDMM chunk: the gathered rows stay around 16 MB.
CHUNK_FLOATS = 1 << 22


def measure(case):
    import scipy

    a = common.scipy_csr(case)
    op, x = case["op"], case["X"]
    if op in ("spmm", "spmv"):
        result, times = common.time_op(lambda _: a @ x, case["warmup"], case["repeat"])
    else:
        y, k, nnz = case["Y"], case["k"], case["nnz"]
        rows = a.tocoo().row
        cols, vals = case["indices"], case["values"]
        chunk = max(1, CHUNK_FLOATS // k)

        def sddmm(_):
            out = np.empty(nnz, dtype=np.float32)
            for s in range(0, nnz, chunk):
                e = min(nnz, s + chunk)
                out[s:e] = vals[s:e] * np.einsum("ij,ij->i", x[rows[s:e]], y[cols[s:e]])
            return out

        result, times = common.time_op(sddmm, case["warmup"], case["repeat"])
    return result, times, f"scipy {scipy.__version__}", None


if __name__ == "__main__":
    common.main("scipy", measure)
