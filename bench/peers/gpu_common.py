"""Shared plumbing of the GPU peers of `sparsile bench --target cuda`.

The harness writes the case folder as for the CPU peers (see common.py: A.indptr.i64,
A.indices.i32, A.values.f32, X.f32, Y.f32 for SDDMM, case.json, whose "device" is the
GPU's ordinal) and runs `python NAME_gpu_peer.py --serve` once, handing it each
case's `case.json` in turn (see `main`). A GPU peer copies the
operands to the GPU once, times each run of the operation with CUDA events (warm-up
runs first; runs are queued back to back, the host reading EVENT_BATCH runs' events at
a time while the next batch is queued, as Sparsile's own device timing does), copies
the last result back and writes
`out.NAME.f32` and `result.NAME.json` (optionally with "preprocess_ms": work done once
per matrix before the runs, such as cuSPARSE's preprocessing, reported apart).

Nothing beyond the standard library is imported here at module level: a peer whose
NumPy, CuPy, PyTorch or GPU is missing answers "supported": false with the reason,
never a traceback.
"""

import json
import os

# Timed runs whose events the host reads at a time (with as many more queued).
EVENT_BATCH = 64


class Unsupported(Exception):
    """The peer cannot run this case here (no GPU, no library, no such operation)."""


def first_line(error):
    """The first line of an exception's message (CUDA errors can be long)."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def numpy():
    try:
        import numpy as np
    except ImportError as e:
        raise Unsupported("numpy: not installed (bench/setup.sh)") from e
    return np


def arrays(case):
    """The operands of the case as NumPy arrays: indptr (i64), indices (i32), values, X
    (and Y), shaped as the operation needs them."""
    np = numpy()
    d = case["dir"]
    m, n, k, op = case["m"], case["n"], case["k"], case["op"]
    out = {
        "indptr": np.fromfile(os.path.join(d, "A.indptr.i64"), dtype="<i8"),
        "indices": np.fromfile(os.path.join(d, "A.indices.i32"), dtype="<i4"),
        "values": np.fromfile(os.path.join(d, "A.values.f32"), dtype="<f4"),
    }
    x = np.fromfile(os.path.join(d, "X.f32"), dtype="<f4")
    if op == "spmm":
        out["X"] = x.reshape(n, k)
    elif op == "sddmm":
        out["X"] = x.reshape(m, k)
        out["Y"] = np.fromfile(os.path.join(d, "Y.f32"), dtype="<f4").reshape(n, k)
    else:
        out["X"] = x
    return out


def time_on_device(run, warmup, repeat, event, elapsed_ms):
    """Runs `run()` `warmup` times, then `repeat` times each between two events from
    `event()` (objects with `record()` and `synchronize()`); `elapsed_ms(a, b)` reads a
    pair. The host reads EVENT_BATCH runs' events at a time while the next batch is
    already queued, so the device is not left idle. Returns the last result and the
    times in ms."""
    result = None
    for _ in range(warmup):
        result = run()
    batch = max(1, min(repeat, EVENT_BATCH))
    ring = 2 * batch if repeat > batch else batch
    pairs = [(event(), event()) for _ in range(ring)]
    times = []

    def read(upto):
        pairs[(upto - 1) % ring][1].synchronize()
        times.extend(elapsed_ms(*pairs[i % ring]) for i in range(len(times), upto))

    for i in range(repeat):
        start, end = pairs[i % ring]
        start.record()
        result = run()
        end.record()
        if i + 1 - len(times) == ring:
            read(len(times) + batch)
    if len(times) < repeat:
        read(repeat)
    return result, times


def median(values):
    s = sorted(values)
    n = len(s)
    if n == 0:
        return float("inf")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _write(case, name, payload):
    with open(os.path.join(case["dir"], f"result.{name}.json"), "w") as f:
        json.dump(payload, f)


def main(name, measure, argv):
    """Entry point of a GPU peer: `measure(case)` returns a dict with "result" (an
    array), "times_ms", "version", "note" and optionally "preprocess_ms", or raises
    Unsupported.

    `python NAME_gpu_peer.py case.json` measures one case. `python NAME_gpu_peer.py
    --serve` measures case after case in one process (the harness's way: importing
    PyTorch or CuPy and setting up CUDA take seconds): it reads a `case.json` path per
    line of standard input and answers each with a line `sparsile-peer done` (its
    result files written) or `sparsile-peer failed: WHY` (the traceback on standard
    error), until its input ends."""
    if len(argv) > 1 and argv[1] == "--serve":
        _serve(name, measure)
    else:
        _one(name, measure, argv[1])


def _serve(name, measure):
    import sys
    import traceback

    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        try:
            _one(name, measure, path)
        except Exception as e:  # reported to the harness, which starts a fresh process
            traceback.print_exc()
            sys.stderr.flush()
            print(f"sparsile-peer failed: {first_line(e)}", flush=True)
        else:
            print("sparsile-peer done", flush=True)


def _one(name, measure, path):
    """Measures the case described by the file `path` and writes its result files."""
    with open(path) as f:
        case = json.load(f)
    try:
        got = measure(case)
    except Unsupported as e:
        why = str(e)
        note = why if why.startswith(f"{name}:") else f"{name}: {why}"
        _write(case, name, {"supported": False, "note": note, "version": None})
        return
    np = numpy()
    out = np.ascontiguousarray(np.asarray(got["result"], dtype=np.float32)).reshape(-1)
    out.astype("<f4").tofile(os.path.join(case["dir"], f"out.{name}.f32"))
    payload = {
        "supported": True,
        "note": got.get("note"),
        "version": got.get("version"),
        "times_ms": got["times_ms"],
    }
    if got.get("preprocess_ms") is not None:
        payload["preprocess_ms"] = got["preprocess_ms"]
    _write(case, name, payload)
