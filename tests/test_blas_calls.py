"""The GIL-free BLAS calls (tensorc/codegen/blas_calls.py): SciPy's results for every type,
side, transpose and memory order, ``b`` written only when asked and possible, and shapes
checked before BLAS reads them. That two solves
run side by side on two threads is measured by ``benchmarks/threaded_blas.py``."""

import numpy as np
import pytest
import scipy.linalg.blas

from tensorc.codegen import blas_calls
from tensorc.codegen.blas_calls import TRSM_LEAF, trmm, trsm

RNG = np.random.default_rng(7)


def _triangle(n, dtype):
    t = np.tril(RNG.random((n, n))) + n * np.eye(n)
    if np.dtype(dtype).kind == "c":
        t = t + 1j * np.tril(RNG.random((n, n)))
    return t.astype(dtype)


@pytest.mark.parametrize("call", [trsm, trmm])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("trans_a", [0, 1, 2])
@pytest.mark.parametrize("lower,diag", [(1, 0), (0, 1)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_trsm_and_trmm_equal_scipy(call, dtype, side, trans_a, lower, diag, order):
    a = _triangle(7, dtype)
    a = a if lower else a.T.copy()
    b = np.asarray(RNG.random((7, 5) if side == 0 else (5, 7)), dtype=dtype, order=order)
    want = scipy.linalg.blas.get_blas_funcs(call.__name__, (a, b))(
        2.0, a, b, side=side, lower=lower, trans_a=trans_a, diag=diag)
    before = b.copy()
    got = call(2.0, a, b, side=side, lower=lower, trans_a=trans_a, diag=diag)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(b, before)  # b is copied, never written
    assert got.dtype == want.dtype and got.flags.f_contiguous


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("trans_a", [0, 1, 2])
@pytest.mark.parametrize("lower,diag", [(1, 0), (0, 0), (1, 1), (0, 1)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_a_triangle_over_the_leaf_size_is_solved_in_halves_as_scipy_solves_it(
        dtype, side, trans_a, lower, diag, order, monkeypatch):
    halves = []
    solve_halves = blas_calls._solve_halves
    monkeypatch.setattr(blas_calls, "_solve_halves",
                        lambda *args: (halves.append(args[7].shape), solve_halves(*args)))
    edge = 4 * TRSM_LEAF + 5  # halved three times, unevenly
    t = np.tril(RNG.random((edge, edge)) / (edge if diag else 1)) + edge * np.eye(edge)
    if np.dtype(dtype).kind == "c":
        t = t + 1j * np.tril(RNG.random((edge, edge)), -1) / edge
    t = t + np.triu(np.full((edge, edge), np.nan), 1)  # the other triangle is never read
    a = np.asarray(t if lower else t.T, dtype=dtype)
    b = np.asarray(RNG.random((edge, 9) if side == 0 else (9, edge)), dtype=dtype, order=order)
    want = scipy.linalg.blas.get_blas_funcs("trsm", (a, b))(
        0.5, a, b, side=side, lower=lower, trans_a=trans_a, diag=diag)
    before = b.copy()
    got = trsm(0.5, a, b, side=side, lower=lower, trans_a=trans_a, diag=diag)
    tolerance = 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    np.testing.assert_array_equal(b, before)
    assert halves[0] == (edge, edge) and len(halves) == 15  # 4 levels: 1 + 2 + 4 + 8 calls
    fortran = np.asfortranarray(b)
    assert trsm(0.5, a, fortran, side=side, lower=lower, trans_a=trans_a, diag=diag,
                overwrite_b=True) is fortran  # the halves solved in place
    np.testing.assert_allclose(fortran, want, rtol=tolerance, atol=tolerance)


def test_alpha_zero_reads_no_triangle_and_a_small_triangle_is_one_call(monkeypatch):
    edge = 2 * TRSM_LEAF
    a = np.full((edge, edge), np.nan)  # BLAS reads no triangle when alpha is 0
    np.testing.assert_array_equal(trsm(0.0, a, np.ones((edge, 3))), np.zeros((edge, 3)))
    monkeypatch.setattr(blas_calls, "_solve_halves", None)  # never called below the leaf
    small = _triangle(TRSM_LEAF, np.float64)
    np.testing.assert_allclose(trsm(1.0, small, np.ones((TRSM_LEAF, 2))),
                               scipy.linalg.blas.dtrsm(1.0, small, np.ones((TRSM_LEAF, 2)),
                                                       lower=0))


@pytest.mark.parametrize("call", [trsm, trmm])
def test_b_is_written_over_only_when_asked_and_fortran_ordered_of_the_result_type(call):
    a = _triangle(5, np.float64)
    fortran = np.asfortranarray(RNG.random((5, 3)))
    want = call(1.0, a, fortran)
    got = call(1.0, a, fortran, overwrite_b=True)
    assert got is fortran  # written in place, no copy
    np.testing.assert_array_equal(got, want)
    for b in (RNG.random((5, 3)),  # C-ordered
              np.asfortranarray(RNG.random((5, 3))).astype(np.float32)):  # another type
        before = b.copy()
        got = call(1.0, a, b, overwrite_b=True)
        assert got is not b
        np.testing.assert_array_equal(b, before)
        np.testing.assert_array_equal(got, call(1.0, a, before))


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
    with pytest.raises(ValueError, match=r"trmm: a 3 x 3 triangle cannot multiply a 2 x 4 "
                                         r"block on the right"):
        trmm(1.0, np.eye(3), np.ones((2, 4)), side=1)



def test_the_blas_routine_is_called_directly():
    from tensorc.codegen.blas_calls import _exported

    assert _exported("dtrsm") is not None  # not SciPy's wrapper, which holds the GIL
    assert _exported("dtrmm") is not None
    assert _exported("dgemm", 13) is not None  # the halves' products


@pytest.mark.parametrize("dtype", [np.float16, np.longdouble])
def test_other_float_widths_are_solved_as_scipy_does(dtype):
    a, b = _triangle(5, np.float64).astype(dtype), RNG.random((5, 3)).astype(dtype)
    want = scipy.linalg.blas.get_blas_funcs("trsm", (a, b))(1.0, a, b, side=0, lower=1)
    np.testing.assert_array_equal(trsm(1.0, a, b, side=0, lower=1), want)


def test_complex_scale_and_strided_views():
    a = _triangle(12, np.complex128)[::2, ::2]  # a strided view, as LU's halves are
    b = (RNG.random((8, 6)) + 1j * RNG.random((8, 6)))[::-1][2:8, :]  # negative strides
    b = b.T[:, :6]
    want = scipy.linalg.blas.ztrsm(0.5 - 2j, a, b, side=0, lower=1, trans_a=2)
    np.testing.assert_array_equal(trsm(0.5 - 2j, a, b, side=0, lower=1, trans_a=2), want)


def _orders(x: np.ndarray) -> list[np.ndarray]:
    """``x`` C-ordered, Fortran-ordered, and as a strided view."""
    wide = np.zeros((x.shape[0], 2 * x.shape[1]), dtype=x.dtype)
    wide[:, ::2] = x
    return [np.ascontiguousarray(x), np.asfortranarray(x), wide[:, ::2]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("sign", [-1, 1])
@pytest.mark.parametrize("form", ["x @ y", "x @ y.T"])
def test_a_product_update_is_numpys_in_every_memory_order(dtype, sign, form):
    m, k, n = 300, 260, 280
    c = RNG.random((m, n)).astype(dtype)
    x = RNG.random((m, k)).astype(dtype)
    y = RNG.random((k, n) if form == "x @ y" else (n, k)).astype(dtype)
    tolerance = 1e-4 if np.dtype(dtype).char in "fF" else 1e-12
    for xs in _orders(x):
        for ys in _orders(y):
            right = ys if form == "x @ y" else ys.T
            before = c.copy()
            got = blas_calls.product_update(c, xs, right, sign)
            np.testing.assert_allclose(got, c + sign * (x @ (y if form == "x @ y" else y.T)),
                                       rtol=tolerance, atol=tolerance * k)
            assert got.dtype == c.dtype and got.flags.c_contiguous
            np.testing.assert_array_equal(c, before)  # c is copied, never written


@pytest.mark.parametrize("n", [800, 1000])
def test_a_symmetric_update_fills_both_triangles_of_a_matrix_that_is_not_symmetric(
        monkeypatch, n):
    """``c - x x^T`` by ``?syrk``, which writes one triangle: the other is completed from
    ``c``'s own entries, not mirrored (``c`` need not be symmetric)."""
    calls = []
    original = blas_calls._exported
    monkeypatch.setattr(blas_calls, "_exported",
                        lambda name, *a: calls.append(name) or original(name, *a))
    c = RNG.random((n, n))
    x = RNG.random((n, 300))
    got = blas_calls.product_update(c, x, x.T)
    np.testing.assert_allclose(got, c - x @ x.T, rtol=1e-12, atol=1e-9)
    assert calls == ["dsyrk"]


def test_a_symmetric_updates_lower_triangle_reads_nothing_of_the_upper_one():
    """A Cholesky reads only its blocks' lower triangle: NaN or huge values above the
    diagonal stay there (numpy's ``c - x x^T`` gives the same), and the lower triangle is
    exactly numpy's."""
    n = 800
    x = RNG.random((n, 256))
    c = RNG.random((n, n))
    lower, upper = np.tril_indices(n), np.triu_indices(n, 1)
    for garbage in (np.nan, 1e17):
        dirty = c.copy()
        dirty[upper] = garbage
        got = blas_calls.product_update(dirty, x, x.T)
        want = dirty - x @ x.T
        np.testing.assert_allclose(got[lower], want[lower], rtol=1e-13, atol=1e-10)
        np.testing.assert_allclose(got[upper], want[upper], rtol=1e-13)


def test_small_unconforming_or_mixed_updates_are_left_to_numpy():
    big = RNG.random((300, 300))
    assert blas_calls.product_update(big[:, :1], big, RNG.random((300, 1))) is None  # a column
    small = RNG.random((100, 100))
    assert blas_calls.product_update(small, small, small) is None  # under UPDATE_MIN
    assert blas_calls.product_update(big, big, big.astype(np.float32)) is None  # two types
    assert blas_calls.product_update(big, big, big[:, :299]) is None  # c is not x @ y's shape
    assert blas_calls.product_update(big.astype(int), big.astype(int), big.astype(int)) is None
    sym = RNG.random((300, 300))
    assert blas_calls.product_update(sym, sym, sym.T) is None  # x x^T under SYRK_MIN
