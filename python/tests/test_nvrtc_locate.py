"""NVRTC is found in the CUDA wheels on the Python path unless SPARSILE_NVRTC names one."""

from sparsile import _cuda


def _wheel(root, *parts):
    lib = root.joinpath(*parts)
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    return str(lib)


def test_the_cuda_12_wheel_is_found(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARSILE_NVRTC", raising=False)
    lib = _wheel(tmp_path, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12")
    assert _cuda.locate_nvrtc([str(tmp_path / "elsewhere"), str(tmp_path)]) == lib
    import os

    assert os.environ["SPARSILE_NVRTC"] == lib


def test_the_cuda_13_wheel_is_found(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARSILE_NVRTC", raising=False)
    lib = _wheel(tmp_path, "nvidia", "cu13", "lib", "libnvrtc.so.13")
    assert _cuda.locate_nvrtc([str(tmp_path)]) == lib


def test_an_explicit_library_is_kept(tmp_path, monkeypatch):
    _wheel(tmp_path, "nvidia", "cu13", "lib", "libnvrtc.so.13")
    monkeypatch.setenv("SPARSILE_NVRTC", "/opt/cuda/lib64/libnvrtc.so.13")
    assert _cuda.locate_nvrtc([str(tmp_path)]) == "/opt/cuda/lib64/libnvrtc.so.13"


def test_nothing_found_leaves_the_loader_to_search(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARSILE_NVRTC", raising=False)
    assert _cuda.locate_nvrtc([str(tmp_path)]) is None
    import os

    assert "SPARSILE_NVRTC" not in os.environ
