"""Intel MKL peer through sparse_dot_mkl (inspector-executor sparse BLAS): SpMM and
SpMV, both with a fresh result per call and added into an output allocated once and
cleared before each run outside the timing (`out=`); the faster is reported. The `mkl` wheel ships only libmkl_rt.so.3, so MKL_RT points at it. MKL threads
follow MKL_NUM_THREADS. sparse_dot_mkl has no SDDMM."""

import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import numpy as np  # noqa: E402


def measure(case):
    if case["op"] == "sddmm":
        raise common.Unsupported("mkl: sparse_dot_mkl has no SDDMM")
    found = sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")))
    if found and "MKL_RT" not in os.environ:
        os.environ["MKL_RT"] = found[0]
    try:
        import sparse_dot_mkl
        from sparse_dot_mkl import dot_product_mkl
    except Exception as e:  # ImportError, or OSError when libmkl_rt is missing
        raise common.Unsupported(f"mkl: not installed (bench/setup.sh): {type(e).__name__}") from e
    try:
        sparse_dot_mkl.mkl_set_num_threads(case["threads"])
    except AttributeError:
        pass
    a = common.scipy_csr(case)
    x = case["X"]
    # Two ways users call it: a fresh result per call, or the product added into an
    # output allocated once and cleared before each run outside the timing (`out=`). Both
    # are measured; the faster one is reported, with a note saying which.
    shape = (case["m"],) if x.ndim == 1 else (case["m"], x.shape[1])
    out = common.aligned_zeros(shape, x.dtype)

    def clear():
        out.fill(0)
        return out

    w, r = case["warmup"], case["repeat"]
    fresh = common.time_op(lambda _: dot_product_mkl(a, x, dense=True), w, r)
    into = common.time_op(
        lambda o: dot_product_mkl(a, x, dense=True, out=o), w, r, prepare=clear
    )
    if np.median(into[1]) < np.median(fresh[1]):
        (result, times), note = into, "into a reused output (out=)"
    else:
        (result, times), note = fresh, "fresh output per call"
    return result, times, f"sparse_dot_mkl {sparse_dot_mkl.__version__}", note


if __name__ == "__main__":
    common.main("mkl", measure)
