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
from tensorc.runtime.ray import stages
from tensorc.runtime.ray.stages import INPUT, RESULT, stage
from tensorc.runtime.ray.tasks import run_steps

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


def _laid_out(shape, grid, nodes: int) -> Blocks:
    """``shape`` cut in ``grid`` blocks, block ``c`` on node ``sum(c[1:]) % nodes`` (the
    tensor's blocks of one (j, k) pair, and a factor's block, on one node)."""
    bounds = tuple(tuple(range(0, n, n // g)) + (n,) for n, g in zip(shape, grid, strict=True))
    return Blocks.layout(bounds, {c: sum(c[1:]) % nodes if len(c) == 3 else c[0] % nodes
                                  for c in np.ndindex(*grid)}, "float64")


def _staged(i_blocks: int, nodes: int = 1, budget: int | None = None):
    """The MTTKRP ``ijk,jf,kf->if`` (48³ by 48 × 8; 2 × 2 blocks over j and k, ``i_blocks``
    over i) planned, scheduled on ``nodes`` nodes with every load where its block is, and
    staged: ``(its staged calls, the operands' layouts)``."""
    plan = tc.plan("ijk,jf,kf->if", (48, 48, 48), (48, 8), (48, 8),
                   grid={"i": i_blocks, "j": 2, "k": 2, "f": 1})
    graph = plan.graph
    layouts = [_laid_out((48, 48, 48), (i_blocks, 2, 2), nodes),
               _laid_out((48, 8), (2, 1), nodes), _laid_out((48, 8), (2, 1), nodes)]
    loads = {}
    for i, task in enumerate(graph.tasks):
        if task.kind == "load":
            position, slices = task.source
            loads[i] = layouts[position].nodes[layouts[position].pieces(slices)[0][0]]
    placed = schedule(graph, nodes, "lshs", load_nodes=loads)
    return stage(graph, placed, layouts, budget=budget), layouts


def _kernels(program) -> tuple[Counter, list]:
    """How many steps of each kernel the calls run, and how many steps read each shared
    prefix."""
    kinds: Counter = Counter()
    readers = []
    for call in program.calls:
        prefixes = {j for j, (step, _) in enumerate(call.steps)
                    if type(step.kernel) is EinsumPrefix}
        kinds.update(type(step.kernel).__name__ for step, _ in call.steps)
        readers += [sum(("t", j) in inputs for _, inputs in call.steps) for j in prefixes]
    return kinds, readers


def _run_in_process(program, layouts, operands) -> np.ndarray:
    """The staged calls run here, in order, with ``run_steps``: each call's arguments bound
    to the operands' blocks and the earlier calls' returns; the result stitched."""
    returned = []
    for call in program.calls:
        args = []
        for source in call.args:
            if source[0] == INPUT:
                args.append(operands[source[1]][layouts[source[1]].block_slices(source[2])])
            else:
                assert source[0] == RESULT
                args.append(returned[source[1]][source[2]])
        returned.append(run_steps(call.steps, tuple(args), call.exports, threads=2))
    out = np.empty((48, 8))
    edges = [list(b) for b in program.output_bounds]
    for coords, source in program.outputs.items():
        value = returned[source[1]][source[2]] if source[0] == RESULT else None
        region = tuple(slice(e[c], e[c + 1]) for e, c in zip(edges, coords, strict=True))
        out[region] = value
    return out


def test_blocks_meeting_the_same_factor_blocks_share_their_khatri_rao_product():
    kinds, readers = _kernels(_staged(i_blocks=2)[0])
    assert kinds["EinsumPrefix"] == 4 and kinds["EinsumRest"] == 8  # 2 x 2 (j, k) pairs
    assert kinds["EinsumBlock"] == 0 and readers == [2, 2, 2, 2]  # each read by both i's


def test_a_prefix_s_readers_run_right_after_it():
    program, _ = _staged(i_blocks=3, nodes=2)
    for call in program.calls:
        for j, (step, _) in enumerate(call.steps):
            if type(step.kernel) is EinsumPrefix:
                following = call.steps[j + 1:j + 4]  # its 3 readers: one per i-block
                assert all(type(s.kernel) is EinsumRest and ("t", j) in inputs
                           for s, inputs in following)


def test_each_node_builds_the_products_of_its_own_blocks_and_sends_none():
    program, layouts = _staged(i_blocks=3, nodes=2)
    kinds, readers = _kernels(program)
    assert kinds["EinsumPrefix"] == 4 and kinds["EinsumRest"] == 12 and readers == [3] * 4
    on = Counter(call.node for call in program.calls
                 for step, _ in call.steps if type(step.kernel) is EinsumPrefix)
    assert on == {0: 2, 1: 2}  # the (j, k) pairs of each node's tensor blocks
    prefixes = {(c, k) for c, call in enumerate(program.calls)
                for k, step in enumerate(call.exports)
                if type(call.steps[step][0].kernel) is EinsumPrefix}
    assert not prefixes  # returned by no call: read where it was made
    operands = [RNG.random((48, 48, 48)), RNG.random((48, 8)), RNG.random((48, 8))]
    np.testing.assert_allclose(_run_in_process(program, layouts, operands),
                               np.einsum("ijk,jf,kf->if", *operands), rtol=1e-12)


def test_a_product_no_other_block_shares_stays_whole():
    kinds, _ = _kernels(_staged(i_blocks=1)[0])
    assert kinds["EinsumBlock"] == 4 and not kinds["EinsumPrefix"] and not kinds["EinsumRest"]


def test_a_node_shares_products_only_within_its_share_of_the_memory_budget():
    one = 24 * 24 * 8 * 8  # a Khatri-Rao product of two 24 x 8 factor blocks
    kinds, _ = _kernels(_staged(i_blocks=2, budget=stages.PREFIX_SHARE * one)[0])
    assert kinds["EinsumPrefix"] == 1 and kinds["EinsumRest"] == 2 and kinds["EinsumBlock"] == 6
    kinds, _ = _kernels(_staged(i_blocks=2, budget=stages.PREFIX_SHARE * one - 1)[0])
    assert kinds["EinsumBlock"] == 8 and not kinds["EinsumPrefix"]


def test_the_rest_writes_into_an_output_of_another_dtype():
    blocks = [RNG.random((8, 5, 6)), RNG.random((5, 3)), RNG.random((6, 3))]
    whole = EinsumBlock([list("ijk"), list("jf"), list("kf")], list("if"), [(1, 2), (0, 1)],
                        SIZES)
    out = np.empty((8, 3), dtype=np.float32)
    found = EinsumRest(whole)(blocks[0], EinsumPrefix(whole)(*blocks[1:]), out=out)
    assert found is out
    np.testing.assert_allclose(out, np.einsum("ijk,jf,kf->if", *blocks), rtol=1e-6)
