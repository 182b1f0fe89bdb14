"""Merging the calls of consecutive statements (``runtime/call_batch.py``).

The merge itself is checked without Ray: merged calls are run in order with the workers'
own step runner and must give what the separate calls give. On the shared 4-node cluster
(with ``measure`` off, which is when array programs batch their calls), a Newton step runs
as fewer calls than its statements planned, and gives numpy's answer.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc import session as tensorc_session
from tensorc.runtime.ray.call_batch import Deferred, Inline, merge
from tensorc.runtime.ray.stages import RUN, NodeCall, Step
from tensorc.runtime.ray.tasks import run_steps


def _call(node: int, steps, nargs: int, exports) -> NodeCall:
    return NodeCall(node, 0, tuple(steps), tuple(("in", 0, (k,)) for k in range(nargs)),
                    tuple(exports), ())


def _run_separately(calls):
    """Each batch call run on its own, in order: ``{(entry, slot): value}``."""
    out = {}
    for entry, (call, bound) in enumerate(calls):
        args = [out[(r.entry, r.slot)] if isinstance(r, Deferred) else r.value for r in bound]
        for slot, value in enumerate(run_steps(call.steps, tuple(args), call.exports)):
            out[(entry, slot)] = value
    return out


def _run_merged(calls, merged):
    out = {}
    for m in merged:
        args = [out[(entry, slot)] if kind == "d" else calls[entry][1][slot].value
                for kind, entry, slot in m.args]
        for key, value in zip(m.exports, run_steps(m.steps, tuple(args), m.export_steps),
                              strict=True):
            out[key] = value
    return out


def _two_statement_batch():
    """Statement A: node 0 doubles x0, node 1 negates x1. Statement B: node 0 adds 1 to
    A's node-0 result; node 1 multiplies A's two results (one crosses nodes)."""
    x0, x1 = Inline(np.arange(4.0)), Inline(np.arange(4.0) + 10)
    double = Step(RUN, lambda a: 2 * a)
    calls = [
        (_call(0, [(double, (("x", 0),))], 1, [0]), [x0]),
        (_call(1, [(Step(RUN, np.negative), (("x", 0),))], 1, [0]), [x1]),
        (_call(0, [(Step(RUN, lambda a: a + 1), (("x", 0),))], 1, [0]), [Deferred(0, 0)]),
        (_call(1, [(Step(RUN, np.multiply), (("x", 0), ("x", 1)))], 2, [0]),
         [Deferred(1, 0), Deferred(0, 0)]),
    ]
    return calls


def test_calls_on_one_node_and_level_merge_and_cross_node_reads_start_a_level():
    calls = _two_statement_batch()
    merged = merge(calls, frozenset({(2, 0), (3, 0)}))
    assert [(m.node, m.level, m.entries) for m in merged] == [
        (0, 0, (0, 2)), (1, 0, (1,)), (1, 1, (3,))]
    # A's node-0 result is read on node 1 (returned); A's node-1 result only by node 1's
    # next call, at the next level (returned too: another call reads it)
    assert merged[0].exports == ((0, 0), (2, 0))
    assert merged[1].exports == ((1, 0),)
    # inside the merged node-0 call, B reads A's result as a step, not as an argument
    assert merged[0].steps[1][1] == (("t", 0),)
    separate, together = _run_separately(calls), _run_merged(calls, merged)
    for key in [(2, 0), (3, 0)]:
        np.testing.assert_array_equal(together[key], separate[key])


def test_a_result_only_its_own_merged_call_reads_is_not_returned():
    calls = _two_statement_batch()[:3]  # A on both nodes, B on node 0
    merged = merge(calls, frozenset({(2, 0)}))
    assert [m.exports for m in merged] == [((2, 0),), ()]
    assert _run_merged(calls, merged)[(2, 0)].tolist() == [1.0, 3.0, 5.0, 7.0]
    # asked for (a tracked array still holds it), it is returned as well
    assert merge(calls, frozenset({(0, 0), (2, 0)}))[0].exports == ((0, 0), (2, 0))


@pytest.fixture
def batching(ray_cluster):
    """The shared cluster with ``measure`` off: array programs merge their calls."""
    session = tensorc_session.current()
    before = session.measure
    session.measure = False
    yield ray_cluster
    session.measure = before


def newton_step(xp, X, y, w):
    p = 1.0 / (1.0 + xp.exp(-(X @ w)))
    gradient = X.T @ (p - y)
    hessian = X.T @ (X * (p * (1.0 - p))[:, None])
    return w - xp.linalg.solve(hessian, gradient)


def test_a_newton_step_runs_as_merged_calls_and_matches_numpy(batching):
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(20000, 6)), (rng.random(20000) > 0.5).astype(float)
    x, labels = tc.asarray(X, grid=(4, 1)), tc.asarray(y, grid=(4,))
    w, expected = tc.zeros(6), np.zeros(6)
    for _ in range(3):  # the second and third steps reuse the merged plan
        w = newton_step(tc, x, labels, w).compute()
        expected = newton_step(np, X, y, expected)
        np.testing.assert_allclose(w.numpy(), expected, rtol=1e-9)
        stats = tc.last_stats()
        planned = sum(s.get("remote_calls") or 0 for s in stats["statements"])
        # four row blocks: one call per node for every row-wise statement, then the sums
        assert stats["remote_calls"] < planned
        assert stats["remote_calls"] <= 4 + 4


def test_an_intermediate_asked_for_stays_readable_after_the_batch(batching):
    x = tc.random((4096, 8), grid=(4, 1), seed=21)
    centred = x - tc.mean(x, axis=0)
    scaled = centred * 2.0
    total = tc.sum(scaled * centred, axis=0)
    tc.compute(centred, total)  # centred is an output: its blocks are returned
    data = x.numpy()
    want = data - data.mean(0)
    np.testing.assert_allclose(centred.numpy(), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(total.numpy(), (2 * want * want).sum(0), rtol=1e-10)
    # and it feeds a later program, from the blocks the batch returned
    np.testing.assert_allclose(tc.max(centred, axis=0).numpy(), want.max(0), rtol=1e-10, atol=1e-12)


def test_a_whole_array_step_between_batched_statements(batching):
    """A reshape across blocks is one task reading real refs: the batch before it is
    submitted first, and the statements after it batch again."""
    x = tc.random((4096, 4), grid=(4, 1), seed=22)
    reshaped = tc.reshape(x + 1.0, (2048, 8))
    result = tc.sum(reshaped * 3.0, axis=0)
    np.testing.assert_allclose(result.numpy(), ((x.numpy() + 1.0).reshape(2048, 8) * 3.0)
                               .sum(0), rtol=1e-10)
    whole = [s for s in tc.last_stats()["statements"] if s.get("whole_array") == "reshape"]
    assert whole and not whole[0].get("blockwise")


def test_a_kmeans_step_with_argmin_and_a_comparison_is_one_round_of_calls(batching):
    """argmin along the unsplit axis and the bool conversion of a comparison run as steps
    of the nodes' merged calls, not as tasks of their own between two batches."""
    rng = np.random.default_rng(6)
    data, start = rng.normal(size=(40_000, 4)), rng.normal(size=(3, 4))
    x = tc.asarray(data, grid=(4, 1))

    def step(xp, X, centres):
        distances = (xp.sum(X * X, axis=1)[:, None] - 2.0 * (X @ centres.T)
                     + xp.sum(centres * centres, axis=1)[None, :])
        member = xp.astype(xp.argmin(distances, axis=1)[:, None] == xp.arange(3)[None, :],
                           X.dtype)
        return (member.T @ X) / xp.maximum(xp.sum(member, axis=0), 1.0)[:, None]

    got = step(tc, x, tc.asarray(start)).compute()
    np.testing.assert_allclose(got.numpy(), step(np, data, start), rtol=1e-10)
    stats = tc.last_stats()
    searched = [s for s in stats["statements"] if s.get("whole_array") == "argmin"]
    assert searched and searched[0]["blockwise"]
    assert stats["remote_calls"] <= 4 + 4  # one call per node, then the sums


def test_small_driver_operands_under_rays_own_placement(batching):
    """Under ``ray_default`` the calls are not merged; a small numpy operand is placed as
    before, never handed to a task as a stand-in."""
    session = tensorc_session.current()
    before = session.scheduler
    session.scheduler = "ray_default"
    try:
        x = tc.random((100_000, 8), grid=(4, 1), seed=23)
        total = tc.sum(x * np.arange(8.0), axis=0)
        np.testing.assert_allclose(total.numpy(), (x.numpy() * np.arange(8.0)).sum(0),
                                   rtol=1e-10)
        assert tc.last_stats()["remote_calls"] > 0
    finally:
        session.scheduler = before


def test_a_program_failing_on_the_driver_leaves_its_inputs_usable(batching):
    """A statement on the driver raising (a singular solve) after node statements joined
    the batch: the batch is forgotten, and so are the re-laid-out copies it was to make of
    the inputs; the next program on the same inputs is right."""
    c = tc.random((100_000, 32), grid=(1, 4), seed=24)  # column blocks: c.T @ c re-lays out
    singular = tc.asarray(np.ones((32, 32)))
    with pytest.raises(tc.LinAlgError, match="Singular matrix"):
        tc.compute(c.T @ c, c @ tc.linalg.inv(singular))
    data = c.numpy()
    np.testing.assert_allclose((c.T @ c + 1.0).numpy(), data.T @ data + 1.0, rtol=1e-10)


def test_a_threaded_call_runs_on_the_kept_pool_and_a_failure_waits_for_its_other_steps():
    """A node call's steps on several threads run on the worker's one kept pool (the same
    threads every call, so their allocator arenas too); a step that fails fails the call
    only once its other running steps have ended, as when each call had its own pool."""
    import threading
    import time

    from tensorc.runtime.task_pool import helper_pool

    names = set()

    def named(a):
        names.add(threading.current_thread().name)
        return a + 1

    steps = tuple((Step(RUN, named), (("x", 0),)) for _ in range(6))
    for _ in range(3):
        assert [int(r[0]) for r in run_steps(steps, (np.zeros(1),), (0, 5), threads=2)] == [1, 1]
    pool_threads = {thread.name for thread in helper_pool(2)._threads}  # noqa: SLF001
    assert names and names <= pool_threads

    finished = threading.Event()

    def slow(a):
        time.sleep(0.3)
        finished.set()
        return a

    def fail(a):
        raise ValueError("bad block")

    steps = ((Step(RUN, slow), (("x", 0),)), (Step(RUN, fail), (("x", 0),)))
    with pytest.raises(ValueError, match="^bad block$"):
        run_steps(steps, (np.zeros(1),), (0, 1), threads=2)
    assert finished.is_set()
