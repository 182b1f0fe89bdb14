"""Codegen beyond einsum: element-wise maps, other monoids and merges lower to task graphs
whose results equal the reference interpreter's, for every blocking."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tensorc.codegen.lower import lower_to_tasks
from tensorc.codegen.taskgraph import LOAD, PAIR, REDUCE, TaskColumns
from tensorc.errors import IRVerificationError
from tensorc.ir.interpret import interpret
from tensorc.ir.nodes import (
    Arg,
    Const,
    Function,
    InputDecl,
    Join,
    Map,
    Merge,
    OpCall,
    ReduceByKey,
    Scan,
)
from tensorc.ir.verify import verify
from tensorc.planning.blocking import choose_blocking
from tensorc.planning.pricing import planning_context
from tensorc.runtime.task_pool import TaskPool

SIZES = (("i", 5), ("j", 4), ("k", 6))
DECLS = (
    InputDecl("A", (5, 6), "float64"),
    InputDecl("B", (6, 4), "float64"),
    InputDecl("C", (5, 4), "float64"),
)
A, B, C = Scan("A", ("i", "k")), Scan("B", ("k", "j")), Scan("C", ("i", "j"))
MIN_PLUS = ReduceByKey(
    "min", Map(OpCall("add", (Arg(0), Arg(1))), Join((A, B), ("k",)), ("i", "k", "j")), ("i", "j")
)
PROGRAMS = {
    "elementwise-transpose": Map(OpCall("sub", (Arg(0), Const(1.5))), A, ("k", "i")),
    "min-plus-step": MIN_PLUS,
    "max-of-products": ReduceByKey(
        "max", Map(OpCall("mul", (Arg(0), Arg(1))), Join((A, B), ("k",)), ("i", "k", "j")), ("i",)
    ),
    "merge-min": Merge(C, MIN_PLUS, "min"),
}
GRIDS = [None, {"i": 2}, {"i": 2, "k": 3, "j": 2}, {"k": 6}]


def _run(program: Function, grid, arrays):
    blocking = choose_blocking(program, planning_context(workers=2, grid=grid))
    graph = lower_to_tasks(program, blocking)
    graph.verify()
    operands = [arrays[d.name] for d in program.inputs]
    return graph, TaskPool(2).run(graph, None, operands)


@pytest.mark.parametrize("grid", GRIDS, ids=str)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_lowered_program_equals_the_interpreter(name, grid):
    program = verify(Function(DECLS, SIZES, PROGRAMS[name], "float64"))
    rng = np.random.default_rng(11)
    arrays = {d.name: rng.standard_normal(d.shape) for d in DECLS}
    _, result = _run(program, grid, arrays)
    np.testing.assert_allclose(result, interpret(program, arrays), rtol=1e-12)


def test_min_plus_reduces_partials_with_min_not_sum():
    program = verify(Function(DECLS, SIZES, MIN_PLUS, "float64"))
    rng = np.random.default_rng(12)
    arrays = {d.name: rng.standard_normal(d.shape) for d in DECLS}
    graph, result = _run(program, {"k": 3}, arrays)
    assert graph.counts()[REDUCE] == 1 and graph.counts()[PAIR] == 3
    expected = np.min(arrays["A"][:, :, None] + arrays["B"][None, :, :], axis=1)
    np.testing.assert_allclose(result, expected)


def test_task_keys_are_deterministic_and_loads_precede_their_first_use():
    program = verify(Function(DECLS, SIZES, MIN_PLUS, "float64"))
    ctx = planning_context(workers=2, grid={"i": 2, "k": 3})
    first = lower_to_tasks(program, choose_blocking(program, ctx))
    second = lower_to_tasks(program, choose_blocking(program, ctx))
    assert [t.key for t in first.tasks] == [t.key for t in second.tasks]
    assert first.format() == second.format()
    consumers = first.consumers()
    for index, task in enumerate(first.tasks):
        if task.kind == LOAD and consumers[index]:
            assert min(consumers[index]) > index
            assert all(t.kind == LOAD for t in first.tasks[index:min(consumers[index])])


def test_task_records_are_built_on_first_read_and_agree_with_the_columns():
    program = verify(Function(DECLS, SIZES, MIN_PLUS, "float64"))
    graph = lower_to_tasks(program, choose_blocking(program, planning_context(
        workers=2, grid={"i": 2, "k": 3, "j": 2})))
    graph.verify()
    summary = graph.summary()
    assert not graph.tasks.made  # the columns answered: nothing built yet
    assert len(graph.tasks) == summary["tasks"] == 2 * 3 + 3 * 2 + 12 + 4
    columns = graph.columns()
    derived = TaskColumns.of(list(graph.tasks))
    assert graph.tasks.made
    for name in ("kind", "nbytes", "flops", "indptr", "inputs", "kernel"):
        np.testing.assert_array_equal(getattr(derived, name), getattr(columns, name), name)


def test_a_task_calling_an_unknown_kernel_is_refused_by_its_key():
    program = verify(Function(DECLS, SIZES, MIN_PLUS, "float64"))
    graph = lower_to_tasks(program, choose_blocking(program, planning_context(
        workers=2, grid={"k": 3})))
    graph.columns().kernel[-1] = len(graph.kernels)
    with pytest.raises(IRVerificationError) as info:
        graph.verify()
    assert str(info.value) == (f"task {graph.tasks[-1].key} calls unknown kernel 4")
    assert graph.tasks[-1].key[0].startswith("reducebykey4.reduce-")


def test_a_graph_with_records_not_built_yet_pickles_with_its_records():
    import pickle

    program = verify(Function(DECLS, SIZES, MIN_PLUS, "float64"))
    graph = lower_to_tasks(program, choose_blocking(program, planning_context(
        workers=2, grid={"k": 3})))
    copied = pickle.loads(pickle.dumps(graph.tasks))
    assert type(copied) is list and len(copied) == len(graph.tasks) == 10
    assert [t.key for t in copied] == [t.key for t in graph.tasks]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128", "int64"])
@pytest.mark.parametrize(("keys", "output"), [
    ([("j", "f"), ("k", "f")], ("j", "k", "f")),  # a Khatri-Rao block: broadcasts
    ([("i", "j"), ("j",)], ("i", "j")),  # a row scaling: broadcasts
    ([("i", "j"), ("i", "j")], ("i", "j")),  # one shape: no broadcast
    ([("k", "f"), ("j", "f")], ("f", "j", "k")),  # broadcast into another axis order
    ([("i",), ("j",), ("k",)], ("i", "j", "k")),  # three operands
])
def test_a_product_step_equals_numpy_s_multiply_in_its_dtype(dtype, keys, output):
    from tensorc.codegen.kernels import EinsumBlock
    from tensorc.ir.semantics import align

    sizes = {"i": 5, "j": 6, "k": 7, "f": 3}
    rng = np.random.default_rng(9)
    blocks = [(rng.random(tuple(sizes[n] for n in key)) * 10).astype(dtype) for key in keys]
    product = EinsumBlock(list(keys), list(output), [tuple(range(len(keys)))], sizes)
    views = [align(b, k, output) for b, k in zip(blocks, keys, strict=True)]
    want = functools.reduce(np.multiply, views)
    got = product(*blocks)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    out = np.empty_like(want)
    assert product(*blocks, out=out) is out
    np.testing.assert_array_equal(out, want)


def test_a_product_step_of_two_dtypes_takes_numpy_s_result_type():
    from tensorc.codegen.kernels import EinsumBlock

    sizes = {"j": 6, "k": 7, "f": 3}
    rng = np.random.default_rng(10)
    b = rng.random((6, 3)).astype("float32")
    c = rng.integers(0, 9, (7, 3))
    got = EinsumBlock([("j", "f"), ("k", "f")], ["j", "k", "f"], [(0, 1)], sizes)(b, c)
    want = b[:, None, :] * c[None, :, :]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
