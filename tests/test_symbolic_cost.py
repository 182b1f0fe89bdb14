"""The closed-form cost model against the task-level simulation it stands for.

``tensorc.planning.symbolic_cost`` prices a candidate from its grid, its block counts and
the statement's stages; ``tensorc.planning.distribution.model`` lowers the task graph and
simulates it. Per node, bytes received, flops and tasks must be equal, the resident bytes
after the run equal, and the closed form's memory never below the simulated peak — on
random contractions, grids, block counts and node counts up to 64 (hypothesis), against the
owner-computes simulation (``strict``), and against LSHS itself wherever LSHS ran every
task on its grid node. The floors the searches prune with must never exceed the price.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from planning_problems import problem

from tensorc.placement.blocks import Blocks, block_bounds
from tensorc.placement.layout import grid_nodes
from tensorc.planning import model_bound, prediction, symbolic_cost
from tensorc.planning.distribution import Candidate, Problem, layout, model, price
from tensorc.planning.search import all_candidates, candidate_table


def row(plan: Problem, p: np.ndarray, c: np.ndarray, k: int) -> Candidate:
    return Candidate(tuple(zip(plan.indices, p[k].tolist(), strict=True)),
                     tuple(zip(plan.indices, c[k].tolist(), strict=True)))


def followed_hints(plan: Problem, modelled) -> bool:
    """Whether LSHS ran every compute task on its grid node."""
    _, _, hints, _ = layout(plan, modelled.candidate, modelled.graph)
    return all(modelled.schedule.node_of[t] == node for t, node in hints.items())


def assert_agrees(plan: Problem, candidate: Candidate, modelled) -> None:
    found = symbolic_cost.figures(plan, candidate)
    report = modelled.report
    what = f"{plan.name} on {plan.nodes}: {candidate.describe()}"
    assert tuple(found.total_received.tolist()) == report.node_recv_bytes, what
    assert tuple(found.flops.tolist()) == report.node_flops, what
    assert tuple(found.tasks.tolist()) == report.node_tasks, what
    assert found.resident.tolist() == modelled.schedule.final_memory_bytes, what
    assert all(a >= b for a, b in zip(found.memory.tolist(), report.node_memory_bytes,
                                      strict=True)), what
    priced = symbolic_cost.report(plan, candidate, found)
    if priced.node_memory_bytes == report.node_memory_bytes:
        assert priced.cost == pytest.approx(report.cost, rel=1e-12), what
    else:  # the closed form's memory is a bound: its price is never below
        assert priced.cost >= report.cost * (1 - 1e-12), what


@st.composite
def planned(draw):
    """A contraction of 2-3 operands over 2-4 indices (extents 1-40), 2-64 nodes, and one
    legal candidate of it in the closed form's domain (drawn from a seeded generator, as
    ``test_planning`` draws its contractions)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    while True:
        letters = list("ijkl"[: rng.integers(2, 5)])
        operands = [
            [str(c) for c in rng.permutation(letters)[: rng.integers(1, len(letters) + 1)]]
            for _ in range(rng.integers(2, 4))
        ]
        for letter in letters:
            if not any(letter in op for op in operands):
                operands[rng.integers(len(operands))].append(letter)
        output = [str(c) for c in rng.permutation(letters)[: rng.integers(0, len(letters) + 1)]]
        extents = {letter: int(rng.integers(1, 41)) for letter in letters}
        nodes = int(rng.choice([2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64]))
        subscripts = ",".join("".join(op) for op in operands) + "->" + "".join(output)
        shapes = [tuple(extents[c] for c in op) for op in operands]
        plan = problem(subscripts, shapes, nodes)
        p, c = candidate_table(plan)
        inside = [k for k in range(len(p)) if np.all(c[k] % p[k] == 0)]
        if inside and symbolic_cost.structure(plan).unsupported is None:
            return plan, row(plan, p, c, inside[int(rng.integers(len(inside)))])


@settings(max_examples=40, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow])
@given(drawn=planned())
def test_closed_form_equals_the_simulation_node_by_node(drawn):
    plan, candidate = drawn
    assert symbolic_cost.supported(plan, candidate) is None
    assert_agrees(plan, candidate, model(plan, candidate, strict=True))
    lshs = model(plan, candidate)
    if followed_hints(plan, lshs):
        assert_agrees(plan, candidate, lshs)
    floor = prediction.cost_floors(plan, *_arrays(plan, candidate))[0]
    assert floor <= price(plan, candidate).cost
    assert model_bound.cost_bound(plan, dict(candidate.counts)) <= price(plan, candidate).cost
    received = symbolic_cost.figures(plan, candidate).received
    assert prediction.busiest_floors(plan, *_arrays(plan, candidate))[0] <= received.max()


def test_busiest_floors_never_exceed_the_busiest_node_on_every_candidate():
    """The searches prune with the busiest node's floor; the charge for bytes over the
    bound multiplies any excess a thousandfold, so it must hold on its own, byte for byte:
    checked on every candidate of random contractions (spread stages and ragged last
    blocks included) against the closed form, which equals the simulation."""
    rng = np.random.default_rng(11)
    checked = 0
    while checked < 1500:
        letters = list("ijkl"[: rng.integers(2, 5)])
        operands = [[str(c) for c in rng.permutation(letters)[: rng.integers(1, len(letters) + 1)]]
                    for _ in range(rng.integers(2, 4))]
        for letter in letters:
            if not any(letter in op for op in operands):
                operands[rng.integers(len(operands))].append(letter)
        output = [str(c) for c in rng.permutation(letters)[: rng.integers(0, len(letters) + 1)]]
        extents = {letter: int(rng.integers(1, 41)) for letter in letters}
        subscripts = ",".join("".join(op) for op in operands) + "->" + "".join(output)
        shapes = [tuple(extents[c] for c in op) for op in operands]
        plan = problem(subscripts, shapes, int(rng.choice([4, 6, 7, 12, 16, 30, 64])))
        if symbolic_cost.structure(plan).unsupported is not None:
            continue
        p, c = candidate_table(plan)
        inside = np.flatnonzero(np.all(c % p == 0, axis=1))
        picked = rng.choice(inside, size=min(len(inside), 40), replace=False)
        floors = prediction.busiest_floors(plan, p[picked], c[picked])
        for k, floor in zip(picked.tolist(), floors.tolist(), strict=True):
            busiest = int(symbolic_cost.figures(plan, row(plan, p, c, k)).received.max())
            assert floor <= busiest, f"{subscripts} {shapes}: {row(plan, p, c, k).describe()}"
            checked += 1


def _arrays(plan: Problem, candidate: Candidate):
    p = np.array([[dict(candidate.grid)[i] for i in plan.indices]], dtype=np.int64)
    c = np.array([[dict(candidate.counts)[i] for i in plan.indices]], dtype=np.int64)
    return p, c


SMALL = [  # every candidate: pushdown, pairwise and fused joins, outer products, a trace
    ("ik,kj->ij", [(12, 6), (6, 24)], 4),
    ("ijk,if,jf->if", [(12, 6, 4), (12, 4), (6, 4)], 6),
    ("ijk,jf,kf->if", [(12, 6, 4), (6, 4), (4, 4)], 4),
    ("ijk,jkf->if", [(12, 6, 4), (6, 4, 4)], 6),
    ("ij,jk,kl->il", [(16, 16), (16, 16), (16, 16)], 4),
    ("ii->", [(24, 24)], 4),
]


@pytest.mark.parametrize(("subscripts", "shapes", "nodes"), SMALL)
def test_closed_form_equals_lshs_on_every_candidate_of_small_problems(subscripts, shapes,
                                                                      nodes):
    plan = problem(subscripts, shapes, nodes)
    candidates = all_candidates(plan)
    p, c = candidate_table(plan)
    floors = prediction.cost_floors(plan, p, c)
    for k in range(len(p)):
        candidate = row(plan, p, c, k)
        assert candidate in candidates
        priced = price(plan, candidate)
        assert priced.symbolic
        assert_agrees(plan, candidate, model(plan, candidate))
        assert floors[k] <= priced.cost


def test_repartitioned_operands_are_priced_in_closed_form():
    rng = np.random.default_rng(3)
    shapes = [(12, 6, 4), (6, 4), (4, 4)]
    placed = {}
    for position, shape in enumerate(shapes[:2]):
        bounds = block_bounds(shape, tuple(max(1, s // 2) for s in shape))
        coords = itertools.product(*[range(len(b) - 1) for b in bounds])
        placed[position] = Blocks.layout(bounds, {k: int(rng.integers(4)) for k in coords})
    plan = problem("ijk,jf,kf->if", shapes, 4, placed=placed, repartition=frozenset(placed))
    for candidate in all_candidates(plan):
        priced = price(plan, candidate)
        modelled = model(plan, candidate, strict=True)
        assert priced.symbolic
        assert_agrees(plan, candidate, modelled)
        assert priced.cost == pytest.approx(modelled.report.cost, rel=1e-12)


def repartition_by_block(plan: Problem, candidate: Candidate) -> tuple[list, list]:
    """What a repartition moves and copies per node, block by block through the stored
    layouts' own ``node_elements`` and ``pieces`` (the reference the closed form's arrays
    must equal)."""
    moved, copied = [0] * plan.nodes, [0] * plan.nodes
    counts = dict(candidate.counts)
    for position in plan.repartition:
        source = plan.placed[position]
        indices = next(v.indices for v in symbolic_cost.structure(plan).values
                       if v.position == position)
        dims = tuple(dict.fromkeys(indices))
        steps = {i: -(-plan.sizes[i] // counts[i]) for i in dims}
        for coords in itertools.product(*(range(counts[i]) for i in dims)):
            node = int(layout_node(dims, coords, candidate.grid, counts))
            where = dict(zip(dims, coords, strict=True))
            slices = tuple(slice(where[i] * steps[i], min((where[i] + 1) * steps[i],
                                                          plan.sizes[i])) for i in indices)
            moved[node] += 8 * sum(n for holder, n in source.node_elements(slices)
                                   if holder != node)
            pieces = source.pieces(slices)
            if len(pieces) > 1 or source.block_slices(pieces[0][0]) != slices:
                copied[node] += 8 * int(np.prod([slices[indices.index(i)].stop
                                                  - slices[indices.index(i)].start
                                                  for i in dims]))
    return moved, copied


def layout_node(dims, coords, grid, counts) -> int:
    return grid_nodes(dims, np.asarray([coords], np.int64), grid, counts)[0]


@settings(max_examples=40, deadline=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_repartition_is_priced_as_its_blocks_count_it(data):
    # stored blocks of uneven sizes on random nodes: new blocks overlap one or several
    sizes = data.draw(st.lists(st.integers(4, 13), min_size=3, max_size=3), label="ijk")
    shapes = [tuple(sizes), (sizes[1], 3), (sizes[2], 3)]
    nodes = data.draw(st.sampled_from([2, 3, 4, 6]), label="nodes")
    rng = np.random.default_rng(data.draw(st.integers(0, 1000), label="seed"))
    placed = {}
    for position, shape in enumerate(shapes[:2]):
        bounds = tuple((0, *sorted(rng.choice(np.arange(1, n), size=int(rng.integers(0, 3)),
                                              replace=False).tolist()), n) for n in shape)
        coords = itertools.product(*[range(len(b) - 1) for b in bounds])
        placed[position] = Blocks.layout(bounds, {k: int(rng.integers(nodes)) for k in coords})
    plan = problem("ijk,jf,kf->if", shapes, nodes, placed=placed,
                   repartition=frozenset(placed))
    candidates = [c for c in all_candidates(plan) if not symbolic_cost.supported(plan, c)]
    assert candidates
    for candidate in rng.permutation(len(candidates))[:6].tolist():
        candidate = candidates[candidate]
        grid = symbolic_cost._Grid(plan, candidate)
        moved, copied = symbolic_cost._repartition(plan, candidate, grid,
                                                    symbolic_cost.structure(plan))
        assert (moved.tolist(), copied.tolist()) == repartition_by_block(plan, candidate)


def test_outside_the_domain_the_simulation_prices():
    lonely = problem("k,k->", [(11,), (11,)], 5)  # too small for an even split
    uneven = [c for c in all_candidates(lonely) if symbolic_cost.supported(lonely, c)]
    assert uneven and not symbolic_cost.closed_form(lonely)
    priced = price(lonely, uneven[0])
    assert not priced.symbolic and priced.cost == model(lonely, uneven[0]).report.cost
    on_node_0 = {(a, b): 0 for a in range(2) for b in range(2)}
    kept = {0: Blocks.layout(((0, 16, 32), (0, 16, 32)), on_node_0)}
    plan = problem("ik,kj->ij", [(32, 32), (32, 32)], 4, placed=kept,
                   placed_counts={"i": 2, "k": 2})
    candidate = all_candidates(plan)[0]
    assert "layout of its own" in symbolic_cost.supported(plan, candidate)
    assert not price(plan, candidate).symbolic
