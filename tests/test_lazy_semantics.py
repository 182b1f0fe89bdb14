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


# -- 5. invalid arguments are refused at the call, naming the function and argument ------
def test_invalid_arguments_are_refused_at_the_call() -> None:
    values = np.arange(12.0).reshape(3, 4)
    a = tc.asarray(values)
    rows = np.array([[0, 2, 1, 2]] * 2)
    with pytest.raises(np.exceptions.AxisError):
        np.roll(values, 1, axis=3)
    with pytest.raises(tc.AxisError, match="roll: axis: axis 3 is out of bounds"):
        tc.roll(a, 1, axis=3)
    with pytest.raises(tc.ShapeError, match=r"roll: shift \(1, 2, 3\) and axis"):
        tc.roll(a, (1, 2, 3), axis=(0, 1))
    with pytest.raises(tc.TypeCheckError, match="roll: shift must be integers"):
        tc.roll(a, 1.5)
    with pytest.raises(tc.ShapeError, match="searchsorted: x1 must be a 1-d sorted array"):
        tc.searchsorted(a, tc.ones(2))
    with pytest.raises(ValueError, match="side must be 'left' or 'right'"):
        np.searchsorted(values[0], 1.0, side="middle")
    with pytest.raises(tc.ArgumentError, match="searchsorted: side must be 'left' or 'right'"):
        tc.searchsorted(a[0], tc.ones(2), side="middle")
    with pytest.raises(IndexError, match="must be an integer array"):
        np.take_along_axis(values, np.zeros((3, 3)), axis=-1)
    with pytest.raises(tc.TypeCheckError, match="take_along_axis: indices must be an integer "
                                                "array, not float64"):
        tc.take_along_axis(a, tc.zeros((3, 3)))
    with pytest.raises(tc.AxisError, match="take_along_axis: axis 2 is out of bounds"):
        tc.take_along_axis(a, tc.asarray(rows), axis=2)
    with pytest.raises(tc.ShapeError, match="take_along_axis: indices of shape"):
        tc.take_along_axis(a, tc.asarray(rows[0]), axis=0)
    with pytest.raises(ValueError, match="zero-dimensional arrays cannot be concatenated"):
        np.concatenate([np.asarray(1.0), np.asarray(2.0)])
    with pytest.raises(tc.ShapeError, match="concat: zero-dimensional arrays cannot be "
                                            "concatenated"):
        tc.concat([tc.asarray(1.0), tc.asarray(2.0)])
    with pytest.raises(tc.AxisError, match="concat: axis: axis 2 is out of bounds"):
        tc.concat([a, a], axis=2)
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        np.zeros((2.5,))
    for make in (tc.zeros, tc.ones, tc.empty, lambda shape: tc.full(shape, 1.0)):
        with pytest.raises(tc.TypeCheckError, match=r"shape must be an int or a sequence of "
                                                    r"ints, got \(2\.5,\)"):
            make((2.5,))
    with pytest.raises(tc.ShapeError, match="zeros: negative dimensions are not allowed"):
        tc.zeros((2, -1))
    with pytest.raises(tc.ShapeError, match="linspace: num must be non-negative"):
        tc.linspace(0, 1, -1)
    with pytest.raises(tc.TypeCheckError, match="linspace: num must be an integer"):
        tc.linspace(0, 1, 2.5)
    # what is valid matches numpy
    same(tc.linspace(0, 10, 5, dtype=tc.int64), np.linspace(0, 10, 5, dtype=np.int64))
    same(tc.linspace(0, 1, 5, dtype=tc.float32), np.linspace(0, 1, 5, dtype=np.float32))
    same(tc.linspace(0, 10, 5), np.linspace(0, 10, 5))
    same(tc.zeros(np.int64(3)), np.zeros(3))
    same(tc.roll(a, 1, axis=-1), np.roll(values, 1, axis=-1))
    same(tc.roll(a, (1, 2), axis=(0, 1)), np.roll(values, (1, 2), axis=(0, 1)))
    same(tc.roll(a, 1, axis=(0, 0)), np.roll(values, 1, axis=(0, 0)))
    same(tc.roll(a, -5), np.roll(values, -5))
    same(tc.searchsorted(a[0], tc.asarray([2.5, 0.0]), side="right"),
         np.searchsorted(values[0], [2.5, 0.0], side="right"))
    same(tc.take_along_axis(a, tc.asarray(rows), axis=0),
         np.take_along_axis(values, rows, axis=0))
    same(tc.concat([a, a], axis=-1), np.concatenate([values, values], axis=-1))


# -- 6. numerical failures of the one-task linear algebra are tc.LinAlgError -------------
@pytest.mark.parametrize(
    ("tensorc_call", "numpy_call"),
    [
        (lambda m: tc.linalg.inv(m), np.linalg.inv),
        (lambda m: tc.linalg.solve(m, tc.ones(m.shape[-1])),
         lambda m: np.linalg.solve(m, np.ones(m.shape[-1]))),
        (lambda m: tc.linalg.solve(m, tc.ones((m.shape[-1], 2))),
         lambda m: np.linalg.solve(m, np.ones((m.shape[-1], 2)))),
    ],
)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (512, 512)])
def test_singular_small_matrices_raise_tc_linalg_error(tensorc_call, numpy_call,
                                                       shape) -> None:
    singular = np.zeros(shape)
    with pytest.raises(np.linalg.LinAlgError) as expected:
        numpy_call(singular)
    with pytest.raises(tc.LinAlgError) as err:
        tensorc_call(tc.asarray(singular)).numpy()
    assert str(err.value) == str(expected.value) == "Singular matrix"
    assert isinstance(err.value, np.linalg.LinAlgError)
    assert isinstance(err.value, tc.TensorcError)


def test_a_non_definite_matrix_raises_tc_linalg_error_in_cholesky() -> None:
    with pytest.raises(tc.LinAlgError, match="Matrix is not positive definite"):
        tc.linalg.cholesky(tc.asarray(-np.eye(3))).numpy()


# -- 7. numpy scalars are typed operands (numpy 2), not weak Python scalars ---------------
@pytest.mark.parametrize("scalar", [np.float64(1.5), np.float32(2.0), np.int64(3),
                                    np.int8(-2), np.uint8(7), np.bool_(True),
                                    np.complex128(1 + 2j), np.float16(0.5)])
@pytest.mark.parametrize("dtype", ["float32", "int16", "uint8", "bool"])
def test_numpy_scalars_promote_as_in_numpy(scalar, dtype) -> None:
    values = np.arange(1, 4).astype(dtype)
    x = tc.asarray(values)
    for name in ("add", "multiply", "subtract", "less", "equal", "maximum"):
        fn = getattr(np, name)
        try:
            expected = fn(values, scalar)
            reflected = fn(scalar, values)
        except (TypeError, np.exceptions.DTypePromotionError):
            continue  # e.g. bool - bool: numpy refuses, not this test's subject
        same(getattr(tc, name)(x, scalar), expected)
        same(getattr(tc, name)(scalar, x), reflected)
    if values.dtype != np.bool_ and not isinstance(scalar, np.bool_):
        same(x + scalar, values + scalar)
        same(scalar + x, scalar + values)
        same(x * scalar, values * scalar)
        same(scalar - x, scalar - values)
    same(x < scalar, values < scalar)
    same(scalar >= x, scalar >= values)


# -- 8. comparing with a Python int outside the dtype compares by value (numpy 2) ---------
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint64", "int64"])
@pytest.mark.parametrize("scalar", [-1, -129, -(2**63) - 1, 300, 2**63, 2**64, 0, 5])
def test_comparisons_with_out_of_range_python_ints(dtype, scalar) -> None:
    info = np.iinfo(dtype)
    values = np.array([0, 1, 2, info.max, info.min], dtype)
    x = tc.asarray(values)
    for name in ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal"):
        same(getattr(tc, name)(x, scalar), getattr(np, name)(values, scalar))
        same(getattr(tc, name)(scalar, x), getattr(np, name)(scalar, values))
    same(x < scalar, values < scalar)
    same(scalar < x, scalar < values)
    same(x == scalar, values == scalar)
    same(x != scalar, values != scalar)
    same(tc.stack([x >= scalar, x <= scalar]), np.stack([values >= scalar, values <= scalar]))


def test_arithmetic_with_out_of_range_python_ints_still_overflows_as_numpy() -> None:
    values = np.array([1, 2], np.uint8)
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for uint8"):
        _ = values + 300
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for uint8"):
        _ = tc.asarray(values) + 300


# -- 11. Python conversions and the namespace version follow numpy 2 ---------------------
def test_only_0d_arrays_convert_to_python_scalars() -> None:
    for shape in ((1,), (1, 1), (2, 2)):
        for kind in (float, int, complex):
            with pytest.raises(TypeError, match="only 0-dimensional arrays can be converted"):
                kind(np.ones(shape))
            with pytest.raises(tc.TypeCheckError, match="only a 0-d array converts to .* "
                                                        "only 0-dimensional arrays"):
                kind(tc.ones(shape))
    assert float(tc.asarray(2.5)) == float(np.asarray(2.5)) == 2.5
    assert int(tc.asarray(3)) == 3 and complex(tc.asarray(1j)) == 1j
    assert [10, 20, 30][tc.asarray(1)] == 20
    # bool keeps numpy's truth value: any one-element array has one
    assert bool(tc.ones((1, 1))) is bool(np.ones((1, 1))) is True
    assert bool(tc.zeros(1)) is bool(np.zeros(1)) is False
    for shape in ((2,), (0,)):
        with pytest.raises(ValueError, match="truth value of an"):
            bool(np.ones(shape))
        with pytest.raises(tc.ShapeError, match="truth value of an .* is ambiguous"):
            bool(tc.ones(shape))


def test_unknown_array_api_versions_raise_value_error() -> None:
    x = tc.ones(3)
    with pytest.raises(ValueError, match="2099.1"):
        np.ones(3).__array_namespace__(api_version="2099.1")
    with pytest.raises(ValueError, match="version '2099.1' of the array API standard is not "
                                         "supported"):
        x.__array_namespace__(api_version="2099.1")
    assert x.__array_namespace__() is tc
    assert x.__array_namespace__(api_version="2024.12") is tc
    assert x.__array_namespace__(api_version="2023.12") is tc


# -- 10. a lazy 0-d fill value ------------------------------------------------------------
def test_full_takes_a_lazy_0d_fill_value() -> None:
    values = np.arange(6.0).reshape(2, 3)
    x = tc.asarray(values)
    same(tc.full((2,), tc.sum(x)), np.full((2,), np.sum(values)))
    same(tc.full((2, 2), tc.sum(x), dtype=tc.int32), np.full((2, 2), np.sum(values), np.int32))
    same(tc.full((), tc.max(x)), np.full((), np.max(values)))
    same(tc.full_like(x, tc.min(x) + 1), np.full_like(values, np.min(values) + 1))
    same(tc.full((3,), tc.asarray(np.float32(2))), np.full((3,), np.asarray(np.float32(2))))
    with pytest.raises(tc.ShapeError, match="full: fill_value must be a scalar or a 0-d "
                                            r"array, got shape \(2, 3\)"):
        tc.full((2,), x)


# -- 9. numpy functions on tc.Array take numpy's signatures -------------------------------
V = np.arange(1.0, 13.0).reshape(3, 4)
SPD = V[:, :3].T @ V[:, :3] + np.eye(3)
NUMPY_CALLS = {
    "sum positional axis": lambda a: np.sum(a, 0),
    "sum keepdims": lambda a: np.sum(a, axis=1, keepdims=True),
    "sum positional dtype": lambda a: np.sum(a, None, np.float32),
    "prod": lambda a: np.prod(a, 1),
    "max": lambda a: np.max(a, 0),
    "amin": lambda a: np.amin(a, 1, keepdims=True),
    "any": lambda a: np.any(a > 5, 0),
    "all": lambda a: np.all(a > 0),
    "mean": lambda a: np.mean(a, 0),
    "mean dtype": lambda a: np.mean(a, dtype=np.float32),
    "var ddof": lambda a: np.var(a, 0, ddof=1),
    "std": lambda a: np.std(a, axis=1),
    "argmax": lambda a: np.argmax(a, 1),
    "argmin flat": lambda a: np.argmin(a),
    "count_nonzero": lambda a: np.count_nonzero(a > 4, axis=0),
    "cumsum flattens": lambda a: np.cumsum(a),
    "cumsum axis": lambda a: np.cumsum(a, 1),
    "cumprod dtype": lambda a: np.cumprod(a, axis=0, dtype=np.float32),
    "sort": lambda a: np.sort(-a),
    "sort flattens": lambda a: np.sort(-a, None),
    "argsort": lambda a: np.argsort(-a, 0),
    "where": lambda a: np.where(a > 5, a, 0.0),
    "clip a_min": lambda a: np.clip(a, a_min=2, a_max=None),
    "clip positional": lambda a: np.clip(a, 2, 8),
    "clip max": lambda a: np.clip(a, max=3),
    "squeeze all": lambda a: np.squeeze(np.reshape(a, (1, 3, 1, 4))),
    "tile int": lambda a: np.tile(a, 2),
    "tile longer": lambda a: np.tile(a, (2, 1, 2)),
    "take flattens": lambda a: np.take(a, [0, 5, 11]),
    "take axis": lambda a: np.take(a, [3, 0], axis=1),
    "concatenate": lambda a: np.concatenate((a, a), 1),
    "concatenate flattens": lambda a: np.concatenate([a, a], axis=None),
    "stack": lambda a: np.stack([a, a], 1),
    "zeros_like": lambda a: np.zeros_like(a),
    "ones_like dtype": lambda a: np.ones_like(a, dtype=np.int32),
    "full_like": lambda a: np.full_like(a, 7.0),
    "zeros_like shape": lambda a: np.zeros_like(a, shape=(2,)),
    "tensordot": lambda a: np.tensordot(a, a, 2),
    "tensordot positional axes": lambda a: np.tensordot(a, np.transpose(a), 1),
    "dot": lambda a: np.dot(a, np.transpose(a)),
    "outer": lambda a: np.outer(a[0], a[1]),
    "transpose": lambda a: np.transpose(a),
    "reshape": lambda a: np.reshape(a, (4, 3)),
    "reshape int": lambda a: np.reshape(a, -1),
    "expand_dims": lambda a: np.expand_dims(a, 1),
    "broadcast_to": lambda a: np.broadcast_to(a[0], (2, 4)),
    "flip": lambda a: np.flip(a, 0),
    "flip all": lambda a: np.flip(a),
    "roll flattens": lambda a: np.roll(a, 2),
    "roll axis": lambda a: np.roll(a, 1, 0),
    "moveaxis": lambda a: np.moveaxis(a, 0, 1),
    "repeat": lambda a: np.repeat(a, 2, 1),
    "trace": lambda a: np.trace(a),
    "trace offset": lambda a: np.trace(a, 1),
    "diagonal": lambda a: np.diagonal(a),
    "diagonal offset": lambda a: np.diagonal(a, -1),
    "einsum": lambda a: np.einsum("ij,ij->i", a, a),
    "einsum optimize": lambda a: np.einsum("ij->j", a, optimize=True),
    "isclose": lambda a: np.isclose(a, a + 1e-9),
    "astype": lambda a: np.astype(a, np.float32),
    "linalg.svd values": lambda a: np.linalg.svd(a, compute_uv=False),
    "linalg.norm": lambda a: np.linalg.norm(a),
}


@pytest.mark.parametrize("name", list(NUMPY_CALLS))
def test_numpy_functions_adapt_numpy_signatures(name) -> None:
    call = NUMPY_CALLS[name]
    result = call(tc.asarray(V))
    assert isinstance(result, tc.Array)  # stayed on tensorc
    expected = call(V)
    got = np.asarray(result)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_numpy_linalg_functions_on_tc_arrays() -> None:
    a = tc.asarray(SPD)
    for fn in (np.linalg.det, np.linalg.inv, np.linalg.cholesky, np.linalg.eigvalsh,
               lambda m: np.linalg.solve(m, np.arange(3.0)),
               lambda m: np.linalg.matrix_power(m, 2)):
        result = fn(a)
        assert isinstance(result, tc.Array)
        np.testing.assert_allclose(np.asarray(result), fn(SPD), rtol=1e-9)
    q, r = np.linalg.qr(tc.asarray(V))
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), V, atol=1e-12)
    assert np.asarray(np.linalg.qr(tc.asarray(V), mode="r")).shape == np.linalg.qr(
        V, mode="r").shape
    assert np.allclose(tc.asarray(V), V) and np.shape(tc.asarray(V)) == (3, 4)
    assert np.ndim(tc.asarray(V)) == 2 and np.size(tc.asarray(V), 1) == 4


@pytest.mark.parametrize(("call", "message"), [
    (lambda a: np.sum(a, where=np.ones((3, 4), bool)), r"numpy.sum with where=\.\.\."),
    (lambda a: np.sum(a, out=np.empty(4)), r"numpy.sum with out=\.\.\."),
    (lambda a: np.max(a, initial=5), "numpy.max with initial=5"),
    (lambda a: np.sort(a, order="f"), "numpy.sort with order='f'"),
    (lambda a: np.reshape(a, (4, 3), order="F"), "numpy.reshape with order='F'"),
    (lambda a: np.linalg.qr(a, mode="raw"), "numpy.linalg.qr with mode='raw'"),
    (lambda a: np.linalg.eigh(a, UPLO="U"), "numpy.linalg.eigh with UPLO='U'"),
    (lambda a: np.clip(a, 0, 1, dtype=np.float32), "numpy.clip with dtype="),
    (lambda a: np.unique(a), "numpy.unique with equal_nan=True"),
    (lambda a: np.unique(a, axis=0), "numpy.unique with axis="),
    (lambda a: np.histogram(a), "numpy.histogram is not supported on tc.Array"),
])
def test_numpy_arguments_tensorc_cannot_honour_are_named(call, message) -> None:
    with pytest.raises(tc.UnsupportedError, match=message):
        call(tc.asarray(V))
