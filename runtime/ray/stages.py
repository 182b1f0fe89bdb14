"""Two-level execution: a scheduled task graph as one call per node and stage.

Contract: :func:`stage` takes a task graph, its :class:`~tensorc.placement.schedule.Schedule`,
the layout of every operand (:class:`~tensorc.placement.blocks.Blocks`, data not needed) and
the operands to repartition first, and returns a :class:`StagedCalls` — plain data, no Ray:
the calls to make, in order, each on one node, each running a list of block steps with the
in-process step runner. It is deterministic for its inputs, so a plan keeps it and a
repeated call only binds block refs and submits.

Hierarchy (NumS's: nodes, then the workers in a node). Every block computation is a *unit*
on the node the schedule gave its task. A unit's *level* is the largest level of its inputs,
plus one when an input comes from another node; units with the same node and level form one
call. A call therefore needs nothing computed on another node at its own level or later, so
the calls form a DAG, their number grows with nodes x stages (not with blocks), and every
block that crosses a node is a call's return value — a Ray object, moved and, when a node is
lost, rebuilt by Ray's lineage reconstruction. Blocks a call makes and uses itself never
leave the worker's memory.

Units:

- a load whose block is one stored block unchanged is that block (no unit); any other load
  stitches the stored pieces it overlaps on the node holding its first piece;
- a load of an operand read from storage (a position in ``stored``: a
  :class:`~tensorc.stored.StoredArray`, zarr or ``.npy``) is a *read* unit in front of each
  unit that uses it, on that unit's node and in that unit's call, reading the block from the
  store (``stored.read(slices)``, the call's argument ``("st", position)`` being the stored
  array itself, which travels as its path). A block read is therefore never a Ray object: it
  is read where it is used, by the call that uses it, and dropped after its last use there
  (two units of one call that use one block share one read; units on two nodes read it
  twice, from the store, instead of moving it);
- a reduce with local groups (``Schedule.reduce_groups``) folds each group on its node, then
  the group results and the other inputs on the reduce's node;
- a block product whose path's first step takes the same operands, two or more but not all
  of them, as another product of the same kernel on its node, its other operands loaded
  there (:meth:`~tensorc.codegen.kernels.EinsumBlock.prefix_inputs`: an MTTKRP's Khatri-Rao
  product of two factor blocks), runs that step once there, as a unit of its own
  (:class:`~tensorc.codegen.kernels.EinsumPrefix`), and each product finishes from its
  result (:class:`~tensorc.codegen.kernels.EinsumRest`), right after it in the call where
  it can be. Those results may all be alive at once in the node's call, so a node shares
  at most an eighth of its memory budget's worth (:data:`PREFIX_SHARE`; 256 MiB without a
  budget), the rest computed per product as before;
- a result streamed to a sink (``sink=True``) ends in a write step per block, on the
  block's node and in its call (:mod:`tensorc.runtime.ray.streamed_results`): the call
  returns the bytes written, the block never leaves the worker;
- a repartitioned operand (``relayouts[position] = (bounds, node of each new block)``) is
  re-cut first: a piece of a stored block that crosses nodes is cut out on its holder (only
  the elements the new block needs travel), then each new block is stitched on its node.
  New blocks are returned, so the operand can keep its new layout for later calls.

A call that finishes a reduction across nodes, its every step a fold
(:class:`~tensorc.codegen.kernels.ReduceBlocks`) or a product of blocks
(:class:`~tensorc.codegen.kernels.EinsumBlock`) of other calls' results and operand blocks,
into result blocks no other call reads, is listed in :attr:`StagedCalls.folds` with its bytes
and multiplications: the executor may run it in the driver (:mod:`~tensorc.runtime.ray.calls`).

Bytes between nodes are counted from the calls' arguments (:attr:`StagedCalls.transfers`):
an argument produced on another node, once per receiving node, unless the receiving node
already holds a copy (``Blocks.copies``). That is what Ray must move, objects it inlines
into task messages included. Reads from storage move nothing between nodes; the bytes each
node reads are :meth:`StagedCalls.read_bytes`. Every call carries the node's memory
``budget`` (bytes, or ``None``) its worker admits reads against
(:func:`~tensorc.runtime.ray.tasks.run_steps`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tensorc.codegen.kernels import (
    EinsumBlock,
    EinsumPrefix,
    EinsumRest,
    LoadBlock,
    ReduceBlocks,
)
from tensorc.codegen.taskgraph import LOAD, REDUCE, TaskGraph
from tensorc.placement.blocks import Blocks

RUN, STITCH, READ = "run", "stitch", "read"
"""Step kinds: ``kernel(*inputs)``, ``kernel(stitched region, full slices)``, and
``kernel(block read from the stored array input, full slices)``."""

INPUT, RESULT, STORED = "in", "out", "st"
"""Argument sources: a stored operand block ``("in", position, coords)``, return value
``k`` of an earlier call ``("out", call index, k)``, or an operand read from storage
itself ``("st", position)`` (a :class:`~tensorc.stored.StoredArray`, passed by value)."""

SINK = -1
"""The position of a sink's node writer among a call's ``("st", position)`` arguments."""

WRITTEN_BYTES = 8
"""What a step writing a result block to a sink returns: its byte count, one int64."""


class SinkWrite:
    """A block step kernel: ``writer.write(slices, block)`` (the sink's node writer, the
    argument ``("st", SINK)``); returns the bytes written as a 0-d array, so the call
    returns that and not the block."""

    def __init__(self, slices: tuple[slice, ...]) -> None:
        self.slices = tuple(slices)

    def __call__(self, writer, block) -> np.ndarray:
        block = np.asarray(block)
        writer.write(self.slices, block)
        return np.array(block.nbytes, dtype=np.int64)

PENDING_READ = "r"
"""A load of an operand read from storage, ``("r", load task)``: made a read unit in front
of each unit that uses it."""


@dataclass(frozen=True)
class Step:
    """What one unit computes: ``kind`` (:data:`RUN`, :data:`STITCH` or :data:`READ`), the
    kernel, for a stitch the region's shape and ``piece_slices[k] = (into, out_of)`` per
    input piece, for a read the block's shape and the slices it reads (``read``)."""

    kind: str
    kernel: object
    shape: tuple[int, ...] = ()
    piece_slices: tuple = ()
    read: tuple = ()


@dataclass
class NodeCall:
    """One remote call: the steps it runs on ``node`` and where its arguments come from.

    ``steps[j] = (step, inputs)``, each input ``("x", i)`` (argument ``i``) or ``("t", k)``
    (the result of step ``k`` of this call); ``exports`` are the steps whose results the call
    returns, in order; ``tasks`` the graph tasks it computes.
    """

    node: int
    level: int
    steps: tuple
    args: tuple
    exports: tuple[int, ...]
    tasks: tuple[int, ...]
    budget: int | None = None
    """The node's memory budget (bytes) its worker admits reads from storage against."""


@dataclass
class StagedCalls:
    """A scheduled graph as calls (see the module docstring)."""

    calls: list[NodeCall]
    outputs: dict[tuple[int, ...], tuple]
    """Result block coordinates → its source (an operand block or a call's return)."""
    output_bounds: tuple[tuple[int, ...], ...]
    output_nodes: dict[tuple[int, ...], int]
    output_shape: tuple[int, ...]
    dtype: object
    relaid: dict[int, dict[tuple[int, ...], tuple]]
    """Repartitioned operand → source of each new block."""
    relaid_layouts: dict[int, Blocks]
    """Repartitioned operand → its new layout (no data)."""
    transfers: list[tuple[tuple, int, int]]
    """``(source, receiving node, bytes)`` of every argument that crosses nodes."""
    repartition_transfers: list[tuple[tuple, int, int]] = field(default_factory=list)
    """The part of ``transfers`` that re-lays operands out."""
    levels: int = 0
    folds: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    """The calls that finish a reduction across nodes on other calls' results, read by no
    other call (:func:`final_folds`): call index → (bytes of its largest argument, result
    or intermediate, bytes of all its arguments, multiplications). The executor may run
    them in the driver (:mod:`~tensorc.runtime.ray.calls`)."""
    payloads: tuple | None = field(default=None, repr=False, compare=False)
    """Set by the Ray executor: the calls' steps as Ray objects, for one session."""

    def recv_bytes(self, nodes: int, repartition: bool = False) -> list[int]:
        """Bytes each node receives (only the repartition's with ``repartition=True``)."""
        out = [0] * nodes
        for _, node, nbytes in self.repartition_transfers if repartition else self.transfers:
            out[node] += nbytes
        return out

    def read_bytes(self, nodes: int, itemsizes: Mapping[int, int]) -> list[int]:
        """Bytes each node reads from storage (``itemsizes``: the element size of each
        operand read from storage, by position)."""
        out = [0] * nodes
        for call in self.calls:
            if call.node >= nodes:
                continue
            for step, inputs in call.steps:
                if step.kind == READ:
                    position = call.args[inputs[0][1]][1]
                    out[call.node] += math.prod(step.shape) * itemsizes.get(position, 0)
        return out


class _Units:
    """The units of one graph, in creation (topological) order."""

    def __init__(self, inputs: Sequence[Blocks]) -> None:
        self.inputs = inputs
        self.node: list[int] = []
        self.step: list[Step] = []
        self.args: list[tuple] = []
        self.nbytes: list[int] = []
        self.task: list[int | None] = []
        self.reads: dict[int, tuple[int, Step, int]] = {}
        """Load task of an operand read from storage -> (position, read step, bytes)."""
        self.reader: dict[int, int] = {}
        """Read unit -> the one unit it was made for (whose call it joins)."""

    def add(self, node: int, step: Step, args: Sequence[tuple], nbytes: int,
            task: int | None = None) -> tuple:
        made = []
        resolved = []
        for arg in args:
            if arg[0] == PENDING_READ:  # read where, and in the call where, it is used
                arg = self._read(node, arg[1])
                made.append(arg[1])
            resolved.append(arg)
        unit = self._append(node, step, resolved, nbytes, task)
        for read in made:
            self.reader[read] = unit[1]
        return unit

    def read_unit(self, node: int, load: int) -> tuple:
        """A read of load task ``load`` on ``node`` that no unit uses (an output block)."""
        return self._read(node, load)

    def _read(self, node: int, load: int) -> tuple:
        position, step, nbytes = self.reads[load]
        return self._append(node, step, [(STORED, position)], nbytes, load)

    def _append(self, node: int, step: Step, args: Sequence[tuple], nbytes: int,
                task: int | None) -> tuple:
        self.node.append(node)
        self.step.append(step)
        self.args.append(tuple(args))
        self.nbytes.append(int(nbytes))
        self.task.append(task)
        return ("u", len(self.node) - 1)

    def node_of(self, source: tuple) -> int:
        if source[0] == "u":
            return self.node[source[1]]
        _, position, coords = source
        return self.inputs[position].nodes.get(coords, 0)

    def nbytes_of(self, source: tuple) -> int:
        if source[0] == "u":
            return self.nbytes[source[1]]
        _, position, coords = source
        blocks = self.inputs[position]
        extent = math.prod(s.stop - s.start for s in blocks.block_slices(coords))
        return extent * np.dtype(blocks.dtype).itemsize


def _relayout(units: _Units, position: int, bounds, target: Mapping) -> tuple[Blocks, dict]:
    """Units re-cutting operand ``position`` at ``bounds`` onto ``target`` nodes; returns
    the new layout and the source of each new block."""
    stored = units.inputs[position]
    dtype = np.dtype(stored.dtype)
    identity = LoadBlock(None, dtype)
    cut = LoadBlock(None, dtype, compact=True)
    new = Blocks(stored.shape, dtype, bounds)
    sources: dict = {}
    for coords in np.ndindex(*new.grid):
        node = target.get(coords, 0)
        new.nodes[coords] = node
        slices = new.block_slices(coords)
        shape = tuple(s.stop - s.start for s in slices)
        pieces = stored.pieces(slices)
        first = pieces[0][0]
        if (len(pieces) == 1 and stored.block_slices(first) == tuple(slices)
                and stored.nodes.get(first, 0) == node):
            sources[coords] = (INPUT, position, first)  # already there, already this block
            continue
        args, piece_slices = [], []
        for source, into, out_of in pieces:
            arg = (INPUT, position, source)
            holder = stored.nodes.get(source, 0)
            whole = tuple(slice(0, s.stop - s.start) for s in stored.block_slices(source))
            if holder != node and tuple(out_of) != whole:
                extent = tuple(s.stop - s.start for s in out_of)
                piece = tuple(slice(0, n) for n in extent)
                arg = units.add(holder, Step(STITCH, cut, extent, ((piece, out_of),)), [arg],
                                math.prod(extent) * dtype.itemsize)
                out_of = piece
            args.append(arg)
            piece_slices.append((into, out_of))
        sources[coords] = units.add(node, Step(STITCH, identity, shape, tuple(piece_slices)), args,
                                    math.prod(shape) * dtype.itemsize)
    return new, sources


def relayout_moves(stored: Blocks, bounds, target: Mapping) -> bool:
    """Whether re-cutting ``stored`` at ``bounds`` onto ``target`` nodes moves any element
    between nodes. One that does not is better left to the loads, which stitch the stored
    pieces where they are: materialising it would copy every element once more for
    nothing."""
    new = Blocks.layout(bounds, target)
    for coords in np.ndindex(*new.grid):
        node = target.get(coords, 0)
        for source, _, _ in stored.pieces(new.block_slices(coords)):
            if stored.nodes.get(source, 0) != node:
                return True
    return False


def stage(graph: TaskGraph, schedule, inputs: Sequence[Blocks],
          relayouts: Mapping[int, tuple] | None = None, stored: frozenset = frozenset(),
          budget: int | None = None, sink: bool = False) -> StagedCalls:
    """The calls that run ``graph`` as ``schedule`` places it (module docstring).

    ``inputs[p]`` is operand ``p``'s stored layout; ``relayouts[p] = (bounds, node_of)``
    re-cuts it first. The schedule must have been made with the loads on the nodes of the
    layout they read (the re-cut one for a repartitioned operand). Operands at positions in
    ``stored`` are read from storage by the calls that use their blocks (their layout only
    says where the schedule expected the reads); ``budget`` is each node's memory budget.
    With ``sink`` every result block is written where it is, by a step of the call that made
    it, and the result's blocks are what those steps return
    (:mod:`tensorc.runtime.ray.streamed_results`)."""
    units = _Units(inputs)
    layouts = list(inputs)
    relaid: dict[int, dict] = {}
    for position, (bounds, target) in sorted((relayouts or {}).items()):
        layouts[position], relaid[position] = _relayout(units, position, bounds, target)

    repartition_units = len(units.node)

    def block(position: int, coords) -> tuple:
        return relaid[position][coords] if position in relaid else (INPUT, position, coords)

    node_of = schedule.node_of
    groups = schedule.reduce_groups
    shared = _shared_prefixes(graph, node_of, budget)
    prefixes: dict[tuple, tuple] = {}  # shared prefix's key -> its unit
    value: list[tuple | None] = [None] * len(graph.tasks)
    for index, task in enumerate(graph.tasks):
        kernel = graph.kernels[task.kernel]
        if task.kind == LOAD and task.source[0] in stored:
            position, slices = task.source
            shape = tuple(s.stop - s.start for s in slices)
            units.reads[index] = (position, Step(READ, kernel, shape, read=tuple(slices)),
                                  task.nbytes)
            value[index] = (PENDING_READ, index)
            continue
        if task.kind == LOAD:
            position, slices = task.source
            blocks = layouts[position]
            pieces = blocks.pieces(slices)
            first = pieces[0][0]
            if (len(pieces) == 1 and blocks.block_slices(first) == tuple(slices)
                    and kernel.identity(blocks.dtype)):
                value[index] = block(position, first)
                continue
            shape = tuple(s.stop - s.start for s in slices)
            piece_slices = tuple((into, out_of) for _, into, out_of in pieces)
            value[index] = units.add(
                node_of[index], Step(STITCH, kernel, shape, piece_slices),
                [block(position, c) for c, _, _ in pieces], task.nbytes, index)
            continue
        args = [value[s] for s in task.inputs]
        if task.kind == REDUCE and index in groups:
            folded, lone = [], set(task.inputs)
            for node, members in groups[index]:
                folded.append(units.add(node, Step(RUN, kernel), [value[m] for m in members],
                                        task.nbytes, index))
                lone -= set(members)
            args = folded + [value[s] for s in task.inputs if s in lone]
            if len(args) == 1:  # one group held every partial
                value[index] = args[0]
                continue
        if index in shared:  # its first path step, computed once on the node for all readers
            key, nbytes = shared[index]
            taken = kernel.prefix_inputs()
            first = prefixes.get(key)
            if first is None:
                first = prefixes[key] = units.add(
                    node_of[index], Step(RUN, EinsumPrefix(kernel)), [args[t] for t in taken],
                    nbytes)
            rest = [a for t, a in enumerate(args) if t not in taken]
            value[index] = units.add(node_of[index], Step(RUN, EinsumRest(kernel)),
                                     [*rest, first], task.nbytes, index)
            continue
        value[index] = units.add(node_of[index], Step(RUN, kernel), args, task.nbytes, index)
    bounds = output_bounds(graph)
    starts = [list(edges[:-1]) for edges in bounds]
    outputs, nodes = {}, {}
    for task, slices in graph.outputs:
        coords = tuple(starts[d].index(s.start) for d, s in enumerate(slices))
        if value[task][0] == PENDING_READ:  # the result is a block read as it is
            value[task] = units.read_unit(node_of[task], value[task][1])
        source = value[task]
        nodes[coords] = units.node_of(source) if schedule.pinned else node_of[task]
        if sink:  # written where it is; the call returns the bytes written
            source = units.add(units.node_of(source), Step(RUN, SinkWrite(tuple(slices))),
                               [(STORED, SINK), source], WRITTEN_BYTES)
        outputs[coords] = source
    return _calls(units, outputs, bounds, nodes, graph.dtype, relaid,
                  {p: layouts[p] for p in relaid}, repartition_units, budget)


PREFIX_SHARE = 8
"""A node's shared prefixes (:func:`_shared_prefixes`), which may all be alive at once in
its call, take at most this share of its memory budget, or :data:`PREFIX_BYTES` without
one."""
PREFIX_BYTES = 256 * 2**20


def _prefix_key(graph: TaskGraph, index: int, node_of) -> tuple | None:
    """``(node, kernel, the tasks its first path step reads)`` for a task whose einsum
    kernel's first step takes two or more of its operands but not all
    (:meth:`~tensorc.codegen.kernels.EinsumBlock.prefix_inputs`), the others loaded on its
    own node (so the step's unit is never at a lower level than the task's, in another
    call); else ``None``."""
    task = graph.tasks[index]
    kernel = graph.kernels[task.kernel]
    if type(kernel) is not EinsumBlock:
        return None
    taken = kernel.prefix_inputs()
    if taken is None:
        return None
    node = node_of[index]
    others = [task.inputs[t] for t in range(len(task.inputs)) if t not in taken]
    if any(graph.tasks[o].kind != LOAD or node_of[o] != node for o in others):
        return None
    return (node, task.kernel, tuple(task.inputs[t] for t in taken))


def _shared_prefixes(graph: TaskGraph, node_of,
                     budget: int | None = None) -> dict[int, tuple[tuple, int]]:
    """The tasks whose first path step (:func:`_prefix_key`) two or more tasks of one kernel
    on one node share, each with that step's key and the bytes of its result: the
    Khatri-Rao product of two factor blocks in an MTTKRP, which every block of the tensor
    meeting both reads. Each is computed once. A node's shared results may all be alive at
    once in its call, so they are taken in task order only while their bytes fit its share
    of ``budget`` (:data:`PREFIX_SHARE`, else :data:`PREFIX_BYTES`)."""
    readers: dict[tuple, list[int]] = {}
    for index in range(len(graph.tasks)):
        key = _prefix_key(graph, index, node_of)
        if key is not None:
            readers.setdefault(key, []).append(index)
    shared: dict[int, tuple[tuple, int]] = {}
    held: dict[int, int] = {}  # node -> bytes of its shared prefixes
    cap = PREFIX_BYTES if budget is None else budget // PREFIX_SHARE
    itemsize = np.dtype(graph.dtype).itemsize
    for key, tasks in readers.items():
        if len(tasks) < 2:
            continue
        step = graph.kernels[key[1]].steps[0]
        extent: dict[str, int] = {}
        for letters, read in zip(step.keys, key[2], strict=True):
            extent.update(zip(letters, graph.tasks[read].shape, strict=False))
        nbytes = itemsize * math.prod(extent.get(letter, 1) for letter in step.output)
        if held.get(key[0], 0) + nbytes <= cap:
            held[key[0]] = held.get(key[0], 0) + nbytes
            shared.update(dict.fromkeys(tasks, (key, nbytes)))
    return shared


def output_bounds(graph: TaskGraph) -> tuple[tuple[int, ...], ...]:
    """Per dimension, the block edges of ``graph``'s result."""
    starts = [sorted({slices[d].start for _, slices in graph.outputs})
              for d in range(len(graph.output_shape))]
    return tuple((*starts[d], graph.output_shape[d]) for d in range(len(starts)))


def relayout_calls(stored: Blocks, bounds, target: Mapping) -> StagedCalls:
    """The calls re-cutting ``stored`` at ``bounds`` onto ``target`` nodes (what a plan's
    re-layout of an operand does before its graph runs) as staged calls of their own, whose
    result is the re-cut array: a new block that is a stored block unchanged is that block,
    any other is stitched on its node from the stored pieces, each cut first on its holder
    when only part of it travels."""
    units = _Units([stored])
    layout, sources = _relayout(units, 0, bounds, target)
    return _calls(units, sources, layout.bounds, dict(layout.nodes), stored.dtype, {}, {},
                  len(units.node))


def _levels(units: _Units) -> list[int]:
    """Each unit's level; a read unit takes the level of the unit it was made for (it
    reads nothing computed, so it never raises that unit's level)."""
    level = [0] * len(units.node)
    for u, args in enumerate(units.args):
        for arg in args:
            if arg[0] == "u":
                a = arg[1]
                level[u] = max(level[u], level[a] + (units.node[a] != units.node[u]))
    for read, user in units.reader.items():
        level[read] = level[user]
    return level


def _calls(units: _Units, outputs: dict, bounds, nodes: dict, dtype, relaid: dict,
           relaid_layouts: dict, repartition_units: int,
           budget: int | None = None) -> StagedCalls:
    """The units as calls; ``outputs`` gives the source of each result block (``bounds``,
    on ``nodes``), ``relaid`` of each block of a re-laid-out operand."""
    level = _levels(units)
    keys = sorted({(level[u], units.node[u]) for u in range(len(units.node))})
    call_index = {key: i for i, key in enumerate(keys)}
    call_of = [call_index[(level[u], units.node[u])] for u in range(len(units.node))]
    members: list[list[int]] = [[] for _ in keys]
    for u, c in enumerate(call_of):
        members[c].append(u)
    outputs_needed = set(outputs.values())
    outputs_needed.update(s for sources in relaid.values() for s in sources.values())
    exported: set[int] = {s[1] for s in outputs_needed if s[0] == "u"}
    for u, args in enumerate(units.args):
        for arg in args:
            if arg[0] == "u" and call_of[arg[1]] != call_of[u]:
                exported.add(arg[1])
    export_slot: dict[int, tuple] = {}
    calls: list[NodeCall] = []
    transfers: list[tuple[tuple, int, int]] = []
    repartition_transfers: list[tuple[tuple, int, int]] = []
    held: dict[tuple, set[int]] = {}  # source -> nodes holding it (copies as they happen)
    for c, (lvl, node) in enumerate(keys):
        position_of: dict[int, int] = {}
        arg_index: dict[tuple, int] = {}
        args: list[tuple] = []
        steps = []
        read_at: dict[int, int] = {}  # load task -> the step of this call reading it
        for u in _readers_after_prefixes(units, members[c], call_of):
            if units.step[u].kind == READ and units.task[u] in read_at:
                position_of[u] = read_at[units.task[u]]  # read once per call
                continue
            inputs = []
            for arg in units.args[u]:
                if arg[0] == "u" and call_of[arg[1]] == c:
                    inputs.append(("t", position_of[arg[1]]))
                    continue
                if arg[0] == STORED:  # the stored array itself: nothing moves
                    if arg not in arg_index:
                        arg_index[arg] = len(args)
                        args.append(arg)
                    inputs.append(("x", arg_index[arg]))
                    continue
                bound = arg if arg[0] == INPUT else export_slot[arg[1]]
                if bound not in arg_index:
                    arg_index[bound] = len(args)
                    args.append(bound)
                    holders = held.setdefault(bound, _holders(units, arg))
                    if node not in holders:
                        holders.add(node)
                        moved = (bound, node, units.nbytes_of(arg))
                        transfers.append(moved)
                        if u < repartition_units:
                            repartition_transfers.append(moved)
                inputs.append(("x", arg_index[bound]))
            position_of[u] = len(steps)
            if units.step[u].kind == READ:
                read_at[units.task[u]] = len(steps)
            steps.append((units.step[u], tuple(inputs)))
        exports = tuple(position_of[u] for u in members[c] if u in exported)
        for k, u in enumerate(u for u in members[c] if u in exported):
            export_slot[u] = (RESULT, c, k)
        tasks = tuple(dict.fromkeys(units.task[u] for u in members[c]
                                    if units.task[u] is not None))
        calls.append(NodeCall(node, lvl, tuple(steps), tuple(args), exports, tasks, budget))

    def bind(source: tuple) -> tuple:
        return export_slot[source[1]] if source[0] == "u" else source

    arg_bytes = {slot: units.nbytes[u] for u, slot in export_slot.items()}
    arg_bytes.update((arg, units.nbytes_of(arg)) for call in calls for arg in call.args
                     if arg[0] == INPUT)
    relaid_slots = {bind(s) for sources in relaid.values() for s in sources.values()}
    return StagedCalls(
        calls=calls,
        outputs={coords: bind(source) for coords, source in outputs.items()},
        output_bounds=tuple(bounds),
        output_nodes=nodes,
        output_shape=tuple(edges[-1] for edges in bounds),
        dtype=dtype,
        relaid={p: {c: bind(s) for c, s in sources.items()} for p, sources in relaid.items()},
        relaid_layouts=relaid_layouts,
        transfers=transfers,
        repartition_transfers=repartition_transfers,
        levels=len({lvl for lvl, _ in keys}),
        folds=final_folds(calls, arg_bytes, relaid_slots, np.dtype(dtype).itemsize),
    )


def final_folds(calls: Sequence[NodeCall], arg_bytes: Mapping[tuple, int],
                relaid_slots=frozenset(), itemsize: int = 8) -> dict[int, tuple[int, int, int]]:
    """The calls that finish a reduction across nodes: that read another call's result,
    whose every argument is another call's result or an operand block, whose every step
    folds blocks (:class:`ReduceBlocks`) or multiplies them (:class:`EinsumBlock`), and
    whose results no other call reads and no re-laid-out operand keeps (``arg_bytes``: the
    bytes of each call's results by ``("out", call, k)`` and of each operand block an
    argument names; ``itemsize``: the bytes of an element of a product's intermediates).
    Call index → (bytes of its largest argument, result or intermediate, bytes of all its
    arguments, the multiplications of its einsum steps)."""
    read = {arg for call in calls for arg in call.args if arg[0] == RESULT}
    folds = {}
    for c, call in enumerate(calls):
        slots = [(RESULT, c, k) for k in range(len(call.exports))]
        if (any(arg[0] == RESULT for arg in call.args)
                and all(arg[0] in (RESULT, INPUT) for arg in call.args)
                and all(step.kind == RUN and type(step.kernel) in (ReduceBlocks, EinsumBlock)
                        for step, _ in call.steps)
                and not any(slot in read or slot in relaid_slots for slot in slots)):
            sizes = [arg_bytes[arg] for arg in call.args]
            products = [step.kernel for step, _ in call.steps
                        if type(step.kernel) is EinsumBlock]
            largest = max(sizes + [arg_bytes[slot] for slot in slots]
                          + [kernel.largest_step * itemsize for kernel in products])
            folds[c] = (largest, sum(sizes), sum(kernel.multiplies for kernel in products))
    return folds


def _readers_after_prefixes(units: _Units, members: list[int], call_of: list[int]) -> list[int]:
    """A call's units in creation order, but each shared prefix's readers
    (:class:`~tensorc.codegen.kernels.EinsumRest`) right after it when all they read in the
    call is made by then (a reader waiting for a read from storage keeps its place): one
    prefix alive at a time, read while it is in cache, and the next one made in the memory
    the last one freed."""
    readers: dict[int, list[int]] = {}
    for u in members:
        for arg in units.args[u]:
            if arg[0] == "u" and type(units.step[arg[1]].kernel) is EinsumPrefix:
                readers.setdefault(arg[1], []).append(u)
    if not readers:
        return members
    done: set[int] = set()
    order: list[int] = []
    call = call_of[members[0]]

    def ready(u: int) -> bool:
        return all(arg[0] != "u" or call_of[arg[1]] != call or arg[1] in done
                   for arg in units.args[u])

    for u in members:
        if u in done:
            continue
        order.append(u)
        done.add(u)
        for reader in readers.get(u, ()):
            if reader not in done and ready(reader):
                order.append(reader)
                done.add(reader)
    return order


def _holders(units: _Units, source: tuple) -> set[int]:
    """The nodes holding ``source`` before anything moves: its producer, and for a stored
    block the copies its layout records."""
    held = {units.node_of(source)}
    if source[0] == INPUT:
        _, position, coords = source
        held.update(units.inputs[position].copies.get(coords, ()))
    return held
