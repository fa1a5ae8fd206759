"""cuSPARSE GPU peer through CuPy (`--target cuda --peers cusparse`).

SpMM and SpMV: every variant this CuPy can reach, the fastest per case reported:
- `A @ X` on a `cupyx.scipy.sparse.csr_matrix`, what a CuPy user writes (CuPy picks the
  cuSPARSE routine and converts X to the layout it needs inside the call);
- cuSPARSE's generic API through CuPy's bindings (`cupy_backends.cuda.libs.cusparse`),
  once per algorithm: SpMM with CSR (ALG_DEFAULT, CSR_ALG1, CSR_ALG2, CSR_ALG3) and COO
  (COO_ALG1 to COO_ALG4), each with the dense operands row-major and column-major (the
  layout made once, outside the timing); SpMV with ALG_DEFAULT, CSR_ALG1, CSR_ALG2,
  COO_ALG1 and COO_ALG2. Descriptors and the work buffer are made once per variant;
  `cusparseSpMM_preprocess` / `cusparseSpMV_preprocess` run once, where CuPy exposes them,
  and their time is reported apart ("preprocess_ms"), never in the timed runs.

Every variant cuSPARSE accepts is checked against the first one's result; one that
disagrees is dropped (the note says so). The variants are screened with a few timed
runs; the fastest is then measured with the full warm-up and repeats, and its result is
the one the harness checks. A variant cuSPARSE refuses (an algorithm this version or
layout lacks) is skipped.

SDDMM: `cusparseSDDMM` where this CuPy exposes it (times A's values, in the timing, as
Sparsile computes the whole operation); otherwise reported as unsupported (PyTorch's
`sampled_addmm`, the torch peer, calls cuSPARSE's SDDMM).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common  # noqa: E402
from gpu_common import Unsupported  # noqa: E402

# Screening runs per variant before the fastest gets the full measurement.
SCREEN_RUNS = 5

# cuSPARSE's enumerators (cusparse.h, CUDA 11.2 and later); CuPy's names where it has
# them.
CUDA_R_32F = 0
SPMM_ALGS = [
    ("ALG_DEFAULT", "csr", 0),
    ("CSR_ALG1", "csr", 4),
    ("CSR_ALG2", "csr", 6),
    ("CSR_ALG3", "csr", 12),
    ("COO_ALG1", "coo", 1),
    ("COO_ALG2", "coo", 2),
    ("COO_ALG3", "coo", 3),
    ("COO_ALG4", "coo", 5),
]
SPMV_ALGS = [
    ("ALG_DEFAULT", "csr", 0),
    ("CSR_ALG1", "csr", 2),
    ("CSR_ALG2", "csr", 3),
    ("COO_ALG1", "coo", 1),
    ("COO_ALG2", "coo", 4),
]


def const(cs, name, default):
    return getattr(cs, name, default)


def cupy_device(case):
    """cupy, its cuSPARSE bindings and the case's GPU, or Unsupported."""
    try:
        import cupy
        import cupyx.scipy.sparse  # noqa: F401
        from cupy_backends.cuda.libs import cusparse as cs
    except ImportError as e:
        raise Unsupported(f"cupy: not installed ({gpu_common.first_line(e)})") from e
    version = f"cupy {cupy.__version__}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver, or no device: CUDARuntimeError
        raise Unsupported(f"{version}: no CUDA device ({gpu_common.first_line(e)})") from e
    ordinal = case.get("device") or 0
    if ordinal >= count:
        raise Unsupported(f"{version}: no CUDA device {ordinal} ({count} visible)")
    return cupy, cs, ordinal, version


class Events:
    """CuPy's CUDA events in the shape gpu_common.time_on_device takes."""

    def __init__(self, cupy):
        self.cupy = cupy

    def event(self):
        return self.cupy.cuda.Event()

    def elapsed(self, a, b):
        return self.cupy.cuda.get_elapsed_time(a, b)


class Variant:
    """One way to run the operation: `run()` (queued on the current stream) returns the
    result on the device; `close()` frees what the variant made."""

    def __init__(self, name, run, close=lambda: None, preprocess_ms=None, keep=()):
        self.name = name
        self.run = run
        self.close = close
        self.preprocess_ms = preprocess_ms
        # Host and device arrays whose addresses cuSPARSE holds (alpha, beta, operands).
        self.keep = keep


def sparse_descriptor(cs, kind, m, n, dev):
    """A CSR or COO descriptor of A (i32 indices) on `dev`'s arrays."""
    idx32 = const(cs, "CUSPARSE_INDEX_32I", 2)
    base = const(cs, "CUSPARSE_INDEX_BASE_ZERO", 0)
    nnz = dev["values"].size
    if kind == "csr":
        return cs.createCsr(
            m, n, nnz, dev["indptr"].data.ptr, dev["indices"].data.ptr,
            dev["values"].data.ptr, idx32, idx32, base, CUDA_R_32F,
        )
    return cs.createCoo(
        m, n, nnz, dev["rows"].data.ptr, dev["indices"].data.ptr,
        dev["values"].data.ptr, idx32, base, CUDA_R_32F,
    )


def timed_preprocess(cupy, events, call):
    """Runs `call()` once between two events; its time in ms."""
    start, end = events.event(), events.event()
    start.record()
    call()
    end.record()
    end.synchronize()
    return events.elapsed(start, end)


def spmm_variant(cupy, np, cs, events, handle, dev, m, n, k, name, kind, alg, order):
    """The generic-API SpMM `alg` on A as `kind`, dense operands in `order`."""
    row = order == "row"
    order_const = const(cs, "CUSPARSE_ORDER_ROW", 2) if row else const(cs, "CUSPARSE_ORDER_COL", 1)
    x = dev["X"] if row else cupy.asfortranarray(dev["X"])
    c = cupy.zeros((m, k), dtype=cupy.float32, order="C" if row else "F")
    op = const(cs, "CUSPARSE_OPERATION_NON_TRANSPOSE", 0)
    alpha = np.array(1.0, dtype=np.float32)
    beta = np.array(0.0, dtype=np.float32)
    mat_a = sparse_descriptor(cs, kind, m, n, dev)
    mat_x = cs.createDnMat(n, k, k if row else n, x.data.ptr, CUDA_R_32F, order_const)
    mat_c = cs.createDnMat(m, k, k if row else m, c.data.ptr, CUDA_R_32F, order_const)

    def close():
        cs.destroySpMat(mat_a)
        cs.destroyDnMat(mat_x)
        cs.destroyDnMat(mat_c)

    try:
        args = (handle, op, op, alpha.ctypes.data, mat_a, mat_x, beta.ctypes.data, mat_c, CUDA_R_32F, alg)
        size = cs.spMM_bufferSize(*args)
        buffer = cupy.empty(max(int(size), 1), dtype=cupy.uint8)
        preprocess_ms = None
        if hasattr(cs, "spMM_preprocess"):
            preprocess_ms = timed_preprocess(
                cupy, events, lambda: cs.spMM_preprocess(*args, buffer.data.ptr)
            )
    except Exception:
        close()
        raise

    def run():
        cs.spMM(*args, buffer.data.ptr)
        return c

    keep = (alpha, beta, x, c, buffer, dev)
    return Variant(f"SpMM {name} {order}-major", run, close, preprocess_ms, keep)


def spmv_variant(cupy, np, cs, events, handle, dev, m, n, name, kind, alg):
    """The generic-API SpMV `alg` on A as `kind`."""
    y = cupy.zeros(m, dtype=cupy.float32)
    op = const(cs, "CUSPARSE_OPERATION_NON_TRANSPOSE", 0)
    alpha = np.array(1.0, dtype=np.float32)
    beta = np.array(0.0, dtype=np.float32)
    mat_a = sparse_descriptor(cs, kind, m, n, dev)
    vec_x = cs.createDnVec(n, dev["X"].data.ptr, CUDA_R_32F)
    vec_y = cs.createDnVec(m, y.data.ptr, CUDA_R_32F)

    def close():
        cs.destroySpMat(mat_a)
        cs.destroyDnVec(vec_x)
        cs.destroyDnVec(vec_y)

    try:
        args = (handle, op, alpha.ctypes.data, mat_a, vec_x, beta.ctypes.data, vec_y, CUDA_R_32F, alg)
        size = cs.spMV_bufferSize(*args)
        buffer = cupy.empty(max(int(size), 1), dtype=cupy.uint8)
        preprocess_ms = None
        if hasattr(cs, "spMV_preprocess"):
            preprocess_ms = timed_preprocess(
                cupy, events, lambda: cs.spMV_preprocess(*args, buffer.data.ptr)
            )
    except Exception:
        close()
        raise

    def run():
        cs.spMV(*args, buffer.data.ptr)
        return y

    keep = (alpha, beta, y, buffer, dev)
    return Variant(f"SpMV {name}", run, close, preprocess_ms, keep)


def sddmm_variant(cupy, np, cs, events, handle, dev, m, n, k):
    """cusparseSDDMM: (X @ Y.T) at A's pattern, times A's values."""
    if not (hasattr(cs, "sDDMM") and hasattr(cs, "sDDMM_bufferSize")):
        raise Unsupported(
            "this CuPy does not expose cusparseSDDMM (the torch peer's sampled_addmm calls it)"
        )
    row = const(cs, "CUSPARSE_ORDER_ROW", 2)
    non_t = const(cs, "CUSPARSE_OPERATION_NON_TRANSPOSE", 0)
    trans = const(cs, "CUSPARSE_OPERATION_TRANSPOSE", 1)
    out = cupy.zeros_like(dev["values"])
    sampled = dict(dev, values=out)
    alpha = np.array(1.0, dtype=np.float32)
    beta = np.array(0.0, dtype=np.float32)
    mat_x = cs.createDnMat(m, k, k, dev["X"].data.ptr, CUDA_R_32F, row)
    mat_y = cs.createDnMat(n, k, k, dev["Y"].data.ptr, CUDA_R_32F, row)
    mat_o = sparse_descriptor(cs, "csr", m, n, sampled)

    def close():
        cs.destroyDnMat(mat_x)
        cs.destroyDnMat(mat_y)
        cs.destroySpMat(mat_o)

    alg = const(cs, "CUSPARSE_SDDMM_ALG_DEFAULT", 0)
    try:
        args = (handle, non_t, trans, alpha.ctypes.data, mat_x, mat_y, beta.ctypes.data, mat_o, CUDA_R_32F, alg)
        size = cs.sDDMM_bufferSize(*args)
        buffer = cupy.empty(max(int(size), 1), dtype=cupy.uint8)
        preprocess_ms = None
        if hasattr(cs, "sDDMM_preprocess"):
            preprocess_ms = timed_preprocess(
                cupy, events, lambda: cs.sDDMM_preprocess(*args, buffer.data.ptr)
            )
    except Exception:
        close()
        raise
    values = dev["values"]

    def run():
        cs.sDDMM(*args, buffer.data.ptr)
        return out * values

    keep = (alpha, beta, out, buffer, dev, sampled)
    return Variant("SDDMM ALG_DEFAULT", run, close, preprocess_ms, keep)


def agrees(cupy, got, expected):
    """The harness's tolerance: max|a - b| <= 1e-3 (max|b| + 1)."""
    if got.shape != expected.shape:
        return False
    diff = float(cupy.max(cupy.abs(got.astype(cupy.float64) - expected))) if got.size else 0.0
    scale = float(cupy.max(cupy.abs(expected))) if expected.size else 0.0
    return diff == diff and diff <= 1e-3 * (scale + 1.0)


def measure(case):
    cupy, cs, ordinal, version = cupy_device(case)
    np = gpu_common.numpy()
    import cupyx.scipy.sparse as csp

    arr = gpu_common.arrays(case)
    m, n, k, op = case["m"], case["n"], case["k"], case["op"]
    if case["nnz"] >= 2**31:
        raise Unsupported("more than 2^31 non-zeros (this peer uses i32 indices)")
    with cupy.cuda.Device(ordinal):
        events = Events(cupy)
        handle = cupy.cuda.device.get_cusparse_handle()
        try:
            version += f", cuSPARSE {cs.getVersion(handle)}"
        except Exception:
            pass
        counts = np.diff(arr["indptr"])
        dev = {
            "indptr": cupy.asarray(arr["indptr"].astype(np.int32)),
            "indices": cupy.asarray(arr["indices"]),
            "values": cupy.asarray(arr["values"]),
            "rows": cupy.asarray(np.repeat(np.arange(m, dtype=np.int32), counts)),
            "X": cupy.asarray(arr["X"]),
        }
        if op == "sddmm":
            dev["Y"] = cupy.asarray(arr["Y"])
        a = csp.csr_matrix((dev["values"], dev["indices"], dev["indptr"]), shape=(m, n))

        # (label, maker): each maker builds one variant, or raises when cuSPARSE refuses.
        makers = []
        if op == "spmm":
            makers.append(("cupyx A @ X", lambda: Variant("cupyx A @ X", lambda: a @ dev["X"])))
            for name, kind, alg in SPMM_ALGS:
                for order in ("row", "col"):
                    makers.append(
                        (
                            f"SpMM {name} {order}-major",
                            lambda name=name, kind=kind, alg=alg, order=order: spmm_variant(
                                cupy, np, cs, events, handle, dev, m, n, k, name, kind, alg, order
                            ),
                        )
                    )
        elif op == "spmv":
            makers.append(("cupyx A @ x", lambda: Variant("cupyx A @ x", lambda: a @ dev["X"])))
            for name, kind, alg in SPMV_ALGS:
                makers.append(
                    (
                        f"SpMV {name}",
                        lambda name=name, kind=kind, alg=alg: spmv_variant(
                            cupy, np, cs, events, handle, dev, m, n, name, kind, alg
                        ),
                    )
                )
        else:
            makers.append(
                ("SDDMM", lambda: sddmm_variant(cupy, np, cs, events, handle, dev, m, n, k))
            )
        return run_variants(cupy, events, case, makers, version, op)


def run_variants(cupy, events, case, makers, version, op):
    """Screens every variant (keeping only the fastest so far alive), measures the
    fastest, and returns the peer's answer."""
    refused, disagreed = [], []
    expected = None
    best, best_time, screened = None, float("inf"), 0
    for label, make in makers:
        try:
            variant = make()
        except Unsupported:
            raise
        except Exception as e:  # cuSPARSE refuses an algorithm, layout or size
            refused.append(f"{label}: {gpu_common.first_line(e)}")
            continue
        try:
            first = variant.run()
            cupy.cuda.Device().synchronize()
        except Exception as e:
            refused.append(f"{label}: {gpu_common.first_line(e)}")
            variant.close()
            continue
        if expected is None:
            expected = first.astype(cupy.float64)
        elif not agrees(cupy, first, expected):
            disagreed.append(variant.name)
            variant.close()
            continue
        _, times = gpu_common.time_on_device(
            variant.run, 1, min(SCREEN_RUNS, case["repeat"]), events.event, events.elapsed
        )
        screened += 1
        t = gpu_common.median(times)
        if t < best_time:
            if best is not None:
                best.close()
            best, best_time = variant, t
        else:
            variant.close()
    if best is None:
        raise Unsupported(f"{version}: cuSPARSE ran no {op} variant ({'; '.join(refused)})")
    result, times = gpu_common.time_on_device(
        best.run, case["warmup"], case["repeat"], events.event, events.elapsed
    )
    cupy.cuda.Device().synchronize()
    host = cupy.asnumpy(cupy.ascontiguousarray(result))
    best.close()
    parts = [f"best of {screened} variants: {best.name}"]
    if best.preprocess_ms is not None:
        parts.append(f"preprocessing {best.preprocess_ms:.3f} ms, untimed")
    if refused:
        parts.append(f"{len(refused)} refused by cuSPARSE ({refused[0]}{', ...' if len(refused) > 1 else ''})")
    if disagreed:
        parts.append(f"dropped for wrong results: {', '.join(disagreed)}")
    return {
        "result": host,
        "times_ms": times,
        "version": version,
        "note": "; ".join(parts),
        "preprocess_ms": best.preprocess_ms,
    }


if __name__ == "__main__":
    gpu_common.main("cusparse", measure, sys.argv)
