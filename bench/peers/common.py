"""Shared plumbing of the `sparsile bench` peers.

The harness writes a case folder (A.indptr.i64, A.indices.i32, A.values.f32, X.f32,
Y.f32 for SDDMM, case.json) and runs `python PEER_peer.py case.json` with the thread
count in OMP_NUM_THREADS / MKL_NUM_THREADS / OPENBLAS_NUM_THREADS (and in case.json).
A peer times only the operation (warm-up, then repeats) and writes `out.NAME.f32`
(raw little-endian f32: SpMM m x K row-major, SDDMM nnz values in CSR order, SpMV m
values) and `result.NAME.json`.
"""

import json
import mmap
import os
import sys
import time

import numpy as np


class Unsupported(Exception):
    """The peer lacks this operation (or its package): reported, not a failure."""


LINE = 64
HUGE = 8 << 20
HUGE_PAGE = 2 << 20


def aligned_empty(shape, dtype):
    """An uninitialised array placed as Sparsile places its own buffers, so that every
    system gets its operands and outputs alike: on a 64-byte cache line (NumPy's large
    arrays start 16 bytes past a page), and from 8 MiB on in a mapping of its own on a
    2 MiB boundary marked for transparent huge pages (Linux). This is what
    `sparsile.aligned` does; the peers' environment does not have the package."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * dtype.itemsize
    if nbytes >= HUGE and hasattr(mmap, "MADV_HUGEPAGE"):
        region = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        raw = np.frombuffer(region, dtype=np.uint8)
        start = (-raw.ctypes.data) % HUGE_PAGE
        length = (nbytes + HUGE_PAGE - 1) // HUGE_PAGE * HUGE_PAGE
        region.madvise(mmap.MADV_HUGEPAGE, start, min(length, len(region) - start))
    else:
        raw = np.empty(nbytes + LINE, dtype=np.uint8)
        start = (-raw.ctypes.data) % LINE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def aligned_zeros(shape, dtype):
    """Zeros, aligned like `aligned_empty`."""
    out = aligned_empty(shape, dtype)
    out[...] = 0
    return out


def _read(path, dtype):
    """A raw little-endian array file, in line-aligned memory."""
    data = np.fromfile(path, dtype=dtype)
    out = aligned_empty(data.shape, data.dtype)
    out[...] = data
    return out


def load(case_path):
    """The case description with its arrays: indptr, indices, values, X (and Y)."""
    with open(case_path) as f:
        case = json.load(f)
    d = case["dir"]
    m, n, k, op = case["m"], case["n"], case["k"], case["op"]
    case["indptr"] = _read(os.path.join(d, "A.indptr.i64"), "<i8")
    case["indices"] = _read(os.path.join(d, "A.indices.i32"), "<i4")
    case["values"] = _read(os.path.join(d, "A.values.f32"), "<f4")
    x = _read(os.path.join(d, "X.f32"), "<f4")
    if op == "spmm":
        case["X"] = x.reshape(n, k)
    elif op == "sddmm":
        case["X"] = x.reshape(m, k)
        case["Y"] = _read(os.path.join(d, "Y.f32"), "<f4").reshape(n, k)
    else:
        case["X"] = x
    return case


def scipy_csr(case):
    """A as a scipy.sparse CSR matrix (i32 indices when they fit)."""
    import scipy.sparse as sp

    indptr = case["indptr"]
    if case["nnz"] < 2**31:
        indptr = indptr.astype(np.int32)
    return sp.csr_matrix(
        (case["values"], case["indices"], indptr), shape=(case["m"], case["n"])
    )


def time_op(run, warmup, repeat, prepare=None):
    """Runs `run(state)` `warmup` times untimed, then `repeat` times timed; `prepare()`
    (untimed) gives each run its state. Returns the last result and the times in ms."""
    result = None
    for _ in range(max(warmup, 1)):
        result = run(prepare() if prepare else None)
    times = []
    for _ in range(repeat):
        state = prepare() if prepare else None
        t0 = time.perf_counter()
        result = run(state)
        times.append((time.perf_counter() - t0) * 1e3)
    return result, times


def _write(case, name, payload):
    path = os.path.join(case["dir"], f"result.{name}.json")
    with open(path, "w") as f:
        json.dump(payload, f)


def main(name, measure):
    """Entry point of a peer: `measure(case)` returns (result array, times in ms,
    version string, note or None), or raises Unsupported."""
    case = load(sys.argv[1])
    try:
        result, times, version, note = measure(case)
    except Unsupported as e:
        _write(case, name, {"supported": False, "note": str(e), "version": None})
        return
    out = np.ascontiguousarray(np.asarray(result, dtype=np.float32)).reshape(-1)
    out.astype("<f4").tofile(os.path.join(case["dir"], f"out.{name}.f32"))
    _write(
        case,
        name,
        {"supported": True, "note": note, "version": version, "times_ms": times},
    )
