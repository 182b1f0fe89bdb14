"""The block placer's simulated cores (no Ray): nodes on separate machines add compute,
nodes sharing one machine share its cores; and the calibration's grouping of nodes by host."""

from __future__ import annotations

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


def test_nodes_on_separate_machines_each_add_their_cores():
    placer = place_independent_tasks(None)
    assert placer.tasks_per_node == [1, 1, 1, 1]
    assert max(max(pool) for pool in placer.cores) < 1.01  # all four at once


def test_nodes_sharing_a_machine_share_its_cores_and_spreading_only_moves_bytes():
    placer = place_independent_tasks(((0, 0, 0, 0), (2,)))
    assert placer.tasks_per_node == [4, 0, 0, 0]  # as soon done on node 0: nothing moves
    assert placer.moved_bytes() == 0
    assert len(placer.cores) == 1 and sorted(placer.cores[0]) == [2.0, 2.0]


def test_a_machine_s_pool_is_at_most_its_nodes_own_cores():
    # 8 cores on the machine, but its two nodes may use one each
    placer = place_independent_tasks(((0, 0, 1, 1), (8, 8)))
    assert [len(pool) for pool in placer.cores] == [2, 2]
    assert max(max(pool) for pool in placer.cores) < 1.01
    assert sum(placer.tasks_per_node[:2]) == 2 and sum(placer.tasks_per_node[2:]) == 2


def test_hosts_are_numbered_in_order_and_only_shared_ones_change_the_model():
    assert hosts_of([("a/1", 2), ("b/1", 4), ("a/1", 2)]) == ((0, 1, 0), (2, 4))
    shared = Machine(host_of=(0, 1, 0), host_cores=(2, 4))
    assert shared.hosts(3) == ((0, 1, 0), (2, 4))
    assert shared.hosts(4) is None  # figures for another cluster
    assert Machine(host_of=(0, 1), host_cores=(2, 2)).hosts(2) is None  # one node each
    assert Machine().hosts(4) is None
    assert "3 node(s) on 2 host(s) of 2/4 core(s), shared" in shared.describe()
