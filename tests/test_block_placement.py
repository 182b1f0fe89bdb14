"""The block placer's simulated cores (no Ray): nodes on separate machines add compute,
nodes sharing one machine share its cores; and the calibration's grouping of nodes by host."""

from __future__ import annotations

import random

import pytest

from tensorc.placement.block_placement import BlockPlacer
from tensorc.planning.cost import Machine
from tensorc.runtime.ray.calibrate import hosts_of

FLOPS = 1e9  # one second of compute a task at the placer's 1 GFLOP/s


def place_independent_tasks(hosts, tasks: int = 4, cores: int = 1) -> BlockPlacer:
    """``tasks`` tasks of one second each, each reading its own small block on node 0."""
    placer = BlockPlacer(4, cores, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                         task_seconds=0.0, hop_seconds=0.01, hosts=hosts)
    for _ in range(tasks):
        block = placer.add_version(1000, 1, node=0)
        out = placer.add_version(1000, 0)
        node = placer.place([block], 1000, FLOPS)
        placer.run([out], [block], node, FLOPS)
    return placer


def makespan(placer: BlockPlacer) -> float:
    return max(max(node) for node in placer.cores)


def test_nodes_on_separate_machines_each_add_their_cores():
    placer = place_independent_tasks(None)
    assert placer.tasks_per_node == [1, 1, 1, 1]
    assert makespan(placer) < 1.01  # all four at once


def test_nodes_sharing_a_two_core_machine_run_two_tasks_at_a_time():
    placer = place_independent_tasks(((0, 0, 0, 0), (2,)))
    assert [len(pool) for pool in placer.pools] == [2]
    assert 2.0 <= makespan(placer) < 2.01  # not 1 s: four nodes, but two cores
    assert placer.tasks_per_node == [4, 0, 0, 0]  # spreading would gain nothing: no copy


def test_a_node_on_a_shared_machine_has_the_machine_s_cores_and_the_pool_bounds_them():
    """The runtime gives a node with a wave's work alone its machine's cores
    (``wave_threads``), so the simulation does too; the machine's pool bounds the nodes'
    tasks together. Four one-second tasks reading blocks of node 0 on a 4-core machine of 4
    one-core nodes: all four at once, on node 0 (no copy), not one a node."""
    placer = place_independent_tasks(((0, 0, 0, 0), (4,)))
    assert [len(cores) for cores in placer.cores] == [4, 4, 4, 4]
    assert [len(pool) for pool in placer.pools] == [4]
    assert placer.tasks_per_node == [4, 0, 0, 0] and makespan(placer) < 1.01
    assert placer.wave_threads([1, 1, 1, 1]) == [4, 1, 1, 1]
    two_machines = place_independent_tasks(((0, 0, 1, 1), (8, 8)), tasks=8)
    assert [len(pool) for pool in two_machines.pools] == [8, 8]
    assert makespan(two_machines) < 1.01  # 8 cores on node 0's machine: one round


def test_hosts_are_numbered_in_order_and_only_shared_ones_change_the_model():
    assert hosts_of([("a/1", 2), ("b/1", 4), ("a/1", 2)]) == ((0, 1, 0), (2, 4))
    shared = Machine(host_of=(0, 1, 0), host_cores=(2, 4))
    assert shared.hosts(3) == ((0, 1, 0), (2, 4))
    assert shared.hosts(4) is None  # figures for another cluster
    assert Machine(host_of=(0, 1), host_cores=(2, 2)).hosts(2) is None  # one node each
    assert Machine().hosts(4) is None
    probed = Machine(host_of=(0, 0, 1), host_cores=(2, 4), host_nodes=("n0", "n1", "n2"))
    assert probed.hosts(3, ["n2", "n0", "n1"]) == ((1, 0, 0), (2, 4))  # matched by id
    assert probed.hosts(2, ["n0", "n1"]) == ((0, 0), (2, 4))  # n2 died: the rest still share
    assert probed.hosts(3, ["n0", "n1", "n9"]) is None  # a node the probe did not see
    assert "3 node(s) on 2 host(s) of 2/4 core(s), shared" in shared.describe()


def test_a_result_leaves_its_node_when_its_call_ends_and_a_reader_closes_the_call():
    placer = BlockPlacer(2, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                         task_seconds=0.0, hop_seconds=0.01)
    source = placer.add_version(1000, 2, node=0)
    first, second = placer.add_version(1000, 1), placer.add_version(1000, 1)
    placer.run([first], [source], 0, FLOPS)  # 0-1 s on node 0
    placer.run([second], [source], 0, FLOPS)  # 1-2 s, the same call on node 0
    # read on node 1, `first` leaves when node 0's call ends (2 s), not when it was made
    assert placer._finish([first], FLOPS, 1) > 3.0
    assert placer._finish([first], FLOPS, 0) == 3.0
    reader = placer.add_version(1000, 0)
    placer.run([reader], [first], 1, FLOPS)
    assert placer.made_in[reader] == (1, 1)  # a call one level up on node 1
    assert placer.floor == [1, 1]  # node 0's next task starts its next call
    # the copy: the call ended (2 s), the hop, its bytes, one object's half hop
    assert placer.copied[(first, 1)] == pytest.approx(2.01 + 1e-6 + 0.005)
    # a second reader on node 1 finds the copy there: its core is the wait, not the copy
    assert placer._finish([first], FLOPS, 1) == pytest.approx(4.015 + 1e-6)
    later = placer.add_version(1000, 0)
    placer.run([later], [source], 0, FLOPS)
    assert placer.made_in[later] == (0, 1) and placer.made_in[first] == (0, 0)
    # on node 0, a task of its next call reading `first` waits for the first call's end
    assert placer._timing([first], 0.0, 0)[:2] == (pytest.approx(3.0), 1)
    placer.new_wave()  # submitted: later tasks start calls above every level so far
    assert placer.floor == [2, 2]


def test_a_call_s_copies_arrive_after_its_last_input_exists_one_after_another():
    """Ray sends a call to its worker once all its arguments exist, and the worker then
    pulls them: a copy that could leave early still arrives after the call's late one."""
    placer = BlockPlacer(2, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                         task_seconds=0.0, hop_seconds=0.01)
    early = placer.add_version(10**6, 2, node=1)  # an input on node 1: can leave at once
    source = placer.add_version(1000, 1, node=1)
    late = placer.add_version(1000, 1)
    placer.run([late], [source], 1, FLOPS)  # made on node 1 by a 1 s call
    reader = placer.add_version(1000, 0)
    placer.run([reader], [late], 0, 0.0)  # node 0's call at level 1 reads it
    assert placer.copied[(late, 0)] == pytest.approx(1.01 + 1e-6 + 0.005)
    # joining that call, `early` arrives after `late` can leave and both were moved
    finish, level, copies, copied = placer._timing([early, late], 0.0, 0)
    assert level == 1 and copied == [early]
    assert copies == (pytest.approx(1.01), 1000 + 10**6, 2, pytest.approx(2 * 0.005))
    assert finish == pytest.approx(1.01 + (1000 + 10**6) / 1e9 + 2 * 0.005)


def test_a_result_ray_carries_in_its_messages_pays_the_small_hop():
    """A call's result of at most ``inline_bytes`` crosses a call boundary at the small hop
    (Ray carries it inside its messages); a larger one pays the hop, and so does an input
    of any size (it is in the object store); each copy half its own hop."""
    placer = BlockPlacer(2, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                         task_seconds=0.0, hop_seconds=0.01, small_hop_seconds=0.002,
                         inline_bytes=99 * 1024)
    source = placer.add_version(1000, 2, node=1)
    small, large = placer.add_version(99 * 1024, 1), placer.add_version(99 * 1024 + 8, 1)
    placer.run([small, large], [source], 1, FLOPS)  # both made on node 1 by a 1 s call
    assert placer._arrival(small, 0, placer.made_in[small], 1) == (pytest.approx(1.002), True)
    assert placer._arrival(large, 0, placer.made_in[large], 1) == (pytest.approx(1.01), True)
    finish, _, copies, _ = placer._timing([small, large], 0.0, 0)
    assert copies[3] == pytest.approx(0.001 + 0.005)
    assert finish == pytest.approx(1.01 + (2 * 99 * 1024 + 8) / 1e9 + 0.006)
    tiny_input = placer.add_version(8, 1, node=1)  # an input: stored, the hop's half
    assert placer._timing([tiny_input], 0.0, 0)[2][3] == pytest.approx(0.005)


def test_a_call_reading_its_node_s_earlier_result_copies_nothing_before_that_result_exists():
    """Ray sends a call once every argument exists, those its own node made in an earlier
    call included, and the node fetches the copies then: a tall block copied to the node of
    a small factor made by a long call arrives after that call ends, not while it runs (so
    TSQR's last products stay on their blocks' nodes, not on the tree root's)."""
    placer = BlockPlacer(2, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                         task_seconds=0.0, hop_seconds=0.01)
    tall = placer.add_version(10**6, 1, node=1)  # an input on node 1: can leave at once
    source = placer.add_version(1000, 1, node=0)
    factor = placer.add_version(1000, 1)
    placer.run([factor], [source], 0, FLOPS)  # node 0's 1 s call makes the factor
    reader = placer.add_version(1000, 0)
    placer.run([reader], [factor], 1, 0.0)  # node 1 reads it: node 0's next call is level 1
    finish, level, copies, copied = placer._timing([tall, factor], 0.0, 0)
    assert level == 1 and copied == [tall]
    # it leaves when the factor exists
    assert copies == (pytest.approx(1.0), 10**6, 1, pytest.approx(0.005))
    assert finish == pytest.approx(1.0 + 10**6 / 1e9 + 0.005)


def test_finishes_within_half_a_hop_are_a_tie_that_bytes_decide():
    """A 2.6 MB block is not moved to finish a millisecond sooner in the model."""
    placer = BlockPlacer(2, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                         task_seconds=0.0, hop_seconds=0.01)
    busy = placer.add_version(1000, 1, node=0)
    placer.run([placer.add_version(1000, 0)], [busy], 0, 0.010 * FLOPS)  # node 0: 10 ms
    big = placer.add_version(2_600_000, 1, node=0)
    # node 1 finishes at 2.6 + 5 (copy: bytes, one object) + 1 ms, node 0 at 10 + 1 ms
    assert placer._finish([big], 0.001 * FLOPS, 1) < placer._finish([big], 0.001 * FLOPS, 0)
    assert placer.place([big], 1000, 0.001 * FLOPS) == 0
    placer.tie_seconds = 0.0  # finish alone would move it
    assert placer.place([big], 1000, 0.001 * FLOPS) == 1


def test_a_node_alone_with_a_wave_s_work_on_a_shared_machine_uses_its_cores():
    placer = place_independent_tasks(((0, 0, 0, 0), (2,)), tasks=1)  # one task, one node
    assert placer.wave_threads([1, 1, 1, 1]) == [2, 1, 1, 1]
    placer.new_wave()  # a new wave starts with no work placed
    assert placer.wave_threads([1, 1, 1, 1]) == [1, 1, 1, 1]
    placer.wave_flops = [1.0, 1.0, 1.0, 1.0]  # four nodes share the work: a core each
    assert placer.wave_threads([1, 1, 1, 1]) == [1, 1, 1, 1]  # (2 cores: oversubscribed)
    separate = place_independent_tasks(None, tasks=1)  # machines of their own: their CPUs
    assert separate.wave_threads([1, 3, 1, 1]) == [1, 3, 1, 1]


def test_a_shared_machine_s_cores_follow_the_flops_and_nodes_gone_get_one():
    placer = BlockPlacer(2, 2, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                         task_seconds=0.0, hop_seconds=0.01, hosts=((0, 0), (4,)))
    placer.wave_flops = [0.5, 0.5]  # an even share: 2 cores each
    assert placer.wave_threads([2, 2]) == [2, 2]
    placer.wave_flops = [0.9, 0.1]  # 3.6 and 0.4 cores: the busier node takes all 4, the
    assert placer.wave_threads([2, 2]) == [4, 1]  # other keeps one for its little work
    placer.wave_flops = [0.99, 0.01]
    assert placer.wave_threads([1, 1]) == [4, 1]  # not 1 each: own CPUs hold no cores
    placer.wave_flops = [0.9, 0.0]  # node 1 idle: node 0 takes the 2 cores it leaves
    assert placer.wave_threads([2, 2]) == [4, 2]
    assert placer.wave_threads([2]) == [4, 1]  # node 1 left the cluster: one thread


def test_a_block_read_twice_is_copied_once():
    placer = BlockPlacer(2, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                         task_seconds=0.0, hop_seconds=0.01)
    block = placer.add_version(10**6, 2, node=1)
    once = placer._timing([block], 0.0, 0)
    twice = placer._timing([block, block], 0.0, 0)  # L{i,k} @ T(L{i,k})
    assert twice[0] == once[0] == pytest.approx(10**6 / 1e9 + 0.005)
    assert twice[2] == (0.0, 10**6, 1, pytest.approx(0.005))


def test_a_call_starts_once_all_its_copies_arrived_whoever_brought_them():
    placer = BlockPlacer(2, 2, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                         task_seconds=0.0, hop_seconds=0.01)  # a core to spare on node 0
    small, big = placer.add_version(1000, 2, node=1), placer.add_version(10**9, 1, node=1)
    placer.run([placer.add_version(1000, 0)], [small], 0, 0.0)
    placer.run([placer.add_version(1000, 0)], [big], 0, 0.0)  # 1 s of copying, same call
    # a third task of that call reads only what is already there, yet waits for the call
    finish, level, _, copied = placer._timing([small], 0.0, 0)
    assert level == 0 and copied == []
    assert finish >= 1.0


def cholesky_on(nodes: int, weigh_all: int, monkeypatch) -> tuple:
    """The simulated figures of the shipped Cholesky, n = 4096 in 8 x 8 blocks, on
    ``nodes`` nodes, with ``weigh_all`` as the placer's :data:`WEIGH_ALL_NODES`, and how
    many (task, node) pairs the placer weighed."""
    from tensorc.codegen.block_layout import environment
    from tensorc.driver.block_programs import shipped
    from tensorc.placement import block_placement
    from tensorc.planning.block_counts import simulate

    monkeypatch.setattr(block_placement, "WEIGH_ALL_NODES", weigh_all)
    weighed = []
    finish = BlockPlacer._finish
    monkeypatch.setattr(BlockPlacer, "_finish",
                        lambda self, *args: weighed.append(args[-1]) or finish(self, *args))
    program = shipped("cholesky").program
    env, bounds = environment(program, {"A": (4096, 4096)}, {"NB": 8})
    found = simulate(program, env, bounds, nodes=nodes, cores=8)
    return (found.makespan, found.moved_bytes, found.busiest_in_bytes,
            found.peak_node_bytes), len(weighed)


def test_a_large_cluster_weighs_a_task_on_few_nodes_and_places_it_as_every_node_would(
        monkeypatch):
    """Beyond WEIGH_ALL_NODES nodes a task is weighed on its inputs' nodes, the first
    unused node and the 16 used nodes whose cores free first; on 300 nodes the
    Cholesky's 120 tasks get the schedule weighing all 300 gives, at a fraction of the
    weighing."""
    every, weighed_every = cholesky_on(300, 10**6, monkeypatch)
    few, weighed_few = cholesky_on(300, 64, monkeypatch)
    assert few == every
    assert weighed_every == 120 * 300
    assert weighed_few <= weighed_every / 10


def test_small_clusters_and_shared_machines_weigh_every_node():
    assert not BlockPlacer(64, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                           task_seconds=0.0).narrowed
    assert BlockPlacer(65, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                       task_seconds=0.0).narrowed
    shared = ((0,) * 65, (2,))
    assert not BlockPlacer(65, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                           task_seconds=0.0, hosts=shared).narrowed


def random_dag_on(nodes: int, weigh_all: int, monkeypatch) -> float:
    """The makespan of 400 tasks of 0.1-3 s, each reading one or two earlier results (the
    first reads a block on node 0), on ``nodes`` one-core nodes."""
    from tensorc.placement import block_placement

    monkeypatch.setattr(block_placement, "WEIGH_ALL_NODES", weigh_all)
    rng = random.Random(1)
    placer = BlockPlacer(nodes, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e8,
                         task_seconds=0.0, hop_seconds=0.001)
    made = [placer.add_version(10**5, 1 << 30, node=0)]
    for _ in range(400):
        inputs = rng.sample(made, min(len(made), rng.choice((1, 2))))
        out = placer.add_version(10**5, 1 << 30)
        flops = rng.choice((1e8, 1e9, 3e9))
        placer.run([out], inputs, placer.place(inputs, 10**5, flops), flops)
        made.append(out)
    return makespan(placer)


def test_a_large_cluster_spreads_tasks_as_well_as_weighing_every_node(monkeypatch):
    """Where many used nodes tie the choice is not the full scan's, but the load spreads as
    well: through the first unused node while there is one (without it the 400 tasks stay
    on the nodes their inputs are on: 595 s), then to the nodes that free first."""
    every = random_dag_on(100, 10**6, monkeypatch)
    assert every == pytest.approx(58.917)
    assert random_dag_on(100, 64, monkeypatch) <= every * 1.02


def test_used_nodes_that_tie_are_weighed_lowest_id_first(monkeypatch):
    """Every node holds a block, so none is unused and all free at 0: the 16 weighed are
    the lowest ids, as weighing every node would choose (not numpy's selection order)."""
    from tensorc.placement import block_placement

    def placements(weigh_all: int) -> list[int]:
        monkeypatch.setattr(block_placement, "WEIGH_ALL_NODES", weigh_all)
        placer = BlockPlacer(200, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                             task_seconds=0.0, hop_seconds=0.001)
        blocks = [placer.add_version(1000, 1 << 30, node=n) for n in range(200)]
        nodes = []
        for _ in range(40):
            out = placer.add_version(1000, 1 << 30)
            nodes.append(placer.place([blocks[0]], 1000, FLOPS))
            placer.run([out], [blocks[0]], nodes[-1], FLOPS)
        return nodes

    every = placements(10**6)
    assert placements(64) == every
    assert every[:3] == [0, 1, 2]


def _place_small_tasks(memory_cap: int | None) -> tuple[BlockPlacer, list[int]]:
    """Four tasks of no flops, each reading its own 1000-byte input on node 0 and making a
    kept 1000-byte result: without a cap LSHS keeps them by their inputs, on node 0."""
    placer = BlockPlacer(2, 1, "lshs", flops_per_core=1e9, bytes_per_second=1e9,
                         task_seconds=0.0, hop_seconds=0.01, memory_cap=memory_cap)
    inputs = [placer.add_version(1000, 1, node=0, retained=True) for _ in range(4)]
    nodes = []
    for block in inputs:
        out = placer.add_version(1000, 0, retained=True)
        node = placer.place([block], 1000, 0.0)
        placer.run([out], [block], node, 0.0)
        nodes.append(node)
    return placer, nodes


def test_lshs_places_within_a_node_s_memory_cap_where_a_node_has_room():
    # the inputs node 0 was given are the caller's: the cap holds the copies and results
    free, nodes = _place_small_tasks(None)
    assert nodes == [0, 0, 0, 0] and free.given == [4000, 0]
    assert max(free.state.peak) == 8000 and free.plan_peak == [4000, 0]
    capped, nodes = _place_small_tasks(3000)  # room on node 0 for 3 results
    assert nodes == [0, 0, 0, 1] and capped.over_cap == 0
    assert capped.plan_peak == [3000, 2000]  # node 1: the fourth input's copy and result
    # at 2000 the fourth fits nowhere (3000 either way): the lower id, counted over the cap
    tight, nodes = _place_small_tasks(2000)
    assert nodes == [0, 0, 1, 0] and tight.over_cap == 1
    assert tight.plan_peak == [3000, 2000]
