"""Every error path raises a Python exception with the Rust message (ValueError for bad
values, TypeError for bad types); nothing crashes."""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsile

SPMV = "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n"


@pytest.mark.parametrize(
    "indptr, indices, nvalues, message",
    [
        ([0, 1, 3], [0, 1, 2], 3, r"index 2 at position 2 of axis 1 \(under parent position 1\) is out of range \(dimension 2\)"),
        ([0, 2, 1], [0, 1, 1], 3, "indptr of axis 1 decreases at entry 2: 1 after 2"),
        ([0, 1], [0], 1, "indptr of axis 1 has length 2, expected 3"),
        ([0, 2, 2], [1, 0], 2, "indices of axis 1 under parent position 0 are not sorted at position 1"),
        ([0, 2, 2], [1, 1], 2, "duplicate index 1 on axis 1 under parent position 0 at position 1"),
        ([0, 2, 2], [0, 1], 3, "values have length 3, expected 2"),
        ([0, -1, 2], [0, 1], 2, "indptr"),
    ],
)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_malformed_csr_arrays(indptr, indices, nvalues, message, index_dtype):
    with pytest.raises(ValueError, match=message):
        sparsile.from_csr(np.array(indptr, index_dtype), np.array(indices, index_dtype),
                          np.ones(nvalues, np.float32), (2, 2))


def test_unsorted_and_duplicates_fixed_on_request():
    T = sparsile.from_csr([0, 3, 3], [1, 0, 1], np.array([1.0, 2.0, 3.0]), (2, 2),
                          sort_indices=True, sum_duplicates=True)
    np.testing.assert_array_equal(T.to_dense(), [[2, 4], [0, 0]])


def test_wrong_dtypes_are_type_errors():
    with pytest.raises(TypeError, match=r"values must be float16, bfloat16 \(torch tensors\), float32 or float64, got int64"):
        sparsile.from_csr([0, 1], [0], np.array([1]), (1, 1))
    with pytest.raises(TypeError, match="indices must be an int32 or int64 array, got float64"):
        sparsile.from_csr([0, 1], [0.0], np.ones(1), (1, 1))
    with pytest.raises(TypeError, match="values must be float16, float32 or float64"):
        sparsile.from_scipy(sp.identity(3, dtype=np.int64, format="csr"))
    with pytest.raises(TypeError, match="expects a scipy.sparse"):
        sparsile.from_scipy(np.eye(3))
    A = sparsile.from_coo([0], [0], np.ones(1, np.float32), shape=(2, 3))
    with pytest.raises(TypeError, match="X is float64 but A is float32"):
        sparsile.spmm(A, np.ones((3, 2)))
    with pytest.raises(TypeError, match=r"X must be float16, bfloat16 \(torch tensors\), float32 or float64, got int64"):
        sparsile.spmm(A, np.ones((3, 2), np.int64))
    with pytest.raises(TypeError, match="got ndarray"):
        sparsile.spmm(np.eye(2), np.ones((2, 2)))
    with pytest.raises(TypeError, match="Tensor wraps a native tensor"):
        sparsile.Tensor(None)


def test_wrong_shapes_are_value_errors():
    A = sparsile.from_coo([0], [0], np.ones(1, np.float32), shape=(2, 3))
    with pytest.raises(ValueError, match=r"dimension `n` is 3 \(dimension 1 of A\) but 4 \(dimension 0 of X\)"):
        sparsile.spmm(A, np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="input X has order 1 but is declared with 2 dimensions"):
        sparsile.spmm(A, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="expected 1 values"):
        sparsile.spmm(A, np.ones((3, 2), np.float32), values=np.ones(5, np.float32))
    with pytest.raises(ValueError, match="shape must be two non-negative integers"):
        sparsile.from_coo([0], [0], np.ones(1), shape=(2,))
    with pytest.raises(ValueError, match="must have 3 dimensions"):
        sparsile.mttkrp(A, np.ones((3, 2), np.float32), np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="must be one-dimensional"):
        sparsile.from_csr(np.zeros((2, 2), np.int32), [0], np.ones(1), (1, 1))


def test_bad_formats():
    A = sparsile.from_coo([0], [0], np.ones(1), shape=(2, 2))
    with pytest.raises(ValueError, match="bad format `foo`: unknown format"):
        A.to("foo")
    with pytest.raises(ValueError, match="expected two positive sizes"):
        A.to("bsr:0x2")
    with pytest.raises(ValueError, match="format names are lower case: write `csr`"):
        sparsile.from_coo([0], [0], shape=(1, 1), format="CSR")


def test_file_system_errors_are_os_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nonexistent.mtx"):
        sparsile.load(tmp_path / "nonexistent.mtx")
    with pytest.raises(IsADirectoryError):
        sparsile.load(tmp_path)


def test_compile_infers_declarations_of_a_lone_statement(rng):
    import scipy.sparse as sp

    M = sp.random(6, 5, density=0.4, format="csr", dtype=np.float64, random_state=rng)
    A = sparsile.from_scipy(M)
    X = rng.standard_normal((5, 3))
    k = sparsile.compile("Y[i,k] = A[i,j] * X[j,k]  # SpMM")
    np.testing.assert_allclose(k(A=A, X=X)["Y"], M @ X)
    # Per call: another format and element type compile another kernel.
    np.testing.assert_allclose(k(A=A.to("ell").astype(np.float32), X=X.astype(np.float32))["Y"], M @ X, rtol=1e-5)
    # A sampled output takes the sparse operand's format.
    C = sparsile.compile("C[i,j] = A[i,j] * P[i,k] * Q[j,k]")(A=A, P=rng.standard_normal((6, 2)),
                                                            Q=rng.standard_normal((5, 2)))["C"]
    assert isinstance(C, sparsile.Tensor) and C.nnz == A.nnz


def test_inferred_program_errors_point_into_the_statement():
    with pytest.raises(ValueError) as e:
        sparsile.compile("Y[i,k] = A[i,j] * * X[j,k]")
    assert str(e.value).splitlines() == ["column 19: expected an expression, found `*`",
                                         "  Y[i,k] = A[i,j] * * X[j,k]",
                                         "                    ^"]
    with pytest.raises(ValueError, match=r"(?s)never closed.*in: Y\[i\] = A\[i,j"):
        sparsile.compile("Y[i] = A[i,j")
    with pytest.raises(ValueError, match="plain index variables only"):
        sparsile.compile("Y[i] = A[idx[i], j]")


def test_file_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.mtx"
    bad.write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 x 1.0\n")
    with pytest.raises(ValueError, match="line 3: bad entry: column index `x` is not a positive integer"):
        sparsile.load(bad)


def test_program_errors():
    with pytest.raises(ValueError, match="line 2, column 1: unknown tensor `y`"):
        sparsile.compile("tensor A: f32[m, n] csr\ny[i] = A[i,j] * x[j]\n")
    with pytest.raises(ValueError, match="input Q is not declared by the program"):
        sparsile.compile(SPMV, formats={"Q": "csr"})
    with pytest.raises(TypeError, match="program must be index notation text"):
        sparsile.compile(42)
    with pytest.raises(ValueError, match="trace"):
        sparsile.compile(SPMV, schedule='{"steps": [{"step": "nope"}]}')


def test_kernel_call_errors():
    k = sparsile.compile(SPMV)
    A = sparsile.from_coo([0], [0], np.ones(1, np.float32), shape=(2, 3))
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="threads must be at least 1"):
        k(A=A, x=x, threads=0)
    with pytest.raises(ValueError, match="input Z is not declared by the program"):
        k(A=A, x=x, Z=x)
    with pytest.raises(ValueError, match="input buffer `x` was not given a tensor"):
        k(A=A)
    with pytest.raises(TypeError, match=r"x must be float16, bfloat16 \(torch tensors\), float32 or float64"):
        k(A=A, x="abc")
    with pytest.raises(ValueError, match="declared sparse_variable but the tensor's axis 1 is sparse_fixed"):
        k(A=A.to("ell"), x=x)


def test_schedule_errors():
    sch = sparsile.compile(SPMV).schedule()
    with pytest.raises(ValueError, match="a loop is written BLOCK/VAR"):
        sch.split("y", 4)
    with pytest.raises(TypeError, match="a loop is a 'BLOCK/VAR' string"):
        sch.parallel(3)
    with pytest.raises(ValueError, match="unknown split tail"):
        sch.split("y/i_2", 4, tail="sideways")
    with pytest.raises(ValueError, match="fuse: loops of different blocks"):
        sch.fuse("y/i_2", "z/j")


def test_sddmm_operand_convention_in_the_error():
    A = sparsile.from_coo([0], [1], np.ones(1), shape=(3, 4))
    with pytest.raises(ValueError, match=r"Y must be \(n, k\) = \(4, 2\).*got \(2, 4\) \(a \(k, n\) operand is passed as Y.T\)"):
        sparsile.sddmm(A, np.ones((3, 2)), np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"X must be \(m, k\) = \(3, k\)"):
        sparsile.sddmm(A, np.ones((4, 2)), np.ones((4, 2)))
    assert sparsile.sddmm(A, np.ones((3, 2)), np.ones((4, 2))).values.tolist() == [2.0]
