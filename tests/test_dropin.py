"""numpy drop-in behaviour beyond values: views, the cache-hit fast path, argument forms and
errors numpy users rely on, result memory order, and strided operands reaching BLAS uncopied."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import tensorc as tc
from tensorc.driver import fast_path


@pytest.fixture
def rng():
    return np.random.default_rng(7)


# -- views -----------------------------------------------------------------------------------


@pytest.mark.parametrize("subscripts,shape", [
    ("ij->ji", (3, 4)), ("ii->i", (4, 4)), ("...", (2, 3)), ("ijk->kji", (2, 3, 4)),
    ("iii->i", (3, 3, 3)), ("...ii->i...", (2, 3, 3)), ("jii->ij", (2, 3, 3)), ("ji", (3, 4)),
])
def test_one_operand_einsum_that_sums_nothing_is_a_view(subscripts, shape):
    a = np.arange(int(np.prod(shape)), dtype=float).reshape(shape)
    for _ in range(2):  # the full path, then the fast path
        b = tc.einsum(subscripts, a)
        np.testing.assert_array_equal(b, np.einsum(subscripts, a))
        assert b.base is a.base
        assert b.flags.writeable
    b[(0,) * b.ndim] = -1.0  # writes go through, as with numpy
    assert a.min() == -1.0


def test_views_of_a_readonly_operand_are_readonly():
    a = np.arange(9.0).reshape(3, 3)
    a.flags.writeable = False
    assert not tc.einsum("ii->i", a).flags.writeable
    assert not tc.einsum("ij->ji", a).flags.writeable


def test_a_summing_or_casting_einsum_is_not_a_view():
    a = np.arange(9.0).reshape(3, 3)
    assert not np.shares_memory(tc.einsum("ij->i", a), a)
    cast = tc.einsum("ij->ji", a, dtype=np.float32, casting="same_kind")  # numpy ignores
    with pytest.raises(TypeError):  # dtype= here (it returns the view); tensorc honours it
        tc.einsum("ij->ji", a, dtype=np.float32)
    assert cast.dtype == np.float32 and not np.shares_memory(cast, a)
    out = np.empty((3, 3))
    assert tc.einsum("ij->ji", a, out=out) is out


# -- fast path ---------------------------------------------------------------------------------


def test_cache_hit_takes_the_fast_path_with_equal_results(rng):
    tc.clear_plan_cache()
    a, b = rng.random((6, 5)), rng.random((5, 7))
    first = tc.einsum("ij,jk->ik", a, b)
    assert not tc.last_stats().get("fast_path")
    second = tc.einsum("ij,jk->ik", a, b)
    stats = tc.last_stats()
    assert stats["fast_path"] and stats["plan_cached"] and stats["tasks"] >= 1
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(second, a @ b)
    tc.clear_plan_cache()
    assert not fast_path.ENTRIES


def test_fast_path_keys_on_order_dtype_and_shape(rng):
    a, b = rng.random((6, 5)), rng.random((5, 7))
    for _ in range(2):
        np.testing.assert_allclose(tc.einsum("ij,jk->ki", a, b), np.einsum("ij,jk->ki", a, b))
        fortran = np.asfortranarray(a)
        result = tc.einsum("ij,jk->ki", fortran, b)
        expected = np.einsum("ij,jk->ki", fortran, b)
        np.testing.assert_allclose(result, expected)
        assert result.strides == expected.strides
        ints = tc.einsum("ij,jk->ik", a.astype(np.int32), b.astype(np.int32))
        assert ints.dtype == np.int32
        assert tc.einsum("i,i->", a[0], a[0]) == pytest.approx(a[0] @ a[0])
        assert isinstance(tc.einsum("i,i->", a[0], a[0]), np.float64)


def test_calls_with_options_never_take_the_fast_path(rng):
    a, b = rng.random((6, 5)), rng.random((5, 7))
    for kwargs in ({"out": np.empty((6, 7))}, {"dtype": np.float32, "casting": "same_kind"},
                   {"order": "F"}, {"grid": {"i": 2}}, {"workers": 1}):
        for _ in range(2):
            result = tc.einsum("ij,jk->ik", a, b, **kwargs)
            assert not tc.last_stats().get("fast_path"), kwargs
        np.testing.assert_allclose(result, a @ b, rtol=1e-6)


def test_fast_path_errors_name_the_task(rng):
    a = rng.random((3, 3))
    tc.einsum("ij,jk->ik", a, a)
    with pytest.raises(tc.ExecutionError):
        entry = fast_path.ENTRIES[fast_path.key("ij,jk->ik", (a, a), None, "auto", None,
                                                None, "K", "safe", {})]
        fast_path.run(entry, (a, np.zeros((3, 3, 3))), type("S", (), {})())


# -- argument forms and errors --------------------------------------------------------------


def test_sublists_take_any_integer_sequence(rng):
    a = rng.random((3, 3))
    expected = np.trace(a)
    for sublist in ([0, 0], (0, 0), np.array([0, 0]), [np.int64(0), np.int8(0)], range(0, 0)):
        if len(sublist) == 0:
            continue
        assert tc.einsum(a, sublist) == pytest.approx(expected)
    np.testing.assert_allclose(tc.einsum(a, range(2)), a)
    np.testing.assert_allclose(tc.einsum(a, [0, 1], a, np.array([1, 2]), [0, 2]), a @ a)


def test_numpy_type_errors_are_type_errors_and_tensorc_errors():
    with pytest.raises(TypeError) as info:
        tc.einsum(0, 0)
    assert isinstance(info.value, tc.TensorcError)
    with pytest.raises(TypeError):
        tc.einsum("i", np.ones(2), out="test")
    with pytest.raises(TypeError) as info:
        tc.einsum("i", np.ones(2), bad_arg=0)
    assert isinstance(info.value, tc.PlanError)  # also what tensorc raised before
    with pytest.raises(ValueError):
        tc.einsum(optimize=True)
    with pytest.raises(RuntimeError):
        tc.einsum("a,a,a->a", np.ones(2), np.ones(2), np.ones(2),
                  optimize=["einsum_path", (1,), (0, 1)])


@pytest.mark.parametrize("order", ["a", "c", "f", "k", "C"])
def test_order_takes_either_case(order):
    a = np.ones((2, 3, 5), order="F")
    b = np.ones((4, 3), order="F")
    result = tc.einsum("...ft,mf->...mt", a, b, order=order)
    expected = np.einsum("...ft,mf->...mt", a, b, order=order)
    assert result.strides == expected.strides
    with pytest.raises(ValueError):
        tc.einsum("i->i", np.ones(3), order="d")


def test_order_k_follows_numpy_strides(rng):
    a, b = rng.random((3, 4)), rng.random((4, 5))
    for subscripts in ("ij,jk->ki", "ij,jk->ik", "ij,jk->ik"):
        assert tc.einsum(subscripts, a, b).strides == np.einsum(subscripts, a, b).strides


def test_object_operands_are_computed_by_numpy():
    a = np.array([1, 2, 3], dtype=object)
    assert tc.einsum("i,i->", a, a) == 14
    np.testing.assert_array_equal(tc.einsum("i,j->ij", a, a), np.outer([1, 2, 3], [1, 2, 3]))


def test_out_casting_follows_numpy_per_optimize():
    a = np.ones(7)
    out = np.array(0)
    tc.einsum("i,i->", a, a, out=out, optimize="optimal")  # numpy's gh-31350
    assert out == 7
    with pytest.raises(TypeError):
        tc.einsum("i,i->", a, a, out=np.array(0))  # optimize=False: numpy's 'safe' check


# -- strided operands ---------------------------------------------------------------------------


def _second_call_peak(subscripts, *operands):
    """The result and the peak bytes traced while ``tc.einsum`` runs a second time (the
    first call plans, outside the measurement)."""
    tc.einsum(subscripts, *operands)
    tracemalloc.start()
    try:
        result = tc.einsum(subscripts, *operands)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.mark.parametrize("make", [
    pytest.param(lambda r: (r.random((256, 64)), r.random((64, 512))[:, :256]), id="column-slice"),
    pytest.param(lambda r: (r.random((512, 64))[::2], r.random((64, 256))), id="row-step"),
    pytest.param(lambda r: (r.random((64, 256)).T, r.random((256, 64)).T), id="transposes"),
])
def test_strided_matrices_reach_blas_without_a_copy(rng, make):
    a, b = make(rng)
    expected = a @ b
    result, peak = _second_call_peak("ij,jk->ik", a, b)
    np.testing.assert_allclose(result, expected)
    smallest_operand = min(a.nbytes, b.nbytes)
    assert peak < result.nbytes + smallest_operand // 2, (peak, result.nbytes)


def test_an_operand_without_a_blas_view_is_copied_once(rng):
    x = rng.random((16, 32, 16))[:, ::2, :]
    y = rng.random((16, 16, 10))
    result, peak = _second_call_peak("ijk,jkf->if", x, y)
    np.testing.assert_allclose(result, np.einsum("ijk,jkf->if", x, y))
    assert peak < result.nbytes + 1.5 * x.nbytes


def test_batched_matmul_on_views(rng):
    a = rng.random((4, 6, 10))[:, :, ::2]
    b = rng.random((4, 5, 3))
    np.testing.assert_allclose(tc.einsum("bij,bjk->bik", a, b), a @ b)
    np.testing.assert_allclose(tc.einsum("bji,bjk->bik", a.transpose(0, 2, 1), b), a @ b)
