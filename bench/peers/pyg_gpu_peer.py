"""PyG GPU peer (`--target cuda --peers pyg`): the SpMM of message passing with a sum
aggregation. With torch_sparse installed, `torch_sparse.matmul(adj, X, reduce="sum")`
on a `torch_sparse.SparseTensor` (its own CUDA kernel, i64 indices, as PyG stores
graphs); without it, `torch_geometric.utils.spmm` on a torch CSR tensor (which calls
torch.sparse, said in the note). SpMV runs as SpMM with one column. PyG has no SDDMM:
reported as unsupported."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common  # noqa: E402
from gpu_common import Unsupported  # noqa: E402
from torch_gpu_peer import cuda_device  # noqa: E402


def library():
    """("torch_sparse", module) or ("torch_geometric", module), or Unsupported."""
    try:
        import torch_sparse

        return "torch_sparse", torch_sparse
    except ImportError:
        pass
    try:
        import torch_geometric
        import torch_geometric.utils  # noqa: F401

        return "torch_geometric", torch_geometric
    except ImportError as e:
        raise Unsupported("neither torch_sparse nor torch_geometric is installed") from e


def measure(case):
    if case["op"] == "sddmm":
        raise Unsupported("PyG and torch_sparse have no SDDMM")
    torch, dev, torch_version = cuda_device(case)
    kind, lib = library()
    arr = gpu_common.arrays(case)
    m, n, op = case["m"], case["n"], case["op"]
    torch.cuda.set_device(dev)
    x = torch.from_numpy(arr["X"]).to(dev)
    if op == "spmv":
        x = x.view(-1, 1)
    values = torch.from_numpy(arr["values"]).to(dev)
    if kind == "torch_sparse":
        adj = lib.SparseTensor(
            rowptr=torch.from_numpy(arr["indptr"]).to(dev, torch.int64),
            col=torch.from_numpy(arr["indices"]).to(dev, torch.int64),
            value=values,
            sparse_sizes=(m, n),
            is_sorted=True,
            trust_data=True,
        )

        def run():
            return lib.matmul(adj, x, reduce="sum")

        note = None
        version = f"torch_sparse {lib.__version__}"
    else:
        index = torch.int32 if case["nnz"] < 2**31 else torch.int64
        adj = torch.sparse_csr_tensor(
            torch.from_numpy(arr["indptr"]).to(dev, index),
            torch.from_numpy(arr["indices"]).to(dev, index),
            values,
            size=(m, n),
        )
        spmm = lib.utils.spmm

        def run():
            return spmm(adj, x, reduce="sum")

        note = "torch_geometric.utils.spmm through torch.sparse (torch_sparse is not installed)"
        version = f"torch_geometric {lib.__version__}"

    def event():
        return torch.cuda.Event(enable_timing=True)

    with torch.inference_mode():
        result, times = gpu_common.time_on_device(
            run, case["warmup"], case["repeat"], event, lambda a, b: a.elapsed_time(b)
        )
        torch.cuda.synchronize(dev)
    if op == "spmv":
        note = "; ".join(filter(None, [note, "SpMV as SpMM with one column"]))
    return {
        "result": result.reshape(-1).cpu().numpy() if op == "spmv" else result.cpu().numpy(),
        "times_ms": times,
        "version": f"{version}, {torch_version}",
        "note": note,
    }


if __name__ == "__main__":
    gpu_common.main("pyg", measure, sys.argv)
