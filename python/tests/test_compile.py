"""The compiler from Python: formats, schedules, traces as JSON, IR and source."""

import json

import numpy as np
import pytest

import sparsile

from conftest import random_csr

SPMM = "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"


def test_kernel_call_returns_outputs_by_name(rng):
    A = random_csr(rng, 17, 13, 0.2, np.float64)
    B = rng.standard_normal((13, 4))
    k = sparsile.compile(SPMM)
    out = k(A=sparsile.from_scipy(A), B=B)
    assert list(out) == ["C"]
    np.testing.assert_allclose(out["C"], A @ B, rtol=1e-12)
    assert k.compile_info()[0] in ("hit", "miss")


def test_formats_replace_declared_ones(rng):
    A = random_csr(rng, 16, 12, 0.2, np.float64)
    B = rng.standard_normal((12, 3))
    k = sparsile.compile(SPMM, formats={"A": "bsr:4x4"})
    assert "bsr" in k.ir("stage1") or "A_" in k.ir("stage1")
    out = k(A=sparsile.from_scipy(A).to("bsr:4x4"), B=B)["C"]
    np.testing.assert_allclose(out, A @ B, rtol=1e-12)
    assert k.ir("stage1") != sparsile.compile(SPMM).ir("stage1")


def test_ir_and_source():
    k = sparsile.compile(SPMM)
    assert k.ir("stage1").startswith("func main(")
    assert "block C" in k.ir("stage2")
    assert "for (" in k.source("c") and k.source() == k.ir("c")
    with pytest.raises(ValueError, match="unknown stage"):
        k.ir("stage4")
    with pytest.raises(ValueError, match="unknown source language 'fortran'"):
        k.source("fortran")
    with pytest.raises(ValueError, match="target is cpu, whose source is c, not 'cuda'"):
        k.source("cuda")


def test_schedule_split_parallel_and_trace_round_trip(rng, tmp_path):
    k = sparsile.compile(SPMM)
    sch = k.schedule()
    sch.parallel("C/i_2")
    outer, inner = sch.split("C/i_2", 4)
    assert (outer, inner) == ("C/i_2_o", "C/i_2_i")
    steps = json.loads(sch.trace())["steps"]
    assert [s["step"] for s in steps] == ["lower", "parallel", "split"]
    assert "i_2_i" in sch.ir()
    path = tmp_path / "spmm.trace.json"
    sch.save(path)
    again = sparsile.Schedule.load(path, SPMM)
    assert again.ir() == sch.ir()
    A = random_csr(rng, 23, 19, 0.2, np.float64)
    B = rng.standard_normal((19, 5))
    for scheduled in (sparsile.compile(SPMM, schedule=sch), sparsile.compile(SPMM, schedule=str(path)),
                      sparsile.compile(SPMM, schedule=path), sch.compile()):
        assert "i_2_i" in scheduled.ir("stage2")
        np.testing.assert_allclose(scheduled(A=sparsile.from_scipy(A), B=B)["C"], A @ B, rtol=1e-12)


def test_generic_primitive_through_trace_steps():
    sch = sparsile.compile(SPMM).schedule()
    sch.apply({"step": "split", "target": "C/i_2", "factor": 8, "tail": "OuterFixed"})
    sch.vectorize("C/k2_2")
    assert [s["step"] for s in json.loads(sch.trace())["steps"]] == ["lower", "split", "vectorize"]


def test_failing_step_changes_nothing():
    sch = sparsile.compile(SPMM).schedule()
    sch.split("C/i_2", 4)
    before = sch.trace()
    with pytest.raises(ValueError, match="no loop `nope` in block `C`"):
        sch.split("C/nope", 4)
    with pytest.raises(ValueError, match="unknown variant `frobnicate`"):
        sch.frobnicate(target="C/i_2")
    assert sch.trace() == before


def test_index_types_compile_separately(rng):
    A = random_csr(rng, 11, 9, 0.3, np.float64)
    B = rng.standard_normal((9, 2))
    k = sparsile.compile(SPMM)
    a32 = sparsile.from_scipy(A)
    a64 = a32.to("csr", index_type=np.int64)
    np.testing.assert_allclose(k(A=a32, B=B)["C"], A @ B, rtol=1e-12)
    np.testing.assert_allclose(k(A=a64, B=B)["C"], A @ B, rtol=1e-12)
    assert "int64_t" in k.source("c")


def test_operators_reuse_compiled_kernels(rng):
    from sparsile import _compile

    A = sparsile.from_scipy(random_csr(rng, 8, 8, 0.3, np.float32))
    X = np.ones((8, 2), np.float32)
    sparsile.spmm(A, X)
    count = len(_compile._CACHE)
    sparsile.spmm(A, X)
    assert len(_compile._CACHE) == count
