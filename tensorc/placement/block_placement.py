"""Placement of block-program tasks as they are expanded: LSHS simulating time and bytes.

Contract: a :class:`BlockPlacer` is told about every block version (its bytes and the node
that holds it) and asked, one task at a time in submission order, which node runs it:
``place(inputs, out_bytes, flops, home=None) -> node``, where ``inputs`` are version ids
and ``home`` the node owning the block the task writes (the ``owner`` policy's choice,
:func:`owner_node`). It never runs data and it is deterministic.

Policies:

- ``lshs`` — the load-simulating scheduler for DAGs whose tasks are BLAS-3 sized: every node's cores
  are simulated as busy-until times, and when ``hosts`` gives ``(host of each node, cores of each
  host)`` so are the cores of each machine that several nodes share: a task needs a core of its node
  and of its machine, so spreading over nodes of one machine adds compute only up to its cores, and
  a node there has as many cores as its machine (the runtime gives a node with the wave's work alone
  all of them, :meth:`wave_threads`). Tasks are grouped as the runtime groups them
  (:mod:`tensorc.runtime.ray.block_waves`): a task's *call* is its node and level (the level of the
  results it reads, one more for a result of another node, and at least the node's floor). A result
  of another node can leave when its call ends (the runtime returns results at the end of a call)
  and pays ``hop_seconds`` (the latency of the call boundary it crosses; ``small_hop_seconds`` for
  a result of at most ``inline_bytes``, which Ray carries inside its messages); an input block can
  leave at once. Copies into a call arrive as Ray delivers a call's arguments: once the last of them
  can leave and every result of the node's earlier calls it reads exists (Ray sends the call when
  all its arguments exist, and its node fetches the copies then: a call reading a factor made by the
  node's previous call copies nothing before that call ends), one after another, each its bytes over
  the calibrated bandwidth plus half its hop (one object's share of a hop: its store or its
  fetch), and no task of the call starts before the copies placed in it so far have arrived; a block
  read twice is sent once. Once a node's call is read from elsewhere, that node's later tasks start
  its next call (the floor), so the call stops growing. The task goes to a node where it would
  *finish* first (compute at the calibrated per-core rate) or within ``hop_seconds / 2`` of it (a
  difference the model cannot tell from its own error), among those to the node the byte objective
  of :class:`~tensorc.placement.cluster_state.ClusterState` prefers (peak memory + net in + net
  out), then to the earliest finish and the lowest id. Bytes alone would put a whole factorisation
  on one node, and time alone would ignore memory, and move a 2.6 MB block to save a simulated
  millisecond (TSQR's last products, each of a tall block by a small factor, piled on the node of
  the tree's root): the simulated clock carries both. With ``memory_cap`` (a node's memory
  budget), a task is weighed only on the nodes whose simulated bytes (the cluster state's:
  blocks held, copies brought, results made and not yet freed) stay within it with the
  task's copies and result, less the input blocks it held from the start (the caller's
  data, as an einsum's budget leaves out the arrays the caller holds; ``plan_peak`` is each
  node's most); when no node would, on the one that would hold the least (``over_cap``
  counts those tasks).
- ``owner`` — a task runs on the node that owns the block it writes (``home``, its block
  of the written tensor's block-cyclic layout): ScaLAPACK's owner-computes rule. LSHS above
  chooses one task at a time, and at scale that gathers a factorisation onto one node:
  the trailing update there needs one block copied where its owner needs two, so every
  update follows the panel, and the triangle crosses one node's link. The count choice
  (:func:`~tensorc.planning.block_counts.choose_counts`) simulates both and keeps the faster.
  A task without a home (a stitch; a block of a tensor declared without dimensions, such as
  TSQR's stacked factors) is placed by LSHS.
- ``round_robin`` — the c-th task on node ``c % nodes`` (the ablation baseline).

On more than :data:`WEIGH_ALL_NODES` nodes of separate machines (a simulated large cluster,
:func:`~tensorc.planning.block_counts.choose_counts` at scale) ``lshs`` weighs a task on the
nodes that hold or made its inputs or hold a copy of one, on the lowest-numbered node that
has neither run a task nor held a block (every such node would finish it at the same time
at the same byte cost, and ties go to the lowest id, so it stands for all of them), and on
the :data:`WEIGHED_EARLIEST` other nodes whose cores free first, instead of on every node:
a task then costs the same on 64 nodes and on 4,096. Where more than that many used nodes
could finish it within the tie, the choice among them is not the full scan's (the sampled
few NumS also weighs); up to :data:`WEIGH_ALL_NODES` nodes, and on nodes sharing a
machine's cores, every node is weighed.

Byte accounting (moved bytes, per-node peak memory) is the cluster-state model's, so the
stats of a block program read like those of an einsum.
"""

from __future__ import annotations

import heapq

import numpy as np

from tensorc.placement.cluster_state import ClusterState, mask_nodes
from tensorc.placement.layout import own_node

POLICIES = ("lshs", "owner", "round_robin")
WEIGH_ALL_NODES = 64
"""Up to this many nodes ``lshs`` weighs a task on every node (module docstring)."""
WEIGHED_EARLIEST = 16
"""Beyond :data:`WEIGH_ALL_NODES`, the used nodes whose cores free first that a task is
weighed on besides those holding its inputs and the first unused node."""


def owner_node(dag, written: tuple[str, tuple[int, ...]], nodes: int) -> int | None:
    """The node owning block ``written`` (``(tensor, coords)``, the first a task of ``dag``,
    a :class:`~tensorc.codegen.block_dag.BlockDag`, writes): its node under the tensor's
    block-cyclic layout over ``nodes`` (:func:`node_grid`), where an array made on its own
    holds it; None for a tensor declared without dimensions."""
    tensor, coords = written
    grid = dag.program.block_grid(tensor, dag.env)
    return None if grid is None else own_node(grid, coords, nodes)


class BlockPlacer:
    """Simulated nodes for a stream of block tasks (see the module docstring)."""

    def __init__(self, nodes: int, cores: int, policy: str, *, flops_per_core: float,
                 bytes_per_second: float, task_seconds: float,
                 hop_seconds: float = 0.0, small_hop_seconds: float | None = None,
                 inline_bytes: int = 0, hosts=None, memory_cap: int | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown block scheduler {policy!r}; choose one of "
                             f"{', '.join(POLICIES)}")
        self.nodes = nodes
        self.policy = policy
        self.flops_per_core = flops_per_core
        self.bytes_per_second = bytes_per_second
        self.task_seconds = task_seconds
        self.hop_seconds = hop_seconds
        self.small_hop_seconds = hop_seconds if small_hop_seconds is None else small_hop_seconds
        self.inline_bytes = inline_bytes  # a result up to this size crosses at the small hop
        self.memory_cap = memory_cap  # lshs: the most simulated bytes a node should hold
        self.over_cap = 0  # tasks lshs placed over memory_cap: no node had room
        self.given = [0] * nodes  # per node, the bytes of the input blocks it held already
        self.plan_peak = [0] * nodes  # per node, the most simulated bytes less those
        self.state = ClusterState(nodes, [], [])
        self.cores = [[0.0] * max(1, cores) for _ in range(nodes)]  # per node, busy until
        self.host_of: list[int] | None = None  # per node, its machine's shared pool
        self.pools: list[list[float]] = []  # per machine, its cores' busy-until times
        if hosts is not None:  # nodes on one machine share its cores: a node alone there
            self.host_of = list(hosts[0])  # runs on all of them (wave_threads), the machine's
            self.pools = [[0.0] * max(1, count) for count in hosts[1]]  # pool bounds the sum
            self.cores = [[0.0] * max(1, cores, len(self.pools[self.host_of[n]]))
                          for n in range(nodes)]
        self.ready: list[float] = []  # per version: simulated time it exists
        self.made_in: dict[int, tuple[int, int]] = {}  # result version -> its (node, level)
        self.call_end: dict[tuple[int, int], float] = {}  # (node, level) -> when it ends
        self.floor = [0] * nodes  # per node, the level of the call its next task joins
        # per node: its highest call's level and end, and the latest end of those below it
        self.node_calls: list[tuple[int, float, float]] = [(0, 0.0, 0.0)] * nodes
        self.copied: dict[tuple[int, int], float] = {}  # (version, node) -> copy there at
        self.tie_seconds = hop_seconds / 2  # finishes this close are a tie: bytes decide
        # per call (node, level): when its last copied input can leave, their bytes, count,
        # and their shares of a hop (each object half its hop: its store or its fetch)
        self.copies: dict[tuple[int, int], tuple[float, int, int, float]] = {}
        self.count = 0
        self.tasks_per_node = [0] * nodes
        self.wave_flops = [0.0] * nodes  # per node, the flops placed there this wave
        # beyond WEIGH_ALL_NODES nodes of separate machines: the few nodes a task is weighed on
        self.narrowed = policy != "round_robin" and nodes > WEIGH_ALL_NODES and hosts is None
        self.unused = list(range(nodes))  # a heap of the nodes that ran and held nothing
        self.used = bytearray(nodes)
        self.free_at = np.full(nodes, np.inf)  # a used node's earliest free core; inf unused

    def add_version(self, nbytes: int, uses: int, node: int | None = None,
                    retained: bool = False, given: bool = True) -> int:
        """A block version; with ``node``, one that already exists there (an input),
        counted in :attr:`given` (the caller's: left out of :attr:`memory_cap`) unless
        ``given`` is false (a block the run itself puts there). A given block must stay
        (``retained``, or read without end), or the node's plan bytes would go below its
        own."""
        block = self.state.add_block(nbytes, uses, retained)
        self.ready.append(0.0)
        if node is not None:
            if given:
                self.given[node] += nbytes
            self.state.add_copy(block, node)
            self.state.home[block] = node
            self._use(node)
        return block

    def _use(self, node: int) -> None:
        """Record that ``node`` holds a block or ran a task: it is weighed as itself."""
        if self.narrowed:
            self.used[node] = 1
            self.free_at[node] = self.cores[node][0]

    def home(self, dag, written: tuple[str, tuple[int, ...]]) -> int | None:
        """The ``home`` to :meth:`place` a task of ``dag`` writing block ``written`` with:
        its owner (:func:`owner_node`) under the ``owner`` policy, else None."""
        return owner_node(dag, written, self.nodes) if self.policy == "owner" else None

    def place(self, inputs: list[int], out_bytes: int, flops: float,
              home: int | None = None) -> int:
        """The node for a task reading versions ``inputs`` (see the module policy);
        ``home``: the node owning the block it writes (the ``owner`` policy's choice)."""
        if self.policy == "owner" and home is not None:
            node = home
        elif self.policy == "round_robin" or self.nodes == 1:
            node = self.count % self.nodes
        else:
            weighed = self._weighed(inputs) if self.narrowed else range(self.nodes)
            if self.memory_cap is not None:
                weighed = self._with_room(inputs, out_bytes, weighed)
            finish = {n: self._finish(inputs, flops, n) for n in weighed}
            near = min(finish.values()) + self.tie_seconds
            node = min((n for n in weighed if finish[n] <= near), key=lambda n: (
                self.state.cost(inputs, out_bytes, n), finish[n], n))
        self.count += 1
        return node

    def _plan_bytes(self, distinct: list[int], out_bytes: int, node: int) -> int:
        """The simulated bytes ``node`` would hold, less the input blocks it was given
        (:attr:`given`: the caller's, not the plan's), with a task reading the
        ``distinct`` blocks: the copies it brings and its ``out_bytes`` result."""
        moved = self.state.evaluate(distinct, out_bytes, node)[1]
        return self.state.mem[node] - self.given[node] + moved + out_bytes

    def _with_room(self, inputs: list[int], out_bytes: int, weighed) -> list[int]:
        """The nodes of ``weighed`` whose simulated bytes less the input blocks they were
        given (:meth:`_plan_bytes`), with the copies a task reading ``inputs`` brings and
        its ``out_bytes`` result, stay within :attr:`memory_cap`;
        when none of them would, the one that would hold the least (counted in
        :attr:`over_cap`; beyond :data:`WEIGH_ALL_NODES` nodes only the weighed few are
        looked at)."""
        distinct = list(dict.fromkeys(inputs))
        state = self.state
        most = sum(state.size[block] for block in distinct) + out_bytes  # all copied
        if max(state.mem[n] - self.given[n] for n in weighed) + most <= self.memory_cap:
            return list(weighed)  # room everywhere, whatever is copied
        after = {n: self._plan_bytes(distinct, out_bytes, n) for n in weighed}
        room = [n for n in weighed if after[n] <= self.memory_cap]
        if room:
            return room
        self.over_cap += 1
        return [min(weighed, key=lambda n: (after[n], n))]

    def _weighed(self, inputs: list[int]) -> list[int]:
        """The nodes a task reading ``inputs`` is weighed on beyond
        :data:`WEIGH_ALL_NODES` nodes (module docstring), ascending."""
        weighed = set()
        for block in set(inputs):  # a live block's holders include where it was made or
            weighed.update(mask_nodes(self.state.holders[block]))  # copied
        while self.unused and self.used[self.unused[0]]:
            heapq.heappop(self.unused)
        if self.unused:
            weighed.add(self.unused[0])
        free = self.free_at  # the WEIGHED_EARLIEST earliest, ties to the lowest ids
        count = min(WEIGHED_EARLIEST, self.nodes)
        cut = np.partition(free, count - 1)[count - 1]
        below = np.flatnonzero(free < cut).tolist()
        earliest = below + np.flatnonzero(free == cut)[:count - len(below)].tolist()
        weighed.update(n for n in earliest if self.used[n])
        return sorted(weighed)

    def _finish(self, inputs: list[int], flops: float, node: int) -> float:
        return self._timing(inputs, flops, node)[0]

    def _timing(self, inputs: list[int], flops: float, node: int
                ) -> tuple[float, int, tuple, list]:
        """``(finish, call level, copies, copied)`` of a task reading ``inputs`` on
        ``node``: ``copies`` is its call's ``(when the last copy can leave, bytes,
        objects, their hop shares)`` with this task's copies (``copied``) added."""
        inputs = list(dict.fromkeys(inputs))  # a block read twice is sent once
        made = [self.made_in.get(block) for block in inputs]
        level = max([self.floor[node]] + [m[1] + (m[0] != node) for m in made if m is not None])
        leaves, nbytes, objects, shares = self.copies.get((node, level), (0.0, 0, 0, 0.0))
        arrive, copied = 0.0, []
        for block, m in zip(inputs, made, strict=True):
            at, copy = self._arrival(block, node, m, level)
            if copy:
                leaves, nbytes = max(leaves, at), nbytes + self.state.size[block]
                objects, shares = objects + 1, shares + self._hop(block, m) / 2
                copied.append(block)
            else:
                arrive = max(arrive, at)
                if m is not None and m[0] == node and m[1] != level:  # an earlier call's
                    leaves = max(leaves, at)  # result here: Ray sends the call once it exists
        if objects:  # the call starts once its copies, one after another, have arrived
            arrive = max(arrive, leaves + self._moving(nbytes, shares))
        top, top_end, below_end = self.node_calls[node]  # its node's earlier calls come first
        arrive = max(arrive, below_end if level == top else max(below_end, top_end))
        finish = self._start(arrive, node) + self.task_seconds + flops / self.flops_per_core
        return finish, level, (leaves, nbytes, objects, shares), copied

    def _moving(self, nbytes: int, shares: float) -> float:
        """Seconds to copy blocks of ``nbytes`` in all into a call, ``shares`` the sum of
        their objects' halves of a hop."""
        return nbytes / self.bytes_per_second + shares

    def _hop(self, block: int, made) -> float:
        """The latency of a call boundary for ``block`` (``made``: its ``made_in`` entry):
        the small hop for a call's result Ray carries in its messages (at most
        ``inline_bytes``), else the hop (an input block is in the object store, whatever
        its size)."""
        small = made is not None and self.state.size[block] <= self.inline_bytes
        return self.small_hop_seconds if small else self.hop_seconds

    def _arrival(self, block: int, node: int, made, level: int) -> tuple[float, bool]:
        """``(when block can be read on node by a task at level, whether it is copied
        there for it)``: where it was made, when made (the same call) or when its call ended
        (an earlier one); a copy an earlier call made, when it arrived; elsewhere, when it
        can leave (an input at once, a result when the call that made it ended, plus the
        hop), its bytes not counted."""
        copied = self.copied.get((block, node))
        if copied is not None:
            return copied, False
        if made is None:  # an input
            ready = self.ready[block]
            return ready, not self.state.holders[block] & (1 << node)
        if made[0] == node:
            return (self.ready[block] if made[1] == level else self.call_end[made]), False
        return self.call_end[made] + self._hop(block, made), True

    def _start(self, arrive: float, node: int) -> float:
        """When a task whose inputs are there at ``arrive`` gets a core of ``node`` (and of
        its machine, when machines are shared)."""
        start = max(arrive, self.cores[node][0])
        if self.host_of is not None:
            start = max(start, self.pools[self.host_of[node]][0])
        return start

    def stitch(self, pieces: list[int], nbytes: int, uses: int) -> tuple[int, int]:
        """Place and record a step that cuts a block of ``nbytes`` (read ``uses`` times)
        out of the stored blocks ``pieces`` (versions on their nodes): no flops, its pieces
        copied to its node, not one of the program's tasks (``tasks_per_node``); returns
        ``(node, the block's version)``. What the runtime's ``Stitch`` step does, and the
        count choice simulates."""
        made = self.add_version(nbytes, uses)
        pieces = list(dict.fromkeys(pieces))
        node = self.place(pieces, nbytes, 0.0)
        self.run([made], pieces, node, 0.0, task=False)
        return node, made

    def run(self, outputs: list[int], inputs: list[int], node: int, flops: float,
            task: bool = True) -> None:
        """Record the task on ``node``: its inputs copied there, its outputs made there
        (``task=False``: a :meth:`stitch`, not counted in ``tasks_per_node``)."""
        finish, level, copies, copied = self._timing(inputs, flops, node)
        call = (node, level)
        self.copies[call] = copies
        if copied:
            arrived = copies[0] + self._moving(copies[1], copies[3])
            for block in copied:
                self.copied.setdefault((block, node), arrived)
        self.call_end[call] = max(self.call_end.get(call, 0.0), finish)
        top, top_end, below_end = self.node_calls[node]
        self.node_calls[node] = ((level, finish, max(below_end, top_end)) if level > top
                                 else (top, max(top_end, finish), below_end))
        self.floor[node] = max(self.floor[node], level)  # a node's calls run in order
        for block in inputs:
            made = self.made_in.get(block)
            if made is not None and made[0] != node:  # a call read from elsewhere ends
                self.floor[made[0]] = max(self.floor[made[0]], made[1] + 1)
        state = self.state
        held, received = state.mem[node], state.net_in[node]  # before the task runs
        heapq.heapreplace(self.cores[node], finish)
        self._use(node)
        if self.host_of is not None:
            heapq.heapreplace(self.pools[self.host_of[node]], finish)
        state.run(outputs[0], inputs, node)
        copied = state.net_in[node] - received  # the task's copies: what the node received
        made = sum(state.size[block] for block in outputs)
        self.plan_peak[node] = max(self.plan_peak[node],
                                   held - self.given[node] + copied + made)
        for extra in outputs[1:]:
            state.add_copy(extra, node)
            state.home[extra] = node
        for block in outputs:
            self.ready[block] = finish
            self.made_in[block] = call
        self.tasks_per_node[node] += task
        self.wave_flops[node] += flops

    def wave_threads(self, cpus) -> list[int]:
        """Threads for each node's calls of the wave placed so far: a node's own CPUs
        (``cpus[node]``; 1 for a node no longer in ``cpus``), and, on a machine several
        nodes share, the machine's cores shared out over its busy nodes in proportion to
        the flops each was given this wave (whole cores, the largest remainders first; a
        busy node at least one): a node that runs the wave's work alone, or nearly alone
        (a factorisation beside a few row sums), uses the machine's cores, nodes that share
        the work share them. A wave still running on another node of the machine is not
        counted."""
        threads = [max(1, int(cpus[n])) if n < len(cpus) else 1 for n in range(self.nodes)]
        if self.host_of is None:
            return threads
        for host, pool in enumerate(self.pools):
            busy = [n for n in range(self.nodes)
                    if self.host_of[n] == host and self.wave_flops[n] > 0]
            if not busy:
                continue
            total = sum(self.wave_flops[n] for n in busy)
            wanted = {n: len(pool) * self.wave_flops[n] / total for n in busy}
            given = {n: int(wanted[n]) for n in busy}  # whole cores, then the largest rest
            left = len(pool) - sum(given.values())
            for n in sorted(busy, key=lambda n: given[n] - wanted[n])[:left]:
                given[n] += 1
            for n in busy:
                threads[n] = max(1, given[n])
        return threads

    def new_wave(self) -> None:
        """The tasks placed so far were submitted (a wave): their results are returned, and
        later tasks start calls of their own, above every level so far (the runtime numbers
        each wave's levels afresh; its calls come after the earlier waves')."""
        self.floor = [1 + max(top for top, _, _ in self.node_calls)] * self.nodes
        self.wave_flops = [0.0] * self.nodes

    def moved_bytes(self) -> int:
        return sum(self.state.net_in)
