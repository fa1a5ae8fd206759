"""PyTorch CPU peer (optional: bench/setup.sh --torch): `A @ X` with A a sparse CSR
tensor for SpMM and SpMV; `torch.sparse.sampled_addmm` (X @ Y.T sampled at A's
pattern) times A's values for SDDMM. Threads: torch.set_num_threads."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import numpy as np  # noqa: E402


def measure(case):
    try:
        import torch
    except ImportError as e:
        raise common.Unsupported("torch: not installed (bench/setup.sh --torch)") from e
    torch.set_num_threads(case["threads"])
    m, n, op = case["m"], case["n"], case["op"]
    values = torch.from_numpy(case["values"])
    a = torch.sparse_csr_tensor(
        torch.from_numpy(case["indptr"]),
        torch.from_numpy(case["indices"].astype(np.int64)),
        values,
        size=(m, n),
    )
    x = torch.from_numpy(case["X"])
    w, r = case["warmup"], case["repeat"]
    with torch.inference_mode():
        if op == "spmm":
            result, times = common.time_op(lambda _: a @ x, w, r)
        elif op == "spmv":
            result, times = common.time_op(lambda _: torch.mv(a, x), w, r)
        else:
            yt = torch.from_numpy(case["Y"]).t()

            def sddmm(_):
                s = torch.sparse.sampled_addmm(a, x, yt, beta=0.0, alpha=1.0)
                return s.values() * values

            result, times = common.time_op(sddmm, w, r)
    return result.numpy(), times, f"torch {torch.__version__}", None


if __name__ == "__main__":
    common.main("torch", measure)
