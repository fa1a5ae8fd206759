"""sparsile.cache_info / sparsile.clear_cache on kernel caches in temporary folders.

The cache folder is read from SPARSILE_CACHE_DIR at each call; the test that compiles
runs in a subprocess, so no kernel of this process lands in its folder or the reverse."""

import json
import os
import subprocess
import sys

import pytest

import sparsile

KEY = "ab" + "0" * 62


def test_a_missing_folder_is_empty_and_not_created(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("SPARSILE_CACHE_DIR", str(folder))
    info = sparsile.cache_info()
    assert info["dir"] == str(folder)
    assert (info["exists"], info["kernels"], info["files"], info["bytes"]) == (False, 0, 0, 0)
    assert info["oldest"] is None and info["newest"] is None
    report = sparsile.clear_cache()
    assert (report["kernels_removed"], report["files_removed"], report["bytes_removed"]) == (0, 0, 0)
    assert not folder.exists()


def test_only_the_caches_own_files_are_removed(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    (folder / "ab").mkdir(parents=True)
    folder.chmod(0o700)
    for ext, size in (("so", 100), ("c", 10), ("sum", 5)):
        (folder / "ab" / f"{KEY}.{ext}").write_bytes(b"x" * size)
    (folder / "tuning.jsonl").write_text("{}\n")
    (folder / "ab" / "notes.txt").write_text("mine")
    monkeypatch.setenv("SPARSILE_CACHE_DIR", str(folder))
    info = sparsile.cache_info()
    assert info["checks_pass"] and info["problem"] is None
    assert (info["cpu_kernels"], info["cuda_kernels"], info["files"], info["bytes"]) == (1, 0, 3, 115)
    assert info["oldest"] <= info["newest"]
    report = sparsile.clear_cache()
    assert (report["kernels_removed"], report["files_removed"], report["bytes_removed"]) == (1, 3, 115)
    assert (folder / "tuning.jsonl").exists() and (folder / "ab" / "notes.txt").exists()
    assert sparsile.cache_info()["files"] == 0


def test_a_folder_others_can_write_is_named_and_left_alone(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    (folder / "ab").mkdir(parents=True)
    obj = folder / "ab" / f"{KEY}.so"
    obj.write_bytes(b"x")
    folder.chmod(0o777)
    monkeypatch.setenv("SPARSILE_CACHE_DIR", str(folder))
    info = sparsile.cache_info()
    assert info["exists"] and not info["checks_pass"]
    assert "mode 777" in info["problem"]
    with pytest.raises(ValueError, match="refusing the kernel cache folder"):
        sparsile.clear_cache()
    assert obj.exists()


SCRIPT = """
import json, numpy as np, sparsile
A = sparsile.from_dense(np.eye(8, dtype=np.float32))
y = sparsile.spmv(A, np.arange(8, dtype=np.float32))
assert np.allclose(y, np.arange(8))
before = sparsile.cache_info()
cleared = sparsile.clear_cache()
after = sparsile.cache_info()
print(json.dumps({"before": before, "cleared": cleared, "after": after}))
"""


def test_kernels_compiled_by_a_process_are_listed_and_cleared(tmp_path):
    folder = tmp_path / "cache"
    env = dict(os.environ, SPARSILE_CACHE_DIR=str(folder))
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    before, cleared, after = result["before"], result["cleared"], result["after"]
    assert before["dir"] == str(folder) and before["checks_pass"]
    assert before["cpu_kernels"] >= 1 and before["bytes"] > 0
    assert cleared["kernels_removed"] == before["kernels"]
    assert cleared["bytes_removed"] == before["bytes"]
    assert (after["kernels"], after["files"]) == (0, 0)
