"""The public API: plans, explain golden files, task counts, caching, stats, error messages."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.codegen.taskgraph import APPLY, LOAD, PAIR, REDUCE

MISSION = {
    "mttkrp_ijk_if_jf": ("ijk,if,jf->if", [(256, 256, 256), (256, 100), (256, 100)]),
    "mttkrp_ijk_jf_kf": ("ijk,jf,kf->if", [(256, 256, 256), (256, 100), (256, 100)]),
    "double_contraction": ("ijk,jkf->if", [(256, 256, 256), (256, 256, 100)]),
    "matmul": ("ik,kj->ij", [(2048, 2048), (2048, 2048)]),
    "xtx": ("ki,kj->ij", [(1_000_000, 64), (1_000_000, 64)]),
}


@pytest.mark.parametrize("name", sorted(MISSION))
def test_explain_of_the_benchmark_expressions_matches_golden(name, golden):
    subscripts, shapes = MISSION[name]
    plan = tc.plan(subscripts, *shapes, workers=2, memory_limit="16GB")
    golden(f"explain_{name}", plan.explain())


def _tasks_reading(graph, operand):
    loads = {i for i, t in enumerate(graph.tasks) if t.kind == LOAD and t.source[0] == operand}
    return loads, [t for t in graph.tasks if set(t.inputs) & loads]


@pytest.mark.parametrize("grid,blocks", [(None, 1), ({"i": 2, "j": 2}, 4), ({"k": 3}, 3)])
def test_reduce_pushdown_reads_x_once_in_mttkrp(grid, blocks):
    options = {} if grid is None else {"grid": grid}
    shapes = (256, 256, 256), (256, 100), (256, 100)
    plan = tc.plan("ijk,if,jf->if", *shapes, workers=2, **options)
    loads, readers = _tasks_reading(plan.graph, 0)
    # every block of X is read by exactly one task, and that task only sums k away
    assert len(readers) == len(loads) == blocks
    assert {t.kind for t in readers} == {APPLY}
    assert sum(t.flops for t in readers) == 256**3
    assert sum(plan.graph.tasks[i].nbytes for i in loads) == 256**3 * 8


def test_without_pushdown_the_join_would_read_x_with_b_and_c():
    # ijk,jkf: no private index, so X goes straight into the pair tasks
    plan = tc.plan("ijk,jkf->if", (64, 64, 64), (64, 64, 10), grid={"i": 2})
    _, readers = _tasks_reading(plan.graph, 0)
    assert {t.kind for t in readers} == {PAIR}


def test_task_counts_follow_the_grid():
    plan = tc.plan("ik,kj->ij", (40, 30), (30, 20), grid={"i": 4, "k": 3, "j": 2})
    counts = plan.graph.counts()
    assert counts[LOAD] == 4 * 3 + 3 * 2
    assert counts[PAIR] == 4 * 3 * 2
    assert counts[REDUCE] == 4 * 2
    assert plan.stats["tasks"] == sum(counts.values())


def test_plan_accepts_arrays_and_shapes_alike():
    a, b = np.ones((8, 6)), np.ones((6, 4))
    assert tc.plan("ik,kj->ij", a, b).explain() == tc.plan("ik,kj->ij", (8, 6), (6, 4)).explain()


def test_repeated_calls_reuse_the_plan():
    tc.clear_plan_cache()
    a, b = np.ones((8, 6)), np.ones((6, 4))
    tc.einsum("ik,kj->ij", a, b)
    assert tc.last_stats()["plan_cached"] is False
    tc.einsum("ik,kj->ij", a + 1, b)
    stats = tc.last_stats()
    assert stats["plan_cached"] is True
    assert stats["tasks"] == 3


def test_last_stats_reports_the_executed_call():
    a = np.random.default_rng(0).random((64, 32))
    result = tc.einsum("ki,kj->ij", a, a, grid={"k": 4})
    np.testing.assert_allclose(result, a.T @ a)
    stats = tc.last_stats()
    assert stats["tasks"] == 2 * 4 + 4 + 1
    assert stats["reduce_tasks"] == 1
    assert stats["backend"] == "local"
    assert stats["measured_inter_node_bytes"] is None
    assert stats["run_seconds"] > 0


ERRORS = [
    (
        ("ij,jk", (2, 3), (4, 5)),
        tc.ShapeError,
        "Size of label 'j' for operand 1 (4) does not match previous terms (3); operand shapes "
        "are (2, 3), (4, 5)",
    ),
    (
        ("ij,jk->ik", (2, 3)),
        tc.ParseError,
        "fewer operands provided to einstein sum function than specified in the subscripts "
        "string: 2 term(s) in 'ij,jk->ik', 1 operand(s) given",
    ),
    (
        ("ij", (2, 3), (3, 4)),
        tc.ParseError,
        "more operands provided to einstein sum function than specified in the subscripts "
        "string: 1 term(s) in 'ij', 2 operand(s) given",
    ),
    (
        ("ij->ik", (2, 3)),
        tc.ParseError,
        "einstein sum subscripts string included output subscript 'k' which never appeared in "
        "an input: 'ij->ik'",
    ),
    (
        ("ijk", (2, 3)),
        tc.ParseError,
        "einstein sum subscripts string contains too many subscripts for operand 0: 'ijk' names "
        "3 dimension(s), the operand has shape (2, 3)",
    ),
    (
        ("i", (2, 3)),
        tc.ParseError,
        "operand 0 has more dimensions than subscripts given in einstein sum: 'i' names 1 "
        "dimension(s), the operand has shape (2, 3); use '...' to broadcast the extra dimensions",
    ),
    (
        ("i%", (2, 3)),
        tc.ParseError,
        "invalid subscript '%' in einstein sum subscripts string, subscripts must be letters",
    ),
    (
        ("ij->ii", (2, 3)),
        tc.ParseError,
        "einstein sum subscripts string includes output subscript 'i' multiple times: 'ij->ii'",
    ),
    (
        ("ij->i->j", (2, 3)),
        tc.ParseError,
        "einstein sum subscripts string includes '->' more than once: 'ij->i->j'",
    ),
    (
        ("ii->i", (2, 3)),
        tc.ShapeError,
        "dimensions in single operand for collapsing index 'i' don't match (2 != 3) in operand 0 "
        "of shape (2, 3)",
    ),
    (
        ("..i", (2, 3)),
        tc.ParseError,
        "einstein sum subscripts string contains a '.' that is not part of an ellipsis ('...') "
        "in operand 0",
    ),
    (
        ("...,...", (2, 3), (4, 4, 3)),
        tc.ShapeError,
        "Size of dimension 1 of the ellipsis ('...') for operand 1 (4) does not match previous "
        "terms (2); operand shapes are (2, 3), (4, 4, 3)",
    ),
    (
        ("...i->i", (2, 3)),
        tc.ParseError,
        "output has more dimensions than subscripts given in einstein sum, but no '...' ellipsis "
        "provided to broadcast the extra dimensions: '...i->i'",
    ),
]


@pytest.mark.parametrize("call,kind,message", ERRORS, ids=[e[0][0] for e in ERRORS])
def test_einsum_error_messages(call, kind, message):
    subscripts, *shapes = call
    operands = [np.ones(s) for s in shapes]
    with pytest.raises(kind) as info:
        tc.einsum(subscripts, *operands)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, tc.TensorcError)


OPTION_ERRORS = [
    ({"grid": {"q": 2}}, "grid names index 'q' which is not used (indices: i, j, k)"),
    ({"grid": {"i": 0}}, "grid['i'] must be a positive integer, got 0"),
    ({"grid": [(2, 2), (3, 2)]}, "grid disagrees on index 'j': 2 and 3; operands that share an "
     "index must share its blocking"),
    ({"grid": [(2, 2)]}, "grid gives 1 tuple(s) but the contraction has 2 operand(s)"),
    ({"grid": (2, 2)}, "grid[0] must be a tuple with one entry per index of operand 0 (ij), "
     "got 2; or give grid as a dict {index: int}"),
    ({"grid": {"i": 2}, "block_shape": {"i": 2}}, "give either grid= or block_shape=, not both"),
    (
        {"blocks": 3},
        "unknown plan option 'blocks'; tensorc.einsum takes grid, block_shape, workers, "
        "nodes, planner, node_memory, memory_limit",
    ),
    ({"memory_limit": "lots"}, "memory_limit must be bytes or a size such as '768MB' or "
     "'4GB', got 'lots'"),
    ({"memory_limit": 0}, "memory_limit must be a positive number of bytes or a size such as "
     "'4GB', got 0"),
    ({"optimize": [(0, 5)]}, "path step (0, 5) names positions outside 0..1 (or repeats one)"),
    ({"optimize": "fastest"}, "unknown optimize strategy 'fastest'"),
    ({"backend": "spark"}, "unknown backend 'spark'; choose one of local, ray (or None: the "
     "session's, see tc.init)"),
    ({"scheduler": "fifo"}, "unknown scheduler 'fifo'; choose one of lshs, round_robin, "
     "ray_default"),
]


@pytest.mark.parametrize("options,message", OPTION_ERRORS, ids=[m[:20] for _, m in OPTION_ERRORS])
def test_plan_option_errors(options, message):
    with pytest.raises(tc.PlanError) as info:
        tc.einsum("ij,jk", np.ones((2, 3)), np.ones((3, 4)), **options)
    assert str(info.value) == message


def test_dtype_refusals_are_type_errors_with_numpys_words():
    with pytest.raises(tc.TypeCheckError) as info:
        tc.einsum("i,i", np.ones(3), np.ones(3), dtype=np.int32)
    assert isinstance(info.value, TypeError)
    assert "according to the rule 'safe'" in str(info.value)
    with pytest.raises(tc.TypeCheckError, match="operand 0 has dtype <U1"):
        tc.einsum("i,i", np.array(["a"]), np.array(["b"]))


def test_out_of_the_wrong_shape_is_refused():
    with pytest.raises(tc.ShapeError, match=r"out has shape \(2,\) but einsum 'i,i' produces"):
        tc.einsum("i,i", np.ones(3), np.ones(3), out=np.empty(2))


TENSORDOT_ERRORS = [
    (((2, 3), (4, 5), 1), "shape-mismatch for sum: axis 1 of a has size 3 but axis 0 of b has "
     "size 4"),
    (((2, 3), (3, 5), ([0], [0, 1])), "shape-mismatch for sum: 1 axes of a against 2 of b"),
    (((2, 3), (3, 5), 3), "tensordot axes=3 but the operands have 2 and 2 dimensions"),
    (((2, 3), (3, 5), ([5], [0])), "axis 5 is out of bounds for a of dimension 2"),
]


@pytest.mark.parametrize(
    "call,message", TENSORDOT_ERRORS, ids=[m[:24] for _, m in TENSORDOT_ERRORS]
)
def test_tensordot_error_messages(call, message):
    a_shape, b_shape, axes = call
    with pytest.raises(tc.ShapeError) as info:
        tc.tensordot(np.ones(a_shape), np.ones(b_shape), axes=axes)
    assert str(info.value) == message


@pytest.mark.parametrize("grid", [None, {"i": 2, "k": 2}, {"i": 3}])
def test_out_that_overlaps_an_input_gets_numpys_answer(grid):
    rng = np.random.default_rng(8)
    a, b = rng.random((6, 6)), rng.random((6, 6))
    expected = a @ b
    options = {} if grid is None else {"grid": grid}
    result = tc.einsum("ij,jk->ik", a, b, out=a, workers=1, **options)
    assert result is a
    np.testing.assert_allclose(a, expected)
    c = rng.random((6, 6))
    transposed = c.T.copy()
    tc.einsum("ij->ji", c, out=c, grid={"i": 2})
    np.testing.assert_array_equal(c, transposed)


def test_the_path_explain_shows_is_the_path_that_runs():
    plan = tc.plan("ab,bc,cd->ad", (10, 500), (500, 400), (400, 8), grid={"c": 8})
    note = next(n for n in plan.notes if n.startswith("contraction-path"))
    kernels = [k for k in plan.graph.kernels if type(k).__name__ == "EinsumBlock"]
    if "fused join" in note:
        (kernel,) = [k for k in kernels if k.path is not None and len(k.path) == 2]
        assert f"path {kernel.path}:" in note
    else:
        assert all(len(k.path) == 1 for k in kernels)


def test_an_explicit_path_runs_as_given():
    shapes = (10, 50), (50, 40), (40, 8)
    plan = tc.plan("ab,bc,cd->ad", *shapes, optimize=["einsum_path", (0, 1), (0, 1)])
    assert "path [(0, 1), (0, 1)]" in "\n".join(plan.notes)


@pytest.mark.parametrize(
    "optimize", [("greedy", 10**6), ["optimal", 1e6], "dp", ["einsum_path", (0, 1)]]
)
def test_numpy_optimize_forms_are_accepted(optimize):
    a, b = np.ones((3, 4)), np.ones((4, 5))
    np.testing.assert_allclose(tc.einsum("ij,jk", a, b, optimize=optimize), a @ b)


@pytest.mark.parametrize("order", ["K", "A", "C", "F"])
@pytest.mark.parametrize("operand_order", ["C", "F"])
def test_result_order_follows_numpy(order, operand_order):
    rng = np.random.default_rng(9)
    a = np.asarray(rng.random((5, 4)), order=operand_order)
    b = np.asarray(rng.random((4, 3)), order=operand_order)
    expected = np.einsum("ij,jk->ik", a, b, order=order)
    result = tc.einsum("ij,jk->ik", a, b, order=order)
    assert result.flags.f_contiguous == expected.flags.f_contiguous
    assert result.flags.c_contiguous == expected.flags.c_contiguous


@pytest.mark.parametrize("axes", [-1, True, 0, np.int64(1)])
def test_tensordot_integer_axes_follow_numpy(axes):
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(tc.tensordot(a, b, axes=axes), np.tensordot(a, b, axes=axes))


def test_tensordot_axis_out_of_range_is_an_index_error_like_numpy():
    with pytest.raises(IndexError):
        np.tensordot(np.ones((2, 3)), np.ones((3, 5)), axes=([5], [0]))
    with pytest.raises(IndexError):
        tc.tensordot(np.ones((2, 3)), np.ones((3, 5)), axes=([5], [0]))


def test_debug_hook_logs_passes_and_dumps_the_plan(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("TENSORC_DEBUG", "3")
    monkeypatch.setenv("TENSORC_DUMP_DIR", str(tmp_path))
    tc.clear_plan_cache()
    plan = tc.plan("ijk,if,jf->if", (4, 5, 6), (4, 3), (5, 3))
    err = capsys.readouterr().err
    assert "[tensorc] pass reduce-pushdown:" in err
    assert "[tensorc] IR after fuse-maps:" in err
    assert "[tensorc] reduce-pushdown: summed private indices" in err
    dumped = tmp_path / f"plan-{plan.graph.name}.txt"
    assert dumped.read_text() == plan.explain() + "\n"


def test_a_ray_call_without_a_ray_session_says_how_to_connect_even_after_a_failed_init(
        monkeypatch):
    from tensorc import session

    if session.current().backend == "ray":
        pytest.skip("tc.init would end the shared Ray session")

    def failing(cluster):
        raise RuntimeError("calibration failed")

    monkeypatch.setattr(session, "calibrate_cluster", failing)
    monkeypatch.setattr(session, "connect", lambda address, nodes: object())
    monkeypatch.setattr(session, "disconnect", lambda cluster: None)
    with pytest.raises(RuntimeError, match="calibration failed"):
        tc.init(backend="ray")
    assert tc.session.current().backend == "local"
    with pytest.raises(tc.ExecutionError, match="no Ray cluster: call tc.init"):
        tc.einsum("ij->i", np.ones((2, 2)), backend="ray")
