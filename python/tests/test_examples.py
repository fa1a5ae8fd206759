"""The GAT and sparse-attention examples run end to end (short settings): their
gradchecks pass and their outputs agree with the references they print."""

import pathlib
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _run(script, *args):
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_gat_example():
    out = _run("gat_cora.py", "--epochs", "3", "--heads", "2")
    assert "gradcheck of GATConv (float64, 60 nodes, 2 heads): passed" in out, out
    diff = float(re.search(r"eager and compiled final outputs: (\S+)", out).group(1))
    assert diff < 1e-3, out


def test_sparse_attention_example():
    out = _run("sparse_attention.py", "--seq", "256", "--dim", "32", "--heads", "2", "--window", "4")
    assert "gradcheck of sparse_attention (float64, 64 tokens, 2 heads): passed" in out, out
    diff = float(re.search(r"from dense masked attention: (\S+)", out).group(1))
    assert diff < 1e-4, out
