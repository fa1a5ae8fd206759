"""The examples in the package's docstrings run and print what they show, and every
public function documents its parameters and has a type-annotated signature."""

import doctest
import importlib
import inspect

import pytest

import sparsile

MODULES = ["sparsile", "sparsile._ops", "sparsile._tensor", "sparsile._compile", "sparsile._dense",
           "sparsile._log", "sparsile._explain", "sparsile._threads"]
TORCH_MODULES = ["sparsile.torch", "sparsile.nn", "sparsile._torch_library", "sparsile._torch_eager"]


@pytest.mark.parametrize("name", MODULES + TORCH_MODULES)
def test_docstring_examples(name):
    if name in TORCH_MODULES:
        pytest.importorskip("torch")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


@pytest.mark.parametrize("fn", [sparsile.spmm, sparsile.spmv, sparsile.sddmm, sparsile.spmm_batched,
                                sparsile.spmv_batched, sparsile.mttkrp, sparsile.rgms, sparsile.compile,
                                sparsile.from_coo, sparsile.from_csr, sparsile.from_coords, sparsile.from_dense,
                                sparsile.from_scipy, sparsile.from_torch, sparsile.as_tensor, sparsile.load,
                                sparsile.save])
def test_operators_are_documented_and_typed(fn):
    doc = inspect.getdoc(fn)
    assert doc, fn.__name__
    if fn.__module__ == "sparsile._ops" or fn is sparsile.compile:
        assert "Example::" in doc, fn.__name__
    sig = inspect.signature(fn)
    for p in sig.parameters.values():
        assert p.annotation is not inspect.Parameter.empty, f"{fn.__name__}({p.name})"
        assert "Any" not in str(p.annotation) or p.name in ("schedule",), f"{fn.__name__}({p.name}: {p.annotation})"
    assert sig.return_annotation is not inspect.Signature.empty, fn.__name__
