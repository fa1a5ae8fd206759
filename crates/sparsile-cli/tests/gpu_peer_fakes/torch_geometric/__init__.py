"""A stand-in for torch_geometric.utils.spmm (see ../README.md)."""

import os

if os.environ.get("FAKE_NO_PYG") == "1":
    raise ImportError("No module named 'torch_geometric'")

from torch_geometric import utils  # noqa: E402,F401

__version__ = "0.0-fake"
