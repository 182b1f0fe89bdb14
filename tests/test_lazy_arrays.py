"""Lazy ``tc.Array`` programs on the local executor: results against numpy, laziness,
fusion and sharing (statements counted), plan reuse, numpy interop and errors."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.ir.nodes import is_product_of_args
from tensorc.lazy import evaluate, namespace
from tensorc.lazy.array_object import wrap
from tensorc.lazy.graph import NodeKind, deferred
from tensorc.lazy.lowering import LOWERED_AS, lower_graph, post_order

RNG = np.random.default_rng(7)
X = RNG.random((40, 6))
Y = RNG.random((40, 6))
V = RNG.random(6)


def close(array, expected) -> None:
    got = np.asarray(array)
    assert got.shape == np.shape(expected)
    assert got.dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def statements(array) -> int:
    return len(lower_graph([array._expr]).unrolled.statements)  # noqa: SLF001


@pytest.mark.parametrize(
    ("build", "reference"),
    [
        (lambda x, y, v: x + y * 2 - 1.5, lambda x, y, v: x + y * 2 - 1.5),
        (lambda x, y, v: x / (y + 1) ** 2, lambda x, y, v: x / (y + 1) ** 2),
        (lambda x, y, v: tc.exp(-x) * tc.log(y + 1),
         lambda x, y, v: np.exp(-x) * np.log(y + 1)),
        (lambda x, y, v: x - v, lambda x, y, v: x - v),
        (lambda x, y, v: tc.where(x > 0.5, x, -y), lambda x, y, v: np.where(x > 0.5, x, -y)),
        (lambda x, y, v: tc.sum(x, axis=0), lambda x, y, v: x.sum(0)),
        (lambda x, y, v: tc.max(x * y, axis=1), lambda x, y, v: (x * y).max(1)),
        (lambda x, y, v: tc.min(x), lambda x, y, v: np.asarray(x.min())),
        (lambda x, y, v: tc.mean(x, axis=1, keepdims=True),
         lambda x, y, v: x.mean(1, keepdims=True)),
        (lambda x, y, v: tc.var(x, axis=0, correction=1), lambda x, y, v: x.var(0, ddof=1)),
        (lambda x, y, v: tc.std(x), lambda x, y, v: np.asarray(x.std())),
        (lambda x, y, v: x - tc.mean(x, axis=0), lambda x, y, v: x - x.mean(0)),
        (lambda x, y, v: x.T @ y, lambda x, y, v: x.T @ y),
        (lambda x, y, v: x @ v, lambda x, y, v: x @ v),
        (lambda x, y, v: v @ v, lambda x, y, v: np.asarray(v @ v)),
        (lambda x, y, v: tc.tensordot(x, y, axes=([0], [0])),
         lambda x, y, v: np.tensordot(x, y, ([0], [0]))),
        (lambda x, y, v: tc.vecdot(x, y), lambda x, y, v: (x * y).sum(-1)),
        (lambda x, y, v: tc.einsum("ij,ij->i", x, y), lambda x, y, v: np.einsum("ij,ij->i", x, y)),
        (lambda x, y, v: tc.permute_dims(x[:, :, None] * y[:, None, :], (2, 0, 1)),
         lambda x, y, v: np.transpose(x[:, :, None] * y[:, None, :], (2, 0, 1))),
        (lambda x, y, v: tc.sum(x[:, None, :] - y[None, :5, :], axis=2),
         lambda x, y, v: (x[:, None, :] - y[None, :5, :]).sum(2)),
        (lambda x, y, v: tc.reshape(x, (6, 40)), lambda x, y, v: x.reshape(6, 40)),
        (lambda x, y, v: tc.reshape(x[:1], (6,)), lambda x, y, v: x[:1].reshape(6)),
        (lambda x, y, v: tc.concat([x, y], axis=1), lambda x, y, v: np.concatenate([x, y], 1)),
        (lambda x, y, v: tc.stack([x, y]), lambda x, y, v: np.stack([x, y])),
        (lambda x, y, v: x[3:30:4, ::-2], lambda x, y, v: x[3:30:4, ::-2]),
        (lambda x, y, v: x[5], lambda x, y, v: x[5]),
        (lambda x, y, v: tc.argmax(x, axis=1), lambda x, y, v: x.argmax(1)),
        (lambda x, y, v: tc.argmin(x), lambda x, y, v: np.asarray(x.argmin())),
        (lambda x, y, v: tc.astype(x * 10, tc.int32) % 3,
         lambda x, y, v: (x * 10).astype(np.int32) % 3),
        (lambda x, y, v: tc.sum(x > 0.5, axis=0), lambda x, y, v: (x > 0.5).sum(0)),
        (lambda x, y, v: tc.any(x > 0.99), lambda x, y, v: np.asarray((x > 0.99).any())),
        (lambda x, y, v: tc.linalg.solve(x.T @ x, v),
         lambda x, y, v: np.linalg.solve(x.T @ x, v)),
        (lambda x, y, v: tc.linalg.inv(x.T @ x + tc.eye(6)),
         lambda x, y, v: np.linalg.inv(x.T @ x + np.eye(6))),
        (lambda x, y, v: tc.cumulative_sum(v), lambda x, y, v: np.cumsum(v)),
        (lambda x, y, v: tc.sort(x, axis=0), lambda x, y, v: np.sort(x, 0)),
        (lambda x, y, v: tc.clip(x, 0.2, 0.8), lambda x, y, v: np.clip(x, 0.2, 0.8)),
    ],
)
def test_results_equal_numpy(build, reference) -> None:
    x, y, v = tc.asarray(X), tc.asarray(Y), tc.asarray(V)
    close(build(x, y, v), reference(X, Y, V))


def test_nothing_runs_until_a_value_is_needed() -> None:
    x = tc.asarray(X)
    tc.einsum("ij,jk->ik", np.ones((2, 2)), np.ones((2, 2)))  # a known last run
    marker = tc.last_stats()
    z = tc.exp(x) @ tc.asarray(V) + 1.0
    assert not z.evaluated
    assert tc.last_stats() == marker
    value = float(tc.sum(z))
    assert tc.last_stats()["backend"] == "local"
    assert value == pytest.approx((np.exp(X) @ V + 1.0).sum(), rel=1e-12)


def test_element_wise_chains_fuse_into_their_reduction() -> None:
    x = tc.asarray(X)
    m = tc.mean(x, axis=0)
    centred = tc.sum((x - m) ** 2, axis=0)
    # the mean, then one statement for subtract, square and sum together, then nothing else
    assert statements(centred) == 2
    close(centred, ((X - X.mean(0)) ** 2).sum(0))
    # a chain of element-wise operations is one statement
    assert statements(tc.tanh(x * 2 + 1) - tc.exp(-x) / 3) == 1


def test_a_transpose_read_twice_is_never_materialised() -> None:
    x, v = tc.asarray(X), tc.asarray(V[:6])
    p = tc.exp(x @ v)
    both = x.T @ p + x.T @ (p * p)
    statements = lower_graph([both._expr]).unrolled.statements  # noqa: SLF001
    kinds = [s.text.split(" = ")[1].split("(")[0] for s in statements]
    assert "permute" not in kinds
    close(both, X.T @ np.exp(X @ V) + X.T @ np.exp(X @ V) ** 2)


def test_transposes_are_free_and_contractions_stay_products() -> None:
    x, y = tc.asarray(X), tc.asarray(Y)
    product = x.T @ y
    lowered = lower_graph([product._expr])  # noqa: SLF001
    (statement,) = lowered.unrolled.statements
    assert statement.operands == ("x0", "x1")
    product = statement.program.output.x  # ReduceByKey(+, Map(#0 * #1, Join(x0, x1)))
    assert is_product_of_args(product.fn, 2)
    # x.T is read as x with its axes renamed: the contracted index first, no copy
    assert [scan.indices for scan in product.x.inputs] == [("i1", "i0"), ("i1", "i2")]


def test_common_subexpressions_are_computed_once() -> None:
    x, v = tc.asarray(X), tc.asarray(V)
    a = tc.exp(x) @ v
    b = tc.exp(x) @ v
    both = a + b
    assert statements(both) == statements(a) + 1
    close(both, 2 * (np.exp(X) @ V))


def test_compute_evaluates_several_arrays_in_one_program() -> None:
    x = tc.asarray(X)
    shared = tc.exp(x)
    first, second = tc.sum(shared, axis=0), tc.max(shared, axis=1)
    tc.compute(first, second)
    assert first.evaluated and second.evaluated
    assert tc.last_stats()["statements_run"] == 2  # exp is recomputed in each reduction
    close(first, np.exp(X).sum(0))
    close(second, np.exp(X).max(1))


def test_a_statement_value_is_kept_for_the_next_program_reading_it() -> None:
    x, v = tc.asarray(X), tc.asarray(V)
    raw = x @ v  # a contraction statement inside the first program
    loss = tc.sum(tc.log1p(tc.exp(raw)))
    close(loss, np.log1p(np.exp(X @ V)).sum())
    assert raw.evaluated  # kept: a node still referred to
    gradient = x.T @ (1.0 / (1.0 + tc.exp(-raw)))  # reads raw's value: one statement
    close(gradient, X.T @ (1.0 / (1.0 + np.exp(-(X @ V)))))
    assert tc.last_stats()["statements_run"] == 2  # the element-wise part, then X^T @ it


def test_a_long_shared_expression_is_stored_once_not_recomputed() -> None:
    x = tc.asarray(X)
    shared = tc.exp(tc.sin(tc.cos(tc.exp(x) + 1.0) * 2.0) - 3.0)  # 7 element-wise operations
    first, second = tc.sum(shared, axis=0), tc.max(shared, axis=1)
    tc.compute(first, second)
    assert tc.last_stats()["statements_run"] == 3
    expected = np.exp(np.sin(np.cos(np.exp(X) + 1.0) * 2.0) - 3.0)
    close(first, expected.sum(0))
    close(second, expected.max(1))


def test_a_loop_plans_each_statement_once() -> None:
    w = tc.zeros(6)
    x = tc.asarray(X)
    for _ in range(3):
        w = (w - 0.1 * (x.T @ (x @ w - 1.0))).compute()
    misses = evaluate.RUNNER.plans.misses
    for _ in range(3):
        w = (w - 0.1 * (x.T @ (x @ w - 1.0))).compute()
    assert evaluate.RUNNER.plans.misses == misses
    expected = np.zeros(6)
    for _ in range(6):
        expected = expected - 0.1 * (X.T @ (X @ expected - 1.0))
    close(w, expected)


def test_a_loop_lowers_each_program_once_and_binds_its_new_values() -> None:
    def program(x, w, scale=0.1):
        raw = x @ w
        return tc.sum(tc.log1p(tc.exp(raw)) * scale), x.T @ (raw - 1.0)

    x, w = tc.asarray(X), tc.asarray(V)
    first = lower_graph([a._expr for a in program(x, w)])
    again = lower_graph([a._expr for a in program(tc.asarray(X * 2), tc.asarray(V + 1))])
    assert again.unrolled is first.unrolled  # the lowering is reused, not built again
    assert again.inputs["x0"] is not first.inputs["x0"]  # ... with the new values bound
    for x_value, w_value in ((X, V), (X * 2, V + 1), (X[::-1].copy(), -V)):
        loss, gradient = program(tc.asarray(x_value), tc.asarray(w_value))
        tc.compute(loss, gradient)
        raw = x_value @ w_value
        close(loss, (np.log1p(np.exp(raw)) * 0.1).sum())
        close(gradient, x_value.T @ (raw - 1.0))
    x = tc.asarray(X)
    other_scalar = lower_graph([a._expr for a in program(x, w, scale=0.2)])
    shared_leaf = lower_graph([a._expr for a in program(x, tc.asarray(X[0]))])
    two_leaves = lower_graph([(x.T @ tc.asarray(X * 3))._expr])
    one_leaf = lower_graph([(x.T @ x)._expr])  # the same leaf twice: another graph
    assert other_scalar.unrolled is not first.unrolled
    assert shared_leaf.unrolled is first.unrolled
    assert one_leaf.unrolled is not two_leaves.unrolled
    assert len(one_leaf.inputs) == 1 and len(two_leaves.inputs) == 2
    close(x.T @ tc.asarray(X * 3), X.T @ (X * 3))
    close(x.T @ x, X.T @ X)
    later = deferred(lambda a: a * 2, (x._expr,), x.shape, x.dtype, "double")
    assert lower_graph([wrap(later).sum()._expr]).unrolled is not \
        lower_graph([wrap(later).sum()._expr]).unrolled  # a deferred node: lowered afresh


def test_numpy_functions_stay_on_tensorc() -> None:
    x = tc.asarray(X)
    for result in (np.exp(x), np.sum(x, axis=0), np.einsum("ij,j->i", x, V),
                   np.tensordot(x, x, axes=([0], [0])), np.matmul(x.T, x), x + np.ones(6)):
        assert isinstance(result, tc.Array)
    close(np.mean(np.exp(x), axis=0), np.exp(X).mean(0))
    assert isinstance(np.asarray(x), np.ndarray)


def test_numpy_functions_without_a_tensorc_meaning_raise() -> None:
    x = tc.asarray(X)
    with pytest.raises(tc.UnsupportedError, match="numpy.fft.fft is not supported|numpy.fft"):
        np.fft.fft(x)
    with pytest.raises(tc.UnsupportedError, match="numpy.add.reduce is not supported"):
        np.add.reduce(x)
    # nonzero's shape depends on the data: a synchronisation point (tests/test_data_dependent.py)
    for found, expected in zip(tc.nonzero(x), np.nonzero(X), strict=True):
        np.testing.assert_array_equal(found.numpy(), expected)


def test_bad_input_gets_clear_errors() -> None:
    x = tc.asarray(X)
    with pytest.raises(tc.ShapeError, match="do not broadcast"):
        _ = x + tc.ones(5)
    with pytest.raises(tc.ShapeError, match="do not align"):
        _ = x @ x
    with pytest.raises(tc.AxisError, match="axis 2 is out of bounds"):
        tc.sum(x, axis=2)
    with pytest.raises(tc.LinAlgError, match="must be square"):
        tc.linalg.inv(x)
    with pytest.raises(tc.ShapeError, match="cannot assign a value of shape"):
        x[0, :] = tc.ones(5)
    with pytest.raises(IndexError, match="boolean index did not match"):
        _ = x[tc.ones(7, dtype=tc.bool)]
    with pytest.raises(tc.TypeCheckError, match="only a 0-d"):
        float(x)


def test_namespace_protocol() -> None:
    x = tc.ones((2, 3), dtype=tc.float32)
    assert x.__array_namespace__() is tc
    assert tc.__array_api_version__ == "2024.12"
    assert x.dtype == tc.float32 and x.device == "cpu"
    assert (x + 1).dtype == tc.float32 and (x + 1.5).dtype == tc.float32
    assert tc.result_type(tc.int32, tc.float32) == tc.float64
    assert x.mT.shape == (3, 2) and x.T.shape == (3, 2)
    assert bool(tc.all(x == 1))


def test_explain_shows_program_plan_and_statistics(golden) -> None:
    x = tc.asarray(X)
    z = tc.sum((x - 0.5) ** 2, axis=0)
    program = z.explain().split("-- plan")[0].rstrip()
    golden("lazy_explain_program", program)
    z.compute()
    text = z.explain()
    assert "-- statistics of the run" in text and '"backend": "local"' in text


def test_local_random_is_blocked_like_ray_random() -> None:
    a = tc.random((8, 6), block_shape=(4, 3), seed=5).numpy()
    rng = np.random.default_rng([5, 1, 1])
    np.testing.assert_array_equal(a[4:8, 3:6], rng.random((4, 3)))


def test_a_long_chain_of_shared_expressions_lowers_in_linear_time() -> None:
    """Each step reads x three times; common-subexpression keys stay flat, so 40 steps
    lower to 39 statements at once (nested keys made this exponential in the depth)."""
    data = np.linspace(0.0, 1.0, 50)
    x, ref = tc.asarray(data), data
    for _ in range(40):
        x, ref = x - 0.1 * (x * x - 2.0), ref - 0.1 * (ref * ref - 2.0)
    close(x, ref)
    assert tc.last_stats()["statements_run"] == 39


# -- calls that used to evaluate their operands at call time: nothing runs until needed --
def _fresh_marker():
    """Run a known program and return its statistics (what no later call may replace)."""
    tc.einsum("ij,jk->ik", np.ones((2, 2)), np.ones((2, 2)))
    return tc.last_stats()


def test_asarray_with_a_blocking_keeps_a_lazy_array_lazy() -> None:
    x = tc.asarray(X) * 2.0
    marker = _fresh_marker()
    blocked = tc.asarray(x, block_shape=(16, 3))
    gridded = tc.asarray(x + 1, grid=(2, 2), dtype=np.float32)
    assert not blocked.evaluated and not gridded.evaluated and not x.evaluated
    assert tc.last_stats() == marker
    close(blocked, X * 2.0)
    close(gridded, (X * 2.0 + 1).astype(np.float32))


def test_large_solve_and_inv_stay_lazy_until_a_value_is_needed() -> None:
    from tensorc.lazy.linalg import WHOLE_EDGE

    n = WHOLE_EDGE + 8
    rng = np.random.default_rng(11)
    a_value = rng.random((n, n)) + n * np.eye(n)
    b_value = rng.random((n, 2))
    a, b = tc.asarray(a_value) * 1.0, tc.asarray(b_value) + 0.0
    marker = _fresh_marker()
    x = tc.linalg.solve(a, b)
    v = tc.linalg.solve(a, b[:, 0])
    inverse = tc.linalg.inv(a)
    checked = tc.sum(x, axis=0)  # a later operation on the lazy result
    assert not any(t.evaluated for t in (a, b, x, v, inverse, checked))
    assert tc.last_stats() == marker
    assert x.shape == (n, 2) and v.shape == (n,) and inverse.shape == (n, n)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a_value, b_value), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(v), np.linalg.solve(a_value, b_value[:, 0]),
                               rtol=1e-9)
    np.testing.assert_allclose(np.asarray(checked), np.linalg.solve(a_value, b_value).sum(0),
                               rtol=1e-9)
    np.testing.assert_allclose(np.asarray(inverse), np.linalg.inv(a_value), rtol=1e-9,
                               atol=1e-12)
    assert x.dtype == np.asarray(x).dtype == np.float64


def test_take_with_an_index_array_and_meshgrid_stay_lazy() -> None:
    x = tc.asarray(X) + 1.0
    indices = tc.asarray(np.array([5, 0, -1, 2])) % 6
    u, w = tc.asarray(V) * 2.0, tc.asarray(np.arange(3)) + 1
    marker = _fresh_marker()
    rows = tc.take(x, tc.asarray(np.array([3, -1, 0])) + 0, axis=0)
    columns = tc.take(x, indices, axis=-1)
    flat = tc.take(u, indices)
    grids = tc.meshgrid(u, w) + tc.meshgrid(u, w, np.arange(2.0), indexing="ij")
    assert not any(t.evaluated for t in (x, indices, u, w, rows, columns, flat, *grids))
    assert tc.last_stats() == marker
    close(rows, np.take(X + 1.0, [3, -1, 0], axis=0))
    close(columns, np.take(X + 1.0, np.array([5, 0, -1, 2]) % 6, axis=1))
    close(flat, np.take(V * 2.0, np.array([5, 0, -1, 2]) % 6))
    expected = (np.meshgrid(V * 2.0, np.arange(3) + 1)
                + np.meshgrid(V * 2.0, np.arange(3) + 1, np.arange(2.0), indexing="ij"))
    assert len(grids) == len(expected)
    for got, want in zip(grids, expected, strict=True):
        close(got, want)


def test_repeat_evaluates_only_counts_it_needs_for_its_shape() -> None:
    """The result's length is the counts' sum (a data-dependent shape): an Array of counts
    is read at call time, ``x`` stays lazy; already evaluated counts run no program."""
    x = tc.asarray(V) + 1.0
    counts = tc.asarray(np.array([1, 0, 2, 1, 3, 1]))
    marker = _fresh_marker()
    repeated = tc.repeat(x, counts)
    assert not x.evaluated and not repeated.evaluated and tc.last_stats() == marker
    assert repeated.shape == (8,)
    close(repeated, np.repeat(V + 1.0, [1, 0, 2, 1, 3, 1]))


def test_every_node_kind_is_lowered_and_an_evaluated_node_becomes_a_leaf() -> None:
    """``NodeKind`` is closed: the lowering lists every member, one graph holding a node of
    every kind lowers and evaluates to numpy's values, and evaluation turns each node into a
    leaf holding its value (operands released), shape and dtype unchanged."""
    assert set(LOWERED_AS) == set(NodeKind)
    x = tc.asarray(X)
    roots = [
        tc.astype(tc.sum(tc.exp(x), axis=0), tc.float32),  # leaf, map, reduce, cast
        x.T @ x,  # permute, contract
        tc.squeeze(tc.expand_dims(tc.asarray(V), axis=0), axis=0) + 1.0,  # expand, squeeze
        tc.sort(x, axis=0),  # whole
        wrap(deferred(lambda v: v * 2.0, (x._expr,), x.shape, x.dtype, "double")),  # noqa: SLF001
    ]
    nodes = [r._expr for r in roots]  # noqa: SLF001
    assert {node.kind for node in post_order(nodes)} == set(NodeKind)
    lower_graph(nodes)  # the deferred node stands as an input, as in explain()
    tc.compute(*roots)
    expected = [np.exp(X).sum(0).astype(np.float32), X.T @ X, V + 1.0, np.sort(X, axis=0),
                X * 2.0]
    for root, node, want in zip(roots, nodes, expected, strict=True):
        assert node.kind is NodeKind.LEAF and node.args == () and node.op is None
        assert node.shape == want.shape and node.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(root), want, rtol=1e-6)


def test_array_methods_reach_the_chapters_and_namespace_through_the_registry() -> None:
    """``tensorc/lazy/__init__.py`` binds the chapters ``Array``'s methods call and
    ``tensorc/__init__.py`` registers itself (``tensorc.lazy.namespace``)."""
    assert namespace.chapters is not None
    assert namespace.chapters.indexing is tc.lazy.indexing
    assert namespace.get_namespace() is tc
    assert tc.asarray(V).__array_namespace__() is tc
