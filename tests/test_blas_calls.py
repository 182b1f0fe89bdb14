"""The GIL-free BLAS calls (tensorc/codegen/blas_calls.py): SciPy's results for every type,
side, transpose and memory order, and shapes checked before BLAS reads them. That two solves
run side by side on two threads is measured by ``benchmarks/threaded_blas.py``."""

import numpy as np
import pytest
import scipy.linalg.blas

from tensorc.codegen.blas_calls import trsm

RNG = np.random.default_rng(7)


def _triangle(n, dtype):
    t = np.tril(RNG.random((n, n))) + n * np.eye(n)
    if np.dtype(dtype).kind == "c":
        t = t + 1j * np.tril(RNG.random((n, n)))
    return t.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("trans_a", [0, 1, 2])
@pytest.mark.parametrize("lower,diag", [(1, 0), (0, 1)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_trsm_equals_scipy(dtype, side, trans_a, lower, diag, order):
    a = _triangle(7, dtype)
    a = a if lower else a.T.copy()
    b = np.asarray(RNG.random((7, 5) if side == 0 else (5, 7)), dtype=dtype, order=order)
    want = scipy.linalg.blas.get_blas_funcs("trsm", (a, b))(
        2.0, a, b, side=side, lower=lower, trans_a=trans_a, diag=diag)
    before = b.copy()
    got = trsm(2.0, a, b, side=side, lower=lower, trans_a=trans_a, diag=diag)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(b, before)  # b is copied, never written
    assert got.dtype == want.dtype and got.flags.f_contiguous


def test_empty_right_hand_side():
    assert trsm(1.0, _triangle(3, np.float64), np.ones((3, 0))).shape == (3, 0)


def test_wrong_shapes_are_refused_before_blas_reads_them():
    with pytest.raises(ValueError, match=r"trsm: a 3 x 3 triangle cannot solve a 4 x 2 "
                                         r"right-hand side on the left"):
        trsm(1.0, _triangle(3, np.float64), np.ones((4, 2)))
    with pytest.raises(ValueError, match="2-D float or complex arrays"):
        trsm(1.0, np.eye(3, dtype=np.int64), np.ones((3, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="trans_a is 0, 1 or 2"):
        trsm(1.0, np.eye(3), np.ones((3, 2)), trans_a=3)

