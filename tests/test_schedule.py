"""Cluster-state simulation and the schedulers (pure simulation: no Ray here)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.codegen.taskgraph import APPLY, LOAD, PAIR, REDUCE, Task, TaskGraph
from tensorc.errors import PlanError
from tensorc.placement.cluster_state import ClusterState
from tensorc.placement.layout import (
    block_cyclic_load_nodes,
    block_cyclic_node,
    block_cyclic_output_nodes,
    load_block_coords,
)
from tensorc.placement.schedule import SCHEDULERS, schedule
from tensorc.planning.lower_bound import communication_lower_bound

GRID = {"i": 4, "j": 4, "k": 4, "f": 1}


def _graph(tasks: list[Task], outputs: list[int]) -> TaskGraph:
    """A hand-built graph; each output block is a 1-element slice of a 1-d result."""
    return TaskGraph(
        name="hand",
        tasks=tasks,
        kernels=[None],
        outputs=[(t, (slice(k, k + 1),)) for k, t in enumerate(outputs)],
        output_shape=(len(outputs),),
        dtype=np.dtype("float64"),
        operand_names=("a",),
    )


def _task(kind: str, inputs: tuple[int, ...], nbytes: int, position: int = 0) -> Task:
    source = (0, (slice(position, position + 1),)) if kind == LOAD else None
    return Task((kind, position, inputs), kind, 0, inputs, (1,), nbytes, 0, source)


def _benchmark_graph(subscripts: str, n: int, f: int) -> TaskGraph:
    operands = subscripts.split("->")[0].split(",")
    sizes = {"i": n, "j": n, "k": n, "f": f}
    shapes = [tuple(sizes[c] for c in op) for op in operands]
    return tc.plan(subscripts, *shapes, grid=GRID).graph


def _retained_bytes(graph: TaskGraph) -> int:
    retained = {i for i, t in enumerate(graph.tasks) if t.kind == LOAD}
    retained |= {i for i, _ in graph.outputs}
    return sum(graph.tasks[i].nbytes for i in retained)


# -- the block-cyclic layout ----------------------------------------------------------------


def test_block_cyclic_node_is_row_major_over_the_node_grid():
    assert block_cyclic_node((0, 0, 5), (2, 2)) == 0
    assert block_cyclic_node((0, 1), (2, 2)) == 1
    assert block_cyclic_node((1, 0), (2, 2)) == 2
    assert block_cyclic_node((3, 3, 1), (2, 2)) == 3
    assert block_cyclic_node((6, 2), (4, 1)) == 2
    assert block_cyclic_node((), ()) == 0


def test_load_coords_come_from_the_block_slices():
    graph = _benchmark_graph("ijk,jf,kf->if", 64, 16)
    coords = load_block_coords(graph)
    x_blocks = sorted(c for p, c in coords.values() if p == 0)
    assert x_blocks == [(a, b, c) for a in range(4) for b in range(4) for c in range(4)]
    nodes = block_cyclic_load_nodes(graph, [(2, 2), (4, 1), (4, 1)])
    assert sorted(set(nodes.values())) == [0, 1, 2, 3]
    assert block_cyclic_output_nodes(graph, (4, 1)) == [0, 1, 2, 3]


# -- the cluster state ----------------------------------------------------------------------


def test_transition_copies_from_the_least_loaded_holder_and_frees_after_last_use():
    # blocks: 0 (load) on node 0, 1 (load) on node 2, 2 = f(0, 1), 3 = g(0, 2) (the output)
    state = ClusterState(3, [100, 10, 7, 5], [2, 1, 1, 0], retained=[0, 1, 3])
    state.run(0, (), 0)
    state.run(1, (), 2)
    state.run(2, (0, 1), 1)  # copies 100 B from node 0 and 10 B from node 2
    assert state.transfers[0][1:] == (0, 0, 1, 100)
    assert state.holder_nodes(0) == [0, 1]
    assert state.net_in == [0, 110, 0] and state.net_out == [100, 0, 10]
    # block 1 is retained: its copy on node 1 is dropped, its home copy stays
    assert state.holder_nodes(1) == [2]
    assert state.mem == [100, 100 + 7, 10]
    assert state.peak[1] == 117
    # block 0 is now on nodes 0 and 1; a copy to node 2 comes from node 1 (sent 0 so far)
    before = (list(state.mem), list(state.net_in), list(state.net_out), state.objective())
    cost = state.cost((0, 2), 5, 2)
    assert (list(state.mem), list(state.net_in), list(state.net_out)) == tuple(before[:3])
    state.run(3, (0, 2), 2)
    assert [t[1:] for t in state.transfers[-2:]] == [(0, 1, 2, 100), (2, 1, 2, 7)]
    assert state.objective() == cost
    assert state.holder_nodes(2) == []  # block 2 was freed: its only consumer ran
    assert state.holder_nodes(0) == [0]  # retained: back to its home copy only
    assert state.mem == [100, 0, 10 + 5]  # retained only: block 0 home, block 1, block 3


def test_cost_equals_objective_after_the_same_transition():
    graph = _benchmark_graph("ijk,jkf->if", 64, 16)
    loads = block_cyclic_load_nodes(graph, [(2, 2), (4, 1)])
    tasks = graph.tasks
    state = ClusterState(4, [t.nbytes for t in tasks], [len(c) for c in graph.consumers()])
    for index, task in enumerate(tasks):
        if task.kind == LOAD:
            state.run(index, (), loads[index])
    for index, task in enumerate(tasks):
        if task.kind == LOAD:
            continue
        node = (index * 7) % 4
        predicted = state.cost(task.inputs, task.nbytes, node)
        state.run(index, task.inputs, node)
        assert state.objective() == predicted


# -- LSHS by hand ---------------------------------------------------------------------------


def test_lshs_moves_the_small_block_to_the_big_one():
    # a (100 B) on node 0, b (10 B) on node 1, c = pair(a, b): on node 0 the objective is
    # peak 120 + in 10 + out 10 = 140; on node 1 it is 120 + 100 + 100 = 320
    graph = _graph([_task(LOAD, (), 100, 0), _task(LOAD, (), 10, 1), _task(PAIR, (0, 1), 10)], [2])
    result = schedule(graph, 2, load_nodes={0: 0, 1: 1})
    assert result.node_of == [0, 1, 0]
    assert [tuple(t) for t in result.transfers] == [(2, 1, 1, 0, 10)]
    assert result.memory_bytes == [120, 10]
    assert result.final_memory_bytes == [110, 10]  # b's cached copy on node 0 is dropped


def test_lshs_ties_go_to_the_lowest_node_and_layout_node_is_an_option():
    graph = _graph([_task(LOAD, (), 10, 0), _task(LOAD, (), 10, 1), _task(PAIR, (0, 1), 10)], [2])
    assert schedule(graph, 2, load_nodes={0: 0, 1: 1}).node_of[2] == 0
    # the output's layout node (2) is an option: node 0 costs peak 2 + in 0 + out 0 = 2,
    # node 2 costs peak 2 + in 1 + out 1 = 4; a heavy node 0 tips it the other way
    graph = _graph([_task(LOAD, (), 1, 0), _task(APPLY, (0,), 1)], [1])
    assert schedule(graph, 3, load_nodes={0: 0}, output_nodes=[2]).node_of[1] == 0
    tasks = [_task(LOAD, (), 1, 0), _task(LOAD, (), 50, 1), _task(APPLY, (0,), 40)]
    graph = _graph(tasks, [2])
    # 51 B resident on node 0: computing there costs peak 51 + 40 = 91; on the layout node
    # 2 it costs peak 51 (node 0 unchanged) + in 1 + out 1 = 53; node 1 is no option
    assert schedule(graph, 3, load_nodes={0: 0, 1: 0}, output_nodes=[2]).node_of[2] == 2


def test_reduce_folds_locally_first():
    # four partials, two made on each of two nodes: one block crosses the network
    tasks = [_task(LOAD, (), 8, k) for k in range(4)]
    tasks += [_task(APPLY, (k,), 8) for k in range(4)]
    tasks.append(_task(REDUCE, (4, 5, 6, 7), 8))
    graph = _graph(tasks, [8])
    loads = {0: 0, 1: 0, 2: 1, 3: 1}
    lshs = schedule(graph, 2, load_nodes=loads)
    assert lshs.node_of[4:8] == [0, 0, 1, 1]
    assert lshs.reduce_groups == {8: [(0, (4, 5)), (1, (6, 7))]}
    assert lshs.inter_node_bytes == 8
    assert [t.block >= len(tasks) for t in lshs.transfers] == [True]  # a local fold's result
    robin = schedule(graph, 2, "round_robin", load_nodes=loads)
    assert robin.reduce_groups == {}
    assert robin.inter_node_bytes > lshs.inter_node_bytes


def test_round_robin_and_ray_default_rules():
    tasks = [_task(LOAD, (), 100, 0), _task(LOAD, (), 10, 1)]
    tasks += [_task(PAIR, (0, 1), 5), _task(PAIR, (0, 1), 5), _task(PAIR, (0, 1), 5)]
    graph = _graph(tasks, [2, 3, 4])
    robin = schedule(graph, 2, "round_robin", load_nodes={0: 1, 1: 0})
    assert robin.node_of == [1, 0, 0, 1, 0] and robin.pinned
    ray = schedule(graph, 2, "ray_default", load_nodes={0: 1, 1: 0})
    assert ray.node_of == [1, 0, 1, 1, 1] and not ray.pinned


# -- errors ---------------------------------------------------------------------------------


def test_refusals_name_the_problem():
    graph = _graph([_task(LOAD, (), 8, 0), _task(APPLY, (0,), 8)], [1])
    with pytest.raises(PlanError, match="lshs, round_robin, ray_default"):
        schedule(graph, 2, "fifo", load_nodes={0: 0})
    with pytest.raises(PlanError, match="at least one node"):
        schedule(graph, 0, load_nodes={0: 0})
    with pytest.raises(PlanError, match="load task t0"):
        schedule(graph, 2, load_nodes={})
    with pytest.raises(PlanError, match="node 5 of 2"):
        schedule(graph, 2, load_nodes={0: 5})
    with pytest.raises(PlanError, match="output_nodes"):
        schedule(graph, 2, load_nodes={0: 0}, output_nodes=[0, 1])


# -- the benchmark contractions -------------------------------------------------------------

BENCHMARKS = [
    ("ijk,if,jf->if", 256, 100, (2, 2), (4, 1)),
    ("ijk,if,jf->if", 128, 16, (4, 1), (4, 1)),
    ("ijk,jf,kf->if", 256, 16, (2, 2), (2, 2)),
    ("ijk,jf,kf->if", 128, 16, (2, 2), (4, 1)),
    ("ijk,jkf->if", 256, 100, (2, 2), (4, 1)),
    ("ijk,jkf->if", 64, 100, (4, 1), (4, 1)),
    ("ijk,jkf->if", 256, 16, (2, 2), (2, 2)),
]


def _layouts(graph: TaskGraph, tensor_grid, matrix_grid):
    grids = [tensor_grid] + [matrix_grid] * (len(graph.operand_names) - 1)
    return block_cyclic_load_nodes(graph, grids), block_cyclic_output_nodes(graph, matrix_grid)


@pytest.mark.parametrize(("subscripts", "n", "f", "tensor_grid", "matrix_grid"), BENCHMARKS)
def test_lshs_against_round_robin_and_ray_default(subscripts, n, f, tensor_grid, matrix_grid):
    graph = _benchmark_graph(subscripts, n, f)
    loads, outputs = _layouts(graph, tensor_grid, matrix_grid)
    result = {
        name: schedule(graph, 4, name, load_nodes=loads, output_nodes=outputs)
        for name in SCHEDULERS
    }
    lshs = result["lshs"]
    assert lshs.inter_node_bytes * 2 <= result["round_robin"].inter_node_bytes
    assert lshs.max_node_recv_bytes <= result["ray_default"].max_node_recv_bytes


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize(("subscripts", "n", "f", "tensor_grid", "matrix_grid"), BENCHMARKS[::2])
def test_schedule_invariants(scheduler, subscripts, n, f, tensor_grid, matrix_grid):
    graph = _benchmark_graph(subscripts, n, f)
    loads, outputs = _layouts(graph, tensor_grid, matrix_grid)
    first = schedule(graph, 4, scheduler, load_nodes=loads, output_nodes=outputs)
    again = schedule(graph, 4, scheduler, load_nodes=loads, output_nodes=outputs)
    assert first == again and first.format() == again.format()
    assert all(0 <= node < 4 for node in first.node_of)
    assert all(first.node_of[i] == node for i, node in loads.items())
    moved = sum(t.nbytes for t in first.transfers)
    assert sum(first.net_in_bytes) == sum(first.net_out_bytes) == moved
    assert all(t.src != t.dst for t in first.transfers)
    assert sum(first.final_memory_bytes) == _retained_bytes(graph)
    assert first.max_node_memory_bytes >= max(first.final_memory_bytes)
    summary = first.summary()
    assert summary["scheduler"] == scheduler and summary["nodes"] == 4
    assert summary["inter_node_bytes"] == moved
    for group_list in first.reduce_groups.values():
        for node, members in group_list:
            assert len(members) >= 2
            assert all(first.node_of[m] == node for m in members)


def test_format_is_deterministic_and_limitable():
    graph = _benchmark_graph("ijk,jkf->if", 64, 16)
    loads, outputs = _layouts(graph, (2, 2), (4, 1))
    text = schedule(graph, 4, load_nodes=loads, output_nodes=outputs).format(limit=3)
    lines = text.splitlines()
    assert lines[0].startswith("schedule lshs on 4 nodes (pinned)")
    assert [line.split(":")[0].strip() for line in lines[1:5]] == [f"node {k}" for k in range(4)]
    result = schedule(graph, 4, load_nodes=loads, output_nodes=outputs)
    assert lines[5:8] == [f"t{k} -> node {result.node_of[k]}" for k in range(3)]
    assert lines[-1] == f"... {len(graph.tasks) - 3} more tasks"


@pytest.mark.parametrize(("subscripts", "n", "f", "tensor_grid", "matrix_grid"), BENCHMARKS[2:])
def test_no_schedule_beats_the_lower_bound(subscripts, n, f, tensor_grid, matrix_grid):
    graph = _benchmark_graph(subscripts, n, f)
    loads, outputs = _layouts(graph, tensor_grid, matrix_grid)
    inputs, output = subscripts.split("->")
    sizes = {"i": n, "j": n, "k": n, "f": f}
    bound = communication_lower_bound(inputs.split(","), output, sizes, 4, 8)
    assert bound > 0
    for name in SCHEDULERS:
        result = schedule(graph, 4, name, load_nodes=loads, output_nodes=outputs)
        assert result.max_node_recv_bytes >= bound, name


def test_lshs_reports_where_it_trades_bytes_for_balance():
    """Node 0 already holds a big retained result; the next task copies fewer bytes on
    node 0 (60 B against 100 B) but LSHS runs it on node 1 to keep peak memory even, and
    says so: one task, 40 B more than its fewest-bytes option."""
    tasks = [
        _task(LOAD, (), 100, 0),
        _task(LOAD, (), 60, 1),
        _task(APPLY, (0,), 10_000),
        _task(PAIR, (0, 1), 1_000),
    ]
    placed = schedule(_graph(tasks, [2, 3]), 2, "lshs", load_nodes={0: 0, 1: 1})
    assert placed.node_of[2:] == [0, 1]
    assert (placed.traded_tasks, placed.traded_bytes) == (1, 40)
    note = ("LSHS traded bytes for balance: 1 task(s) run where they copy 40 B more than "
            "their fewest-bytes option, to keep peak memory and per-node traffic even")
    assert placed.trade_note() == note
    assert note in placed.format()
    fewest = schedule(_graph(tasks[:2] + [_task(PAIR, (0, 1), 1_000)], [2]), 2, "lshs",
                      load_nodes={0: 0, 1: 1})
    assert fewest.traded_tasks == 0 and fewest.trade_note() is None
