"""A contraction's last stage across nodes, when it only adds up other calls' small results
and multiplies them by small operand blocks into result blocks no call reads, runs in the
driver (``StagedCalls.folds``): Ray brought those results back inside the calls' replies,
and the result's blocks stay in the driver (``Inline``) until a reader wants refs."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest

import tensorc as tc
from tensorc.codegen.kernels import EinsumBlock, ReduceBlocks
from tensorc.placement.blocks import Blocks
from tensorc.placement.schedule import schedule
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.ray.call_batch import _patch
from tensorc.runtime.ray.calls import CallRunner
from tensorc.runtime.ray.inline import Inline
from tensorc.runtime.ray.stages import (
    INPUT,
    RESULT,
    RUN,
    STITCH,
    NodeCall,
    Step,
    final_folds,
    stage,
)


def _staged(nodes: int, subscripts: str = "ijk,jf,kf->if"):
    """``subscripts`` (48³ by 48 × 8 twice; 3 × 2 × 2 blocks) scheduled on ``nodes`` nodes
    with the tensor's blocks of one (j, k) pair on one node, and staged."""
    plan = tc.plan(subscripts, (48, 48, 48), (48, 8), (48, 8),
                   grid={"i": 3, "j": 2, "k": 2, "f": 1})
    graph = plan.graph

    def laid_out(shape, grid):
        bounds = tuple(tuple(range(0, n, n // g)) + (n,)
                       for n, g in zip(shape, grid, strict=True))
        return Blocks.layout(bounds, {c: sum(c[1:]) % nodes if len(c) == 3 else c[0] % nodes
                                      for c in np.ndindex(*grid)}, "float64")

    layouts = [laid_out((48, 48, 48), (3, 2, 2)), laid_out((48, 8), (2, 1)),
               laid_out((48, 8), (2, 1))]
    loads = {}
    for i, task in enumerate(graph.tasks):
        if task.kind == "load":
            position, slices = task.source
            loads[i] = layouts[position].nodes[layouts[position].pieces(slices)[0][0]]
    return stage(graph, schedule(graph, nodes, "lshs", load_nodes=loads), layouts)


def test_the_sums_across_nodes_are_the_folds_with_their_bytes():
    program = _staged(nodes=2)
    folds = program.folds
    assert folds, "the partial sums of two nodes meet in a call of their own"
    read = Counter(arg for call in program.calls for arg in call.args if arg[0] == RESULT)
    for c, (largest, total, multiplies) in folds.items():
        call = program.calls[c]
        assert all(type(step.kernel) is ReduceBlocks for step, _ in call.steps)
        assert all(arg[0] == RESULT for arg in call.args)
        assert not any(read[(RESULT, c, k)] for k in range(len(call.exports)))
        assert largest == 16 * 8 * 8  # a partial (16 rows of i by 8 of f) and the sum alike
        assert total == largest * len(call.args) and multiplies == 0
    folded_outputs = [source for source in program.outputs.values() if source[1] in folds]
    assert len(folded_outputs) == sum(len(program.calls[c].exports) for c in folds)
    assert not any(all(type(step.kernel) is ReduceBlocks for step, _ in call.steps)
                   and c not in folds for c, call in enumerate(program.calls)
                   if call.level == program.levels - 1)


def test_a_last_stage_that_multiplies_by_operand_blocks_is_a_fold_with_its_work():
    product = EinsumBlock([("i", "j"), ("i", "f"), ("j", "f")], ("i", "f"), [(0, 2), (0, 1)],
                          {"i": 8, "j": 8, "f": 4})  # the partial (i, j) by two factors
    made = [NodeCall(node, 0, ((Step(RUN, ReduceBlocks("+", "float64")),
                                (("x", 0), ("x", 1))),), ((INPUT, 0, (node, 0)),) * 2, (0,),
                     (node,)) for node in (0, 1)]
    last = NodeCall(0, 1, ((Step(RUN, ReduceBlocks("+", "float64")), (("x", 0), ("x", 1))),
                           (Step(RUN, product), (("t", 0), ("x", 2), ("x", 3)))),
                    ((RESULT, 0, 0), (RESULT, 1, 0), (INPUT, 1, (0, 0)), (INPUT, 2, (0, 0))),
                    (1,), (2, 3))
    nbytes = {(RESULT, 0, 0): 512, (RESULT, 1, 0): 512, (RESULT, 2, 0): 256,
              (INPUT, 1, (0, 0)): 256, (INPUT, 2, (0, 0)): 256}
    assert final_folds([*made, last], nbytes) == {2: (512, 1536, 8 * 8 * 4 + 8 * 4)}
    outer = EinsumBlock([("i",), ("f",)], ("i", "f"), [(0, 1)], {"i": 64, "f": 64})
    wide = NodeCall(0, 1, ((Step(RUN, ReduceBlocks("+", "float64")), (("x", 0), ("x", 1))),
                           (Step(RUN, outer), (("t", 0), ("x", 2)))),
                    ((RESULT, 0, 0), (RESULT, 1, 0), (INPUT, 1, (0, 0))), (1,), (2, 3))
    assert final_folds([*made, wide], nbytes)[2][0] == 64 * 64 * 8  # its outer product
    stitched = NodeCall(0, 1, ((Step(STITCH, product, (8, 4), ()), (("x", 0),)),),
                        ((RESULT, 0, 0),), (0,), (2,))
    assert final_folds([*made, stitched], nbytes) == {}  # a stitch is no fold


def test_an_einsum_block_counts_the_multiplications_of_its_path():
    sizes = {"i": 4, "j": 5, "f": 6}
    kernel = EinsumBlock([("i", "j"), ("i", "f"), ("j", "f")], ("i", "f"), [(0, 2), (0, 1)],
                         sizes)
    assert kernel.multiplies == 4 * 5 * 6 + 4 * 6  # ij,jf->if; then if,if->if
    assert kernel.largest_step == 4 * 6
    assert EinsumBlock([("i", "j"), ("j", "f")], ("i", "f"), None, sizes).multiplies == 120
    outer = EinsumBlock([("i",), ("f",)], ("i", "f"), [(0, 1)], sizes)
    assert outer.largest_step == outer.multiplies == 4 * 6


def test_a_call_whose_results_another_call_reads_is_no_fold():
    program = _staged(nodes=2)
    c = next(iter(program.folds))
    slot_bytes = defaultdict(lambda: 1024)  # every result 1 KiB
    assert c in final_folds(program.calls, slot_bytes)
    assert c not in final_folds(program.calls, slot_bytes, relaid_slots={(RESULT, c, 0)})
    reader = type(program.calls[c])(**{**vars(program.calls[c]), "args": ((RESULT, c, 0),)})
    assert c not in final_folds([*program.calls, reader], slot_bytes)


def test_one_node_has_nothing_to_fold():
    assert _staged(nodes=1).folds == {}


def _inputs(f: int, seed: int = 0):
    made = (tc.random((48, 48, 48), grid=(4, 4, 4), seed=seed),
            tc.random((48, f), grid=(4, 1), seed=seed + 1),
            tc.random((48, f), grid=(4, 1), seed=seed + 2))
    tc.wait(*made)
    return made


@pytest.mark.usefixtures("ray_cluster")
def test_small_partial_sums_are_added_in_the_driver_and_the_result_stays_there():
    import ray

    x, b, c = _inputs(8)  # a result block is 12 x 8: 768 bytes, under the tests' 1 KiB
    expected = np.einsum("ijk,jf,kf->if", x.numpy(), b.numpy(), c.numpy())
    result = tc.einsum("ijk,jf,kf->if", x, b, c, measure=False)
    stats = tc.last_stats()
    assert stats["driver_folds"] >= 1 and stats["folded_tasks"]
    assert all(stats["ran_on"][t] == 0 for t in stats["folded_tasks"])  # the driver's node
    value = result.value()
    kept = {c for c, ref in value.layout.refs.items() if type(ref) is Inline}
    assert len(kept) >= stats["driver_folds"]  # each fold makes one block here
    assert all(value.layout.nodes[c] == 0 for c in kept)
    assert len(value.stored_refs()) == len(value.layout.refs) - len(kept)
    tc.wait(result)  # waits for the stored blocks only
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-10)
    squared = tc.einsum("if,if->if", result, result, measure=False)  # read by value
    np.testing.assert_allclose(squared.numpy(), expected**2, rtol=1e-10)
    refs = dict(value.blocks.refs)  # a reader of refs: put in Ray, once
    assert all(isinstance(ref, ray.ObjectRef) for ref in refs.values())
    assert value.blocks.refs == refs
    first = min(kept)
    np.testing.assert_allclose(np.asarray(ray.get(refs[first])),
                               expected[value.layout.block_slices(first)], rtol=1e-10)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-10)


def test_a_last_stage_with_the_factors_runs_in_the_driver_too(ray_cluster, monkeypatch):
    """At N = 64 the plan sums the tensor over k on the nodes, then adds the partials and
    multiplies them by the factors' blocks in its last stage. With Ray's own inline size
    (100 KiB, not the tests' 1 KiB) that stage runs in the driver: the partials were
    returned to it, and the factors' blocks are operand blocks it reads."""
    folded = []
    run_folds = CallRunner._fold

    def seen(self, staged, folds, inputs, returned):
        folded.extend(staged.calls[c] for c in folds)
        others = {(arg, call.node) for c, call in enumerate(staged.calls) if c not in folds
                  for arg in call.args}
        only.update((arg, call.node) for call in folded for arg in call.args
                    if arg[0] == INPUT and (arg, call.node) not in others)
        return run_folds(self, staged, folds, inputs, returned)

    only = set()  # operand blocks on a node that only the folds there read

    monkeypatch.setattr(CallRunner, "_fold", seen)
    monkeypatch.setattr(ray_cluster, "inline_bytes", 100 * 1024)
    x, b, c = (tc.random((64, 64, 64), grid=(4, 4, 4), seed=30),
               tc.random((64, 16), grid=(4, 1), seed=31),
               tc.random((64, 16), grid=(4, 1), seed=32))
    tc.wait(x, b, c)
    result = tc.einsum("ijk,if,jf->if", x, b, c, measure=False)
    assert tc.last_stats()["driver_folds"] == len(folded) >= 1
    assert any(type(step.kernel) is EinsumBlock for call in folded for step, _ in call.steps)
    assert any(arg[0] == INPUT for call in folded for arg in call.args)
    layouts = {1: b.value().layout, 2: c.value().layout}
    assert only and not any(node in layouts[arg[1]].copies.get(arg[2], ())
                            for arg, node in only)  # the driver read them: no copy there
    np.testing.assert_allclose(
        result.numpy(), np.einsum("ijk,if,jf->if", x.numpy(), b.numpy(), c.numpy()),
        rtol=1e-10)
    m = tc.random((64, 64), grid=(4, 4), seed=33)
    tc.wait(m)
    factor = tc.einsum("ik,kf->if", m, b, measure=False)  # kept in the driver itself
    assert any(type(ref) is Inline for ref in factor.value().layout.refs.values())
    folded.clear()
    again = tc.einsum("ijk,if,jf->if", x, factor, c, measure=False)
    assert any(type(factor.value().layout.refs[arg[2]]) is Inline for call in folded
               for arg in call.args if arg[0] == INPUT and arg[1] == 1)  # read by value
    np.testing.assert_allclose(
        again.numpy(),
        np.einsum("ijk,if,jf->if", x.numpy(), m.numpy() @ b.numpy(), c.numpy()), rtol=1e-10)


@pytest.mark.usefixtures("ray_cluster")
@pytest.mark.parametrize(("f", "measure"), [
    (32, False),  # a result block is 12 x 32: 3 KiB, over the tests' 1 KiB inline size
    (8, True),  # 768 bytes, but a measured run runs its calls as planned
])
def test_the_last_stage_stays_on_ray_for_large_partials_and_measured_runs(f, measure):
    x, b, c = _inputs(f, seed=10 + f)
    result = tc.einsum("ijk,jf,kf->if", x, b, c, measure=measure)
    stats = tc.last_stats()
    assert stats["driver_folds"] == 0 and stats["folded_tasks"] == []
    assert all(stats["ran_on"][t] == stats["node_of"][t] for t in stats["ran_on"])
    assert not any(type(ref) is Inline for ref in result.value().layout.refs.values())
    assert (stats["measured_inter_node_bytes"] is not None) == measure
    np.testing.assert_allclose(
        result.numpy(), np.einsum("ijk,jf,kf->if", x.numpy(), b.numpy(), c.numpy()),
        rtol=1e-10)


@pytest.mark.usefixtures("ray_cluster")
def test_a_measured_call_reads_a_result_kept_in_the_driver():
    x, b, c = _inputs(8, seed=40)
    result = tc.einsum("ijk,jf,kf->if", x, b, c, measure=False)
    assert tc.last_stats()["driver_folds"] >= 1
    expected = np.einsum("ijk,jf,kf->if", x.numpy(), b.numpy(), c.numpy())
    doubled = tc.einsum("if,if->if", result, result, measure=True)
    assert tc.last_stats()["measured_inter_node_bytes"] is not None
    np.testing.assert_allclose(doubled.numpy(), expected**2, rtol=1e-10)


@pytest.mark.usefixtures("ray_cluster")
def test_an_array_whose_kept_blocks_a_batch_put_in_ray_reads_the_stored_ones():
    """A batch that passed blocks kept in the driver through into its result puts them in
    Ray when it is flushed (``call_batch._patch``), under the array made on that result."""
    import ray

    data = np.arange(48.0).reshape(12, 4)
    blocks = Blocks(data.shape, data.dtype, ((0, 6, 12), (0, 4)))
    for coords in np.ndindex(*blocks.grid):
        blocks.nodes[coords] = 0
        blocks.refs[coords] = Inline(data[blocks.block_slices(coords)].copy())
    array = DistributedArray(blocks, (1, 1))
    assert array.stored_refs() == []
    _patch(blocks, {})  # the flush: each kept block put in Ray
    assert all(isinstance(ref, ray.ObjectRef) for ref in blocks.refs.values())
    np.testing.assert_array_equal(array.numpy(), data)
    assert array.blocks.refs == blocks.refs and len(array.stored_refs()) == 2
