"""A sparse-attention block (BigBird-style mask: a sliding window, global tokens and random
links) with ``sparsile.nn.SparseAttention``: gradients checked, output compared with dense
masked attention, and timed against it (PyTorch's dense ``softmax(QKᵀ + mask) V``).

The attention mask is built here (``--seq``, ``--window``, ``--globals``, ``--random``)
or read from a Matrix Market file (``--mask data/attn_bigbird.mtx``).

    python examples/sparse_attention.py [--seq 4096] [--dim 256] [--heads 4]
"""

import argparse
import math
import statistics
import time

import numpy as np
import torch

import sparsile
import sparsile.nn as snn


def bigbird_mask(seq, window, n_global, n_random, seed=0):
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for off in range(-window, window + 1):
        i = np.arange(max(0, -off), min(seq, seq - off))
        rows.append(i)
        cols.append(i + off)
    g = np.arange(n_global)
    everyone = np.arange(seq)
    rows += [np.repeat(g, seq), np.tile(everyone, n_global)]
    cols += [np.tile(everyone, n_global), np.repeat(g, seq)]
    rows.append(np.repeat(everyone, n_random))
    cols.append(rng.integers(0, seq, seq * n_random))
    A = sparsile.from_coo(np.concatenate(rows), np.concatenate(cols), shape=(seq, seq))
    return A.with_values(np.ones(A.nnz, dtype=np.float32))  # a pattern: duplicates were summed


def dense_attention(bias, q, k, v):
    """PyTorch's dense masked attention: ``bias`` is 0 where allowed, -inf elsewhere."""
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias, dim=-1) @ v


def median_ms(f, repeat=10):
    f()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mask", help="a Matrix Market attention mask (its pattern is used)")
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--globals", type=int, default=8)
    parser.add_argument("--random", type=int, default=8)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)

    if args.mask:
        mask = sparsile.load(args.mask)
        mask = mask.with_values(np.ones(mask.nnz, dtype=np.float32))
    else:
        mask = bigbird_mask(args.seq, args.window, args.globals, args.random)
    seq = mask.shape[0]
    print(f"mask: {seq} x {seq}, {mask.nnz} stored positions ({100 * mask.nnz / seq ** 2:.2f} % of the dense scores)")

    # Gradients against finite differences, float64, a small mask of the same kind.
    small = bigbird_mask(64, 4, 2, 2).astype(np.float64)
    q, k, v = (torch.randn(64, 2, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    ok = torch.autograd.gradcheck(lambda q, k, v: snn.sparse_attention(small, q, k, v), (q, k, v))
    print(f"gradcheck of sparse_attention (float64, 64 tokens, 2 heads): {'passed' if ok else 'FAILED'}")

    block = snn.SparseAttention(args.dim, args.heads)
    X = torch.randn(seq, args.dim)
    allowed = torch.from_numpy(mask.to_dense()) != 0
    bias = torch.zeros(seq, seq).masked_fill(~allowed, -math.inf)

    def dense_block():
        h = args.dim // args.heads
        qkv = block.qkv(X).view(seq, 3, args.heads, h).permute(1, 2, 0, 3)
        out = dense_attention(bias, qkv[0], qkv[1], qkv[2])  # (heads, seq, h)
        return block.out(out.permute(1, 0, 2).reshape(seq, -1))

    with torch.no_grad():
        ours, ref = block(mask, X), dense_block()
    print(f"largest difference from dense masked attention: {(ours - ref).abs().max().item():.2e}")

    def fwd_bwd(f):
        def run():
            block.zero_grad()
            f().square().sum().backward()
        return run

    with torch.no_grad():
        t_sparse = median_ms(lambda: block(mask, X))
        t_dense = median_ms(dense_block)
    t_sparse_bwd = median_ms(fwd_bwd(lambda: block(mask, X)))
    t_dense_bwd = median_ms(fwd_bwd(dense_block))
    print(f"{'':>22} {'sparsile':>10} {'dense torch':>12} {'speedup':>8}")
    print(f"{'forward (ms)':>22} {t_sparse:10.2f} {t_dense:12.2f} {t_dense / t_sparse:7.2f}x")
    print(f"{'forward+backward (ms)':>22} {t_sparse_bwd:10.2f} {t_dense_bwd:12.2f} {t_dense_bwd / t_sparse_bwd:7.2f}x")


if __name__ == "__main__":
    main()
