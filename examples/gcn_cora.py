"""A two-layer GCN (Kipf & Welling) on the Cora citation graph, with Sparsile's SpMM
inside PyTorch, timed against the same model using ``torch.sparse.mm``.

The repository bundles the Cora *graph* (``data/cora.mtx``) but not Cora's node features
or labels. With ``--features FEATURES.npy --labels LABELS.npy`` (a float array of shape
(2708, F) and an integer array of 2708 classes, in the node order of ``cora.mtx``) the
script trains on the real task with the usual Planetoid-style split sizes (20 nodes per
class for training, 500 validation, 1000 test), where GCNs reach about 80 % test accuracy.
Without them it says so and trains on a *synthetic* task of the same size: classes that
follow the graph and sparse binary bag-of-words features correlated with them (1433 words,
as Cora has). Its accuracy is then not the Cora benchmark's and must not be read as one;
the epoch times are what the run measures either way. The last line times the SpMM alone
(Â times a 2708 x 16 matrix, as in the forward pass).

    python examples/gcn_cora.py [--epochs 200] [--features F.npy --labels L.npy]
"""

import argparse
import warnings
import pathlib
import statistics
import time

import numpy as np
import scipy.sparse as sp
import torch

import sparsile
import sparsile.torch as st

HERE = pathlib.Path(__file__).resolve().parent


def normalized_adjacency(A: sp.csr_array) -> sp.csr_array:
    """D^-1/2 (A + I) D^-1/2, the GCN propagation matrix."""
    A = sp.csr_array(A, dtype=np.float32)
    A = (A + sp.identity(A.shape[0], dtype=np.float32, format="csr")).tocsr()
    d = np.asarray(A.sum(axis=1)).ravel()
    inv = sp.diags_array(1.0 / np.sqrt(d)).astype(np.float32)
    out = (inv @ A @ inv).tocsr()
    out.sort_indices()
    return out


def synthetic_task(A_hat, n_features=1433, n_classes=7, seed=0):
    """A Cora-sized synthetic task: classes that follow the graph (the argmax of random
    node signals smoothed by four propagations), and sparse binary bag-of-words features
    (about 18 words a node, each drawn from its class's 200 topic words or, half of the
    time, from all words)."""
    g = np.random.default_rng(seed)
    n = A_hat.shape[0]
    signal = g.standard_normal((n, n_classes))
    for _ in range(4):
        signal = A_hat @ signal
    labels = ((signal - signal.mean(0)) / signal.std(0)).argmax(1)
    topics = g.permutation(n_features)[: 200 * n_classes].reshape(n_classes, 200)
    X = np.zeros((n, n_features), np.float32)
    for v in range(n):
        words = np.where(g.random(18) < 0.5, g.choice(topics[labels[v]], 18), g.integers(0, n_features, 18))
        X[v, words] = 1.0
    return torch.from_numpy(X), torch.from_numpy(labels)


def split(labels, n_classes, seed=0):
    g = np.random.default_rng(seed)
    order = g.permutation(len(labels))
    train = np.concatenate([order[labels[order] == c][:20] for c in range(n_classes)])
    rest = np.setdiff1d(order, train, assume_unique=True)
    rest = rest[g.permutation(len(rest))]
    return torch.from_numpy(train), torch.from_numpy(rest[:500]), torch.from_numpy(rest[500:1500])


class GCN(torch.nn.Module):
    def __init__(self, propagate, n_in, n_hidden, n_out):
        super().__init__()
        self.propagate = propagate
        self.w1 = torch.nn.Linear(n_in, n_hidden)
        self.w2 = torch.nn.Linear(n_hidden, n_out)

    def forward(self, X):
        h = torch.relu(self.propagate(self.w1(torch.nn.functional.dropout(X, 0.5, self.training))))
        h = torch.nn.functional.dropout(h, 0.5, self.training)
        return self.propagate(self.w2(h))


def train(name, propagate, X, labels, masks, n_classes, epochs):
    torch.manual_seed(0)
    model = GCN(propagate, X.shape[1], 16, n_classes)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    train_idx, val_idx, test_idx = masks
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        model.train()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(X)[train_idx], labels[train_idx])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    model.eval()
    with torch.no_grad():
        pred = model(X).argmax(1)
    acc = lambda idx: (pred[idx] == labels[idx]).float().mean().item()  # noqa: E731
    print(f"{name:<18} epoch median {statistics.median(times) * 1e3:7.2f} ms   "
          f"(mean {statistics.mean(times[1:]) * 1e3:7.2f} ms, first {times[0] * 1e3:7.1f} ms)   "
          f"loss {loss.item():.3f}   val {acc(val_idx):.3f}   test {acc(test_idx):.3f}")
    return statistics.median(times)


def best_time(f, repeat=50):
    """The median time of ``repeat`` calls of ``f`` after one warm-up call."""
    f()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    warnings.filterwarnings("ignore", message="Sparse (CSR tensor support is in beta|invariant checks)")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default=str(HERE.parent / "data" / "cora.mtx"))
    parser.add_argument("--features", help="node features (.npy, shape (2708, F))")
    parser.add_argument("--labels", help="node classes (.npy, 2708 integers)")
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()

    A_hat = normalized_adjacency(sparsile.load(args.graph, dtype=np.float32).to_scipy())
    if args.features and args.labels:
        X = torch.from_numpy(np.load(args.features).astype(np.float32))
        labels = torch.from_numpy(np.load(args.labels).astype(np.int64))
        print("task: real Cora features and labels")
    else:
        X, labels = synthetic_task(A_hat)
        print("task: SYNTHETIC (the repository has no Cora features/labels): graph-following "
              "classes and topic-word features; accuracies below are NOT Cora's")
    n_classes = int(labels.max()) + 1
    masks = split(labels.numpy(), n_classes)
    print(f"graph: {A_hat.shape[0]} nodes, {A_hat.nnz} stored entries (with self-loops); "
          f"{X.shape[1]} features, {n_classes} classes; torch threads {torch.get_num_threads()}")

    A_sparsile = sparsile.from_scipy(A_hat)
    A_torch = torch.sparse_csr_tensor(torch.from_numpy(A_hat.indptr.astype(np.int64)),
                                      torch.from_numpy(A_hat.indices.astype(np.int64)),
                                      torch.from_numpy(A_hat.data), A_hat.shape)
    sparsile.spmm(A_sparsile, np.zeros((A_hat.shape[1], 16), np.float32))  # compile (or load) once
    t_s = train("sparsile spmm", lambda H: st.spmm(A_sparsile, H), X, labels, masks, n_classes, args.epochs)
    t_t = train("torch.sparse.mm", lambda H: torch.sparse.mm(A_torch, H), X, labels, masks, n_classes, args.epochs)
    H = torch.randn(A_hat.shape[1], 16)
    spmm_s = best_time(lambda: sparsile.spmm(A_sparsile, H))
    spmm_t = best_time(lambda: torch.sparse.mm(A_torch, H))
    print(f"SpMM alone (2708 x 16): sparsile {spmm_s * 1e3:.3f} ms, torch.sparse.mm {spmm_t * 1e3:.3f} ms")
    print(f"epoch time: sparsile {t_s * 1e3:.2f} ms, torch.sparse.mm {t_t * 1e3:.2f} ms "
          f"(ratio {t_t / t_s:.2f}x)")


if __name__ == "__main__":
    main()
