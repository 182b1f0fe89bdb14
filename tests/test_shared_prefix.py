"""A block product's first path step, shared by the blocks that read the same operands on a
node, is computed once there (``EinsumPrefix``, then ``EinsumRest``): the Khatri-Rao
product of an MTTKRP's two factor blocks is built once per node for every tensor block that
meets both, and the split product equals the whole one."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import tensorc as tc
from tensorc.codegen.kernels import EinsumBlock, EinsumPrefix, EinsumRest
from tensorc.placement.blocks import Blocks
from tensorc.placement.schedule import schedule
from tensorc.runtime.ray.stages import stage

RNG = np.random.default_rng(5)
SIZES = {"i": 8, "j": 5, "k": 6, "f": 3}


@pytest.mark.parametrize(("subscripts", "path"), [
    ("ijk,jf,kf->if", [(1, 2), (0, 1)]),  # the factors' Khatri-Rao product first
    ("ijk,if,jf->if", [(0, 1), (0, 1)]),  # the tensor and a factor first
])
def test_a_prefix_and_its_rest_give_the_whole_block_s_product(subscripts, path):
    inputs, output = subscripts.split("->")
    letters = inputs.split(",")
    blocks = [RNG.random(tuple(SIZES[c] for c in term)) for term in letters]
    whole = EinsumBlock([list(t) for t in letters], list(output), path, SIZES)
    taken = whole.prefix_inputs()
    assert taken == tuple(path[0])
    first = EinsumPrefix(whole)(*(blocks[t] for t in taken))
    rest = [b for t, b in enumerate(blocks) if t not in taken]
    split = EinsumRest(whole)(*rest, first)
    np.testing.assert_allclose(split, np.einsum(subscripts, *blocks), rtol=1e-12)
    np.testing.assert_array_equal(split, whole(*blocks))


def test_a_product_of_one_step_has_no_prefix_to_share():
    assert EinsumBlock([["i", "j"], ["j", "k"]], ["i", "k"], [(0, 1)],
                       {"i": 2, "j": 3, "k": 4}).prefix_inputs() is None


def _on_one_node(shape, grid):
    bounds = tuple(tuple(range(0, n, n // g)) + (n,) for n, g in zip(shape, grid, strict=True))
    return Blocks.layout(bounds, {c: 0 for c in np.ndindex(*grid)}, "float64")


def _staged_kernels(i_blocks: int) -> tuple[Counter, list]:
    """The kernels of the staged calls of the MTTKRP ``ijk,jf,kf->if`` (48³ by 48 × 8, 2 × 2
    blocks over j and k, ``i_blocks`` over i) on one node, and how many steps read each
    shared prefix."""
    plan = tc.plan("ijk,jf,kf->if", (48, 48, 48), (48, 8), (48, 8),
                   grid={"i": i_blocks, "j": 2, "k": 2, "f": 1})
    graph = plan.graph
    loads = {i: 0 for i, t in enumerate(graph.tasks) if t.kind == "load"}
    placed = schedule(graph, 1, "lshs", load_nodes=loads)
    program = stage(graph, placed, [_on_one_node((48, 48, 48), (i_blocks, 2, 2)),
                                    _on_one_node((48, 8), (2, 1)),
                                    _on_one_node((48, 8), (2, 1))])
    kinds: Counter = Counter()
    readers = []
    for call in program.calls:
        prefixes = {j for j, (step, _) in enumerate(call.steps)
                    if type(step.kernel) is EinsumPrefix}
        kinds.update(type(step.kernel).__name__ for step, _ in call.steps)
        readers += [sum(("t", j) in inputs for _, inputs in call.steps) for j in prefixes]
    return kinds, readers


def test_blocks_meeting_the_same_factor_blocks_share_their_khatri_rao_product():
    kinds, readers = _staged_kernels(i_blocks=2)
    assert kinds["EinsumPrefix"] == 4 and kinds["EinsumRest"] == 8  # 2 x 2 (j, k) pairs
    assert kinds["EinsumBlock"] == 0 and readers == [2, 2, 2, 2]  # each read by both i's


def test_a_product_no_other_block_shares_stays_whole():
    kinds, _ = _staged_kernels(i_blocks=1)
    assert kinds["EinsumBlock"] == 4 and not kinds["EinsumPrefix"] and not kinds["EinsumRest"]
