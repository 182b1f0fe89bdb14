"""Hot element-wise expressions compiled as one loop (tensorc.codegen.fused_loops): numpy's
values, compiled only once hot, and only what the loop reproduces."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.codegen import fused_loops
from tensorc.ir.nodes import Arg, Const, OpCall
from tensorc.ir.semantics import evaluate_map_expr

pytest.importorskip("numba")

N = fused_loops.MIN_ELEMENTS * 2


def _op(name, *args):
    return OpCall(name, tuple(args))


# scikit-learn's logistic loss on the array API: raw x0, exp(raw) x1, labels x2
LOSS = _op("sub", _op("select", _op("le", Arg(0), Const(-37)), Arg(1),
                      _op("select", _op("le", Arg(0), Const(-2)), _op("log1p", Arg(1)),
                          _op("select", _op("le", Arg(0), Const(18)),
                              _op("log", _op("add", Const(1.0), Arg(1))),
                              _op("add", Arg(0), _op("div", Const(1), Arg(1)))))),
           _op("mul", Arg(2), Arg(0)))


@pytest.fixture
def hot(monkeypatch):
    """Every eligible expression is compiled at its first evaluation."""
    monkeypatch.setattr(fused_loops, "COMPILE_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(fused_loops, "_ENTRIES", type(fused_loops._ENTRIES)())


def _edge_values(rng) -> np.ndarray:
    x = rng.normal(size=N) * 30
    x[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, -37.0, 18.0, 1e308]
    return x


def test_a_hot_expression_is_compiled_and_gives_numpy_s_values(hot):
    rng = np.random.default_rng(0)
    raw = _edge_values(rng)
    with np.errstate(all="ignore"):
        values = [raw, np.exp(raw), (rng.random(N) > 0.5).astype(float)]
        want = evaluate_map_expr(LOSS, values, np.dtype(float))
    got = fused_loops.evaluate(LOSS, values, np.dtype(float), (N,))
    assert fused_loops.compiled_count() == 1
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, equal_nan=True)
    assert got.dtype == np.float64 and got.shape == (N,)


@pytest.mark.parametrize("expr", [
    _op("div", _op("sub", Arg(0), Arg(1)), _op("mul", Arg(1), Arg(1))),  # 0/0, x/0
    _op("max", _op("min", Arg(0), Arg(1)), _op("neg", Arg(1))),  # NaN propagates
    _op("sqrt", _op("log", _op("abs", _op("sub", Arg(0), Arg(1))))),  # log 0, sqrt(<0)
    _op("select", _op("and", _op("gt", Arg(0), Const(0)), _op("not", _op("isnan", Arg(1)))),
        _op("tanh", Arg(0)), _op("expm1", _op("neg", Arg(1)))),
    _op("sigmoid", _op("mul", _op("cos", Arg(0)), _op("sin", Arg(1)))),
    _op("add", Arg(0), Arg(1), _op("mul", Arg(0), Arg(1), Const(3)), Arg(1)),  # variadic
])
def test_division_by_zero_nan_and_domains_are_numpy_s(hot, expr):
    rng = np.random.default_rng(1)
    a, b = _edge_values(rng), _edge_values(rng)[::-1].copy()
    b[100:110] = 0.0
    a[105:115] = 0.0
    with np.errstate(all="ignore"):
        want = evaluate_map_expr(expr, [a, b], np.dtype(float))
        got = fused_loops.evaluate(expr, [a, b], np.dtype(float), (N,))
    assert fused_loops.compiled_count() == 1
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, equal_nan=True)


def test_a_single_element_operand_and_a_bool_condition(hot):
    rng = np.random.default_rng(2)
    x, mask = rng.normal(size=(N // 4, 4)), rng.random((N // 4, 4)) > 0.3
    intercept = np.array([[0.25]])
    expr = _op("select", Arg(1), _op("exp", _op("add", Arg(0), Arg(2))), _op("neg", Arg(0)))
    want = evaluate_map_expr(expr, [x, mask, intercept], np.dtype(float))
    got = fused_loops.evaluate(expr, [x, mask, intercept], np.dtype(float), x.shape)
    assert fused_loops.compiled_count() == 1
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


@pytest.mark.parametrize(("expr", "values"), [
    (_op("exp", _op("add", Arg(0), Arg(0))), [np.ones(N)]),  # 2 operators: numpy's already
    (_op("pow", _op("add", Arg(0), Const(1)), _op("exp", Arg(0))), [np.ones(N)]),  # no pow
    (LOSS, [np.ones(N, np.float32)] * 3),  # float32 is numpy's
    # a broadcast that is not 1 element (N elements in all: (N / 128) x 128)
    (LOSS, [np.ones(128), np.ones((N // 128, 1)), np.ones(128)]),
])
def test_what_the_loop_would_not_reproduce_stays_numpy_s(hot, expr, values):
    shape = np.broadcast_shapes(*(v.shape for v in values))
    dtype = np.result_type(*values)
    got = fused_loops.evaluate(expr, values, dtype, shape)
    assert fused_loops.compiled_count() == 0
    np.testing.assert_array_equal(got, evaluate_map_expr(expr, values, dtype))


def test_an_expression_is_compiled_only_once_numpy_has_spent_the_threshold_on_it(monkeypatch):
    monkeypatch.setattr(fused_loops, "_ENTRIES", type(fused_loops._ENTRIES)())
    monkeypatch.setattr(fused_loops, "COMPILE_AFTER_SECONDS", 3600.0)
    values = [np.linspace(-50, 50, N), np.exp(np.linspace(-50, 50, N)), np.ones(N)]
    for _ in range(3):
        fused_loops.evaluate(LOSS, values, np.dtype(float), (N,))
    assert fused_loops.compiled_count() == 0  # cold: numpy's every time
    (entry,) = fused_loops._ENTRIES.values()
    assert entry.seconds > 0  # the time numpy took is counted
    monkeypatch.setattr(fused_loops, "COMPILE_AFTER_SECONDS", entry.seconds)
    fused_loops.evaluate(LOSS, values, np.dtype(float), (N,))
    assert fused_loops.compiled_count() == 1
    small = [v[: fused_loops.MIN_ELEMENTS - 1] for v in values]
    fused_loops.evaluate(LOSS, small, np.dtype(float), small[0].shape)
    assert len(fused_loops._ENTRIES) == 1  # a small block neither counts nor compiles


def test_lazy_arrays_in_a_loop_compile_their_expression_and_match_numpy(hot):
    rng = np.random.default_rng(3)
    x, w, y = rng.normal(size=(N, 4)), rng.normal(size=4), rng.random(N) > 0.5
    raw = x @ w
    p = 1.0 / (1.0 + np.exp(-raw))
    want = np.where(y, -np.log(p), -np.log1p(-p)).sum()
    tx, ty = tc.asarray(x), tc.asarray(y)
    for _ in range(2):
        traw = tx @ tc.asarray(w)
        tp = 1.0 / (1.0 + tc.exp(-traw))
        got = float(tc.sum(tc.where(ty, -tc.log(tp), -tc.log1p(-tp))))
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert fused_loops.compiled_count() >= 1
