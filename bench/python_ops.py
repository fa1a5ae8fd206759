"""What a Python user gets: ``sparsile.spmm`` / ``spmv`` / ``sddmm`` with their defaults
against ``torch`` and SciPy, in one process.

Every call is what a user writes (no format, no recipe: Sparsile chooses), with ``A``
converted once (``sparsile``) or passed as the SciPy matrix on every call
(``sparsile(A)``: the conversion of the previous call is reused while ``A``'s index
arrays stay equal), timed after warm-up calls (the first call compiles or finds its
kernel in the cache; its time is reported apart). Each system gets the same operands and
the same thread count; results are checked against SciPy's. Rounds alternate the systems
(each round starts one system later), and the medians pool every round's calls.
``native`` calls the same automatic kernel as ``sparsile`` through
``sparsile._native.AutoKernel.run`` with its arguments prepared once: the difference
between the two is what the Python operator layer costs per call (argument checks,
finding the kernel, the thread count, wrapping the result).

    bench/.venv/bin/python bench/python_ops.py                          # ogbn_arxiv, SpMM K=32
    bench/.venv/bin/python bench/python_ops.py --matrix data/cora.mtx --ops spmm:32,spmv,sddmm:32

Needs the ``sparsile`` package (``pip install ./python``); PyTorch is optional.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = pathlib.Path(os.environ.get("SPARSILE_DATA_DIR", ROOT.parent / "shared" / "data"))


def timed(fn, calls):
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def native_call(template, sparse, dense, output, threads, values=False):
    """The automatic kernel of ``template`` called directly, its arguments prepared once."""
    from sparsile import _ops

    program, args, _ = _ops._args(template, sparse, dense, None)
    kernel = _ops.auto_kernel(program, "auto", "cpu")
    if values:
        return lambda: kernel.run(args, threads)[output].values()
    return lambda: kernel.run(args, threads)[output]


def systems_for(op, A, k, rng, threads):
    """(name, callable returning a NumPy result) per system, and the reference."""
    import sparsile
    from sparsile import _ops

    S = sparsile.from_scipy(A)
    m, n = A.shape
    try:
        import torch

        torch.set_num_threads(threads)
        T = torch.sparse_csr_tensor(
            torch.from_numpy(A.indptr.astype(np.int64)),
            torch.from_numpy(A.indices.astype(np.int64)),
            torch.from_numpy(A.data),
            size=A.shape,
        )
    except ImportError:
        torch = None
    if op == "spmm":
        X = rng.random((n, k), dtype=np.float32)
        out = [("sparsile", lambda: np.asarray(sparsile.spmm(S, X, threads=threads))),
               ("native", native_call(_ops.SPMM, {"A": S}, {"X": X}, "Y", threads)),
               ("sparsile(A)", lambda: np.asarray(sparsile.spmm(A, X, threads=threads))),
               ("scipy", lambda: A @ X)]
        if torch is not None:
            Xt = torch.from_numpy(X)
            out.append(("torch", lambda: torch.sparse.mm(T, Xt).numpy()))
        return out, A @ X
    if op == "spmv":
        x = rng.random(n, dtype=np.float32)
        out = [("sparsile", lambda: np.asarray(sparsile.spmv(S, x, threads=threads))),
               ("native", native_call(_ops.SPMV, {"A": S}, {"x": x}, "y", threads)),
               ("sparsile(A)", lambda: np.asarray(sparsile.spmv(A, x, threads=threads))),
               ("scipy", lambda: A @ x)]
        if torch is not None:
            xt = torch.from_numpy(x)
            out.append(("torch", lambda: torch.mv(T, xt).numpy()))
        return out, A @ x
    if op == "sddmm":
        X = rng.random((m, k), dtype=np.float32)
        Y = rng.random((n, k), dtype=np.float32)
        # Row and column of every stored entry in CSR order (explicit zeros included).
        rows, cols = np.repeat(np.arange(m), np.diff(A.indptr)), A.indices
        ref = A.data * np.einsum("ij,ij->i", X[rows], Y[cols])

        def scipy_sddmm():
            return A.data * np.einsum("ij,ij->i", X[rows], Y[cols])

        out = [("sparsile", lambda: sparsile.sddmm(S, X, Y, threads=threads)),
               ("native", native_call(_ops.SDDMM, {"A": S}, {"X": X, "Y": Y}, "C", threads, values=True)),
               ("sparsile(A)", lambda: sparsile.sddmm(A, X, Y, threads=threads)),
               ("scipy", scipy_sddmm)]
        if torch is not None:
            Xt, Yt = torch.from_numpy(X), torch.from_numpy(Y.T.copy())
            out.append(("torch", lambda: torch.sparse.sampled_addmm(T, Xt, Yt, beta=0.0).values().numpy()
                        * A.data))
        return out, ref


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrix", action="append", help="Matrix Market file (repeatable)")
    parser.add_argument("--ops", default="spmm:32", help="spmm:K, sddmm:K and spmv, comma-separated")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--calls", type=int, default=20, help="timed calls per system and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    matrices = args.matrix or [str(DATA / "ogbn_arxiv.mtx.gz")]
    import sparsile

    rng = np.random.default_rng(0)
    print(f"{'case':32} {'system':11} {'first ms':>9} {'median ms':>10} {'p95 ms':>8} {'x sparsile':>11}  check")
    for path in matrices:
        A = sp.csr_matrix(scipy.io.mmread(path), dtype=np.float32)
        A.sum_duplicates()
        A.sort_indices()
        name = pathlib.Path(path).name.split(".")[0]
        for spec in args.ops.split(","):
            op, _, k = spec.partition(":")
            k = int(k or 1)
            systems, ref = systems_for(op, A, k, rng, args.threads)
            first, times = {}, {s: [] for s, _ in systems}
            for s, fn in systems:
                t0 = time.perf_counter()
                got = fn()
                first[s] = (time.perf_counter() - t0) * 1e3
                if isinstance(got, sparsile.Tensor):  # SDDMM's result: the values in A's order
                    got = got.values
                err = np.max(np.abs(np.asarray(got, dtype=np.float64) - ref)) if np.size(ref) else 0.0
                first[s, "ok"] = err <= 1e-3 * (np.max(np.abs(ref)) + 1) if np.size(ref) else True
                for _ in range(args.warmup):
                    fn()
            # Each round starts one system later, so that no system always runs right
            # after the same other one (torch's threads spin for a while after its calls).
            for r in range(args.rounds):
                for s, fn in systems[r % len(systems):] + systems[:r % len(systems)]:
                    times[s] += timed(fn, args.calls)
            base = statistics.median(times["sparsile"])
            case = f"{name} {op}" + (f" K={k}" if op != "spmv" else "")
            for s, _ in systems:
                med = statistics.median(times[s])
                p95 = sorted(times[s])[int(0.95 * (len(times[s]) - 1))]
                print(f"{case:32} {s:11} {first[s]:9.2f} {med:10.3f} {p95:8.3f} {med / base:10.2f}x  "
                      f"{'ok' if first[s, 'ok'] else 'WRONG'}")
                case = ""


if __name__ == "__main__":
    main()
