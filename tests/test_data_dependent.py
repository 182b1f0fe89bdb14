"""Data-dependent shapes at a planned synchronisation point: ``unique_*``, ``nonzero`` and
boolean-mask selection against numpy, locally and on the shared 4-node Ray cluster (results
left distributed for large inputs)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.runtime.ray.arrays import DistributedArray

DTYPES = ["float64", "float32", "int64", "int32", "uint8", "bool"]


def sample(shape, dtype, seed=0, distinct=5):
    rng = np.random.default_rng(seed)
    return rng.integers(0, distinct, size=shape).astype(dtype)


def check_unique(x: np.ndarray, a) -> None:
    values = np.unique(x, equal_nan=False)  # numpy 2's unique_* are sorted like np.unique
    got = tc.unique_values(a)
    np.testing.assert_array_equal(got.numpy(), values)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(np.sort(np.unique_values(x)), values)
    for name in ("unique_counts", "unique_inverse", "unique_all"):
        expected = getattr(np, name)(x)
        found = getattr(tc, name)(a)
        assert found._fields == expected._fields
        for field, e in zip(found._fields, expected, strict=True):
            f = getattr(found, field).numpy()
            assert f.shape == e.shape, (name, field)
            assert f.dtype == (x.dtype if field == "values" else np.int64), (name, field)
            np.testing.assert_array_equal(f, e, err_msg=f"{name}.{field}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(17,), (6, 7), (3, 4, 5)])
def test_unique_matches_numpy(dtype, shape) -> None:
    x = sample(shape, dtype)
    check_unique(x, tc.asarray(x))


def test_unique_of_nans_counts_each_nan_apart_and_of_empty_arrays() -> None:
    x = np.array([[3.0, np.nan, 1.0], [np.nan, 3.0, -0.0], [0.0, np.nan, 1.0]])
    check_unique(x, tc.asarray(x))
    check_unique(np.empty((0, 3)), tc.asarray(np.empty((0, 3))))
    check_unique(np.float64(2.5), tc.asarray(2.5))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(17,), (6, 7), (3, 4, 5)])
def test_nonzero_matches_numpy(dtype, shape) -> None:
    x = sample(shape, dtype, distinct=3)
    found = tc.nonzero(tc.asarray(x))
    expected = np.nonzero(x)
    assert isinstance(found, tuple) and len(found) == len(expected)
    for f, e in zip(found, expected, strict=True):
        assert f.dtype == np.int64 and f.ndim == 1
        np.testing.assert_array_equal(f.numpy(), e)
    empty = tc.nonzero(tc.zeros(shape))
    assert all(e.shape == (0,) for e in empty)
    with pytest.raises(ValueError):
        tc.nonzero(tc.asarray(1.0))


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_mask_selection_matches_numpy(dtype) -> None:
    x = sample((4, 5, 3), dtype, distinct=4)
    a = tc.asarray(x)
    full = x > 1 if dtype != "bool" else x
    lead2 = np.random.default_rng(1).random((4, 5)) > 0.5
    lead1 = np.array([True, False, True, True])
    cases = [
        (full, (full,)), (lead2, (lead2,)), (lead1, (lead1,)),
        (lead1, (lead1, slice(None))), (lead1, (lead1, Ellipsis)),
        (lead1, (lead1, slice(1, 4), 2)), (lead2, (lead2, None)),
        (np.zeros((4, 5), bool), (np.zeros((4, 5), bool),)),
        (np.zeros((0, 5), bool), (np.zeros((0, 5), bool),)),  # numpy takes an empty axis
    ]
    for mask, key in cases:
        expected = x[key if len(key) > 1 else key[0]]
        for as_array in (False, True):  # numpy masks and lazy tc masks
            m = tc.asarray(mask) if as_array else mask
            tc_key = (m, *key[1:]) if len(key) > 1 else m
            got = a[tc_key]
            assert got.shape == expected.shape and got.dtype == expected.dtype
            np.testing.assert_array_equal(got.numpy(), expected)


def test_zero_dimensional_masks_add_an_axis_as_numpy() -> None:
    x = np.arange(6.0).reshape(2, 3)
    a = tc.asarray(x)
    for mask in (True, False, np.True_, np.array(True), np.array(False)):
        expected = x[mask]
        got = a[tc.asarray(mask) if isinstance(mask, np.ndarray) else mask]
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got.numpy(), expected)
    np.testing.assert_array_equal(a[np.array(True), 1].numpy(), x[np.array(True), 1])


def test_mask_errors_as_numpy() -> None:
    a = tc.asarray(np.zeros((3, 4)))
    with pytest.raises(IndexError):
        a[np.ones(4, bool)]
    with pytest.raises(IndexError):
        a[np.ones((3, 4, 2), bool)]


def test_a_lazy_chain_before_and_after_the_cut_and_explain() -> None:
    x = np.random.default_rng(2).random((8, 6))
    a = tc.asarray(x)
    chosen = (a * 1.0)[(a + 0.0) > 0.5]  # lazy before: evaluated at the cut
    result = tc.sum(chosen * 2)  # lazy after
    assert not result.evaluated
    np.testing.assert_allclose(float(result), (x[x > 0.5] * 2).sum())
    text = chosen.explain()
    assert "synchronisation point of boolean-mask selection" in text
    assert "evaluated by a program" in text
    assert "from the synchronisation point of boolean-mask selection" in result.explain()
    values = tc.unique_values(tc.round(a * 4))
    assert "synchronisation point of unique_values" in values.explain()
    np.testing.assert_array_equal((values + 1).numpy(), np.unique(np.round(x * 4)) + 1)


# -- on the shared Ray cluster ----------------------------------------------------------------


@pytest.mark.usefixtures("ray_cluster")
def test_mask_selection_on_ray_stays_distributed() -> None:
    x = tc.random((400, 60), grid=(4, 3), seed=7)  # 192 KiB, 12 blocks on 4 nodes
    data = x.numpy()
    chosen = x[x > 0.5]
    assert isinstance(chosen.value(), DistributedArray)
    np.testing.assert_array_equal(chosen.numpy(), data[data > 0.5])
    rows = x[x[:, 0] > 0.3]  # a mask of the leading dimension: blocks of uneven rows
    value = rows.value()
    assert isinstance(value, DistributedArray)
    assert value.blocks.bounds[1] == x.value().blocks.bounds[1]
    np.testing.assert_array_equal(rows.numpy(), data[data[:, 0] > 0.3])
    lazy = tc.sum(x[x > 0.5] * 2)
    np.testing.assert_allclose(float(lazy), (data[data > 0.5] * 2).sum())
    after = (rows @ tc.ones((60, 2))).numpy()
    np.testing.assert_allclose(after, data[data[:, 0] > 0.3] @ np.ones((60, 2)))
    cube = tc.random((40, 30, 20), grid=(2, 2, 2), seed=1)
    c = cube.numpy()
    mask = c[:, :, 0] > 0.5
    np.testing.assert_array_equal(cube[tc.asarray(mask)].numpy(), c[mask])
    np.testing.assert_array_equal(cube[cube < 0.1].numpy(), c[c < 0.1])
    assert x[x > 2].shape == (0,)


@pytest.mark.usefixtures("ray_cluster")
def test_nonzero_on_ray_stays_distributed() -> None:
    x = tc.random((300, 80), grid=(3, 4), seed=8)
    data = x.numpy()
    found = tc.nonzero(x > 0.4)
    expected = np.nonzero(data > 0.4)
    for f, e in zip(found, expected, strict=True):
        assert isinstance(f.value(), DistributedArray)
        np.testing.assert_array_equal(f.numpy(), e)
    assert all(f.shape == (0,) for f in tc.nonzero(x > 2))


@pytest.mark.usefixtures("ray_cluster")
def test_unique_on_ray_matches_numpy() -> None:
    rng = np.random.default_rng(5)
    small = rng.integers(0, 50, size=(200, 60)).astype("float64")
    small[3, 4] = small[100, 7] = np.nan
    check_unique(small, tc.asarray(small, grid=(4, 2)))  # merged on the driver
    large = tc.random((300, 50), grid=(4, 2), seed=9)  # every value distinct: merged on a node
    data = large.numpy()
    values = tc.unique_values(large)
    assert isinstance(values.value(), DistributedArray)
    check_unique(data, large)
    inverse = tc.unique_inverse(large).inverse_indices
    assert isinstance(inverse.value(), DistributedArray)


NUMPY_DATA_DEPENDENT = {
    "nonzero": np.nonzero,
    "where(c)": lambda m: np.where(m > 1),
    "flatnonzero": np.flatnonzero,
    "argwhere": np.argwhere,
    "extract": lambda m: np.extract(m > 1, m),
    "unique": lambda m: np.unique(m, return_index=True, return_inverse=True,
                                  return_counts=True, equal_nan=False),
    "unique_values": np.unique_values,
    "unique_counts": np.unique_counts,
    "unique_inverse": np.unique_inverse,
}


@pytest.mark.parametrize("name", sorted(NUMPY_DATA_DEPENDENT))
def test_numpy_data_dependent_functions_forward_to_the_namespace(name):
    a = np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 3.0]])
    call = NUMPY_DATA_DEPENDENT[name]
    got, want = call(tc.asarray(a)), call(a)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, tc.Array)
        np.testing.assert_array_equal(np.asarray(g), w)
        assert np.asarray(g).dtype == w.dtype


def test_numpy_unique_of_floats_names_its_nan_rule():
    with pytest.raises(tc.UnsupportedError, match="equal_nan=False"):
        np.unique(tc.asarray(np.array([1.0, np.nan, np.nan])))


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_with_a_sorter_indexes_the_sorted_order_as_numpy(side):
    a = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 2.0])
    order, v = np.argsort(a, kind="stable"), np.array([0.5, 2.0, 3.5, 9.0])
    got = tc.searchsorted(tc.asarray(a), tc.asarray(v), side=side, sorter=tc.asarray(order))
    np.testing.assert_array_equal(np.asarray(got), np.searchsorted(a, v, side=side,
                                                                   sorter=order))


def test_searchsorted_refuses_a_sorter_of_another_shape():
    a = tc.asarray(np.array([3.0, 1.0, 2.0]))
    with pytest.raises(tc.ShapeError, match="sorter must be integer indices of x1's shape"):
        tc.searchsorted(a, tc.asarray(np.array([1.5])), sorter=tc.asarray(np.array([1, 2])))


@pytest.mark.parametrize("value", [3.0, 0.0])
def test_argwhere_of_a_0d_array_has_no_column_as_numpy(value):
    got = np.asarray(np.argwhere(tc.asarray(np.asarray(value))))
    want = np.argwhere(np.asarray(value))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


LATER_MASKS = {
    "x[:, m]": lambda x, a: x[:, a[0, :, 0] > 0.5],
    "x[:, :, m]": lambda x, a: x[:, :, a[0, 0, :] > 0.3],
    "x[:, m2d]": lambda x, a: x[:, a[0] > 0.5],
    "x[:, m, 1:4]": lambda x, a: x[:, a[0, :, 0] > 0.5, 1:4],
    "x[:, none selected]": lambda x, a: x[:, a[0, :, 0] > 2],
}


@pytest.mark.parametrize("case", sorted(LATER_MASKS))
def test_a_mask_after_full_slices_selects_as_numpy(case):
    a = np.random.default_rng(7).random((4, 5, 6))
    want = LATER_MASKS[case](a, a)
    for mask_source in (a, tc.asarray(a)):  # a numpy mask, and a lazy tc one
        got = LATER_MASKS[case](tc.asarray(a), mask_source)
        np.testing.assert_array_equal(np.asarray(got), want)
