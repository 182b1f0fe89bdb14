"""Lazy ``tc.Array`` semantics on the local executor checked against numpy 2 and the array
API 2024.12: result dtypes and values, call-time argument checks (error class and message)
and numpy interop signatures."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc


def same(array, expected) -> None:
    """``array`` evaluates to ``expected``: shape, dtype and values (NaN and the sign of zero
    included)."""
    got = np.asarray(array)
    expected = np.asarray(expected)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected, strict=True)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


# -- 1. a Python scalar's type, not only its value, decides the result dtype --------------
def test_scalar_types_are_not_conflated_by_the_dtype_cache() -> None:
    bools = np.array([True, False])
    ints = np.arange(3)
    b, x = tc.asarray(bools), tc.asarray(ints)
    same(b + True, bools + True)
    same(b + 1, bools + 1)  # int64 [2, 1], not bool
    same(b + 1.0, bools + 1.0)
    same(x + 1.0, ints + 1.0)
    same(x + 1, ints + 1)  # int64, not float64
    same(x + True, ints + True)
    assert (x * 1).dtype == np.dtype("int64")
    assert (x * 1.0).dtype == np.dtype("float64")


# -- 2. signed zeros and NaN are distinct constants --------------------------------------
def test_signed_zero_constants_stay_distinct_in_one_program() -> None:
    values = np.arange(1.0, 4.0)
    a = tc.asarray(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        same(tc.stack([a / 0.0, a / -0.0, a * float("nan"), a + (-0.0)]),
             np.stack([values / 0.0, values / -0.0, values * np.nan, values + (-0.0)]))
        same(tc.stack([a * 0.0j, a * complex(0.0, -0.0)]),
             np.stack([values * 0.0j, values * complex(0.0, -0.0)]))


def test_signed_zero_constants_stay_distinct_across_programs() -> None:
    values = np.arange(1.0, 4.0)
    a = tc.asarray(values)
    with np.errstate(divide="ignore"):
        same(a / 0.0, values / 0.0)
        same(a / -0.0, values / -0.0)


# -- 3. axes out of range raise (numpy's AxisError), never wrap --------------------------
def test_moveaxis_and_permute_dims_refuse_out_of_range_axes() -> None:
    values = np.ones((2, 3, 4))
    a = tc.asarray(values)
    cases = [
        ("moveaxis", lambda: np.moveaxis(values, 5, 0), lambda: tc.moveaxis(a, 5, 0)),
        ("moveaxis", lambda: np.moveaxis(values, 0, -4), lambda: tc.moveaxis(a, 0, -4)),
        ("permute_dims", lambda: np.transpose(values, (0, 1, 5)),
         lambda: tc.permute_dims(a, (0, 1, 5))),
    ]
    for name, numpy_call, tensorc_call in cases:
        with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
            numpy_call()
        with pytest.raises(tc.AxisError,
                           match=f"{name}: .*out of bounds for array of dimension 3") as err:
            tensorc_call()
        assert isinstance(err.value, IndexError) and isinstance(err.value, ValueError)
    with pytest.raises(tc.AxisError, match="repeated axis"):
        tc.permute_dims(a, (0, 1, 1))
    with pytest.raises(tc.AxisError, match="not a permutation"):
        tc.permute_dims(a, (0, 1))
    with pytest.raises(tc.ShapeError, match="same number of elements"):
        tc.moveaxis(a, (0, 1), 2)
    same(tc.moveaxis(a, -1, 0), np.moveaxis(values, -1, 0))
    same(tc.moveaxis(a, (0, 1), (-1, -2)), np.moveaxis(values, (0, 1), (-1, -2)))
    same(tc.permute_dims(a, (2, 0, -2)), np.transpose(values, (2, 0, -2)))


# -- 4. the lazy shape is the computed one: impossible shapes are refused at once ---------
def test_shapes_are_checked_when_the_call_is_made() -> None:
    values = np.arange(12.0).reshape(3, 4) ** 2
    a = tc.asarray(values)
    with pytest.raises(tc.ShapeError, match="tril: x must have at least 2 dimensions"):
        tc.tril(tc.arange(3))
    with pytest.raises(tc.ShapeError, match="triu: x must have at least 2 dimensions"):
        tc.triu(tc.asarray(1.0))
    with pytest.raises(ValueError, match="can only specify one unknown dimension"):
        np.reshape(values, (-2, -30))
    with pytest.raises(tc.ShapeError, match=r"reshape: negative dimensions .*\(-2, -30\)"):
        tc.reshape(a, (-2, -30))
    with pytest.raises(tc.ShapeError, match=r"reshape: .*\(-2, 6\)"):
        tc.reshape(a, (-2, 6))
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        np.reshape(values, (2.5, 4))
    with pytest.raises(tc.TypeCheckError, match="reshape: shape must be integers"):
        tc.reshape(a, (2.5, 4))
    with pytest.raises(ValueError, match="order must be non-negative but got -1"):
        np.diff(values, n=-1)
    with pytest.raises(tc.ShapeError, match="diff: order n must be non-negative but got -1"):
        tc.diff(a, n=-1)
    with pytest.raises(tc.ShapeError, match="diff: x must have at least 1 dimension"):
        tc.diff(tc.asarray(1.0))
    for lazy, expected in ((tc.tril(a, k=1), np.tril(values, k=1)),
                           (tc.triu(a, k=-1), np.triu(values, k=-1)),
                           (tc.reshape(a, (-1, 6)), values.reshape(-1, 6)),
                           (tc.diff(a, n=0), np.diff(values, n=0)),
                           (tc.diff(a, n=2, axis=0), np.diff(values, n=2, axis=0)),
                           (tc.diff(a, n=5), np.diff(values, n=5))):
        assert lazy.shape == expected.shape
        same(lazy, expected)
