"""PyTorch GPU peer (`--target cuda --peers torch`): A as a sparse CSR tensor on the GPU
(i32 indices, as Sparsile's and cuSPARSE's), `torch.sparse.mm(A, X)` for SpMM,
`torch.mv(A, x)` for SpMV, `torch.sparse.sampled_addmm(A, X, Y.T)` (cuSPARSE's SDDMM)
times A's values for SDDMM; each call timed with CUDA events on the current stream.
The result is allocated by every call, the only way these APIs offer."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common  # noqa: E402
from gpu_common import Unsupported  # noqa: E402


def cuda_device(case):
    """torch and the case's GPU, or Unsupported saying which is missing."""
    try:
        import torch
    except ImportError as e:
        raise Unsupported("torch: not installed") from e
    version = f"torch {torch.__version__}"
    try:
        available = torch.cuda.is_available()
        count = torch.cuda.device_count() if available else 0
    except Exception as e:  # a broken CUDA install raises instead of answering
        raise Unsupported(f"{version}: CUDA unusable ({gpu_common.first_line(e)})") from e
    if not available:
        built = getattr(getattr(torch, "version", None), "cuda", None)
        why = f"built with CUDA {built}" if built else "a build without CUDA"
        raise Unsupported(f"{version}: no CUDA device (torch.cuda.is_available() is False; {why})")
    ordinal = case.get("device") or 0
    if ordinal >= count:
        raise Unsupported(f"{version}: no CUDA device {ordinal} ({count} visible)")
    return torch, torch.device("cuda", ordinal), version


def measure(case):
    torch, dev, version = cuda_device(case)
    arr = gpu_common.arrays(case)
    m, n, op = case["m"], case["n"], case["op"]
    torch.cuda.set_device(dev)
    index = torch.int32 if case["nnz"] < 2**31 else torch.int64
    values = torch.from_numpy(arr["values"]).to(dev)
    a = torch.sparse_csr_tensor(
        torch.from_numpy(arr["indptr"]).to(dev, index),
        torch.from_numpy(arr["indices"]).to(dev, index),
        values,
        size=(m, n),
    )
    x = torch.from_numpy(arr["X"]).to(dev)

    def event():
        return torch.cuda.Event(enable_timing=True)

    def elapsed(a_, b_):
        return a_.elapsed_time(b_)

    w, r = case["warmup"], case["repeat"]
    with torch.inference_mode():
        if op == "spmm":

            def run():
                return torch.sparse.mm(a, x)

        elif op == "spmv":

            def run():
                return torch.mv(a, x)

        else:
            yt = torch.from_numpy(arr["Y"]).to(dev).t()

            def run():
                s = torch.sparse.sampled_addmm(a, x, yt, beta=0.0, alpha=1.0)
                return s.values() * values

        try:
            result, times = gpu_common.time_on_device(run, w, r, event, elapsed)
        except RuntimeError as e:
            # Operations this build or device does not offer (an old GPU, a CPU-only op).
            if "not implemented" in str(e).lower() or "not supported" in str(e).lower():
                raise Unsupported(f"{version}: {gpu_common.first_line(e)}") from e
            raise
        torch.cuda.synchronize(dev)
    return {
        "result": result.cpu().numpy(),
        "times_ms": times,
        "version": f"{version}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(dev)}",
        "note": None,
    }


if __name__ == "__main__":
    gpu_common.main("torch", measure, sys.argv)
