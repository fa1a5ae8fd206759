"""Compilation and the automatic choice are logged through the "sparsile" logger."""

import logging

import numpy as np
import scipy.sparse as sp

import sparsile


def test_choice_logged_once_at_info_then_at_debug(rng, caplog):
    A = sparsile.from_scipy(sp.random(40, 30, density=0.2, format="csr", dtype=np.float64, random_state=rng))
    X = rng.standard_normal((30, 4))
    with caplog.at_level(logging.DEBUG, logger="sparsile"):
        sparsile.spmm(A, X)
        sparsile.spmm(A, X)
    choices = [r for r in caplog.records if r.name == "sparsile" and r.getMessage().startswith("spmm: ")]
    assert len(choices) == 2, [r.getMessage() for r in caplog.records]
    assert "for a 40 x 30 operand" in choices[0].getMessage()
    assert {r.levelno for r in choices} <= {logging.INFO, logging.DEBUG}
    assert choices[1].levelno == logging.DEBUG


def test_compilation_logged_with_cache_outcome(caplog):
    with caplog.at_level(logging.INFO, logger="sparsile"):
        sparsile.compile("tensor x: f64[n]\ntensor y: f64[n]\ny[i] = x[i] * 3.5\n")
    msgs = [r.getMessage() for r in caplog.records if r.name == "sparsile"]
    assert any(("compiled" in m or "from the kernel cache" in m) and "y[i] = x[i] * 3.5" in m for m in msgs), msgs


def test_nothing_logged_by_default(rng, capsys):
    A = sparsile.from_scipy(sp.random(10, 10, density=0.3, format="csr", dtype=np.float32, random_state=rng))
    sparsile.spmv(A, np.ones(10, dtype=np.float32))
    assert capsys.readouterr().err == ""
    assert not logging.getLogger("sparsile").handlers
