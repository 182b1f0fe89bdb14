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


RNG = np.random.default_rng(11)
STACK = RNG.standard_normal((2, 4, 3))
SQUARE = RNG.standard_normal((2, 3, 3))
SYMMETRIC = SQUARE + np.swapaxes(SQUARE, -1, -2)


@pytest.mark.parametrize(
    ("build", "reference"),
    [
        (lambda: tc.linalg.cross(tc.asarray(STACK[..., :3, :]), tc.asarray(SQUARE), axis=-2),
         lambda: np.linalg.cross(STACK[..., :3, :], SQUARE, axis=-2)),
        (lambda: tc.linalg.eigvalsh(tc.asarray(SYMMETRIC)),
         lambda: np.linalg.eigvalsh(SYMMETRIC)),
        (lambda: tc.linalg.matrix_norm(tc.asarray(STACK)), lambda: np.linalg.matrix_norm(STACK)),
        (lambda: tc.linalg.matrix_norm(tc.asarray(STACK), ord=-np.inf, keepdims=True),
         lambda: np.linalg.matrix_norm(STACK, ord=-np.inf, keepdims=True)),
        (lambda: tc.linalg.matrix_norm(tc.asarray(STACK), ord="nuc"),
         lambda: np.linalg.matrix_norm(STACK, ord="nuc")),
        (lambda: tc.linalg.matrix_power(tc.asarray(SQUARE), 3),
         lambda: np.linalg.matrix_power(SQUARE, 3)),
        (lambda: tc.linalg.matrix_power(tc.asarray(SQUARE), -2),
         lambda: np.linalg.matrix_power(SQUARE, -2)),
        (lambda: tc.linalg.matrix_power(tc.asarray(np.arange(4).reshape(2, 2)), 0),
         lambda: np.linalg.matrix_power(np.arange(4).reshape(2, 2), 0)),
        (lambda: tc.linalg.matrix_rank(tc.asarray(np.ones((2, 3, 3)))),
         lambda: np.linalg.matrix_rank(np.ones((2, 3, 3)))),
        (lambda: tc.linalg.matrix_rank(tc.asarray(STACK), rtol=tc.asarray([0.0, 1.0])),
         lambda: np.linalg.matrix_rank(STACK, rtol=np.asarray([0.0, 1.0]))),
        (lambda: tc.linalg.pinv(tc.asarray(STACK)), lambda: np.linalg.pinv(STACK, rtol=None)),
        (lambda: tc.linalg.pinv(tc.asarray(STACK), rtol=0.5),
         lambda: np.linalg.pinv(STACK, rtol=0.5)),
        (lambda: tc.linalg.svdvals(tc.asarray(STACK.astype(np.complex64))),
         lambda: np.linalg.svdvals(STACK.astype(np.complex64))),
    ],
)
def test_linalg_extension_matches_numpy(build, reference) -> None:
    expected = reference()
    result = build()
    assert result.shape == expected.shape and result.dtype == expected.dtype
    same(result, expected, rtol=1e-5 if expected.dtype in (np.float32, np.complex64) else 1e-10)


def test_linalg_results_are_named_tuples_like_numpy() -> None:
    values, vectors = tc.linalg.eigh(tc.asarray(SYMMETRIC))
    expected = np.linalg.eigh(SYMMETRIC)
    same(values, expected.eigenvalues, rtol=1e-10)
    same(abs(tc.sum(vectors * tc.asarray(expected.eigenvectors), axis=-2)),
         np.ones((2, 3)), rtol=1e-10)  # eigenvectors are unique up to sign
    sign, logabsdet = tc.linalg.slogdet(tc.asarray(SQUARE.astype(np.complex128)))
    expected = np.linalg.slogdet(SQUARE.astype(np.complex128))
    same(sign, expected.sign, rtol=1e-10)
    same(logabsdet, expected.logabsdet, rtol=1e-10)
    for full in (True, False):
        result = tc.linalg.svd(tc.asarray(STACK), full_matrices=full)
        expected = np.linalg.svd(STACK, full_matrices=full)
        assert [p.shape for p in result] == [p.shape for p in expected]
        same(result.S, expected.S, rtol=1e-10)
        k = result.S.shape[-1]
        rebuilt = (result.U[..., :k] * result.S[..., None, :]) @ result.Vh[..., :k, :]
        same(rebuilt, STACK, rtol=1e-10)


def test_linalg_extension_errors() -> None:
    with pytest.raises(ValueError, match="size 3"):
        tc.linalg.cross(tc.ones((2, 4)), tc.ones((2, 4)))
    with pytest.raises(tc.LinAlgError, match="square"):
        tc.linalg.eigh(tc.ones((2, 3)))
    with pytest.raises(tc.LinAlgError, match="floating"):
        tc.linalg.svd(tc.ones((2, 3), dtype=tc.int64))
    with pytest.raises(ValueError, match="ord"):
        tc.linalg.matrix_norm(tc.ones((2, 2)), ord=3)
    with pytest.raises(np.linalg.LinAlgError, match="Singular"):  # numpy's words
        np.asarray(tc.linalg.matrix_power(tc.zeros((2, 2)), -1))


GRID = np.arange(24).reshape(2, 3, 4)


@pytest.mark.parametrize(
    "key",
    [
        (0, np.array([2, 0, 1])),
        (np.array([1, 0]), slice(None), np.array([3, -1])),
        (Ellipsis, np.array([[0, 1], [3, 2]])),
        (np.array([[1], [0]]), 2, np.array([0, 3, 1])),
        (slice(None), np.array([], dtype=np.int64)),
        (None, 1, np.array([2]), slice(1, 3)),
    ],
)
def test_integer_array_indices_select_as_numpy_does(key) -> None:
    lazy_key = tuple(tc.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
    same(tc.asarray(GRID)[lazy_key], GRID[key])


def test_boolean_masks_select_at_a_synchronisation_point() -> None:
    x = tc.asarray(GRID)
    same(x[x > 3], GRID[GRID > 3])  # more in tests/test_data_dependent.py
    with pytest.raises(IndexError, match="integer or boolean"):
        _ = x[tc.asarray([0.5])]


def test_setitem_updates_the_array_like_numpy() -> None:
    reference = GRID.astype(np.float32)
    x = tc.asarray(reference)
    steps = [
        ((1, slice(None), 2), 7.5),
        ((Ellipsis, 0), np.arange(3, dtype=np.float32)),
        (reference > 10, -1.0),
        (reference[..., 0] < 5, np.float32(2.5)),  # a mask of the leading axes
        ((0, np.array([2, 0])), np.array([1.0, 2.0, 3.0, 4.0], np.float32)),
        ((slice(None, None, -1), 1, slice(1, 3)), 9.0),
    ]
    expected = reference.copy()
    for key, value in steps:
        if isinstance(key, tuple):
            lazy_key = tuple(tc.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
        else:
            lazy_key = tc.asarray(key)
        x[lazy_key] = tc.asarray(value) if isinstance(value, np.ndarray) else value
        expected[key] = value
        assert x.dtype == np.float32 and x.shape == GRID.shape
        same(x, expected)


def test_setitem_converts_values_as_numpy_does_and_checks_shapes() -> None:
    x = tc.zeros(3, dtype=tc.int8)
    x[0] = 1.9  # numpy truncates a float assigned to an integer array
    same(x, np.array([1, 0, 0], np.int8))
    with pytest.raises(OverflowError):
        x[1] = 300
    with pytest.raises(ValueError, match="cannot assign a value of shape"):
        x[:2] = tc.ones(3, dtype=tc.int8)
    with pytest.raises(ValueError, match="cannot assign a value of shape"):
        x[x > 0] = tc.ones(2, dtype=tc.int8)[None]
    with pytest.raises(IndexError, match="does not match"):
        x[tc.asarray([True, False])] = 1


def test_updates_show_in_the_same_array_not_in_copies() -> None:
    x = tc.asarray(np.arange(4.0))
    built_before = x * 2
    alias, copy = tc.asarray(x, copy=False), tc.asarray(x, copy=True)
    same_dtype, converted = tc.astype(x, tc.float64, copy=False), tc.astype(x, tc.float64)
    assert alias is x and same_dtype is x and copy is not x and converted is not x
    x[0] = 10.0
    same(alias, [10.0, 1, 2, 3])
    same(copy, np.arange(4.0))
    same(converted, np.arange(4.0))
    same(built_before, np.arange(4.0) * 2)
    with pytest.raises(ValueError, match="copy=False"):
        tc.asarray(x, dtype=tc.float32, copy=False)


def test_in_place_operators_keep_the_array_and_its_dtype() -> None:
    x = tc.asarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    alias = x
    expected = np.arange(6, dtype=np.int32).reshape(2, 3)
    x += tc.asarray(np.array([1, 2, 3], np.int64))  # same_kind: int64 result cast to int32
    expected += np.array([1, 2, 3], np.int64)
    x *= 3
    expected *= 3
    x //= 2
    expected //= 2
    x ^= 5
    expected ^= 5
    assert x is alias
    same(x, expected)
    with pytest.raises(TypeError, match="cannot cast"):
        x += 1.5
    with pytest.raises(ValueError, match="cannot change the shape"):
        x += tc.ones((4, 2, 3), dtype=tc.int32)
    flags = tc.asarray([True, False])
    flags |= tc.asarray([False, False])
    same(flags, [True, False])
    m = tc.asarray(np.eye(2))
    m @= tc.asarray(np.array([[1.0, 2.0], [3.0, 4.0]]))
    same(m, [[1.0, 2.0], [3.0, 4.0]])


SIGNAL = RNG.standard_normal((4, 6))


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_axis_transforms_match_numpy(name, dtype) -> None:
    x = SIGNAL.astype(dtype)
    if name in ("irfft", "hfft"):
        x = np.fft.rfft(x, axis=0)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    for kwargs in ({}, {"n": 5, "axis": 0, "norm": "ortho"}, {"axis": -1, "norm": "forward"}):
        result = getattr(tc.fft, name)(tc.asarray(x), **kwargs)
        same(result, getattr(np.fft, name)(x, **kwargs), rtol=rtol)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_many_axis_transforms_match_numpy(name) -> None:
    x = np.fft.rfftn(SIGNAL) if name == "irfftn" else SIGNAL
    for kwargs in ({}, {"s": (3, 8), "axes": (1, 0)}, {"axes": (0,), "norm": "ortho"}):
        result = getattr(tc.fft, name)(tc.asarray(x), **kwargs)
        same(result, getattr(np.fft, name)(x, **kwargs), rtol=1e-10)


def test_frequencies_and_shifts_match_numpy() -> None:
    same(tc.fft.fftfreq(7, d=0.25), np.fft.fftfreq(7, d=0.25))
    same(tc.fft.rfftfreq(8, dtype=tc.float32), np.fft.rfftfreq(8).astype(np.float32))
    same(tc.fft.fftshift(tc.asarray(SIGNAL)), np.fft.fftshift(SIGNAL))
    same(tc.fft.ifftshift(tc.asarray(SIGNAL), axes=(1,)), np.fft.ifftshift(SIGNAL, axes=1))
    with pytest.raises(ValueError, match="norm"):
        tc.fft.fft(tc.asarray(SIGNAL), norm="none")
    with pytest.raises(ValueError, match="data points"):
        tc.fft.irfft(tc.ones(1, dtype=tc.complex128))
