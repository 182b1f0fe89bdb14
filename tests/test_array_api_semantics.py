"""The array API standard's semantics of the ``tensorc`` namespace, checked against numpy:
data type functions, indexing, mutation and the ``linalg`` and ``fft`` extensions."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc


def same(array, expected, rtol=1e-12) -> None:
    got = np.asarray(array)
    expected = np.asarray(expected)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("source", ["bool", "int8", "int64", "uint8", "float32", "complex64"])
@pytest.mark.parametrize("target", ["bool", "int16", "uint64", "float64", "complex128"])
def test_can_cast_follows_numpy_safe_casting(source, target) -> None:
    expected = np.can_cast(np.dtype(source), np.dtype(target), casting="safe")
    assert tc.can_cast(getattr(tc, source), getattr(tc, target)) is bool(expected)
    assert tc.can_cast(tc.zeros(2, dtype=getattr(tc, source)), getattr(tc, target)) is bool(
        expected)


@pytest.mark.parametrize("name", ["float32", "float64", "complex64", "complex128"])
def test_finfo_gives_python_numbers_and_the_real_dtype(name) -> None:
    info, reference = tc.finfo(getattr(tc, name)), np.finfo(np.dtype(name))
    assert type(info.bits) is int and info.bits == reference.bits
    for field in ("eps", "max", "min", "smallest_normal"):
        assert type(getattr(info, field)) is float
        assert getattr(info, field) == float(getattr(reference, field))
    assert info.dtype == reference.dtype
    assert tc.finfo(tc.ones(1, dtype=getattr(tc, name))) == info


def test_slice_bounds_may_be_zero_d_integer_arrays() -> None:
    x = np.arange(10)
    start, stop, step = tc.asarray(2), tc.asarray(9), tc.asarray(3)
    same(tc.asarray(x)[start:stop:step], x[2:9:3])
    with pytest.raises(TypeError):
        tc.asarray(x)[tc.asarray(1.5):]
