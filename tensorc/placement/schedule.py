"""Placement of a task graph on the nodes of a cluster: LSHS, round-robin, Ray's default.

Contract: ``schedule(graph, nodes, scheduler, load_nodes=..., output_nodes=...)`` returns a
:class:`Schedule` — plain data: the node of every task, the local folds of reductions and
the modelled per-node memory and network bytes. It simulates (:mod:`cluster_state`), it
never runs data, and it is deterministic for a given graph and layout.

Common to every scheduler:

- load task ``i`` runs on ``load_nodes[i]`` (where the distributed array already keeps that
  block): no transfer, and its bytes count as memory there from the start. All loads are
  placed before any other task, since user data exists before the call;
- user inputs (loads) and final output blocks are *retained*: they stay on their node after
  their last consumer; every other block is freed from all its holders once every consumer
  has run. A task's inputs that are not on its node are copied there from the holder that
  has sent the fewest bytes so far (ties: lowest node id) and stay cached there;
- the other tasks are taken in graph order (the graph is topologically ordered, so this is
  a deterministic frontier order).

Policies:

- ``lshs`` (NumS's load-simulated hierarchical scheduling): the options for a task are the
  nodes holding any of its inputs, plus ``output_nodes[j]`` when the task produces output
  block ``j`` (all nodes if that leaves none). When the plan's index grid names a node for
  task ``i`` (``task_hints[i]``), the options are that node and the nodes already holding
  every input of the task (no transfer at all) — the plan, not the greedy rule, decides
  where its blocks are computed, so a grid that balances traffic over the whole graph is
  not undone one task at a time; with ``strict_hints`` the hint is the only option (owner
  computes: what :mod:`tensorc.planning.symbolic_cost` prices in closed form). A task with
  one option is placed without weighing it; a task with no input anywhere (none at all) is
  weighed on every node up to :data:`SAMPLED_NODES` nodes, and on a larger cluster on that
  many consecutive nodes from a position that moves with the task (NumS samples a few
  nodes rather than all). The task goes to the option minimising
  ``max(peak mem) + max(net_in) + max(net_out)`` over nodes after simulating it there (all
  three are high-water marks, so the terms are commensurate); ties go to
  the option holding the most input bytes, then the lowest id. A ``reduce`` task whose
  inputs were produced on two or more nodes folds locally first: for each node that
  produced two or more of its inputs, those inputs are folded on that node (no network, one
  block out; listed in ``Schedule.reduce_groups``); the final fold, over the group results
  and the remaining inputs, is then placed by the same rule. A reduce whose inputs all come
  from one node is placed like any task.
  On a graph of :data:`COMPILED_TASKS` tasks or more the same policy runs compiled
  (:mod:`tensorc.placement.lshs_compiled`, on the graph's columns): same result.
- ``round_robin``: the c-th non-load task in graph order runs on node ``c % nodes``; no
  local folds. The ablation baseline.
- ``ray_default``: a model of Ray's locality-aware default, which gets no affinity from
  the executor (``pinned=False``): each task runs on the node holding the most bytes of its
  inputs (ties: lowest id; a task without inputs on node 0, the driver's); no local folds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tensorc.codegen.taskgraph import KIND_CODE, LOAD, REDUCE, TaskGraph
from tensorc.errors import PlanError
from tensorc.placement.cluster_state import ClusterState, Transfer, TransferLog, mask_nodes
from tensorc.placement.layout import NodeMap

SCHEDULERS = ("lshs", "round_robin", "ray_default")


@dataclass
class Schedule:
    """Where every task of one graph runs, and the modelled loads per node.

    Attributes:
        scheduler: the policy that made it (one of :data:`SCHEDULERS`).
        nodes: number of nodes.
        node_of: the planned (``pinned``) or modelled node of every task, by task index.
        pinned: whether the executor should pin tasks to ``node_of`` (soft affinity);
            ``False`` for ``ray_default``, where ``node_of`` is only the model's guess.
        reduce_groups: reduce task index → ``[(node, input task indices)]``: each group is
            folded on that node first (only groups of two or more); the reduce task itself
            then folds the group results and its other inputs on ``node_of[task]``.
        memory_bytes: modelled peak live bytes per node.
        net_in_bytes: modelled bytes received per node.
        net_out_bytes: modelled bytes sent per node.
        final_memory_bytes: live bytes per node after the last task (the retained blocks:
            user inputs on their nodes and the final output blocks).
        transfers: every modelled copy; ``block`` is a task index, or ``len(tasks) + g`` for
            the ``g``-th local fold in ``reduce_groups`` order (by reduce task, then group).
        traded_tasks, traded_bytes: LSHS only: the tasks it placed on a node that copies
            more bytes than another of its options would (the objective chose balance of
            peak memory and per-node traffic over bytes), and the extra bytes in all.
    """

    scheduler: str
    nodes: int
    node_of: list[int]
    pinned: bool
    reduce_groups: dict[int, list[tuple[int, tuple[int, ...]]]]
    memory_bytes: list[int]
    net_in_bytes: list[int]
    net_out_bytes: list[int]
    final_memory_bytes: list[int] = field(default_factory=list)
    transfers: Sequence[Transfer] = field(default_factory=list, repr=False)
    traded_tasks: int = 0
    traded_bytes: int = 0

    @property
    def inter_node_bytes(self) -> int:
        """Bytes copied between nodes in all."""
        return sum(self.net_in_bytes)

    @property
    def max_node_recv_bytes(self) -> int:
        """Bytes received by the busiest receiver."""
        return max(self.net_in_bytes)

    @property
    def max_node_memory_bytes(self) -> int:
        """Peak live bytes of the fullest node."""
        return max(self.memory_bytes)

    def trade_note(self) -> str | None:
        """Where LSHS spent bytes on balance, in words (``None`` when it never did)."""
        if not self.traded_tasks:
            return None
        return (f"LSHS traded bytes for balance: {self.traded_tasks} task(s) run where they "
                f"copy {self.traded_bytes} B more than their fewest-bytes option, to keep "
                "peak memory and per-node traffic even")

    def summary(self) -> dict:
        """The headline numbers, keyed as the attributes are named."""
        return {
            "scheduler": self.scheduler,
            "nodes": self.nodes,
            "inter_node_bytes": self.inter_node_bytes,
            "max_node_recv_bytes": self.max_node_recv_bytes,
            "max_node_memory_bytes": self.max_node_memory_bytes,
            "memory_bytes": list(self.memory_bytes),
            "net_in_bytes": list(self.net_in_bytes),
            "net_out_bytes": list(self.net_out_bytes),
            "traded_tasks": self.traded_tasks,
            "traded_bytes": self.traded_bytes,
        }

    def format(self, limit: int | None = None) -> str:
        """Deterministic text: one line per node, then ``t<i> -> node n`` per task (at most
        ``limit`` task lines)."""
        counts = [0] * self.nodes
        for node in self.node_of:
            counts[node] += 1
        lines = [
            f"schedule {self.scheduler} on {self.nodes} nodes"
            f" ({'pinned' if self.pinned else 'modelled, not pinned'}):"
            f" inter-node {self.inter_node_bytes} B"
        ]
        if self.trade_note():
            lines.append(f"  {self.trade_note()}")
        for node in range(self.nodes):
            lines.append(
                f"  node {node}: tasks={counts[node]} memory={self.memory_bytes[node]}"
                f" in={self.net_in_bytes[node]} out={self.net_out_bytes[node]}"
            )
        shown = self.node_of if limit is None else self.node_of[:limit]
        for index, node in enumerate(shown):
            line = f"t{index} -> node {node}"
            groups = self.reduce_groups.get(index)
            if groups:
                folds = " ".join(
                    f"node{g}[{','.join(str(i) for i in inputs)}]" for g, inputs in groups
                )
                line += f" after local folds {folds}"
            lines.append(line)
        if limit is not None and len(self.node_of) > limit:
            lines.append(f"... {len(self.node_of) - limit} more tasks")
        return "\n".join(lines)


def pins(scheduler: str) -> bool:
    """Whether the executor pins tasks to the nodes ``scheduler`` chose (every scheduler
    but ``ray_default``, which leaves placement to Ray)."""
    return scheduler != "ray_default"


def schedule(
    graph: TaskGraph,
    nodes: int,
    scheduler: str = "lshs",
    *,
    load_nodes: Mapping[int, int],
    output_nodes: Sequence[int] | None = None,
    cached_copies: Mapping[int, Iterable[int]] | None = None,
    task_hints: Mapping[int, int] | None = None,
    strict_hints: bool = False,
) -> Schedule:
    """Place every task of ``graph`` on one of ``nodes`` nodes (policy: module docstring).

    Args:
        graph: the task graph (topologically ordered).
        nodes: number of nodes, at least 1.
        scheduler: one of :data:`SCHEDULERS`.
        load_nodes: load task index → node holding that block of its operand.
        output_nodes: for each entry of ``graph.outputs``, the node its block's layout puts
            it on (an extra option for LSHS); ``None`` for no preference.
        cached_copies: load task index → other nodes that already hold a copy of its block
            (Ray caches blocks a node once read); reading there moves nothing.
        task_hints: compute task index → the node a plan's index grid gives its block (LSHS
            runs the task there unless a node holds all its inputs; other schedulers
            ignore it).
        strict_hints: LSHS runs every hinted task on its hint, never on another node that
            holds all its inputs (owner computes: what the symbolic cost model prices).

    Raises:
        PlanError: unknown scheduler, ``nodes < 1``, or a load task without a valid node.
    """
    if scheduler not in SCHEDULERS:
        raise PlanError(f"unknown scheduler {scheduler!r}; choose one of {', '.join(SCHEDULERS)}")
    if nodes < 1:
        raise PlanError(f"a schedule needs at least one node, got nodes={nodes}")
    tasks = graph.tasks
    layout = _output_layout(graph, nodes, output_nodes)
    columns = graph.columns()
    retained = np.flatnonzero(columns.kind == KIND_CODE[LOAD]).tolist()
    retained.extend(index for index, _ in graph.outputs)
    if scheduler == "lshs" and len(tasks) >= COMPILED_TASKS:
        return _lshs_compiled(graph, nodes, load_nodes, layout, retained, cached_copies or {},
                              task_hints or {}, strict_hints)
    if isinstance(load_nodes, NodeMap):  # read entry by entry below: a dict is quicker
        load_nodes = load_nodes.as_dict()
    if isinstance(task_hints, NodeMap):
        task_hints = task_hints.as_dict()
    state = ClusterState(nodes, columns.nbytes.tolist(), columns.uses().tolist(), retained)
    node_of = [0] * len(tasks)
    _place_loads(graph, nodes, load_nodes, state, node_of)
    for index, copies in (cached_copies or {}).items():
        for node in copies:
            if 0 <= node < nodes:
                state.add_copy(index, node)
    groups: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    traded = [0, 0]  # tasks placed off their fewest-bytes option, and the bytes that cost
    if scheduler == "lshs":
        _lshs(graph, state, node_of, layout, groups, task_hints or {}, traded, strict_hints)
    elif scheduler == "round_robin":
        _round_robin(graph, state, node_of)
    else:
        _ray_default(graph, state, node_of)
    return Schedule(
        scheduler=scheduler,
        nodes=nodes,
        node_of=node_of,
        pinned=pins(scheduler),
        reduce_groups=groups,
        memory_bytes=list(state.peak),
        net_in_bytes=list(state.net_in),
        net_out_bytes=list(state.net_out),
        final_memory_bytes=list(state.mem),
        transfers=state.transfers,
        traded_tasks=traded[0],
        traded_bytes=traded[1],
    )


COMPILED_TASKS = 50_000
"""LSHS places graphs of at least this many tasks with its compiled loop
(:mod:`tensorc.placement.lshs_compiled`: the same policy and result, on arrays)."""


def _lshs_compiled(
    graph: TaskGraph,
    nodes: int,
    load_nodes: Mapping[int, int],
    layout: dict[int, int],
    retained: list[int],
    cached_copies: Mapping[int, Iterable[int]],
    hints: Mapping[int, int],
    strict: bool,
) -> Schedule:
    """:func:`schedule`'s LSHS through :func:`~tensorc.placement.lshs_compiled.lshs_arrays`."""
    from tensorc.placement.lshs_compiled import lshs_arrays  # loads numba: large graphs only

    columns = graph.columns()
    count = len(columns.kind)
    loads = np.flatnonzero(columns.kind == KIND_CODE[LOAD])
    placed = _index_array(load_nodes, count)[loads]
    wrong = (placed < 0) | (placed >= nodes)
    if wrong.any():
        index = int(loads[np.argmax(wrong)])
        _check_load(graph, index, load_nodes.get(index), nodes)
    load_array = np.full(count, -1, np.int64)
    load_array[loads] = placed
    hint_array = _index_array(hints, count)
    layout_array = _index_array(layout, count)
    kept = np.zeros(count, np.uint8)
    kept[retained] = 1
    cached = [(block, node) for block, copies in cached_copies.items() for node in copies]
    cached_array = np.asarray(cached, np.int64).reshape(len(cached), 2)
    result = lshs_arrays(columns.kind, columns.nbytes, columns.indptr, columns.inputs, nodes,
                         load_array, hint_array, layout_array, kept, cached_array[:, 0],
                         cached_array[:, 1], strict, SAMPLED_NODES)
    groups: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    members = result.fold_members.tolist()
    ptr = result.fold_ptr.tolist()
    for g, (task, node) in enumerate(zip(result.fold_task.tolist(), result.fold_node.tolist(),
                                         strict=True)):
        groups.setdefault(task, []).append((node, tuple(members[ptr[g]:ptr[g + 1]])))
    return Schedule(
        scheduler="lshs",
        nodes=nodes,
        node_of=result.node_of.tolist(),
        pinned=True,
        reduce_groups=groups,
        memory_bytes=result.peak.tolist(),
        net_in_bytes=result.net_in.tolist(),
        net_out_bytes=result.net_out.tolist(),
        final_memory_bytes=result.mem.tolist(),
        transfers=TransferLog(result.transfers),
        traded_tasks=result.traded_tasks,
        traded_bytes=result.traded_bytes,
    )


def _index_array(values: Mapping[int, int], count: int) -> np.ndarray:
    """``values`` (task index → node) as an array over the tasks, -1 where absent (a
    :class:`~tensorc.placement.layout.NodeMap`'s own array)."""
    if isinstance(values, NodeMap):
        return values.array
    array = np.full(count, -1, np.int64)
    if values:
        array[np.fromiter(values.keys(), np.int64, len(values))] = np.fromiter(
            values.values(), np.int64, len(values))
    return array


def _check_load(graph: TaskGraph, index: int, node: int | None, nodes: int) -> None:
    """Refuse a load task without a node, or with one outside the cluster."""
    task = graph.tasks[index]
    if node is None:
        raise PlanError(f"no node given for load task t{index} {task.key}")
    if not 0 <= node < nodes:
        raise PlanError(f"load task t{index} {task.key} placed on node {node} of {nodes}")


def _output_layout(
    graph: TaskGraph, nodes: int, output_nodes: Sequence[int] | None
) -> dict[int, int]:
    """Task index → layout node of the output block it produces."""
    if output_nodes is None:
        return {}
    if len(output_nodes) != len(graph.outputs):
        raise PlanError(
            f"output_nodes has {len(output_nodes)} entries for {len(graph.outputs)} output blocks"
        )
    layout = {}
    for (index, _), node in zip(graph.outputs, output_nodes, strict=True):
        if not 0 <= node < nodes:
            raise PlanError(f"output block of task t{index} laid out on node {node} of {nodes}")
        layout[index] = node
    return layout


def _place_loads(
    graph: TaskGraph,
    nodes: int,
    load_nodes: Mapping[int, int],
    state: ClusterState,
    node_of: list[int],
) -> None:
    for index, task in enumerate(graph.tasks):
        if task.kind != LOAD:
            continue
        node = load_nodes.get(index)
        _check_load(graph, index, node, nodes)
        node_of[index] = node
        state.run(index, (), node)


def _best_node(state: ClusterState, inputs: Sequence[int], nbytes: int,
               options: int) -> tuple[int, int]:
    """The option (a node mask) minimising the objective; ties: most input bytes held
    (fewest copied), then the lowest id. Also returns how many more bytes it copies than
    the option copying fewest (what the objective spent on balance)."""
    if not options & (options - 1):
        return options.bit_length() - 1, 0
    distinct = inputs if len(set(inputs)) == len(inputs) else tuple(dict.fromkeys(inputs))
    evaluate = state.evaluate
    best_node = -1
    best_cost = best_moved = fewest = 0
    while options:
        low = options & -options
        node = low.bit_length() - 1
        options ^= low
        cost, moved = evaluate(distinct, nbytes, node)
        fewest = moved if best_node < 0 else min(fewest, moved)
        if best_node < 0 or cost < best_cost or (cost == best_cost and moved < best_moved):
            best_node, best_cost, best_moved = node, cost, moved
    return best_node, best_moved - fewest


def _lshs(
    graph: TaskGraph,
    state: ClusterState,
    node_of: list[int],
    layout: dict[int, int],
    groups: dict[int, list[tuple[int, tuple[int, ...]]]],
    hints: Mapping[int, int],
    traded: list[int],
    strict: bool = False,
) -> None:
    every_node = (1 << state.nodes) - 1
    holders = state.holders
    run = state.run
    get_hint = hints.get
    get_layout = layout.get
    for index, task in enumerate(graph.tasks):
        kind = task.kind
        if kind == LOAD:
            continue
        inputs = task.inputs
        if kind == REDUCE and len(inputs) > 1:
            inputs = _fold_locally(index, inputs, state, node_of, groups)
        hint = get_hint(index)
        if hint is not None:
            options = 1 << hint
            if not strict:
                common = every_node
                for block in inputs:
                    common &= holders[block]
                options |= common
        else:
            options = 0
            for block in inputs:
                options |= holders[block]
            lay = get_layout(index)
            if lay is not None:
                options |= 1 << lay
        if not options:
            options = _sampled(index, state.nodes)
        if options & (options - 1):
            node, extra = _best_node(state, inputs, task.nbytes, options)
            if extra:
                traded[0] += 1
                traded[1] += extra
        else:  # one option: nothing to weigh
            node = options.bit_length() - 1
        node_of[index] = node
        run(index, inputs, node)


SAMPLED_NODES = 32  # nodes weighed for a task no node has inputs of, on a large cluster


def _sampled(index: int, nodes: int) -> int:
    """The options of a task none of whose inputs live anywhere (it has none): every node
    on up to :data:`SAMPLED_NODES` nodes, else that many consecutive nodes starting at a
    position that moves with the task (deterministic, and every node is offered in turn),
    as NumS samples a few nodes instead of weighing them all."""
    if nodes <= SAMPLED_NODES:
        return (1 << nodes) - 1
    start = (index * SAMPLED_NODES) % nodes
    window = (1 << SAMPLED_NODES) - 1
    mask = (window << start) & ((1 << nodes) - 1)
    wrapped = start + SAMPLED_NODES - nodes
    if wrapped > 0:
        mask |= (1 << wrapped) - 1
    return mask


def _fold_locally(
    index: int,
    inputs: tuple[int, ...],
    state: ClusterState,
    node_of: list[int],
    groups: dict[int, list[tuple[int, tuple[int, ...]]]],
) -> tuple[int, ...]:
    """Fold the inputs of reduce task ``index`` per producing node; return the final fold's
    inputs (group results and ungrouped inputs)."""
    by_node: dict[int, list[int]] = {}
    for block in inputs:
        by_node.setdefault(node_of[block], []).append(block)
    if len(by_node) == 1:
        return inputs
    nbytes = state.size[index]
    final: list[int] = []
    for node in sorted(by_node):
        members = by_node[node]
        if len(members) == 1:
            final.append(members[0])
            continue
        fold = state.add_block(nbytes, uses=1)
        state.run(fold, members, node, task=index)
        groups.setdefault(index, []).append((node, tuple(members)))
        final.append(fold)
    return tuple(final)


def _round_robin(graph: TaskGraph, state: ClusterState, node_of: list[int]) -> None:
    count = 0
    for index, task in enumerate(graph.tasks):
        if task.kind == LOAD:
            continue
        node = count % state.nodes
        count += 1
        node_of[index] = node
        state.run(index, task.inputs, node)


def _ray_default(graph: TaskGraph, state: ClusterState, node_of: list[int]) -> None:
    holders = state.holders
    size = state.size
    for index, task in enumerate(graph.tasks):
        if task.kind == LOAD:
            continue
        held = [0] * state.nodes
        for block in set(task.inputs):
            for holder in mask_nodes(holders[block]):
                held[holder] += size[block]
        node = held.index(max(held))
        node_of[index] = node
        state.run(index, task.inputs, node)
