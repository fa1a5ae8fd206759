"""CUDA arrays in and out without copies, and autograd on the GPU.

Everywhere: the native ``DeviceArray`` and ``run_device`` check what they are given;
CUDA array interface objects and DLPack producers are described without copies (a
DLPack capsule of a real torch CPU tensor checks the structure layout); operands on mixed devices,
of the wrong dtype or for a CPU kernel are refused with messages that say what to do;
on a machine without a GPU the GPU path stops at the driver's message; the autograd
functions run forward and backward on the GPU recipes (target ``cuda-sim``) and match
the CPU target.

Where ``torch.cuda.is_available()``: operators and ``sparsile.torch`` on CUDA tensors
match the CPU target, return CUDA tensors on the operand's device, run on the current
stream, copy nothing to or from the host after the first call on an operand (checked
with the profiler), and refuse non-contiguous tensors and tensors on other devices.
"""

import ctypes
import gc

import numpy as np
import pytest

import sparsile
from sparsile import _cuda, _native

from conftest import HAVE_TORCH, random_csr

SPMM = "tensor A: f32[m, n] csr\ntensor X: f32[n, k]\ntensor Y: f32[m, k]\nY[i,k] = A[i,j] * X[j,k]\n"

if HAVE_TORCH:
    import torch

    HAVE_GPU = torch.cuda.is_available()
else:  # pragma: no cover - depends on the environment
    HAVE_GPU = False

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
needs_gpu = pytest.mark.skipif(not HAVE_GPU, reason="no CUDA device (torch.cuda.is_available() is False)")


class FakeCudaArray:
    """An object that describes device memory through ``__cuda_array_interface__`` (as
    CuPy and Numba arrays do); its address is made up, so kernels must never run on it."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000000000, device=0):
        self.shape = shape
        self.device = type("Device", (), {"id": device})()
        self.dtype = np.dtype(typestr)
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": typestr, "data": (ptr, False), "strides": strides, "version": 3,
        }


class FakeDLPackArray:
    """An object that exports memory through DLPack as JAX arrays do: a ``dltensor``
    capsule over a DLManagedTensor made here (made-up address, so kernels must never run
    on it). ``capsule_device`` lets the capsule disagree with ``__dlpack_device__``."""

    def __init__(self, shape, code=2, bits=32, strides=None, ptr=0x7F0000002000, offset=0,
                 device=(2, 0), capsule_device=None):
        self.shape = shape
        self.device_pair = device
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(shape))(*strides) if strides else None
        managed = (_cuda._DLTensor * 1)()  # a DLManagedTensor begins with its DLTensor
        t = managed[0]
        t.data = ptr
        dev = capsule_device or device
        t.device = _cuda._DLDevice(dev[0], dev[1])
        t.ndim = len(shape)
        t.dtype = _cuda._DLDataType(code, bits, 1)
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        if self._strides is not None:
            t.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = offset
        # Room for manager_ctx and deleter (null: nothing to release).
        self._managed = (ctypes.c_byte * (ctypes.sizeof(_cuda._DLTensor) + 16))()
        ctypes.memmove(self._managed, managed, ctypes.sizeof(_cuda._DLTensor))
        self.streams = []

    def __dlpack_device__(self):
        return self.device_pair

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._managed), b"dltensor", None)


def csr(rng, m=13, n=9, dtype=np.float32):
    return sparsile.from_scipy(random_csr(rng, m, n, 0.3, dtype))


# --- everywhere --------------------------------------------------------------------


def test_device_arrays_are_checked_when_made():
    a = _native.DeviceArray(0x1000, (3, 4), "f32", 0)
    assert (a.ptr, a.shape, a.dtype, a.device) == (0x1000, [3, 4], "f32", 0)
    assert "shape=[3, 4]" in repr(a)
    assert _native.DeviceArray(0x1000, (3,), "f16", 0).dtype == "f16"
    assert _native.DeviceArray(0x1000, (3,), "bf16", 0).dtype == "bf16"
    with pytest.raises(TypeError, match="dtype must be f16, bf16, f32, f64, i32 or i64"):
        _native.DeviceArray(0x1000, (3,), "f8", 0)
    with pytest.raises(ValueError, match="do not match shape"):
        _native.DeviceArray(0x1000, (3, 4), "f32", 0, (1,))


def test_cuda_array_interface_objects_are_described_without_copies():
    x = FakeCudaArray((5, 3), strides=None, ptr=0x7F0000001000, device=1)
    assert _cuda.is_cuda_array(x)
    a = _cuda.device_array(x, "X")
    assert (a.ptr, a.shape, a.dtype, a.device) == (0x7F0000001000, [5, 3], "f32", 1)
    # Byte strides become element strides (checked by the runtime).
    _cuda.device_array(FakeCudaArray((5, 3), "<f8", strides=(24, 8)), "X")
    with pytest.raises(ValueError, match="X is not contiguous"):
        _cuda.device_array(FakeCudaArray((5, 3), strides=(13, 4)), "X")
    assert _cuda.device_array(FakeCudaArray((5, 3), "<f2"), "X").dtype == "f16"
    with pytest.raises(TypeError, match="float16, float32 or float64, got <i4"):
        _cuda.device_array(FakeCudaArray((5,), "<i4"), "X")
    assert not _cuda.is_cuda_array(np.ones(3))


def test_dlpack_producers_are_described_without_copies():
    x = FakeDLPackArray((5, 3), ptr=0x7F0000002000, offset=64, device=(2, 1))
    assert _cuda.is_cuda_array(x)
    assert _cuda.device_name(x) == "cuda:1"
    assert sparsile._dense.device_of(x) == "cuda"
    a = _cuda.device_array(x, "X")
    assert (a.ptr, a.shape, a.dtype, a.device) == (0x7F0000002000 + 64, [5, 3], "f32", 1)
    # Asked to order its work before the legacy default stream, on which the kernel runs.
    assert x.streams == [1]
    assert _cuda.current_stream(x) == 0
    b = _cuda.device_array(FakeDLPackArray((4, 2), bits=64, strides=(2, 1)), "X")
    assert (b.dtype, b.shape) == ("f64", [4, 2])
    assert _cuda.device_array(FakeDLPackArray((4, 2), bits=16), "X").dtype == "f16"
    assert _cuda.device_array(FakeDLPackArray((4, 2), code=4, bits=16), "X").dtype == "bf16"
    with pytest.raises(TypeError, match="X must be float16, bfloat16, float32 or float64, got DLPack type code 0 of 32 bits"):
        _cuda.device_array(FakeDLPackArray((4,), code=0), "X")
    with pytest.raises(ValueError, match="X: its DLPack tensor is on device type 1, not CUDA"):
        _cuda.device_array(FakeDLPackArray((4,), capsule_device=(1, 0)), "X")
    # Host memory through DLPack (NumPy) is not a CUDA array.
    assert not _cuda.is_cuda_array(np.ones(3))
    assert not _cuda.is_cuda_array(FakeDLPackArray((3,), device=(1, 0)))
    assert sparsile._dense.device_of(np.ones(3)) == "cpu"


@needs_torch
def test_the_dlpack_layout_reads_a_real_producer():
    t = torch.arange(24, dtype=torch.float64).reshape(4, 6)[1:, ::2]
    d = _cuda.dlpack_fields(t.__dlpack__(), "t")
    assert (d.device_type, d.device_id) == (1, 0)
    assert (d.code, d.bits, d.lanes) == (2, 64, 1)
    assert d.shape == (3, 3)
    assert d.strides == tuple(t.stride())
    assert d.data + d.byte_offset == t.data_ptr()
    with pytest.raises(TypeError, match="not a DLPack capsule named 'dltensor'"):
        _cuda.dlpack_fields(object(), "t")


def test_mixed_devices_and_dtypes_are_refused_before_native_code(rng):
    A = csr(rng)
    X = FakeCudaArray((9, 4))
    with pytest.raises(ValueError, match=r"Y is in host memory but X is on cuda:0: pass every dense operand on the same CUDA device"):
        sparsile.sddmm(A, FakeCudaArray((13, 4)), np.ones((9, 4), np.float32))
    with pytest.raises(ValueError, match="Y is on cuda:1 but X is on cuda:0"):
        sparsile.sddmm(A, FakeCudaArray((13, 4)), FakeCudaArray((9, 4), device=1))
    with pytest.raises(TypeError, match="X is float64 but A is float32"):
        sparsile.spmm(A, FakeCudaArray((9, 4), "<f8"))
    with pytest.raises(TypeError, match="Y and X come from different libraries"):
        sparsile.sddmm(A, FakeCudaArray((13, 4)), FakeDLPackArray((9, 4)))
    with pytest.raises(ValueError, match="values is in host memory but X is on cuda:0"):
        sparsile.spmm(A, X, values=A.values)
    with pytest.raises(ValueError, match="an operand is a CUDA tensor: run it with target='cuda', not 'cpu'"):
        sparsile.spmm(A, X, target="cpu")
    with pytest.raises(ValueError, match="run it with a kernel of target 'cuda'"):
        sparsile.compile(SPMM)(A=A, X=X)


def test_the_native_device_run_checks_its_inputs_and_target(rng):
    A = csr(rng)
    X = _native.DeviceArray(0x7F0000000000, (9, 4), "f32", 0)
    cpu = _native.AutoKernel(SPMM, "auto", "cpu")
    with pytest.raises(ValueError, match="run on the cuda target; this kernel's target is cpu"):
        cpu.run_device({"A": A._native, "X": X}, lambda *a: None, 0)
    gpu = _native.AutoKernel(SPMM, "auto", "cuda")
    with pytest.raises(TypeError, match="input X: expected a DeviceArray, a sparsile Tensor, or a"):
        gpu.run_device({"A": A._native, "X": [1.0]}, lambda *a: None, 0)
    with pytest.raises(TypeError, match="input A: expected a DeviceArray"):
        gpu.run_device({"A": (A._native, "values"), "X": X}, lambda *a: None, 0)


@pytest.mark.skipif(HAVE_GPU, reason="checks the message of a machine without a GPU")
def test_without_a_gpu_the_device_path_stops_at_the_driver(rng):
    A = csr(rng)
    with pytest.raises(ValueError) as e:
        sparsile.spmm(A, FakeCudaArray((9, 4)), values=FakeCudaArray((A.nnz,)))
    message = str(e.value)
    assert "NVIDIA driver" in message or "CUDA device" in message or "NVRTC" in message, message
    # A DLPack producer's array takes the same path.
    with pytest.raises(ValueError, match="NVIDIA driver|CUDA device|NVRTC"):
        sparsile.spmm(A, FakeDLPackArray((9, 4)), values=FakeDLPackArray((A.nnz,)))
    # Nothing was allocated for the output: the kernel could not be built.
    gpu = _native.AutoKernel(SPMM, "auto", "cuda")
    asked = []
    with pytest.raises(ValueError, match="NVIDIA driver|CUDA device|NVRTC"):
        gpu.run_device({"A": A._native, "X": _cuda.device_array(FakeCudaArray((9, 4)), "X")},
                       lambda *a: asked.append(a), 0)
    assert asked == []
    assert _native.device_cache_stats() == (0, 0, 0)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_autograd_runs_the_gpu_recipes_forward_and_backward(rng, dtype, monkeypatch):
    """target="cuda-sim": the GPU kernels of every pass, in the SIMT interpreter."""
    import sparsile.torch as st
    from sparsile import _ops

    made = []
    auto_kernel = _ops.auto_kernel

    def spy(program, recipe="auto", target="cpu"):
        made.append((program.splitlines()[-1], target))
        return auto_kernel(program, recipe, target)

    monkeypatch.setattr(_ops, "auto_kernel", spy)
    T = csr(rng, 17, 11, dtype)
    tdtype = torch.float32 if dtype == np.float32 else torch.float64
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-9)
    W = torch.randn(17, 5, dtype=tdtype, generator=torch.Generator().manual_seed(3))
    results = {}
    for target in ("cpu", "cuda-sim"):
        made.clear()
        values = torch.tensor(T.values).requires_grad_()
        X = torch.randn(11, 5, dtype=tdtype, generator=torch.Generator().manual_seed(1), requires_grad=True)
        Xs = torch.randn(17, 5, dtype=tdtype, generator=torch.Generator().manual_seed(2), requires_grad=True)
        Y = st.spmm(T, X, values=values, target=target)
        C = st.sddmm(T, Xs, X, values=values, target=target)
        ((Y * W).sum() + (C * C).sum()).backward()
        results[target] = (Y.detach(), C.detach(), X.grad, Xs.grad, values.grad)
        # Forward: SpMM, SDDMM; backward of SpMM: SpMM (transposed), SDDMM; of SDDMM:
        # SDDMM, SpMM, SpMM (transposed). Every one on the target asked for.
        ops = sorted(op.split("=")[0].strip() for op, _ in made)
        assert ops == ["C[i,j]"] * 3 + ["Y[i,k]"] * 4, made
        assert {t for _, t in made} == {target}, made
    for got, want in zip(results["cuda-sim"], results["cpu"]):
        torch.testing.assert_close(got, want, **tol)


# --- on a GPU ----------------------------------------------------------------------


def _cpu(t):
    return t.detach().cpu()


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64] if HAVE_TORCH else [])
def test_operators_on_cuda_tensors_match_the_cpu_and_stay_on_the_device(rng, dtype):
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    A = csr(rng, 40, 30, np_dtype)
    X = torch.randn(30, 7, dtype=dtype, device="cuda")
    x = torch.randn(30, dtype=dtype, device="cuda")
    Xs = torch.randn(40, 7, dtype=dtype, device="cuda")
    Xb = torch.randn(3, 30, 7, dtype=dtype, device="cuda")
    Xv = torch.randn(3, 30, dtype=dtype, device="cuda")
    for got, want in [
        (sparsile.spmm(A, X), sparsile.spmm(A, _cpu(X))),
        (sparsile.spmv(A, x), sparsile.spmv(A, _cpu(x))),
        (sparsile.spmm_batched(A, Xb), sparsile.spmm_batched(A, _cpu(Xb))),
        (sparsile.spmv_batched(A, Xv), sparsile.spmv_batched(A, _cpu(Xv))),
        (A @ X, A @ _cpu(X)),
    ]:
        assert got.is_cuda and got.device == X.device and got.dtype == dtype
        torch.testing.assert_close(_cpu(got), want, **tol)
    C = sparsile.sddmm(A, Xs, X)
    want = sparsile.sddmm(A, _cpu(Xs), _cpu(X))
    assert C.format == want.format
    np.testing.assert_allclose(C.values, want.values, **tol)
    # Explicit values, on the device.
    v = torch.tensor(A.values).to("cuda") * 2
    torch.testing.assert_close(_cpu(sparsile.spmm(A, X, values=v)), 2 * sparsile.spmm(A, _cpu(X)), **tol)


@needs_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_on_cuda_matches_the_cpu(rng, dtype):
    """f16/bf16 operands on the GPU: loaded as 16 bits, summed in f32, stored rounded
    once, like the CPU target (the two may differ in the last bit: other sum orders)."""
    tdtype = getattr(torch, dtype)
    tol = dict(rtol=2e-3, atol=2e-3) if dtype == "float16" else dict(rtol=1.6e-2, atol=1.6e-2)
    A = csr(rng, 40, 300, np.float32).astype(dtype)
    X = torch.randn(300, 32, device="cuda").to(tdtype)
    x = torch.randn(300, device="cuda").to(tdtype)
    Xs = torch.randn(40, 32, device="cuda").to(tdtype)
    Xt = torch.randn(300, 32, device="cuda").to(tdtype)
    for got, want in [
        (sparsile.spmm(A, X), sparsile.spmm(A, _cpu(X))),
        (sparsile.spmv(A, x), sparsile.spmv(A, _cpu(x))),
        (A @ X, A @ _cpu(X)),
    ]:
        assert got.is_cuda and got.dtype == tdtype
        torch.testing.assert_close(_cpu(got).float(), want.float(), **tol)
    C = sparsile.sddmm(A, Xs, Xt)
    want = sparsile.sddmm(A, _cpu(Xs), _cpu(Xt))
    assert C.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(C.todense(), np.float32), np.asarray(want.todense(), np.float32), **tol)


@needs_gpu
def test_structures_are_cached_on_the_device_per_operand(rng):
    _native.device_cache_clear()
    A = csr(rng, 50, 20)
    X = torch.randn(20, 4, device="cuda")
    sparsile.spmm(A, X)
    structures, arrays, nbytes = _native.device_cache_stats()
    assert (structures, arrays) == (1, 2) and nbytes > 0
    sparsile.spmm(A, X)
    assert _native.device_cache_stats()[:2] == (1, 2), "the same operand is served from the cache"
    B = csr(rng, 50, 20)
    torch.testing.assert_close(_cpu(sparsile.spmm(B, X)), sparsile.spmm(B, _cpu(X)), rtol=1e-4, atol=1e-4)
    assert _native.device_cache_stats()[0] == 2
    del A
    gc.collect()
    C = csr(rng, 50, 20)
    torch.testing.assert_close(_cpu(sparsile.spmm(C, X)), sparsile.spmm(C, _cpu(X)), rtol=1e-4, atol=1e-4)
    assert _native.device_cache_stats()[0] == 2, "the dead operand's entry went"
    _native.device_cache_clear()
    assert _native.device_cache_stats() == (0, 0, 0)


@needs_gpu
def test_no_host_copies_after_the_first_call_on_an_operand(rng):
    from torch.profiler import ProfilerActivity, profile

    A = csr(rng, 300, 200)
    X = torch.randn(200, 32, device="cuda")
    sparsile.spmm(A, X)  # structure and values go to the device once
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        Y = sparsile.spmm(A, X)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    if not names:
        pytest.skip("the profiler recorded no CUDA activity here (no CUPTI?)")
    copies = [n for n in names if "memcpy" in n.lower()]
    assert copies == [], copies
    assert any("memset" not in n.lower() for n in names), f"no kernel recorded: {names}"
    torch.testing.assert_close(_cpu(Y), sparsile.spmm(A, _cpu(X)), rtol=1e-4, atol=1e-4)


@needs_gpu
def test_work_is_ordered_on_the_current_stream(rng):
    A = csr(rng, 64, 64)
    X = torch.randn(64, 16, device="cuda")
    want = sparsile.spmm(A, _cpu(X) * 3)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            Xs = X * 3  # queued on s; the kernel must read it after this
            Y = sparsile.spmm(A, Xs)
            Z = Y.clone()  # queued on s after the kernel
    s.synchronize()
    torch.testing.assert_close(_cpu(Z), want, rtol=1e-4, atol=1e-4)


@needs_gpu
def test_cuda_operands_that_cannot_be_read_in_place_are_refused(rng):
    A = csr(rng, 30, 20)
    X = torch.randn(7, 20, device="cuda")
    with pytest.raises(ValueError, match=r"operand `X` is not contiguous \(shape \[20, 7\], strides \[1, 20\]"):
        sparsile.spmm(A, X.t())
    with pytest.raises(TypeError, match="X is float64 but A is float32"):
        sparsile.spmm(A, X.t().contiguous().double())
    with pytest.raises(ValueError, match="values is in host memory"):
        sparsile.spmm(A, X.t().contiguous(), values=torch.tensor(A.values))
    if torch.cuda.device_count() > 1:
        with pytest.raises(ValueError, match="is on CUDA device 1, but the kernel runs on device 0"):
            sparsile.spmm(A, X.t().contiguous().to("cuda:1"))
    # An exception of the output allocation comes back as it was.
    kernel = sparsile._ops.auto_kernel(SPMM, "auto", "cuda")

    def alloc(name, shape, dtype):
        raise MemoryError(f"no room for {name} {shape} {dtype}")

    args = {"A": A._native, "X": _cuda.device_array(X.t().contiguous(), "X")}
    with pytest.raises(MemoryError, match=r"no room for Y \[30, 7\] f32"):
        kernel.run_device(args, alloc, _cuda.current_stream(X))


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64] if HAVE_TORCH else [])
def test_autograd_on_cuda_matches_the_cpu(rng, dtype):
    import sparsile.torch as st

    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-9)
    T = csr(rng, 40, 30, np_dtype)
    W = torch.randn(40, 6, dtype=dtype)
    results = {}
    for device in ("cpu", "cuda"):
        values = torch.tensor(T.values).to(device).requires_grad_()
        X = torch.randn(30, 6, dtype=dtype, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()
        Xs = torch.randn(40, 6, dtype=dtype, generator=torch.Generator().manual_seed(2)).to(device).requires_grad_()
        Xb = torch.randn(2, 30, 6, dtype=dtype, generator=torch.Generator().manual_seed(4)).to(device).requires_grad_()
        Y = st.spmm(T, X, values=values)
        C = st.sddmm(T, Xs, X, values=values)
        y = st.spmv(T, X[:, 0].contiguous())
        Yb = sparsile.spmm_batched(T, Xb)  # routed to the autograd function
        loss = (Y * W.to(device)).sum() + (C * C).sum() + y.sum() + Yb.square().sum()
        loss.backward()
        if device == "cuda":
            for t in (Y, C, y, Yb, X.grad, Xs.grad, Xb.grad, values.grad):
                assert t.is_cuda
        results[device] = [_cpu(t) for t in (Y, C, y, Yb, X.grad, Xs.grad, Xb.grad, values.grad)]
    for got, want in zip(results["cuda"], results["cpu"]):
        torch.testing.assert_close(got, want, **tol)


@needs_gpu
def test_gradcheck_on_cuda(rng):
    import sparsile.torch as st

    T = csr(rng, 8, 7, np.float64)
    values = torch.tensor(T.values).cuda().requires_grad_()
    X = torch.randn(7, 3, dtype=torch.float64, device="cuda", requires_grad=True)
    Y = torch.randn(8, 3, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(lambda v, x: st.spmm(T, x, values=v), (values, X))
    assert torch.autograd.gradcheck(lambda v, y, x: st.sddmm(T, y, x, values=v), (values, Y, X))


@needs_gpu
def test_graph_conv_trains_on_cuda(rng):
    import sparsile.torch as st

    A = csr(rng, 50, 50)
    layer = st.GraphConv(8, 4).cuda()
    X = torch.randn(50, 8, device="cuda")
    out = layer(A, X)
    assert out.is_cuda
    out.sum().backward()
    assert layer.linear.weight.grad.is_cuda
    cpu = st.GraphConv(8, 4)
    cpu.load_state_dict({k: v.cpu() for k, v in layer.state_dict().items()})
    torch.testing.assert_close(_cpu(out), _cpu(cpu(A, X.cpu())), rtol=1e-4, atol=1e-4)


@needs_gpu
def test_cupy_arrays_too(rng):
    cupy = pytest.importorskip("cupy")
    A = csr(rng, 30, 20)
    X = cupy.asarray(np.random.default_rng(0).standard_normal((20, 5)).astype(np.float32))
    Y = sparsile.spmm(A, X)
    assert isinstance(Y, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(Y), sparsile.spmm(A, cupy.asnumpy(X)), rtol=1e-4, atol=1e-4)
