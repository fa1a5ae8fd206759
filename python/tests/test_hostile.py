"""Hostile but realistic input: every problem is an ordinary exception (caught by
``except Exception``) naming it, never a crash of the interpreter. Regression tests of
what a probe of the package found."""

import threading

import numpy as np
import pytest

import sparsile


def test_deeply_nested_programs_are_value_errors():
    decls = "tensor x: f64[n]\ntensor y: f64[n]\n"
    for body in [
        "y[i] = " + "(" * 7000 + "x[i]" + ")" * 7000,
        "y[i] = x[i]" + " + x[i]" * 20000,
        "y[i] = " + "-" * 50000 + "x[i]",
    ]:
        with pytest.raises(ValueError, match="nested more deeply than 200 levels"):
            sparsile.compile(decls + body + "\n")


def test_a_dense_copy_larger_than_memory_is_a_value_error():
    A = sparsile.from_coo([5], [7], np.ones(1), shape=(1_000_000, 1_000_000))
    with pytest.raises(ValueError, match="more than the memory available"):
        A.to_dense()


def test_an_endless_file_is_a_value_error():
    with pytest.raises(ValueError, match="longer than 1048576 bytes"):
        sparsile.load("/dev/zero")


def test_thread_counts_past_the_limit_are_value_errors():
    with pytest.raises(ValueError, match="the most is 1024"):
        sparsile.set_num_threads(4294967296)
    sparsile.set_num_threads(None)


def test_internal_errors_are_ordinary_exceptions():
    assert issubclass(sparsile.InternalError, RuntimeError)
    assert issubclass(sparsile.InternalError, Exception)


def test_arrays_changed_during_construction_never_give_an_invalid_tensor():
    """Another thread flips the last column index between valid and out of range while
    ``from_csr`` runs (it releases the GIL): whatever it accepts is what it checked."""
    n, rows = 1000, 2000
    indptr = np.arange(0, rows * 100 + 1, 100, dtype=np.int64)
    indices = np.tile(np.arange(0, 1000, 10, dtype=np.int64), rows)
    values = np.ones(len(indices))
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            indices[-1] = 10 * n
            indices[-1] = 990

    t = threading.Thread(target=flip)
    t.start()
    accepted = refused = 0
    try:
        for _ in range(200):
            try:
                A = sparsile.from_csr(indptr, indices, values, (rows, n))
            except ValueError as e:
                assert "out of range" in str(e)
                refused += 1
                continue
            accepted += 1
            stored = A.axes()[1]["indices"]
            assert stored.max() < n, "an accepted tensor holds an index it never checked"
    finally:
        stop.set()
        t.join()
    assert accepted + refused == 200
