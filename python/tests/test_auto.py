"""The automatic choice: ``recipe=`` on the operators, ``explain``, ``recipes`` and
``tune`` (each test uses its own tuning database through ``SPARSILE_TUNING_DB``)."""

import json

import numpy as np
import pytest

import sparsile

from conftest import random_csr


@pytest.fixture
def own_db(tmp_path, monkeypatch):
    path = tmp_path / "tuning.jsonl"
    monkeypatch.setenv("SPARSILE_TUNING_DB", str(path))
    return path


def test_recipes_lists_rowwise_with_parameters():
    names = {r["name"]: r for r in sparsile.recipes()}
    assert "rowwise" in names and "default" in names
    assert any(p["name"] == "partition" for p in names["rowwise"]["params"])


@pytest.mark.parametrize("recipe", ["auto", "default", "rowwise", "rowwise:partition=static"])
def test_spmm_with_each_recipe_matches_scipy(rng, recipe):
    A = random_csr(rng, 57, 41, 0.1, empty_rows=(0, 13))
    X = rng.standard_normal((41, 19)).astype(np.float32)
    Y = sparsile.spmm(sparsile.from_scipy(A), X, recipe=recipe)
    np.testing.assert_allclose(Y, A @ X, rtol=1e-4, atol=1e-4)


def test_unknown_recipe_is_a_value_error(rng):
    A = sparsile.from_scipy(random_csr(rng, 8, 8, 0.3))
    with pytest.raises(ValueError, match="no_such_recipe"):
        sparsile.spmm(A, np.ones((8, 4), np.float32), recipe="no_such_recipe")


def test_explain_names_a_source_without_running(rng, own_db):
    A = sparsile.from_scipy(random_csr(rng, 300, 200, 0.02))
    info = sparsile.explain(A, op="spmm", k=32, threads=2)
    assert info["op"] == "spmm" and info["width"] == 32
    assert info["source"] in ("selector", "rule")
    assert info["format"] == "csr"
    assert info["features"]["log2_rows"] == pytest.approx(np.log2(300), abs=0.01)


def test_nearly_full_blocks_are_named_and_run_tiled_from_bsr(rng, own_db):
    # 96 x 96 in full 16 x 16 blocks on the diagonal: CSR keeps its format and the note
    # names the block format; stored as bsr:8x8 the product runs register-tiled.
    import scipy.sparse as sp

    blocks = [rng.standard_normal((16, 16)) for _ in range(6)]
    A = sp.block_diag(blocks, format="csr").astype(np.float32)
    info = sparsile.explain(sparsile.from_scipy(A), op="spmm", k=32, threads=2)
    assert info["format"] == "csr"
    assert 'format="bsr:8x8"' in info["note"]
    B = sparsile.from_scipy(A, format="bsr:8x8")
    assert sparsile.explain(B, op="spmm", k=32, threads=2)["recipe"] == "rowwise"
    X = rng.standard_normal((96, 40)).astype(np.float32)
    np.testing.assert_allclose(sparsile.spmm(B, X), A @ X, rtol=1e-4, atol=1e-4)


def test_a_first_call_settles_the_short_list_and_explain_says_so(rng, own_db):
    A = sparsile.from_scipy(random_csr(rng, 300, 200, 0.02, empty_rows=(0, 7)))
    before = sparsile.explain(A, op="spmm", k=32, threads=2)
    assert before["trial"] == [] or len(before["trial"]) > 1
    X = rng.standard_normal((200, 32)).astype(np.float32)
    Y = sparsile.spmm(A, X, threads=2)
    np.testing.assert_allclose(Y, A.to_scipy() @ X, rtol=1e-4, atol=1e-4)
    after = sparsile.explain(A, op="spmm", k=32, threads=2)
    assert after["trial"] == []
    if before["trial"]:
        assert before["trial"][0] == f"{before['format']}/{before['recipe']}"
        assert f"{after['format']}/{after['recipe']}" in before["trial"]
        assert "timed against" in after["note"]


def test_explain_refuses_a_bad_op(rng):
    A = sparsile.from_scipy(random_csr(rng, 8, 8, 0.3))
    with pytest.raises(ValueError, match="op must be one of"):
        sparsile.explain(A, op="gemm")


def test_tune_records_the_best_and_auto_then_uses_it(rng, own_db):
    A = sparsile.from_scipy(random_csr(rng, 400, 300, 0.02))
    X = rng.standard_normal((300, 16)).astype(np.float32)
    report = sparsile.tune(A, op="spmm", k=16, strategy="pruned", threads=2)
    assert report["best"] is not None
    assert report["records_written"] > 0
    assert own_db.exists()
    best_format, best_recipe = report["best"].split("/", 1)
    info = sparsile.explain(A, op="spmm", k=16, threads=2)
    assert info["source"] == "tuning database"
    assert info["recipe"] == best_recipe and info["format"] == best_format
    # The operator runs the recorded choice and its result is right.
    Y = sparsile.spmm(A, X, threads=2)
    np.testing.assert_allclose(Y, A.to_scipy() @ X, rtol=1e-4, atol=1e-4)
    # Another width is another key: not a database hit.
    assert sparsile.explain(A, op="spmm", k=8, threads=2)["source"] != "tuning database"


def test_stile_tuning_measures_tiles_and_auto_runs_the_winner(rng, own_db):
    # Full 8 x 8 blocks on the diagonal among scattered entries: the tile model keeps
    # decompositions, each is measured, and whatever wins runs correctly afterwards.
    import scipy.sparse as sp

    blocks = sp.block_diag([rng.standard_normal((8, 8)) for _ in range(40)], format="csr")
    scatter = sp.random(320, 320, density=0.01, random_state=7, format="csr")
    A = (blocks + scatter).tocsr().astype(np.float32)
    S = sparsile.from_scipy(A)
    # The first search measures the tile costs and keeps them beside the database;
    # replaced by costs that make the full 8 x 8 blocks tiles on any machine (an 8 x 8
    # or 4 x 4 tile as dear as its side in entries, larger tiles dear), the second
    # search reads them back and keeps decompositions.
    report = sparsile.tune(S, op="spmm", k=16, strategy="stile", threads=2)
    assert report["strategy"] == "stile"
    costs = own_db.with_name(own_db.stem + ".stile.jsonl")
    record = json.loads(costs.read_text().splitlines()[0])
    record["calibration"].update(
        entry_ms=1e-12, part_ms=0.0, tile_ms=[[32, 1e3], [16, 1e3], [8, 1e-12], [4, 1e-12]]
    )
    costs.write_text(json.dumps(record) + "\n")
    report = sparsile.tune(S, op="spmm", k=16, strategy="stile", threads=2)
    assert report["tiles"], report["warnings"]
    assert any(side == 8 and n > 0 for t in report["tiles"] for side, n in t["tiles"])
    measured = {c["candidate"]: c for c in report["candidates"]}
    for t in report["tiles"]:
        assert t["candidate"].startswith("csr/tiles:")
        assert measured[t["candidate"]]["median_ms"] > 0
    X = rng.standard_normal((320, 16)).astype(np.float32)
    info = sparsile.explain(S, op="spmm", k=16, threads=2)
    assert info["source"] == "tuning database"
    np.testing.assert_allclose(sparsile.spmm(S, X, threads=2), A @ X, rtol=1e-4, atol=1e-4)


def test_tune_refuses_bad_arguments(rng, own_db):
    A = sparsile.from_scipy(random_csr(rng, 8, 8, 0.3))
    with pytest.raises(ValueError, match="strategy"):
        sparsile.tune(A, op="spmm", k=4, strategy="fastest")
    with pytest.raises(ValueError, match="k must be"):
        sparsile.tune(A, op="spmm", k=0)
    with pytest.raises(ValueError, match="budget"):
        sparsile.tune(A, op="spmm", k=4, budget=-1.0)
