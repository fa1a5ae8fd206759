"""Runs the GPU peer scripts of bench/peers on small generated cases, under the
stand-ins of this folder (put on PYTHONPATH by the caller), and checks their answers
against NumPy. Usage: run_peers.py PEERS_DIR WORK_DIR. Prints one line per check and
"gpu peers under the stand-ins: all checks passed" at the end; fails with a traceback
otherwise."""

import json
import os
import subprocess
import sys

import numpy as np

peers_dir, work = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
m, n = 37, 23
dense = rng.random((m, n)) < 0.2
dense[5] = False  # an empty row
indptr = np.concatenate([[0], np.cumsum(dense.sum(axis=1))]).astype(np.int64)
rows, cols = np.nonzero(dense)
values = rng.uniform(-1, 1, len(rows)).astype(np.float32)
A = np.zeros((m, n))
A[rows, cols] = values


def case(op, k, extra=None):
    d = os.path.join(work, f"{op}{k}")
    os.makedirs(d, exist_ok=True)
    indptr.astype("<i8").tofile(os.path.join(d, "A.indptr.i64"))
    cols.astype("<i4").tofile(os.path.join(d, "A.indices.i32"))
    values.astype("<f4").tofile(os.path.join(d, "A.values.f32"))
    if op == "spmm":
        x = rng.uniform(-1, 1, (n, k)).astype(np.float32)
        want = A @ x
    elif op == "spmv":
        x = rng.uniform(-1, 1, n).astype(np.float32)
        want = A @ x
    else:
        x = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        y = rng.uniform(-1, 1, (n, k)).astype(np.float32)
        y.astype("<f4").tofile(os.path.join(d, "Y.f32"))
        want = values * np.einsum("ij,ij->i", x[rows].astype(np.float64), y[cols])
    x.astype("<f4").tofile(os.path.join(d, "X.f32"))
    spec = {"op": op, "m": m, "n": n, "nnz": len(values), "k": k, "threads": 1,
            "warmup": 2, "repeat": 7, "dir": d, "device": 0}
    spec.update(extra or {})
    path = os.path.join(d, "case.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path, np.asarray(want).reshape(-1)


def run(peer, op, k, env=None):
    path, want = case(op, k)
    d = os.path.dirname(path)
    for f in os.listdir(d):
        if f.startswith("result.") or f.startswith("out."):
            os.remove(os.path.join(d, f))
    proc = subprocess.run(
        [sys.executable, os.path.join(peers_dir, f"{peer}_gpu_peer.py"), path],
        env={**os.environ, **(env or {})}, capture_output=True, text=True,
    )
    assert proc.returncode == 0, f"{peer} {op}: exit {proc.returncode}\n{proc.stderr}"
    with open(os.path.join(d, f"result.{peer}.json")) as f:
        result = json.load(f)
    got = None
    if result["supported"]:
        got = np.fromfile(os.path.join(d, f"out.{peer}.f32"), dtype="<f4")
        err = np.max(np.abs(got - want)) if len(want) else 0.0
        assert err <= 1e-3 * (np.max(np.abs(want), initial=0) + 1), f"{peer} {op}: error {err}"
        assert len(result["times_ms"]) == 7, result
        assert all(t > 0 for t in result["times_ms"]), result
    return result


def check(what, cond, detail):
    assert cond, f"{what}: {detail}"
    print(f"ok: {what}")


# gpu_common.time_on_device across batches of events: every run timed, in order.
sys.path.insert(0, peers_dir)
import gpu_common  # noqa: E402
import fake_clock  # noqa: E402
from cupy import cuda as fake_cuda  # noqa: E402


def one_run():
    fake_clock.tick()
    return fake_clock.now()


for warmup, repeat in [(0, 1), (2, 7), (1, 64), (0, 65), (3, 131), (0, 300)]:
    last, times = gpu_common.time_on_device(
        one_run, warmup, repeat, fake_cuda.Event, fake_cuda.get_elapsed_time
    )
    check(f"time_on_device {warmup}+{repeat}", len(times) == repeat and set(times) == {0.5}
          and last == fake_clock.now(), (len(times), set(times)))


for op, k in [("spmm", 4), ("spmv", 1), ("sddmm", 3)]:
    r = run("torch", op, k)
    check(f"torch {op}", r["supported"] and "Fake GPU" in r["version"], r)
    # every run is one stand-in operation (0.5 ms); SDDMM adds the scaling by A's values
    check(f"torch {op} times", set(r["times_ms"]) == {1.0 if op == "sddmm" else 0.5}, r)

r = run("cusparse", "spmm", 4)
check("cusparse spmm picks the fastest variant", "best of" in r["note"] and "CSR_ALG2 row-major" in r["note"], r)
check("cusparse spmm drops a wrong variant", "dropped for wrong results: SpMM CSR_ALG3 col-major" in r["note"], r)
check("cusparse spmm counts a refused variant", "1 refused by cuSPARSE (SpMM COO_ALG4 col-major" in r["note"], r)
check("cusparse spmm preprocessing apart", abs(r["preprocess_ms"] - 0.01) < 1e-9 and set(r["times_ms"]) == {0.25}, r)
r = run("cusparse", "spmv", 1)
check("cusparse spmv", r["supported"] and "SpMV CSR_ALG2" in r["note"] and "preprocess_ms" not in r, r)
r = run("cusparse", "sddmm", 3)
check("cusparse sddmm without the binding", not r["supported"] and "does not expose cusparseSDDMM" in r["note"], r)
r = run("cusparse", "sddmm", 3, {"FAKE_CUPY_SDDMM": "1"})
check("cusparse sddmm", r["supported"] and "SDDMM ALG_DEFAULT" in r["note"], r)

r = run("pyg", "spmm", 4)
check("pyg spmm (torch_sparse)", r["supported"] and r["version"].startswith("torch_sparse"), r)
r = run("pyg", "spmv", 1)
check("pyg spmv", r["supported"] and "one column" in r["note"], r)
r = run("pyg", "spmm", 4, {"FAKE_NO_TORCH_SPARSE": "1"})
check("pyg spmm (torch_geometric)", r["supported"] and "through torch.sparse" in r["note"], r)
r = run("pyg", "spmv", 1, {"FAKE_NO_TORCH_SPARSE": "1"})
check("pyg spmv (torch_geometric)", r["supported"] and "one column" in r["note"], r)
r = run("pyg", "spmm", 4, {"FAKE_NO_TORCH_SPARSE": "1", "FAKE_NO_PYG": "1"})
check("pyg without PyG", not r["supported"] and "neither torch_sparse nor torch_geometric" in r["note"], r)
r = run("pyg", "sddmm", 3)
check("pyg sddmm", not r["supported"] and "no SDDMM" in r["note"], r)

for peer in ["torch", "cusparse", "pyg"]:
    r = run(peer, "spmm", 4, {"FAKE_CUDA_DEVICES": "0"})
    check(f"{peer} without a GPU", not r["supported"] and "no CUDA device" in r["note"], r)
    r = run(peer, "spmm", 4, {"FAKE_CUDA_DEVICES": "1"})
    path, _ = case("spmm", 4, {"device": 3})
    proc = subprocess.run([sys.executable, os.path.join(peers_dir, f"{peer}_gpu_peer.py"), path],
                          capture_output=True, text=True)
    with open(os.path.join(os.path.dirname(path), f"result.{peer}.json")) as f:
        r = json.load(f)
    check(f"{peer} on a device it lacks", proc.returncode == 0 and not r["supported"] and "no CUDA device 3" in r["note"], r)

print("gpu peers under the stand-ins: all checks passed")
