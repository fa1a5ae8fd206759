"""CuPy's cuSPARSE bindings as the stand-in has them: the generic API's descriptors,
SpMM (with preprocess) and SpMV (without), and SDDMM only when FAKE_CUPY_SDDMM=1. COO
algorithm 4 with column-major operands is refused, and CSR algorithm 3 with
column-major operands returns a wrong result, so the peer's screening is exercised;
CSR algorithm 2 row-major is the fastest."""

import atexit
import ctypes
import os

import numpy as np

import cupy
import fake_clock

CUSPARSE_INDEX_32I = 2
CUSPARSE_INDEX_BASE_ZERO = 0
CUSPARSE_ORDER_ROW = 2
CUSPARSE_ORDER_COL = 1
CUSPARSE_OPERATION_NON_TRANSPOSE = 0
CUSPARSE_OPERATION_TRANSPOSE = 1

_handles = {}
_next = [100]
live = []  # descriptors not destroyed (the tests look)


class CuSparseError(RuntimeError):
    pass


@atexit.register
def _all_destroyed():
    if live:
        print(f"stand-in cuSPARSE: {len(live)} descriptors never destroyed", file=__import__("sys").stderr)
        os._exit(3)


def _new(desc):
    _next[0] += 1
    _handles[_next[0]] = desc
    live.append(_next[0])
    return _next[0]


def _array(ptr):
    return cupy.registry[ptr]


def getVersion(handle):
    return 12000


def createCsr(rows, cols, nnz, rowptr, colind, values, rt, ct, base, vt):
    assert (rt, ct, base, vt) == (2, 2, 0, 0)
    a = _array(rowptr)
    assert a.dtype == np.int32 and len(a) == rows + 1 and _array(colind).dtype == np.int32
    return _new({"kind": "csr", "shape": (rows, cols), "indptr": a, "indices": _array(colind), "values": _array(values)})


def createCoo(rows, cols, nnz, rowind, colind, values, it, base, vt):
    assert (it, base, vt) == (2, 0, 0)
    r = _array(rowind)
    assert r.dtype == np.int32 and len(r) == nnz
    return _new({"kind": "coo", "shape": (rows, cols), "rows": r, "indices": _array(colind), "values": _array(values)})


def createDnMat(rows, cols, ld, values, vt, order):
    a = _array(values)
    assert a.shape == (rows, cols) and vt == 0
    if order == CUSPARSE_ORDER_ROW:
        assert a.flags.c_contiguous and ld == cols, "row-major operand"
    else:
        assert a.flags.f_contiguous and ld == rows, "column-major operand"
    return _new({"kind": "dn", "a": a, "order": order})


def createDnVec(size, values, vt):
    a = _array(values)
    assert a.shape == (size,) and vt == 0
    return _new({"kind": "vec", "a": a})


def _destroy(h):
    assert h in live, "a descriptor destroyed twice"
    live.remove(h)


destroySpMat = destroyDnMat = destroyDnVec = _destroy


def _dense(sp):
    out = np.zeros(sp["shape"])
    if sp["kind"] == "csr":
        rows = np.repeat(np.arange(sp["shape"][0]), np.diff(sp["indptr"]))
    else:
        rows = sp["rows"]
    np.add.at(out, (rows, sp["indices"]), sp["values"])
    return out


def _scalar(ptr):
    return ctypes.c_float.from_address(ptr).value


def spMM_bufferSize(handle, opa, opb, alpha, a, b, beta, c, ct, alg):
    col = _handles[b]["order"] == CUSPARSE_ORDER_COL
    if alg == 5 and col:
        raise CuSparseError("CUSPARSE_STATUS_NOT_SUPPORTED")
    return 64


def spMM_preprocess(handle, opa, opb, alpha, a, b, beta, c, ct, alg, buf):
    fake_clock.tick(0.01)


def spMM(handle, opa, opb, alpha, a, b, beta, c, ct, alg, buf):
    assert (opa, opb) == (0, 0) and (_scalar(alpha), _scalar(beta)) == (1.0, 0.0)
    sp, x, out = _handles[a], _handles[b], _handles[c]
    y = _dense(sp) @ x["a"].astype(np.float64)
    if alg == 12 and x["order"] == CUSPARSE_ORDER_COL:
        y = 2 * y
    out["a"][...] = y
    fake_clock.tick(0.25 if (alg == 6 and x["order"] == CUSPARSE_ORDER_ROW) else 0.5)


def spMV_bufferSize(handle, opa, alpha, a, x, beta, y, ct, alg):
    return 0


def spMV(handle, opa, alpha, a, x, beta, y, ct, alg, buf):
    assert opa == 0 and (_scalar(alpha), _scalar(beta)) == (1.0, 0.0)
    _handles[y]["a"][...] = _dense(_handles[a]) @ _handles[x]["a"].astype(np.float64)
    fake_clock.tick(0.25 if alg == 3 else 0.5)


if os.environ.get("FAKE_CUPY_SDDMM") == "1":

    def sDDMM_bufferSize(handle, opa, opb, alpha, a, b, beta, c, ct, alg):
        assert (opa, opb) == (0, 1)
        return 16

    def sDDMM(handle, opa, opb, alpha, a, b, beta, c, ct, alg, buf):
        x, y, sp = _handles[a]["a"], _handles[b]["a"], _handles[c]
        full = x.astype(np.float64) @ y.astype(np.float64).T
        rows = np.repeat(np.arange(sp["shape"][0]), np.diff(sp["indptr"]))
        sp["values"][...] = full[rows, sp["indices"]]
        fake_clock.tick()
