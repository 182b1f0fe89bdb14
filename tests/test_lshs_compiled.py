"""The compiled LSHS loop (large graphs) places every task exactly as the Python one does.

Each case schedules one graph twice, once per loop (``COMPILED_TASKS`` moved so the small
graph takes the path asked for), and compares every figure of the two schedules: nodes,
local folds, peaks, traffic, final memory, the copies in order and the trade counts.
"""

from __future__ import annotations

import random

import pytest
from planning_problems import problem

from tensorc.errors import PlanError
from tensorc.placement import schedule as scheduling
from tensorc.planning import distribution
from tensorc.planning.planners import search

FIGURES = ("node_of", "reduce_groups", "memory_bytes", "net_in_bytes", "net_out_bytes",
           "final_memory_bytes", "traded_tasks", "traded_bytes")

CASES = [
    ("ijk,jf,kf->if", [(48, 48, 48), (48, 8), (48, 8)]),
    ("ijk,jkf->if", [(32, 32, 32), (32, 32, 8)]),
    ("ik,kj->ij", [(64, 64), (64, 64)]),
    ("ijk,if,jf->if", [(32, 32, 32), (32, 8), (32, 8)]),
]


def _both(monkeypatch, graph, nodes, **options):
    monkeypatch.setattr(scheduling, "COMPILED_TASKS", 10**12)
    python = scheduling.schedule(graph, nodes, "lshs", **options)
    monkeypatch.setattr(scheduling, "COMPILED_TASKS", 0)
    compiled = scheduling.schedule(graph, nodes, "lshs", **options)
    for name in FIGURES:
        assert getattr(compiled, name) == getattr(python, name), name
    assert list(compiled.transfers) == list(python.transfers)
    return compiled


@pytest.mark.parametrize(("subscripts", "shapes"), CASES)
@pytest.mark.parametrize("nodes", [3, 8, 40])
def test_compiled_lshs_equals_the_python_loop(monkeypatch, subscripts, shapes, nodes):
    planned = problem(subscripts, shapes, nodes)
    plan = search(planned, "smt", lower=False)
    graph = planned.graph_of(plan.candidate)
    load_nodes, output_nodes, hints, _ = distribution.layout(planned, plan.candidate)
    for strict in (False, True):
        _both(monkeypatch, graph, nodes, load_nodes=load_nodes, output_nodes=output_nodes,
              task_hints=hints, strict_hints=strict)
    draw = random.Random(nodes)
    scattered = {index: draw.randrange(nodes) for index in load_nodes}
    cached = {index: [draw.randrange(nodes)] for index in list(load_nodes)[:5]}
    placed = _both(monkeypatch, graph, nodes, load_nodes=scattered, cached_copies=cached,
                   output_nodes=[draw.randrange(nodes) for _ in graph.outputs])
    assert len(placed.transfers) > 0
    some = {task: node for task, node in hints.items() if draw.random() < 0.5}
    _both(monkeypatch, graph, nodes, load_nodes=scattered, task_hints=some)


def test_the_compiled_loop_folds_locally_and_trades_like_the_python_one(monkeypatch):
    planned = problem("ik,kj->ij", [(64, 64), (64, 64)], 8)
    plan = search(planned, "smt", lower=False)
    graph = planned.graph_of(plan.candidate)
    load_nodes, _, hints, _ = distribution.layout(planned, plan.candidate)
    scattered = {index: index % 8 for index in load_nodes}
    placed = _both(monkeypatch, graph, 8, load_nodes=scattered, task_hints=hints)
    assert placed.reduce_groups  # partials produced on one node were folded there first
    assert placed.traded_tasks == 1


def test_the_compiled_loop_refuses_a_load_without_a_node(monkeypatch):
    planned = problem("ik,kj->ij", [(64, 64), (64, 64)], 4)
    plan = search(planned, "smt", lower=False)
    graph = planned.graph_of(plan.candidate)
    monkeypatch.setattr(scheduling, "COMPILED_TASKS", 0)
    with pytest.raises(PlanError, match="no node given for load task t0"):
        scheduling.schedule(graph, 4, "lshs", load_nodes={})
