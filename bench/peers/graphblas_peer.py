"""python-graphblas peer (SuiteSparse:GraphBLAS).

SpMM and SpMV accumulate into a zero-filled dense output (`C(plus) << A.mxm(X)`), which
selects SuiteSparse's fast in-place saxpy kernel; the plain `A.mxm(X).new()` picks a
much slower method. The zero output is made before each timed run, outside the timing.
SDDMM is the masked product `(X @ Y.T)[A.S]` times A's values."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import numpy as np  # noqa: E402


def measure(case):
    try:
        import graphblas as gb
    except ImportError as e:
        raise common.Unsupported("graphblas: not installed (bench/setup.sh)") from e
    gb.init("suitesparse", blocking=True)
    gb.ss.config["nthreads"] = case["threads"]
    m, n, k, op = case["m"], case["n"], case["k"], case["op"]
    a = gb.Matrix.ss.import_csr(
        nrows=m,
        ncols=n,
        indptr=case["indptr"].astype(np.uint64),
        col_indices=case["indices"].astype(np.uint64),
        values=case["values"],
        sorted_cols=True,
    )
    plus_times = gb.semiring.plus_times
    w, r = case["warmup"], case["repeat"]
    if op == "spmm":
        x = gb.Matrix.ss.import_fullr(values=case["X"].copy(), nrows=n, ncols=k)

        def zero():
            return gb.Matrix.ss.import_fullr(
                values=np.zeros((m, k), dtype=np.float32), nrows=m, ncols=k
            )

        def spmm(c):
            c(gb.binary.plus) << a.mxm(x, plus_times)
            return c

        c, times = common.time_op(spmm, w, r, prepare=zero)
        result = c.ss.export("fullr")["values"]
    elif op == "spmv":
        x = gb.Vector.ss.import_full(values=case["X"].copy(), size=n)

        def zero():
            return gb.Vector.ss.import_full(values=np.zeros(m, dtype=np.float32), size=m)

        def spmv(y):
            y(gb.binary.plus) << a.mxv(x, plus_times)
            return y

        y, times = common.time_op(spmv, w, r, prepare=zero)
        result = y.ss.export("full")["values"]
    else:
        x = gb.Matrix.ss.import_fullr(values=case["X"].copy(), nrows=m, ncols=k)
        y = gb.Matrix.ss.import_fullr(values=case["Y"].copy(), nrows=n, ncols=k)

        def sddmm(_):
            dots = x.mxm(y.T, plus_times).new(mask=a.S)
            return a.ewise_mult(dots, gb.binary.times).new()

        o, times = common.time_op(sddmm, w, r)
        result = on_pattern(case, o)
    return result, times, f"python-graphblas {gb.__version__}", None


def on_pattern(case, o):
    """O's values at A's stored positions, in CSR order (0 where O has none)."""
    rows, cols, vals = o.to_coo()
    indptr, indices = case["indptr"], case["indices"]
    a_rows = np.repeat(np.arange(case["m"], dtype=np.int64), np.diff(indptr))
    key_a = a_rows * case["n"] + indices.astype(np.int64)
    key_o = rows.astype(np.int64) * case["n"] + cols.astype(np.int64)
    order = np.argsort(key_o)
    key_o, vals = key_o[order], vals[order]
    pos = np.searchsorted(key_o, key_a)
    pos = np.minimum(pos, max(len(key_o) - 1, 0))
    out = np.zeros(case["nnz"], dtype=np.float32)
    if len(key_o):
        hit = key_o[pos] == key_a
        out[hit] = vals[pos[hit]]
    return out


if __name__ == "__main__":
    common.main("graphblas", measure)
