"""numpy functions and array methods that clients (scikit-learn, xarray, scipy, opt_einsum)
call on ``tc.Array``: each stays lazy and gives numpy's values, dtype and shape; then the
clients themselves on tensorc arrays (each skipped when it is not installed)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tensorc as tc
from tensorc.lazy.graph import leaf


def _same(result, expected, *, rtol=1e-12, exact_dtype=True):
    """``result`` (a tc.Array or a Python value) equals numpy's ``expected``."""
    if isinstance(expected, (bool, int, float)) and not isinstance(expected, np.generic):
        assert not isinstance(result, tc.Array)
        assert result == expected
        return
    assert isinstance(result, tc.Array), type(result)
    got, want = np.asarray(result), np.asarray(expected)
    assert got.shape == want.shape
    if exact_dtype:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)


@pytest.fixture
def data():
    rng = np.random.default_rng(26)
    a = rng.standard_normal((4, 5))
    b = rng.standard_normal((5, 3))
    return a, b


# -- numpy functions the namespace has: each forwards ------------------------------------------
FORWARDED = {
    "diff": lambda a, b: np.diff(a), "diff_n2_axis0": lambda a, b: np.diff(a, n=2, axis=0),
    "diff_prepend": lambda a, b: np.diff(a, prepend=0.0),
    "round": lambda a, b: np.round(a, 2), "round0": lambda a, b: np.round(a),
    "around": lambda a, b: np.around(a * 100, -1),
    "clip": lambda a, b: np.clip(a, -0.5, 0.5), "cumsum": lambda a, b: np.cumsum(a, axis=1),
    "cumsum_flat": lambda a, b: np.cumsum(a), "transpose": lambda a, b: np.transpose(a),
    "moveaxis": lambda a, b: np.moveaxis(a[None], 0, 2),
    "squeeze": lambda a, b: np.squeeze(a[None]), "expand_dims": lambda a, b: np.expand_dims(a, 1),
    "stack": lambda a, b: np.stack([a, a], axis=1),
    "concatenate": lambda a, b: np.concatenate([a, a], axis=1),
    "flip": lambda a, b: np.flip(a, 0), "roll": lambda a, b: np.roll(a, 2, axis=1),
    "sort": lambda a, b: np.sort(a), "argsort": lambda a, b: np.argsort(a, axis=0),
    "where": lambda a, b: np.where(a > 0, a, -1.0), "isnan": lambda a, b: np.isnan(a),
    "isfinite": lambda a, b: np.isfinite(a), "abs": lambda a, b: np.abs(a),
    "sign": lambda a, b: np.sign(a), "maximum": lambda a, b: np.maximum(a, 0.1),
    "minimum": lambda a, b: np.minimum(a, a[::-1]),
    "logical_and": lambda a, b: np.logical_and(a > 0, a < 1),
    "logical_or": lambda a, b: np.logical_or(a > 1, a < -1),
    "logical_not": lambda a, b: np.logical_not(a > 0), "any": lambda a, b: np.any(a > 1, axis=0),
    "all": lambda a, b: np.all(a > -3), "mean": lambda a, b: np.mean(a, axis=0),
    "std": lambda a, b: np.std(a, ddof=1), "var": lambda a, b: np.var(a, axis=1, keepdims=True),
    "sum": lambda a, b: np.sum(a, 1), "prod": lambda a, b: np.prod(a, axis=0),
    "dot": lambda a, b: np.dot(a, b), "matmul": lambda a, b: np.matmul(a, b),
    "tensordot": lambda a, b: np.tensordot(a, b, axes=1), "outer": lambda a, b: np.outer(a, b),
    "trace": lambda a, b: np.trace(a), "norm": lambda a, b: np.linalg.norm(a),
    "norm_axis": lambda a, b: np.linalg.norm(a, axis=1), "ravel": lambda a, b: np.ravel(a),
    "real": lambda a, b: np.real(a), "imag": lambda a, b: np.imag(a),
}


@pytest.mark.parametrize("name", sorted(FORWARDED))
def test_numpy_function_on_a_tc_array_is_numpy_s_result(name, data):
    a, b = data
    call = FORWARDED[name]
    _same(call(tc.asarray(a), tc.asarray(b)), call(a, b))


# -- nan reductions -----------------------------------------------------------------------------
def _with_nans(dtype):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 6, 3))
    a[0, 1, 2] = np.nan
    a[1, :, 0] = np.nan  # an all-NaN slice along axis 1
    a[2, 2, :] = np.nan
    return a.astype(dtype)


NAN_FUNCTIONS = ["nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanstd", "nanvar",
                 "nanmedian", "median"]
AXES = [{}, {"axis": 1}, {"axis": -1}, {"axis": (0, 2), "keepdims": True}]


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
@pytest.mark.parametrize("name", NAN_FUNCTIONS)
def test_nan_reductions_are_numpy_s(name, dtype):
    a = _with_nans("float64")
    a = a if dtype != "int64" else np.nan_to_num(a * 10).astype(dtype)
    a = a.astype(dtype)
    x = tc.asarray(a)
    for kwargs in AXES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = getattr(np, name)(a, **kwargs)
            result = getattr(np, name)(x, **kwargs)
            assert not result.evaluated  # lazy
            _same(result, expected, rtol=2e-6 if dtype == "float32" else 1e-12)


def test_nan_moments_take_ddof_and_dtype():
    a = _with_nans("float32")
    x = tc.asarray(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _same(np.nanvar(x, axis=1, ddof=1), np.nanvar(a, axis=1, ddof=1), rtol=2e-6)
        _same(np.nanstd(x, ddof=5, axis=0), np.nanstd(a, ddof=5, axis=0), rtol=2e-6)
        _same(np.nanmean(x, axis=0, dtype=np.float64), np.nanmean(a, axis=0, dtype=np.float64))
        _same(np.nansum(x, dtype=np.float64), np.nansum(a, dtype=np.float64))


def test_nanargmax_and_nanargmin_and_their_all_nan_slices():
    a = _with_nans("float64")
    x = tc.asarray(a)
    for name in ("nanargmax", "nanargmin"):
        fn = getattr(np, name)
        _same(fn(x, axis=0), fn(a, axis=0))
        _same(fn(x[3]), fn(a[3]))
        lazy = fn(x, axis=1)  # slice a[1, :, 0] is all NaN: numpy raises, tensorc on compute
        with pytest.raises(ValueError, match="All-NaN slice"):
            lazy.compute()


# -- median, quantile, percentile ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
@pytest.mark.parametrize("name", ["quantile", "percentile", "nanquantile", "nanpercentile"])
def test_quantiles_are_numpy_s(name, dtype):
    a = _with_nans("float64")
    a = (a if dtype != "int64" else np.nan_to_num(a * 10)).astype(dtype)
    x = tc.asarray(a)
    scale = 100 if "percentile" in name else 1
    for q in (0.3, 0.5, 0.0, 1.0, [0.1, 0.75], [[0.2], [0.9]]):
        q = (np.asarray(q) * scale).tolist()
        for kwargs in ({}, {"axis": 1}, {"axis": 0, "keepdims": True}, {"axis": (0, 2)}):
            if name.startswith("nan") and np.ndim(q) > 1 and kwargs == {"axis": (0, 2)}:
                continue  # numpy's nanquantile puts a 2-d q's axes last here (quantile: first)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                result = getattr(np, name)(x, q, **kwargs)
                assert not result.evaluated
                _same(result, getattr(np, name)(a, q, **kwargs),
                      rtol=2e-6 if dtype == "float32" else 1e-12)


def test_a_quantile_method_other_than_linear_is_refused():
    with pytest.raises(tc.UnsupportedError, match="method='nearest'"):
        np.quantile(tc.asarray(np.arange(5.0)), 0.5, method="nearest")


# -- pad ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {"pad_width": 1}, {"pad_width": ((1, 2), (0, 3))},
    {"pad_width": ((1, 2), (3, 0)), "constant_values": ((7, 8), (9, 10))},
    {"pad_width": 1, "constant_values": 2.7}, {"pad_width": (1, 2), "mode": "edge"},
    {"pad_width": 2, "mode": "reflect"}, {"pad_width": 3, "mode": "symmetric"},
    {"pad_width": ((1, 2), (4, 0)), "mode": "wrap"},
])
def test_pad_is_numpy_s(kwargs):
    a = np.arange(12).reshape(3, 4)
    result = np.pad(tc.asarray(a), **kwargs)
    assert not result.evaluated
    _same(result, np.pad(a, **kwargs))
    _same(tc.pad(tc.asarray(a), kwargs.pop("pad_width"), **kwargs), result.numpy())


def test_pad_refuses_what_it_does_not_implement():
    x = tc.asarray(np.arange(4.0))
    with pytest.raises(tc.UnsupportedError, match="mode='mean'"):
        np.pad(x, 1, mode="mean")
    with pytest.raises(tc.UnsupportedError, match="width"):
        np.pad(x, 4, mode="reflect")


# -- memory sharing ------------------------------------------------------------------------------
def test_memory_sharing_follows_the_graph_without_computing():
    a = np.arange(12.0).reshape(3, 4)
    x = tc.asarray(a)  # a copy of a
    y = x * 2
    for test in (np.may_share_memory, np.shares_memory):
        assert test(x, x) and test(x, x.T) and test(x.T, x[None])  # one base: views
        assert not test(x, y) and not test(x, x.copy()) and not test(x, tc.asarray(a))
        assert not test(x, a) and not test(a, y)
        wrapped = tc.Array(leaf(a))  # an array over a's own memory
        assert test(wrapped, a) and test(a, wrapped.T) and test(wrapped, a[1:])
        assert not test(wrapped, a.copy())
        assert not test(tc.zeros((0,)), tc.zeros((0,)))
    assert not y.evaluated  # nothing was computed


# -- array methods --------------------------------------------------------------------------------
METHODS = {
    "transpose()": lambda x: x.transpose(), "transpose(1, 0)": lambda x: x.transpose(1, 0),
    "transpose((1, 0))": lambda x: x.transpose((1, 0)),
    "reshape(5, 4)": lambda x: x.reshape(5, 4), "reshape((20,))": lambda x: x.reshape((20,)),
    "reshape(-1)": lambda x: x.reshape(-1), "astype": lambda x: x.astype(np.float32),
    "sum(0)": lambda x: x.sum(0), "sum": lambda x: x.sum(axis=1, keepdims=True),
    "prod": lambda x: x.prod(axis=0), "mean": lambda x: x.mean(), "std": lambda x: x.std(ddof=1),
    "var": lambda x: x.var(axis=0), "max": lambda x: x.max(axis=1), "min": lambda x: x.min(),
    "argmax": lambda x: x.argmax(), "argmin": lambda x: x.argmin(axis=0),
    "any": lambda x: (x > 0).any(axis=0), "all": lambda x: (x > 0).all(),
    "copy": lambda x: x.copy(), "ravel": lambda x: x.ravel(), "flatten": lambda x: x.flatten(),
    "squeeze": lambda x: x[None].squeeze(), "dot": lambda x: x.dot(x.T),
    "round": lambda x: x.round(2), "clip": lambda x: x.clip(-0.5, 0.5),
    "cumsum": lambda x: x.cumsum(), "cumsum(axis=1)": lambda x: x.cumsum(axis=1),
    "conj": lambda x: x.conj(), "real": lambda x: x.real, "imag": lambda x: x.imag,
    "nbytes": lambda x: x.nbytes, "itemsize": lambda x: x.itemsize,
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_array_method_is_numpy_s(name, data):
    a, _ = data
    _same(METHODS[name](tc.asarray(a)), METHODS[name](a))


def test_numpy_transpose_in_the_namespace():
    a = np.arange(24).reshape(2, 3, 4)
    _same(tc.transpose(tc.asarray(a)), np.transpose(a))
    _same(tc.transpose(tc.asarray(a), (1, 0, 2)), np.transpose(a, (1, 0, 2)))


# -- the clients ----------------------------------------------------------------------------------
def test_opt_einsum_contract_on_tc_arrays():
    opt_einsum = pytest.importorskip("opt_einsum")
    rng = np.random.default_rng(1)
    a, b, c = rng.random((3, 4)), rng.random((4, 5)), rng.random((5, 2))
    result = opt_einsum.contract("ij,jk,kl->il", *map(tc.asarray, (a, b, c)))
    _same(result, np.einsum("ij,jk,kl->il", a, b, c))


XARRAY = {
    "mean": lambda da, xr: da.mean("n"), "std": lambda da, xr: da.std("n"),
    "std_ddof": lambda da, xr: da.std("n", ddof=1), "sum": lambda da, xr: da.sum("n"),
    "max": lambda da, xr: da.max("f"), "var_noskip": lambda da, xr: da.var("n", skipna=False),
    "median": lambda da, xr: da.median("n"),
    "quantile": lambda da, xr: da.quantile(0.3, dim="n"),
    "dot": lambda da, xr: xr.dot(da, da, dim="f"), "T": lambda da, xr: da.T,
}


@pytest.mark.parametrize("name", sorted(XARRAY))
def test_xarray_on_tc_arrays(name):
    xr = pytest.importorskip("xarray")
    d = np.random.default_rng(2).random((6, 3))
    d[2, 1] = np.nan
    result = XARRAY[name](xr.DataArray(tc.asarray(d), dims=("n", "f")), xr)
    expected = XARRAY[name](xr.DataArray(d, dims=("n", "f")), xr)
    assert result.dims == expected.dims
    _same(result.data, expected.data)


SKLEARN = textwrap.dedent("""
    import numpy as np, sklearn, tensorc as tc
    from sklearn import metrics, preprocessing
    rng = np.random.default_rng(0)
    X = rng.random((20, 4)); K = X @ X.T
    yt, yp = rng.integers(0, 3, 20), rng.integers(0, 3, 20)
    rt, rp = rng.random(20), rng.random(20)
    cases = {
        "accuracy_score": lambda c: metrics.accuracy_score(c(yt), c(yp)),
        "r2_score": lambda c: metrics.r2_score(c(rt), c(rp)),
        "mean_squared_error": lambda c: metrics.mean_squared_error(c(rt), c(rp)),
        "MinMaxScaler": lambda c: preprocessing.MinMaxScaler().fit_transform(c(X)),
        "Normalizer": lambda c: preprocessing.Normalizer().fit_transform(c(X)),
        "Binarizer": lambda c: preprocessing.Binarizer(threshold=0.5).fit_transform(c(X)),
        "KernelCenterer": lambda c: preprocessing.KernelCenterer().fit_transform(c(K)),
        "StandardScaler": lambda c: preprocessing.StandardScaler().fit_transform(c(X)),
        "MaxAbsScaler": lambda c: preprocessing.MaxAbsScaler().fit_transform(c(X)),
    }
    with sklearn.config_context(array_api_dispatch=True):
        for name, case in cases.items():
            got, want = case(tc.asarray), case(np.asarray)
            assert isinstance(got, tc.Array) == isinstance(want, np.ndarray), name
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, err_msg=name)
    print("ok")
""")


def test_scikit_learn_with_array_api_dispatch_on_tc_arrays():
    pytest.importorskip("sklearn")
    pytest.importorskip("scipy")
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}  # read when scipy is imported: a process
    done = subprocess.run([sys.executable, "-c", SKLEARN], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


EINOPS_CASES = {
    "rearrange": lambda einops, m: einops.rearrange(m, "a b c -> (a c) b"),
    "reduce mean": lambda einops, m: einops.reduce(m, "a b c -> a c", "mean"),
    "reduce max": lambda einops, m: einops.reduce(m, "a b c -> b", "max"),
    "repeat": lambda einops, m: einops.repeat(m, "a b c -> a b c d", d=2),
    "repeat merged": lambda einops, m: einops.repeat(m, "a b c -> (a r) b c", r=2),
    "einsum": lambda einops, m: einops.einsum(m, m, "a b c, a b d -> c d"),
    "list of arrays": lambda einops, m: einops.rearrange([m, m], "n a b c -> a (n b) c"),
}


@pytest.mark.parametrize("case", sorted(EINOPS_CASES))
def test_plain_einops_takes_and_returns_lazy_tc_arrays(case):
    einops = pytest.importorskip("einops")
    a = np.arange(24.0).reshape(2, 3, 4)
    got = EINOPS_CASES[case](einops, tc.asarray(a))
    assert isinstance(got, tc.Array)
    np.testing.assert_allclose(np.asarray(got), EINOPS_CASES[case](einops, a))


@pytest.mark.parametrize(("window", "axis"), [((3,), 0), ((2,), 1), ((3, 2), (0, 1)),
                                              ((2, 2), None)])
def test_sliding_window_view_is_numpys(window, axis):
    from numpy.lib.stride_tricks import sliding_window_view

    a = np.arange(60.0).reshape(12, 5)
    got = tc.lib.stride_tricks.sliding_window_view(tc.asarray(a), window, axis)
    assert isinstance(got, tc.Array)
    np.testing.assert_array_equal(np.asarray(got), sliding_window_view(a, window, axis))


ROLLING = {
    "mean": lambda da: da.rolling(n=3).mean(),
    "centred sum": lambda da: da.rolling(n=3, center=True).sum(),
    "max, min_periods": lambda da: da.rolling(n=4, min_periods=2).max(),
}


@pytest.mark.parametrize("case", sorted(ROLLING))
def test_xarray_rolling_stays_lazy_and_equals_numpy(case):
    xr = pytest.importorskip("xarray")
    a = np.arange(60.0).reshape(12, 5)
    a[3, 1] = np.nan
    got = ROLLING[case](xr.DataArray(tc.asarray(a), dims=("n", "f")))
    assert isinstance(got.data, tc.Array)
    want = ROLLING[case](xr.DataArray(a, dims=("n", "f")))
    np.testing.assert_allclose(np.asarray(got.data), want.data, equal_nan=True)


def test_diff_with_a_python_scalar_end_takes_numpys_dtype():
    i = np.array([[3, 0, 1], [1, 0, 3]], np.int32)
    for ends in ({"prepend": 0}, {"append": 2.5}):
        want = np.diff(i, **ends)
        got = np.asarray(np.diff(tc.asarray(i), **ends))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
