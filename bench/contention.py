"""How Sparsile's kernel calls behave next to other work: the thread-pool benchmark.

Each case (matrix x operation x thread count) is timed call by call, in scenarios that a
library inside a training loop meets:

- ``quiet``: nothing else runs;
- ``busy``: one other process spins on a core the whole time (timed after 0.5 s of
  untimed calls: the pool gives way to a competitor it has seen for 200 ms);
- ``torch``: one Python loop alternates a Sparsile call with a PyTorch dense matmul
  (``torch.set_num_threads`` = the case's threads); the matmul's time right after a
  Sparsile call is compared with its time in a loop of matmuls alone, and with its time
  right after the calling thread spun for as long as the Sparsile call takes (what any
  other work of that length would cost the matmul: PyTorch's own threads fall asleep
  while it waits), and with its time right after the same operation done by
  ``torch.sparse`` (what the alternative costs it: a call that streams tens of
  megabytes leaves the matmul's operands out of the caches, whoever makes it);
- ``threads8``: eight Python threads call Sparsile at once (each call's latency counts).

For each it prints the median and 95th percentile of the call times, their ratio, and
the median over the ``quiet`` one-thread median (what the call would cost on one core
alone). With ``--rounds R`` every scenario of a case is measured R times in turn and the
call times are pooled, so that a slow spell of a shared machine falls on every scenario
instead of deciding one. ``--json`` writes every row.

    bench/.venv/bin/python bench/contention.py                      # cora, pubmed, ogbn_arxiv
    bench/.venv/bin/python bench/contention.py --matrix data/cora.mtx --scenarios quiet,busy

Needs the ``sparsile`` package (``pip install ./python``) and, for the ``torch`` scenario,
PyTorch. Sparsile's operators run as ``sparsile.spmm(A, X)`` / ``sparsile.spmv(A, x)``
are called by users: whatever format and schedule they choose by default.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = pathlib.Path(os.environ.get("SPARSILE_DATA_DIR", ROOT.parent / "shared" / "data"))
DEFAULT_MATRICES = [ROOT / "data" / "cora.mtx", DATA / "pubmed.mtx", DATA / "ogbn_arxiv.mtx.gz"]
SCENARIOS = ["quiet", "busy", "torch", "threads8"]
BUSY_CODE = "while True:\n    pass\n"


def percentile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def timed_calls(call, n):
    """Per-call seconds of ``n`` calls after three untimed ones."""
    for _ in range(3):
        call()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        out.append(time.perf_counter() - t)
    return out


class BusyProcess:
    """One other process spinning on a core while the block runs."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", BUSY_CODE])
        time.sleep(0.3)
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def torch_matmul(threads, size):
    import torch

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    a = torch.rand(size, size, generator=g)
    b = torch.rand(size, size, generator=g)
    return lambda: torch.mm(a, b)


def torch_peer(A, dense):
    """The same operation by ``torch.sparse`` (CSR): ``A @ dense``."""
    import torch

    indptr, indices = A.indptr, A.indices
    At = torch.sparse_csr_tensor(torch.from_numpy(np.asarray(indptr, dtype=np.int64)),
                                 torch.from_numpy(np.asarray(indices, dtype=np.int64)),
                                 torch.from_numpy(np.ascontiguousarray(A.values)), size=A.shape)
    Dt = torch.from_numpy(dense)
    if Dt.ndim == 1:
        return lambda: torch.mv(At, Dt)
    return lambda: torch.sparse.mm(At, Dt)


def scenario_rows(name, call, threads, args, peer=None):
    """Runs one scenario of one case; returns (call times, extra fields). ``peer`` is the
    same operation by ``torch.sparse`` (the ``torch`` scenario's second control)."""
    n = args.calls
    if name == "quiet":
        return timed_calls(call, n), {}
    if name == "busy":
        with BusyProcess():
            # The pool gives way to another process once it has seen it runnable for
            # 200 ms (shorter bursts are passed through): call for longer than that
            # first, so the timed calls show the steady state of a lasting competitor.
            start = time.perf_counter()
            while time.perf_counter() - start < 0.5:
                call()
            return timed_calls(call, n), {}
    if name == "torch":
        mm = torch_matmul(threads, args.matmul)
        alone = timed_calls(mm, n)
        for _ in range(3):
            call()
            mm()
        ours, after, after_spin, after_peer = [], [], [], []
        peer_call = peer()
        for _ in range(n):
            t = time.perf_counter()
            call()
            t1 = time.perf_counter()
            mm()
            t2 = time.perf_counter()
            ours.append(t1 - t)
            after.append(t2 - t1)
            # The control: the same pause spent spinning in Python instead of in Sparsile.
            t3 = time.perf_counter()
            while time.perf_counter() - t3 < t1 - t:
                pass
            t4 = time.perf_counter()
            mm()
            after_spin.append(time.perf_counter() - t4)
            # The alternative: the same operation by torch.sparse, then the matmul.
            peer_call()
            t5 = time.perf_counter()
            mm()
            after_peer.append(time.perf_counter() - t5)
        return ours, {
            "torch_alone_ms": statistics.median(alone) * 1e3,
            "torch_after_ms": statistics.median(after) * 1e3,
            "torch_after_spin_ms": statistics.median(after_spin) * 1e3,
            "torch_after_peer_ms": statistics.median(after_peer) * 1e3,
            "torch_ratio": statistics.median(after) / statistics.median(alone),
            "torch_ratio_vs_spin": statistics.median(after) / statistics.median(after_spin),
            "torch_ratio_vs_peer": statistics.median(after) / statistics.median(after_peer),
        }
    if name == "threads8":
        per = max(n // 8, 10)
        times = [[] for _ in range(8)]
        call()
        barrier = threading.Barrier(8)

        def worker(k):
            barrier.wait()
            times[k] = timed_calls(call, per)

        ts = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        start = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.perf_counter() - start
        flat = [x for ts_ in times for x in ts_]
        return flat, {"calls_per_s": len(flat) / wall}
    raise ValueError(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matrix", action="append", help="Matrix Market file (repeatable)")
    parser.add_argument("--ops", default="spmm:32,spmv", help="spmm:K and spmv, comma-separated")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--calls", type=int, default=400, help="timed calls per case, scenario and round")
    parser.add_argument("--rounds", type=int, default=1, help="measure every scenario this many times in turn")
    parser.add_argument("--matmul", type=int, default=384, help="side of the torch matmul")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()

    import sparsile

    matrices = [pathlib.Path(m) for m in (args.matrix or DEFAULT_MATRICES)]
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for s in scenarios:
        if s not in SCENARIOS:
            parser.error(f"unknown scenario {s!r} (known: {', '.join(SCENARIOS)})")
    threads = [int(t) for t in args.threads.split(",")]
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    rng = np.random.default_rng(0)
    rows = []
    header = (f"{'scenario':<9} {'case':<26} {'thr':>3} {'median ms':>10} {'p95 ms':>9} "
              f"{'p95/med':>8} {'vs quiet 1-thr':>15}  note")
    print(header)
    print("-" * len(header))
    for path in matrices:
        A = sparsile.load(str(path), dtype="f32")
        m, n = A.shape
        for op in ops:
            if op.startswith("spmm:"):
                X = rng.random((n, int(op.split(":")[1])), dtype=np.float32)
                make_call = lambda t, A=A, X=X: lambda: sparsile.spmm(A, X, threads=t)  # noqa: E731
                make_peer = lambda A=A, X=X: torch_peer(A, X)  # noqa: E731
            elif op == "spmv":
                x = rng.random(n, dtype=np.float32)
                make_call = lambda t, A=A, x=x: lambda: sparsile.spmv(A, x, threads=t)  # noqa: E731
                make_peer = lambda A=A, x=x: torch_peer(A, x)  # noqa: E731
            else:
                parser.error(f"unknown op {op!r}")
            case = f"{path.name.split('.')[0]} {op}"
            pooled = {}
            for _ in range(args.rounds):
                for scenario in scenarios:
                    for t in threads:
                        times, extra = scenario_rows(scenario, make_call(t), t, args, make_peer)
                        got = pooled.setdefault((scenario, t), ([], []))
                        got[0].extend(times)
                        got[1].append(extra)
            quiet1 = None
            for scenario in scenarios:
                for t in threads:
                    times, extras = pooled[(scenario, t)]
                    extra = {key: statistics.median(e[key] for e in extras) for key in extras[0]}
                    med, p95 = statistics.median(times), percentile(times, 0.95)
                    if scenario == "quiet" and t == 1:
                        quiet1 = med
                    row = {
                        "scenario": scenario, "matrix": path.name, "op": op, "threads": t,
                        "median_ms": med * 1e3, "p95_ms": p95 * 1e3, "p95_over_median": p95 / med,
                        "vs_quiet_1thread": (med / quiet1) if quiet1 else None,
                        "calls": len(times), "rounds": args.rounds, **extra,
                    }
                    rows.append(row)
                    note = ""
                    if "torch_ratio" in extra:
                        note = (f"torch mm {extra['torch_after_ms']:.3f} ms after, "
                                f"{extra['torch_alone_ms']:.3f} alone ({extra['torch_ratio']:.2f}x), "
                                f"{extra['torch_after_spin_ms']:.3f} after a spin as long "
                                f"({extra['torch_ratio_vs_spin']:.2f}x), "
                                f"{extra['torch_after_peer_ms']:.3f} after torch.sparse "
                                f"({extra['torch_ratio_vs_peer']:.2f}x)")
                    if "calls_per_s" in extra:
                        note = f"{extra['calls_per_s']:.0f} calls/s in all"
                    vs = f"{row['vs_quiet_1thread']:.2f}x" if quiet1 else "-"
                    print(f"{scenario:<9} {case:<26} {t:>3} {med * 1e3:>10.4f} {p95 * 1e3:>9.4f} "
                          f"{p95 / med:>8.2f} {vs:>15}  {note}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
