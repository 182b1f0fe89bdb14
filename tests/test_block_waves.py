"""A wave of placed block tasks as calls (plain data, no Ray): one call per node and level,
a chain on one node one call, results returned only when another call or a later wave reads
them."""

from __future__ import annotations

import pytest

from tensorc.runtime.ray.block_waves import PENDING, REF, BlockKernel, Wave


def kernel(results: int = 1) -> BlockKernel:
    return BlockKernel(None, (), results)


def test_a_chain_on_one_node_is_one_call_that_returns_only_what_is_wanted():
    wave = Wave()
    first = wave.add(0, kernel(), [(REF, "x")])
    second = wave.add(0, kernel(), [(PENDING, first, 0)])
    wave.add(0, kernel(), [(PENDING, second, 0), (REF, "x")])
    calls = wave.calls(wanted={(2, 0)})
    assert len(calls) == 1
    node, steps, args, exports, exported, *_ = calls[0]
    assert node == 0 and len(steps) == 3 and args == ((REF, "x"),)
    assert [inputs for _, inputs in steps] == [(("x", 0),), (("t", 0),), (("t", 1), ("x", 0))]
    assert exports == (2,) and exported == [(2, 0)]


def test_an_edge_to_another_node_starts_a_level_and_crosses_as_a_return_value():
    wave = Wave()
    a = wave.add(0, kernel(), [(REF, "x")])
    b = wave.add(1, kernel(), [(PENDING, a, 0)])
    wave.add(0, kernel(), [(PENDING, a, 0), (PENDING, b, 0)])
    assert wave.levels() == [0, 1, 2]
    calls = wave.calls(wanted={(2, 0)})
    assert [(node, exported) for node, _, _, _, exported, *_ in calls] == [
        (0, [(0, 0)]), (1, [(1, 0)]), (0, [(2, 0)])]
    assert calls[2][2] == ((PENDING, 0, 0), (PENDING, 1, 0))


def test_a_call_whose_arguments_exceed_the_budget_is_cut_into_parts_on_its_node():
    # node 0's units at level 0 read 100-byte blocks from the store; with a budget of 200
    # the third starts a second call on node 0, which reads the first's result kept there
    # (kept: no store) and counts again the block x the first part read too
    wave = Wave()
    a = wave.add(0, kernel(), [(REF, "x")], [100])
    b = wave.add(0, kernel(), [(REF, "y"), (PENDING, a, 0)], [100, 100])
    c = wave.add(0, kernel(), [(REF, "z"), (PENDING, a, 0), (REF, "x")], [100, 100, 100])
    d = wave.add(1, kernel(), [(REF, "w")], [500])
    level = wave.levels()
    assert level == [0, 0, 0, 0]
    wanted = {(b, 0), (c, 0), (d, 0)}
    assert wave.parts(level, None) == [0, 0, 0, 0]
    part = wave.parts(level, 200, wanted, range(2))
    assert part == [0, 0, 1, 0]
    calls = wave.calls(wanted=wanted, nodes_kept=range(2), level=level, part=part)
    assert [call[0] for call in calls] == [0, 0, 1]
    first, second, _ = calls
    assert first[2] == ((REF, "x"), (REF, "y")) and first[6] == ((0, f"{a}.0"),)  # a kept
    assert second[2] == ((REF, "z"), (REF, "x")) and second[5] == ((f"{a}.0", True),)
    assert first[4] == [(b, 0)] and second[4] == [(c, 0)]
    assert wave.parts(level, 250, wanted, range(2)) == [0, 0, 1, 0]  # x again: 300 > 250


def test_a_part_counts_a_result_of_its_node_that_is_stored_and_nothing_it_holds():
    wave = Wave()
    big = wave.add(0, kernel(), [(REF, "x")], [500])  # over the budget alone: a part
    wave.add(0, kernel(), [(PENDING, big, 0)], [500])  # reads only its result: no new part
    level = wave.levels()
    assert wave.parts(level, 200, set(), range(1)) == [0, 0]
    wave = Wave()
    a = wave.add(0, kernel(), [(REF, "x")], [150])
    wave.add(1, kernel(), [(PENDING, a, 0)], [150])  # read on node 1: a is stored
    b = wave.add(0, kernel(), [(REF, "y")], [150])  # level 1 on node 0 (the floor)
    wave.add(0, kernel(), [(REF, "z"), (PENDING, b, 0)], [30, 150])
    wave.add(0, kernel(), [(PENDING, a, 0)], [150])  # a from the store: 180 + 150 > 200
    level = wave.levels()
    assert level == [0, 1, 1, 1, 1]
    assert wave.parts(level, 200, set(), range(2)) == [0, 0, 0, 0, 1]


def test_a_node_s_later_parts_of_a_level_wait_with_the_part_that_reads_the_driver():
    # node 0's level-1 units are cut in two parts; the first reads a DRIVER unit, so both
    # go after the driver ran it, in part order (the second reads the first's result)
    from tensorc.runtime.ray.block_waves import DRIVER, Prepared

    wave = Wave()
    a = wave.add(1, kernel(), [(REF, "a")], [10])
    small = wave.add(DRIVER, kernel(), [(PENDING, a, 0)], [10])
    u1 = wave.add(0, kernel(), [(PENDING, small, 0), (REF, "p")], [10, 600])
    u2 = wave.add(0, kernel(), [(PENDING, u1, 0), (REF, "q")], [10, 600])
    level = wave.levels()
    part = wave.parts(level, 1000, {(u2, 0)}, range(2))
    assert part == [0, 0, 0, 1]
    calls = wave.calls({(u2, 0)}, range(2), level=level, part=part)
    assert [call[0] for call in calls] == [1, 0, 0]
    prepared = Prepared(calls, {(u2, 0)}, {}, wave.driver_units(),
                        [key[0] for key in wave._call_keys(level, part)])
    assert prepared.order == [0, (small,), 1, 2]


def test_a_task_with_two_results_is_picked_apart_for_its_readers():
    wave = Wave()
    qr = wave.add(0, kernel(results=2), [(REF, "x")])
    wave.add(0, kernel(), [(PENDING, qr, 1)])
    ((_, steps, _, exports, exported, *_),) = wave.calls(wanted={(qr, 0), (1, 0)})
    assert len(steps) == 4  # the task, its two results picked, the reader
    assert exported == [(0, 0), (1, 0)] and exports == (1, 3)


def test_once_another_node_reads_a_call_s_result_the_node_s_later_units_start_a_new_call():
    wave = Wave()
    a = wave.add(0, kernel(), [(REF, "x")])
    wave.add(1, kernel(), [(PENDING, a, 0)])  # reads a: node 0's call 0 ends with a
    wave.add(0, kernel(), [(REF, "y")])  # placed after that read: node 0's next call
    wave.add(2, kernel(), [(REF, "z")])
    wave.add(1, kernel(), [(REF, "w")])  # after node 1's level-1 unit: not before it
    assert wave.levels() == [0, 1, 1, 0, 1]


def test_a_result_only_its_node_s_later_calls_read_is_kept_and_the_last_reader_takes_it():
    wave = Wave()
    tall = wave.add(0, kernel(), [(REF, "x")])  # node 0, level 0
    small = wave.add(0, kernel(), [(PENDING, tall, 0)])
    root = wave.add(1, kernel(), [(PENDING, small, 0)])  # node 1 reads small: level 1
    first = wave.add(0, kernel(), [(PENDING, tall, 0), (PENDING, root, 0)])  # level 2
    spread = wave.add(1, kernel(), [(PENDING, first, 0)])  # level 3, node 1
    wave.add(0, kernel(), [(PENDING, tall, 0), (PENDING, spread, 0)])  # level 4
    calls = wave.calls(wanted={(5, 0)}, nodes_kept=range(2))
    assert [(node, exported) for node, _, _, _, exported, *_ in calls] == [
        (0, [(small, 0)]), (1, [(root, 0)]), (0, [(first, 0)]), (1, [(spread, 0)]),
        (0, [(5, 0)])]
    # keys are relative to the prefix the calls are submitted with (the run's)
    assert calls[0][6] == ((0, "0.0"),)  # tall stays on node 0, not returned
    assert calls[2][5] == (("0.0", False),)  # read, left for the later reader
    assert calls[4][5] == (("0.0", True),)  # the last reader takes it back
    _, steps, args, *_ = calls[4]
    assert args == ((PENDING, spread, 0),)  # kept results follow the arguments
    assert steps[0][1] == (("x", 1), ("x", 0))
    # without a worker on node 0, it is returned as before
    plain = wave.calls(wanted={(5, 0)}, nodes_kept=(1,))
    assert plain[0][4] == [(tall, 0), (small, 0)] and not plain[0][6]


def test_a_calls_report_travels_as_plain_values_and_reads_back_as_a_node_report():
    """Every node call returns its report as a tuple of builtins (:func:`wire_report`),
    which Ray sends with msgpack (a ``NodeReport`` went through cloudpickle at both ends);
    :func:`read_report` gives back a ``NodeReport`` equal to the node id, carrying the
    peak and the pulled counts, and leaves a node id or ``None`` as it is."""
    import msgpack

    from tensorc.runtime.ray.tasks import NodeReport, read_report, wire_report

    sent = wire_report("ab" * 28, 123_456_789, (4096, 2))
    assert msgpack.unpackb(msgpack.packb(sent), use_list=False) == sent
    back = read_report(sent)
    assert type(back) is NodeReport and back == "ab" * 28
    assert (back.peak_rss, back.pulled, back.through_ray) == (123_456_789, 4096, 2)
    assert read_report(wire_report("cd", None, (0, 0))).peak_rss is None
    assert read_report("ef") == "ef" and read_report(None) is None


def test_a_held_final_block_stays_in_its_call_and_a_later_reader_on_its_node_leaves_it():
    # node 0 makes a, a final block to hold that its own later call reads too (after node
    # 1's c, which starts that call's level); c is a final block to hold as well, but a
    # call on node 0 reads it: it must cross, so it is returned instead
    wave = Wave()
    a = wave.add(0, kernel(), [(REF, "x")])
    c = wave.add(1, kernel(), [(REF, "y")])
    wave.add(0, kernel(), [(PENDING, a, 0), (PENDING, c, 0)])
    calls = wave.calls(wanted={(a, 0), (c, 0), (2, 0)}, nodes_kept=(0, 1),
                       held={(a, 0): 8, (c, 0): 8})
    first, second, last = calls
    assert [call[0] for call in calls] == [0, 1, 0]
    assert first[4] == [] and first[6] == () and first[7] == ((0, "0.0", (a, 0)),)
    assert second[4] == [(c, 0)] and second[7] == ()  # read on node 0: returned, not held
    assert last[5] == (("0.0", False),)  # the reader never takes a held block back
    assert last[4] == [(2, 0)]


def test_a_held_block_on_a_node_without_a_worker_is_returned():
    wave = Wave()
    a = wave.add(2, kernel(), [(REF, "x")])
    ((_, _, _, exports, exported, _, keep_out, held),) = wave.calls(
        wanted={(a, 0)}, nodes_kept=(0, 1), held={(a, 0): 8})
    assert exported == [(a, 0)] and exports == (0,) and keep_out == () and held == ()


def test_the_markers_a_call_resolves_in_its_worker_pickle_by_value():
    import pickle

    from tensorc.runtime.ray.tasks import HeldRead, ZerosRead

    zeros = pickle.loads(pickle.dumps(ZerosRead((2, 3), "<f4")))
    assert (zeros.shape, zeros.dtype) == ((2, 3), "<f4")
    assert pickle.loads(pickle.dumps(HeldRead("7.3/0/1.0"))).key == "7.3/0/1.0"


def test_a_call_s_held_reads_travel_as_one_argument_and_come_back_in_place(monkeypatch):
    import pickle

    from tensorc.runtime.ray import tasks
    from tensorc.runtime.ray.tasks import HeldRead, HeldReads

    first, second = [0.0, 1.0], [[1.0]]
    monkeypatch.setitem(tasks.HELD, "made7/0", first)
    monkeypatch.setitem(tasks.HELD, "made7/1", second)
    args = ["ref a", HeldRead("made7/0"), "ref b", HeldRead("made7/1"), "ref c"]
    packed = HeldReads.packed(args)
    assert packed[:3] == ["ref a", "ref b", "ref c"] and len(packed) == 4
    sent = pickle.loads(pickle.dumps(tuple(packed)))
    got = HeldReads.unpacked(sent)
    assert got[0] == "ref a" and got[2] == "ref b" and got[4] == "ref c"
    assert got[1] is first and got[3] is second  # read in place, not copied
    assert tasks.HELD["made7/0"] is first  # and still held
    lone = ["ref a", HeldRead("made7/0")]
    assert HeldReads.packed(lone) is lone  # one read stays one argument
    assert HeldReads.unpacked(("ref a", "ref b")) == ("ref a", "ref b")


def _tree_in_the_driver() -> tuple[Wave, tuple[int, ...]]:
    """A TSQR's tree in miniature: leaves on nodes 0 and 1, their R factors merged in the
    driver, the merged factor split there again, and each node's last unit reading its
    leaf and its part of the split. Returns the wave and its units in that order."""
    from tensorc.runtime.ray.block_waves import DRIVER

    wave = Wave()
    leaf0 = wave.add(0, kernel(results=2), [(REF, "a0")])
    leaf1 = wave.add(1, kernel(results=2), [(REF, "a1")])
    merged = wave.add(DRIVER, kernel(results=2), [(PENDING, leaf0, 1), (PENDING, leaf1, 1)])
    split = wave.add(DRIVER, kernel(results=2), [(PENDING, merged, 0)])
    last0 = wave.add(0, kernel(), [(PENDING, leaf0, 0), (PENDING, split, 0)])
    last1 = wave.add(1, kernel(), [(PENDING, leaf1, 0), (PENDING, split, 1)])
    return wave, (leaf0, leaf1, merged, split, last0, last1)


def test_a_small_task_at_a_hop_runs_in_the_driver_between_two_levels_of_calls():
    # a TSQR's tree in miniature: leaves on nodes 0 and 1, their R factors merged in the
    # driver (DRIVER), the merged factor split in the driver again, and each node's last
    # call reading its leaf (kept on its node) and its part of the split (a value)
    from tensorc.runtime.ray.block_waves import Prepared

    wave, (leaf0, leaf1, merged, split, last0, last1) = _tree_in_the_driver()
    level = wave.levels()
    assert level[merged] == level[split] == 1  # one above the leaves it reads
    assert level[last0] == level[last1] == 1  # submitted once the driver ran both
    assert [(u, k.results) for u, k, _ in wave.driver_units()] == [(merged, 2), (split, 2)]
    calls = wave.calls(wanted={(last0, 0), (last1, 0), (merged, 1)}, nodes_kept=range(2))
    assert [call[0] for call in calls] == [0, 1, 0, 1]  # no call for the driver's units
    # each leaf's R is returned for the driver; its tall Q stays kept for its node's call
    assert calls[0][4] == [(leaf0, 1)] and calls[0][6] == ((1, f"{leaf0}.0"),)
    assert calls[1][4] == [(leaf1, 1)]
    assert calls[2][2] == ((PENDING, split, 0),) and calls[3][2] == ((PENDING, split, 1),)
    prepared = Prepared(calls, {(last0, 0)}, {}, wave.driver_units(), [0, 0, 1, 1])
    # both driver units run before level 1's calls, not one call at a time
    assert prepared.order == [0, 1, (split, split), 2, 3]


def test_handed_over_a_tree_in_the_driver_leaves_one_call_per_node():
    # the same tree with the driver's values handed over (runtime/ray/posted.py): the
    # driver units sit at their inputs' level, so each node's leaf and last unit are one
    # call; the leaf's R is posted by the step right after it is made, and the split's
    # value is pulled by a step just before the last unit reads it
    from tensorc.runtime.ray.block_waves import PULL, Post, Prepared

    wave, (leaf0, _, _, split, last0, _) = _tree_in_the_driver()
    assert wave.levels(handed_over=True) == [0] * 6
    calls = wave.calls(wanted={(last0, 0)}, nodes_kept=range(2), handed_over=True)
    assert [call[0] for call in calls] == [0, 1]
    steps = [(step.kernel, inputs) for step, inputs in calls[0][1]]
    kinds = [type(k).__name__ if isinstance(k, Post) else k for k, _ in steps]
    # leaf, its two results, R posted, the split's value pulled, the last unit
    assert kinds[3] == "Post" and steps[3][0].key == f"{leaf0}.1"
    assert steps[3][1] == (("t", 2),)
    assert kinds[4] is PULL and calls[0][2][steps[4][1][0][1]] == (PENDING, split, 0)
    assert steps[5][1] == (("t", 1), ("t", 4))  # the leaf's Q, then the pulled value
    assert calls[0][4] == [(leaf0, 1), (last0, 0)]  # R still returned (the call's reply)
    prepared = Prepared(calls, {(last0, 0)}, {}, wave.driver_units(), [0, 0], post=True)
    assert prepared.order == [0, 1] and prepared.readers == {(split, 0): 1, (split, 1): 1}


def test_a_level_s_calls_that_read_nothing_of_the_driver_go_before_it_runs():
    from tensorc.runtime.ray.block_waves import DRIVER, Prepared

    wave = Wave()
    a = wave.add(0, kernel(), [(REF, "a")])
    b = wave.add(1, kernel(), [(REF, "b")])
    small = wave.add(DRIVER, kernel(), [(PENDING, a, 0), (PENDING, b, 0)])
    wave.add(2, kernel(), [(PENDING, small, 0)])  # level 1, reads the driver's
    wave.add(3, kernel(), [(PENDING, b, 0)])  # level 1, reads b only
    calls = wave.calls(wanted={(3, 0), (4, 0)})
    assert [(call[0]) for call in calls] == [0, 1, 2, 3]
    assert Prepared(calls, set(), {}, wave.driver_units(), [0, 0, 1, 1]).order == [
        0, 1, 3, (small,), 2]
    with pytest.raises(ValueError, match="needs its calls' levels"):
        Prepared(calls, set(), {}, wave.driver_units())


def test_a_block_the_driver_made_is_kept_read_only():
    import numpy as np

    from tensorc.runtime.ray.inline import Inline, made_here

    block = np.ones((2, 3))
    kept = made_here(block)
    assert type(kept) is Inline and kept.value is block and not block.flags.writeable
    assert made_here(2.5).value == 2.5  # a scalar result is kept as it is


def test_a_call_that_pulls_the_drivers_values_runs_its_steps_in_order(monkeypatch):
    # on threads, a pull could take a thread at once and keep a failing step's error
    # waiting behind it (the driver waits for that call's posts, the pull for the driver's):
    # such a call runs on one thread; a failing one marks what it would have posted failed
    import pickle

    from tensorc.runtime.ray import posted, tasks
    from tensorc.runtime.ray.stages import RUN, Step

    seen = []

    def failing_run_steps(steps, blocks, exports, threads, budget, widen):
        seen.append(threads)
        raise RuntimeError("a step failed")

    monkeypatch.setattr(tasks, "_worker_setup", lambda: "node")
    monkeypatch.setattr(tasks, "run_steps", failing_run_steps)
    steps = ((Step(RUN, tasks.Post("0.1")), (("x", 0),)), (Step(RUN, tasks.pull), (("x", 1),)))
    payload = pickle.dumps((steps, (), None, (), (), (), ((0, "0.1"),)))
    with pytest.raises(RuntimeError, match="a step failed"):
        tasks._stage("run/", payload, 2, "a value", "a posted read")
    assert seen == [1]
    assert posted.take("run/0.1", 0.0) == (False, None)  # marked failed, not missing
