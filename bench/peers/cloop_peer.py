"""Serial C loop peer: the loops a sparse tensor compiler such as TACO generates for a
CSR operand with no schedule (cloop.c: one thread, the dense width a run-time value),
compiled with the system C compiler at `-O3 -march=native -ffast-math` (TACO compiles
with `-O3 -ffast-math`; `-march=native` makes the floor harder to beat) into
`bench/peers/.build/` and called through ctypes. It runs on one thread whatever the
benchmark's thread count: it is the floor-to-beat, not a parallel library."""

import ctypes
import hashlib
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FLAGS = ["-O3", "-march=native", "-ffast-math", "-std=c99", "-shared", "-fPIC"]


def compiler_version(cc):
    out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0].strip()


def build():
    """The shared library of cloop.c, compiled once per source, flags and compiler."""
    cc = os.environ.get("CC", "cc")
    src = os.path.join(HERE, "cloop.c")
    with open(src, "rb") as f:
        source = f.read()
    version = compiler_version(cc)
    key = hashlib.sha256(source + " ".join(FLAGS + [version]).encode()).hexdigest()[:16]
    out_dir = os.path.join(HERE, ".build")
    os.makedirs(out_dir, exist_ok=True)
    lib = os.path.join(out_dir, f"cloop-{key}.so")
    if not os.path.isfile(lib):
        tmp = f"{lib}.{os.getpid()}.tmp"
        subprocess.run([cc, *FLAGS, src, "-o", tmp], check=True)
        os.replace(tmp, lib)
    return ctypes.CDLL(lib), f"{version} {' '.join(FLAGS[:3])}"


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def measure(case):
    try:
        lib, version = build()
    except (OSError, subprocess.CalledProcessError) as e:
        raise common.Unsupported(f"cloop: cannot compile cloop.c: {e}") from e
    m, k, op = case["m"], case["k"], case["op"]
    indptr = np.ascontiguousarray(case["indptr"], dtype=np.int64)
    indices = np.ascontiguousarray(case["indices"], dtype=np.int32)
    values = np.ascontiguousarray(case["values"], dtype=np.float32)
    x = np.ascontiguousarray(case["X"], dtype=np.float32)
    i64 = ctypes.c_int64
    if op == "spmm":
        out = common.aligned_empty((m, k), np.float32)
        call = lib.cloop_spmm
        args = (i64(m), i64(k), ptr(indptr), ptr(indices), ptr(values), ptr(x), ptr(out))
    elif op == "sddmm":
        y = np.ascontiguousarray(case["Y"], dtype=np.float32)
        out = common.aligned_empty(case["nnz"], np.float32)
        call = lib.cloop_sddmm
        args = (i64(m), i64(k), ptr(indptr), ptr(indices), ptr(values), ptr(x), ptr(y), ptr(out))
    else:
        out = common.aligned_empty(m, np.float32)
        call = lib.cloop_spmv
        args = (i64(m), ptr(indptr), ptr(indices), ptr(values), ptr(x), ptr(out))
    call.restype = None

    def run(_):
        call(*args)
        return out

    result, times = common.time_op(run, case["warmup"], case["repeat"])
    return result.copy(), times, version, "one thread"


if __name__ == "__main__":
    common.main("cloop", measure)
