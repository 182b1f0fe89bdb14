"""A block program's placed tasks submitted per node and wave: one call, not one task each.

Contract: a :class:`Wave` collects block-program tasks that the driver has expanded and
placed (:class:`~tensorc.placement.block_placement.BlockPlacer` chose each one's node) but not
submitted. :meth:`Wave.add` takes a task's node, its :class:`BlockKernel` and its arguments,
each ``(PENDING, unit, j)`` (result ``j`` of a task earlier in this wave) or any other
hashable argument the submission binds to a block already in Ray (a symbol of
:mod:`~tensorc.runtime.ray.block_replay`: an input block, or a result of an earlier wave),
and returns the task's unit number. :meth:`Wave.prepare` forms the whole wave as calls of
the two-level runtime (:mod:`tensorc.runtime.ray.stages` levels einsum units the same way)
and pickles their payloads once (:class:`Prepared`), which :meth:`Prepared.submit`
submits, as many times as a recording replays it:

- a unit's *level* is the largest level of the units it reads, plus one when one of them is
  on another node, and at least its node's floor: the level of the node's previous unit (a
  node's calls run one after another, in placement order), one more once a unit on
  another node has read a result of the node's call (so that call ends, and its result
  leaves, without waiting for the units placed after); units with the same node and level
  are one call on that node's
  :class:`~tensorc.runtime.ray.tasks.NodeWorker`, their steps in wave (topological) order.
  A chain of tasks on one node is therefore one call, and calls grow with nodes x levels,
  not with tasks. A call pins every argument it reads from the object store while it runs
  (an input block another node holds is pulled into the worker's memory instead, where
  it offers it: :mod:`~tensorc.runtime.ray.peer_blocks`; it is counted here all the
  same, as the fallback through Ray would bring it), so a node's units of one level whose
  such arguments exceed
  :data:`CALL_STORE_SHARE` of the node's store (:func:`call_budget`) are cut, in wave
  order, into consecutive calls (*parts*, :meth:`Wave.parts`), the results between them
  kept in the worker: a node's store that cannot hold a call's arguments spills its other
  objects to disk. A
  :class:`Stitch` (an input block cut from the stored blocks of another blocking) is a unit
  like a task's, placed by the driver;
- a unit on the :data:`DRIVER` (a small task at a hop, which the driver runs itself: the
  caller decides which) is in no call: its level is one above the node units it reads,
  and a unit reading it is at least at its level. Its values are handed over directly
  where the cluster allows (:mod:`~tensorc.runtime.ray.posted`, :meth:`Prepared.submit`;
  several nodes, every one with a worker, the direct path on): it is then at the level of
  the units it reads (so a node's units before and after it may be one call), the step
  making a result it reads is followed by a :class:`~tensorc.runtime.ray.tasks.Post` step,
  a unit reading it is preceded by a ``pull`` step (:data:`PULL`) that waits for the
  driver's post, every call is submitted at once, and the driver pulls what it reads from
  the workers' block servers, runs its units and posts what calls read. Otherwise
  (``TENSORC_RAY_HANDOVER=0`` too) the driver runs it before the first call of that level
  is sent, on the results it reads, fetched at once through Ray, and a call reads its
  results inside its message;
- calls are submitted in (level, node, part) order under the process-wide submission lock
  (let go only while the driver runs its units; a node's later parts of a level wait with
  its part that reads the driver's), so every worker's queue follows one topological
  order (no cycle can form between actors);
- a result crosses a call boundary to another node only as a call's return value (a Ray
  object: moved by Ray); a result only its own call reads never enters the object store. A
  result is returned when a call on another node reads it or when the caller still wants
  it after the wave (``wanted``: read by tasks not yet expanded, or an output's final
  block). A result that only later calls on its own node read is *kept* in that node's
  worker (:data:`~tensorc.runtime.ray.tasks.KEPT`, under a key relative to the prefix the
  calls are submitted with, a run's own), not stored and read back: a TSQR leaf's tall Q
  factor, read again by its node's last call. On a node without a worker it is returned
  as before. A result the caller asks to *hold* (an output's final block no later wave
  reads: :mod:`~tensorc.runtime.ray.held`) is kept the same way, with no last reader,
  when no call on another node reads it.

:meth:`Prepared.submit` returns the refs of the wanted results and the calls' report refs
(the caller waits on them with :func:`~tensorc.runtime.ray.calls.wait_for_calls`). Plain
data until the submission; it is the only part that talks to Ray.
"""

from __future__ import annotations

import itertools
import os
import pickle
import time
from collections import Counter
from operator import itemgetter

import numpy as np

from tensorc.codegen.block_kernels import evaluate_block_expr
from tensorc.runtime.ray import peer_blocks, posted
from tensorc.runtime.ray.calls import (
    SUBMITTING,
    WorkerLost,
    fetch_results,
    node_workers,
    peer_endpoints,
    submit_stage,
)
from tensorc.runtime.ray.held import Held, read_in_place
from tensorc.runtime.ray.inline import Inline, made_here
from tensorc.runtime.ray.peer_blocks import PostedRead, direct
from tensorc.runtime.ray.stages import RUN, Step
from tensorc.runtime.ray.tasks import Post, stitch
from tensorc.runtime.ray.tasks import pull as PULL

REF, PENDING = "ref", "w"
"""Argument kinds: a block already in Ray, or a result of a task earlier in the wave."""

NO_LAST_READER = -1
"""The last reader of a held result: no call takes it back (a release does)."""

DRIVER = -1
"""The node of a unit the driver runs itself (:meth:`Wave.add`), and the call it is in."""

HANDOVER = os.environ.get("TENSORC_RAY_HANDOVER", "1") != "0"
"""Whether a wave's :data:`DRIVER` units hand their values over directly
(:meth:`Prepared.submit`); ``TENSORC_RAY_HANDOVER=0``: through Ray, the calls reading them
sent once the driver has run them."""

CALL_STORE_SHARE = 0.7
"""The share of its node's object store a call's arguments from the store may take
together (:meth:`Wave.parts`): a call pins them all while it runs, and Ray spills a node's
other objects to disk once its store is 80 % full (a 8192² solve on 4 nodes of 512 MB,
one call reading 537 MB: 5.4-5.7 s and 256-384 MiB spilled; cut at this share, 4 calls,
3.6-3.8 s and none; at 0.4, 7 calls, 3.8-5.0 s)."""


def call_budget(cluster) -> int | None:
    """The most bytes of a call's arguments from the object store on one of ``cluster``'s
    nodes (:data:`CALL_STORE_SHARE` of a node's store), or ``None`` when the store's size
    is unknown."""
    if not cluster.store_bytes:
        return None
    return int(CALL_STORE_SHARE * cluster.node_store_bytes)


class BlockKernel:
    """One block-program task as a call step: its kernel expression over the blocks its reads
    name, in order. Returns its one result, or its results as a tuple (``results > 1``)."""

    __slots__ = ("expr", "reads", "results")

    def __init__(self, expr, reads: tuple, results: int) -> None:
        self.expr, self.reads, self.results = expr, reads, results

    def __call__(self, *blocks):
        made = evaluate_block_expr(self.expr, dict(zip(self.reads, blocks, strict=True)))
        return tuple(made) if self.results > 1 else made[0]

    def __reduce__(self):
        return BlockKernel, (self.expr, self.reads, self.results)


class Stitch:
    """A step that cuts one block of the program's blocking out of the stored blocks that
    overlap it (an input stored in another blocking): it runs inside the call of its node
    (the placer chose it, and copies the pieces there) instead of as a Ray task of its own,
    whose result the object store would keep and the reading call fetch again."""

    __slots__ = ("shape", "piece_slices")
    results = 1

    def __init__(self, shape: tuple[int, ...], piece_slices: tuple) -> None:
        self.shape, self.piece_slices = shape, piece_slices

    def __call__(self, *pieces):
        return np.ascontiguousarray(stitch(self.shape, self.piece_slices, pieces))

    def __reduce__(self):
        return Stitch, (self.shape, self.piece_slices)


class Wave:
    """Placed, unsubmitted block tasks (see the module docstring)."""

    def __init__(self) -> None:
        self.node: list[int] = []
        self.kernel: list[BlockKernel] = []
        self.args: list[tuple] = []
        self.nbytes: list[tuple] = []  # per unit, the bytes of each argument (0: unknown)

    def __len__(self) -> int:
        return len(self.node)

    def add(self, node: int, kernel: BlockKernel, args, nbytes=None) -> int:
        """A unit on ``node`` (or :data:`DRIVER`) running ``kernel`` on ``args``;
        ``nbytes``: each argument's bytes, which :meth:`parts` weighs."""
        self.node.append(node)
        self.kernel.append(kernel)
        self.args.append(tuple(args))
        self.nbytes.append(tuple(nbytes) if nbytes is not None else (0,) * len(args))
        return len(self.node) - 1

    def levels(self, handed_over: bool = False) -> list[int]:
        """Each unit's level (module docstring). A :data:`DRIVER` unit is one level above
        the node units it reads, and a unit reading one is at least at its level: the
        driver runs it between the submissions of the two levels. ``handed_over``: the
        driver's values travel inside the calls (:meth:`Prepared.submit`), so a driver
        unit is at the level of the units it reads, and so may be a unit reading it: one
        call posts what the driver reads and pulls what it makes, in step order."""
        level = [0] * len(self.node)
        floor: dict[int, int] = {}  # per node, the level its next units start at
        for u, args in enumerate(self.args):
            node = self.node[u]
            level[u] = floor.get(node, 0)
            for arg in args:
                if arg[0] != PENDING:
                    continue
                a = arg[1]
                if self.node[a] in (node, DRIVER) or (handed_over and node == DRIVER):
                    level[u] = max(level[u], level[a])
                    continue
                level[u] = max(level[u], level[a] + 1)
                floor[self.node[a]] = max(floor.get(self.node[a], 0), level[a] + 1)
            if node != DRIVER:
                floor[node] = max(floor.get(node, 0), level[u])  # a node's calls run in order
        return level

    def parts(self, level: list[int], budget: int | None, wanted=(), nodes_kept=(),
              held=()) -> list[int]:
        """Each unit's part of its node and level: the units of one node and level are cut,
        in wave order, into parts whose arguments from the object store come to at most
        ``budget`` bytes together, each counted once a part. An argument is from the store
        unless it is a :data:`DRIVER` unit's (in the message), or made on the node and
        either in the same part or kept in the worker (:meth:`calls`' rule, with the same
        ``wanted``, ``nodes_kept`` and ``held``); a unit whose own arguments exceed the
        budget is a part alone, and one that reads nothing more from the store never
        starts a part. ``None``: no limit, one part."""
        part = [0] * len(self.node)
        if budget is None:
            return part
        read_elsewhere = {arg[1:] for u, args in enumerate(self.args) for arg in args
                          if arg[0] == PENDING and self.node[arg[1]] != self.node[u]}

        def from_store(arg, node: int, members: set) -> bool:
            if arg[0] != PENDING:
                return True
            made_on = self.node[arg[1]]
            if made_on == DRIVER or (made_on == node and arg[1] in members):
                return False
            if made_on != node:
                return True
            result = arg[1:]  # made in an earlier part on this node: kept, held or stored
            return (result in read_elsewhere or node not in nodes_kept
                    or (result in wanted and result not in held))

        def weigh(u: int, node: int, counted: set, members: set) -> dict:
            return {arg: size for arg, size in zip(self.args[u], self.nbytes[u], strict=True)
                    if arg not in counted and from_store(arg, node, members)}

        open_parts: dict[tuple[int, int], tuple[int, int, set, set]] = {}
        for u, node in enumerate(self.node):
            if node == DRIVER:
                continue
            number, used, counted, members = open_parts.get((level[u], node),
                                                            (0, 0, set(), set()))
            new = weigh(u, node, counted, members)
            if members and new and used + sum(new.values()) > budget:
                number, used, counted, members = number + 1, 0, set(), set()
                new = weigh(u, node, counted, members)
            counted.update(new)
            members.add(u)
            used += sum(new.values())
            open_parts[(level[u], node)] = (number, used, counted, members)
            part[u] = number
        return part

    def _call_keys(self, level: list[int], part: list[int]) -> list[tuple[int, int, int]]:
        """The calls, as ``(level, node, part)`` in submission order: one per node, level
        and part (:meth:`parts`)."""
        return sorted({(level[u], node, part[u]) for u, node in enumerate(self.node)
                       if node != DRIVER})

    def driver_units(self) -> list[tuple[int, BlockKernel, tuple]]:
        """The :data:`DRIVER` units as ``(unit, kernel, args)``, in wave order."""
        return [(u, self.kernel[u], self.args[u])
                for u, node in enumerate(self.node) if node == DRIVER]

    def calls(self, wanted: set, nodes_kept=(), held=(), level: list[int] | None = None,
              part: list[int] | None = None, handed_over: bool = False
              ) -> list[tuple[int, tuple, tuple, tuple, list, tuple, tuple, tuple]]:
        """The wave as calls: ``(node, steps, args, exports, exported results, kept_in,
        keep_out, held_out)`` in submission order; ``args[i]`` is ``(PENDING, unit,
        j)`` (an export of an earlier call of the wave) or any other hashable argument the
        caller binds (:meth:`Prepared.submit`), ``exported[k]`` the ``(unit, j)`` export
        ``k`` returns. A result read only by later calls on its node, when that node is one
        of ``nodes_kept`` (those with a worker), is kept there: its call's ``keep_out`` holds
        ``(step, key)``, each reading call's ``kept_in`` ``(key, whether it is the last
        reader)``, read after the arguments; the key (``"unit.j"``) is relative to the
        prefix the calls are submitted with. A result of ``held`` (wanted only as a final
        block) that no call on another node reads is held there, read the same way by later
        calls on its node but taken back by none (:mod:`~tensorc.runtime.ray.held`): its
        call's ``held_out`` holds ``(step, key, result)``; ``level``: :meth:`levels`, when
        the caller has it; ``part``: :meth:`parts` (default: one part per node and
        level)."""
        level = self.levels(handed_over) if level is None else level
        part = [0] * len(self.node) if part is None else part
        keys = self._call_keys(level, part)
        call_index = {key: c for c, key in enumerate(keys)}
        call_of = [DRIVER if node == DRIVER else call_index[(level[u], node, part[u])]
                   for u, node in enumerate(self.node)]
        read_by_call: dict[tuple[int, int], set[int]] = {}
        for u, args in enumerate(self.args):
            for arg in args:
                if arg[0] == PENDING:
                    read_by_call.setdefault(arg[1:], set()).add(call_of[u])
        kept: dict[tuple[int, int], tuple[str, int]] = {}  # result -> (key, its last reader)
        for result in {**read_by_call, **dict.fromkeys(held)}:
            c = call_of[result[0]]
            if c == DRIVER:  # a value in the driver: it travels in the calls' messages
                continue
            others = read_by_call.get(result, set()) - {c}
            node = keys[c][1]
            if node not in nodes_kept or any(r == DRIVER or keys[r][1] != node
                                             for r in others):
                continue
            if result in held:
                kept[result] = (f"{result[0]}.{result[1]}", NO_LAST_READER)
            elif others and result not in wanted:
                kept[result] = (f"{result[0]}.{result[1]}", max(others))
        members: list[list[int]] = [[] for _ in keys]
        for u, c in enumerate(call_of):
            if c != DRIVER:
                members[c].append(u)
        made = []
        for c, (_, node, _) in enumerate(keys):
            steps: list = []
            step_of: dict[tuple[int, int], int] = {}
            args: list = []
            arg_index: dict = {}
            kept_in: dict[str, bool] = {}  # key -> whether this call is its last reader
            pulled: dict[tuple, int] = {}  # a driver value this call pulls -> its step
            for u in members[c]:
                inputs = []
                for arg in self.args[u]:
                    if arg[0] == PENDING and call_of[arg[1]] == c:
                        inputs.append(("t", step_of[arg[1:]]))
                        continue
                    if handed_over and arg[0] == PENDING and call_of[arg[1]] == DRIVER:
                        if arg not in pulled:  # pulled just before its first reader
                            if arg not in arg_index:
                                arg_index[arg] = len(args)
                                args.append(arg)
                            steps.append((Step(RUN, PULL), (("x", arg_index[arg]),)))
                            pulled[arg] = len(steps) - 1
                        inputs.append(("t", pulled[arg]))
                        continue
                    if arg[0] == PENDING and arg[1:] in kept:
                        key, last = kept[arg[1:]]
                        kept_in.setdefault(key, last == c)
                        inputs.append(("k", key))
                        continue
                    if arg not in arg_index:
                        arg_index[arg] = len(args)
                        args.append(arg)
                    inputs.append(("x", arg_index[arg]))
                kernel = self.kernel[u]
                steps.append((Step(RUN, kernel), tuple(inputs)))
                if kernel.results == 1:
                    step_of[(u, 0)] = len(steps) - 1
                else:
                    whole = len(steps) - 1
                    for j in range(kernel.results):
                        if (u, j) in read_by_call or (u, j) in wanted:
                            steps.append((Step(RUN, itemgetter(j)), (("t", whole),)))
                            step_of[(u, j)] = len(steps) - 1
                if handed_over:  # what the driver reads leaves as soon as it is made
                    for j in range(kernel.results):
                        if DRIVER in read_by_call.get((u, j), ()):
                            steps.append((Step(RUN, Post(_posted_key((u, j)))),
                                          (("t", step_of[(u, j)]),)))
            if kept_in:  # kept results follow the arguments
                after = {key: len(args) + k for k, key in enumerate(kept_in)}
                steps = [(step, tuple(("x", after[k]) if kind == "k" else (kind, k)
                                      for kind, k in inputs)) for step, inputs in steps]
            exported = [result for result in step_of if result not in kept and (
                result in wanted or read_by_call.get(result, {c}) - {c})]
            made.append((node, tuple(steps), tuple(args),
                         tuple(step_of[r] for r in exported), exported,
                         tuple(kept_in.items()),
                         tuple((step_of[r], kept[r][0]) for r in step_of
                               if r in kept and r not in held),
                         tuple((step_of[r], kept[r][0], r) for r in step_of
                               if r in kept and r in held)))
        return made

    def prepare(self, wanted: set, cluster, held: dict | None = None) -> Prepared:
        """The wave as calls (:meth:`calls`, results kept for the nodes with a worker) with
        their payloads pickled, ready to submit; ``held``: the results that may stay in
        their worker until read, with their sizes in bytes."""
        nodes_kept = range(min(len(node_workers(cluster)), cluster.nodes))
        post = (HANDOVER and peer_blocks.offering(cluster) and len(nodes_kept) == cluster.nodes
                and _handover_reaches(cluster))
        level = self.levels(handed_over=post)
        part = self.parts(level, call_budget(cluster), wanted, nodes_kept, held or {})
        return Prepared(self.calls(wanted, nodes_kept, held or {}, level, part,
                                   handed_over=post),
                        wanted, held or {}, self.driver_units(),
                        [key[0] for key in self._call_keys(level, part)], post=post)


class Prepared:
    """A wave's calls (:meth:`Wave.calls`, kept as ``calls[c] = (node, args, number of
    exports, exported results)``) and each call's payload, pickled once: a call sends bytes, not
    objects Ray pickles again for every call (``(steps, exports, None, kept_in, keep_out,
    held_out, post_out)``, :func:`~tensorc.runtime.ray.tasks.run_steps`'s inputs and,
    handed over (``post``), the exports the driver reads, whose keys a failing call marks
    failed), so a recorded wave (:mod:`~tensorc.runtime.ray.block_replay`) is submitted
    again without forming or pickling its calls. ``readers``: how many calls read each
    driver unit's result; ``made_on``: the node of the call exporting each result."""

    def __init__(self, calls: list, wanted, sizes: dict, driver: list = (),
                 call_levels: list | None = None, post: bool = False) -> None:
        self.wanted = frozenset(wanted)
        self.driver = {u: (kernel, args) for u, kernel, args in driver}
        self.post = post and bool(self.driver)  # handed over: every call sent at once
        self.order = list(range(len(calls))) if self.post else self._order(calls, call_levels)
        driver_reads = {arg[1:] for _, args in self.driver.values() for arg in args
                        if arg[0] == PENDING and arg[1] not in self.driver
                        } if self.post else set()
        self.made_on = {result: call[0] for call in calls for result in call[4]}
        self.readers = Counter(arg[1:] for call in calls for arg in call[2]
                               if arg[0] == PENDING and arg[1] in self.driver)
        self.payloads = [_pickled((steps, exports, None, kept_in, keep_out,
                                   tuple((step, key) for step, key, _ in held_out),
                                   tuple((k, _posted_key(result))
                                         for k, result in enumerate(exported)
                                         if result in driver_reads)))
                         for _, steps, _, exports, exported, kept_in, keep_out, held_out
                         in calls]
        self.held = [(call[0], result, key, sizes[result])
                     for call in calls for _, key, result in call[7]]
        self.kept = sum(len(call[6]) for call in calls)
        self.calls = [(node, args, len(exports), exported)  # the steps are in the payloads
                      for node, _, args, exports, exported, _, _, _ in calls]

    def _order(self, calls: list, call_levels: list | None) -> list:
        """The submission order: call indices, level by level, and before a level's calls
        that read :data:`DRIVER` units (after those that read none), the tuple of those
        units, which the driver runs there (``call_levels``: each call's level). A node's
        later parts of a level (:meth:`Wave.parts`) follow its part that reads them: they
        read its results."""
        if not self.driver:
            return list(range(len(calls)))
        if call_levels is None or len(call_levels) != len(calls):
            raise ValueError("a wave with units in the driver needs its calls' levels")
        order: list = []
        for _, group in itertools.groupby(range(len(calls)), key=call_levels.__getitem__):
            reads = {c: [arg[1] for arg in calls[c][2]
                         if arg[0] == PENDING and arg[1] in self.driver] for c in group}
            after: set[int] = set()  # nodes whose earlier part of the level waits
            waits = []
            for c, units in reads.items():  # in (node, part) order
                if units or calls[c][0] in after:
                    after.add(calls[c][0])
                    waits.append(c)
            order += [c for c in reads if c not in waits]
            needed = tuple(u for units in reads.values() for u in units)
            if waits:
                order += [needed, *waits]
        return order

    def submit(self, cluster, threads: list[int] | None, prefix: str, bind
               ) -> tuple[dict, list, float]:
        """Submit the calls, each node's on ``threads[node]`` threads when given (else its
        CPUs), their kept results under the key ``prefix``; an argument that is not a
        result of the wave is ``bind(argument, node)`` (a held input block that a call on its
        holder's node reads is bound as its ``Held``, read there if still held once all the
        call's arguments are bound). The :data:`DRIVER` units run here, handed over
        directly (:meth:`_submit_handing_over`) where :meth:`_handover` allows, else before
        the first call of the level that reads them (after the level's calls that read
        none), with the submission lock let go while their inputs are fetched (the calls
        sent so far read nothing sent later, whatever other threads send meanwhile).
        Returns ``({(unit, j):
        ref} for the wanted results, a :class:`~tensorc.runtime.ray.held.Held` for a held
        one, an :class:`~tensorc.runtime.ray.inline.Inline` for a driver unit's; the
        calls' report refs; the seconds the driver waited for its units' inputs)``."""
        workers = node_workers(cluster)
        endpoints = peer_endpoints(cluster)
        refs: dict[tuple[int, int], object] = {}
        reports: list = []
        handover = self._handover(cluster)
        if handover is not None:
            return self._submit_handing_over(cluster, workers, endpoints, handover, threads,
                                             prefix, bind, refs, reports)
        waited = 0.0
        run: list[int] = []  # calls sent together under the lock, the driver's units between
        for item in [*self.order, ()]:
            if not isinstance(item, tuple):
                run.append(item)
                continue
            with SUBMITTING:
                for c in run:
                    self._send(c, cluster, workers, endpoints, threads, prefix, bind, refs,
                               reports)
            run = []
            if item:
                waited += self._run_in_driver(cluster, item, refs)
        waited += self._run_in_driver(cluster, self.driver, refs)  # for the caller alone
        return self._results(workers, prefix, refs), reports, waited

    def _results(self, workers: list, prefix: str, refs: dict) -> dict:
        """The wanted results, a held one as its :class:`~tensorc.runtime.ray.held.Held`."""
        for node, result, key, nbytes in self.held:
            refs[result] = Held(workers[node], prefix + key, nbytes)
        return {r: refs[r] for r in self.wanted}

    def _handover(self, cluster) -> tuple | None:
        """``(driver's block server, the node workers' servers)`` when this wave hands its
        driver units' values over directly (``post``, chosen when it was prepared), else
        ``None``; a worker whose server does not answer now is a lost worker."""
        if not self.post:
            return None
        servers = peer_endpoints(cluster, offered_only=False)
        if not servers or any(server is None for server in servers):
            raise WorkerLost("a node worker's block server did not answer")
        return peer_blocks.serve(), servers

    def _submit_handing_over(self, cluster, workers, endpoints, handover: tuple, threads,
                             prefix: str, bind, refs: dict, reports: list
                             ) -> tuple[dict, list, float]:
        """:meth:`submit` with every call sent at once: a call reading a :data:`DRIVER`
        unit's value pulls it from the driver's block server (waiting for the post), where
        the driver posts it once it has run the unit on the values the calls post
        (:meth:`_run_posting`). Any failure here, the submission's own included, marks the
        driver's values failed, so that no call waits for them."""
        driver_server, servers = handover
        posted_reads = {result: PostedRead(driver_server, _driver_key(prefix, result))
                        for result in self.readers}
        producers: dict = {}  # a call's exported result -> that call's report ref
        try:
            with SUBMITTING:
                for c in self.order:
                    self._send(c, cluster, workers, endpoints, threads, prefix, bind, refs,
                               reports, posted_reads)
                    producers.update(dict.fromkeys(self.calls[c][3], reports[-1]))
            waited = self._run_posting(cluster, servers, prefix, refs, producers)
        except BaseException:
            posted.fail([read.key for read in posted_reads.values()])
            raise
        return self._results(workers, prefix, refs), reports, waited

    def _run_posting(self, cluster, servers: list, prefix: str, refs: dict,
                     producers: dict) -> float:
        """Run the :data:`DRIVER` units one by one in wave order, each on the calls' values
        it reads (pulled when it first needs them: :meth:`_pulled`) and on the units' before
        it, posting the values calls read before waiting for any more: a call posts what
        the driver reads as it makes it and waits only for values of units earlier in wave
        order, so every value a pull waits for comes. Returns the seconds spent waiting for
        the calls' values."""
        values: dict = {}
        made: list = []  # (key, value, readers) not posted yet
        waited = 0.0
        for u in sorted(self.driver):  # wave order is topological
            missing = [r for r in self._inputs_of([u]) if r not in values]
            if missing:
                posted.post_many(made)
                made = []
                started = time.perf_counter()
                values.update(self._pulled(cluster, servers, prefix, missing, refs,
                                           producers))
                waited += time.perf_counter() - started
            self._run_units([u], values, refs)
            made += [(_driver_key(prefix, (u, j)), refs[(u, j)].value, self.readers[(u, j)])
                     for j in range(self.driver[u][0].results) if (u, j) in self.readers]
        posted.post_many(made)
        return waited

    def _pulled(self, cluster, servers: list, prefix: str, fetch: list, refs: dict,
                producers: dict) -> dict:
        """The values of the calls' results ``fetch``, pulled from the workers that post
        them (a node's at once), asking again while their calls run. A call that ended
        without posting (it failed, or its worker died) is read through Ray, which raises
        its error (a dead worker: :class:`~tensorc.runtime.ray.calls.WorkerLost`). A
        worker that cannot be reached marks the driver's values failed first (its calls
        may be waiting for them), then Ray says why; where Ray has the values after all,
        the run is a lost worker's (it runs again task by task)."""
        import ray

        pending: dict[int, list] = {}
        for result in fetch:
            pending.setdefault(self.made_on[result], []).append(result)
        values: dict = {}
        while pending:
            for node, results in list(pending.items()):
                try:
                    found = peer_blocks.pull_posted(
                        servers[node], [prefix + _posted_key(r) for r in results],
                        peer_blocks.POSTED_WAIT)
                except peer_blocks.HandOverFailed as err:
                    if err.waiting:
                        continue
                    if not err.failed:  # unreachable: its calls may wait for the driver
                        posted.fail([_driver_key(prefix, r) for r in self.readers])
                    found = _through_ray(cluster, [refs[r] for r in results])
                    if not err.failed:
                        raise WorkerLost(f"values on node {node} were not handed "
                                         "over") from err
                values.update(zip(results, found, strict=True))
                del pending[node]
            reports = list({producers[r] for results in pending.values() for r in results})
            ended = set(ray.wait(reports, num_returns=len(reports), timeout=0)[0]
                        if reports else ())
            for node, results in list(pending.items()):
                done = [r for r in results if producers[r] in ended]
                if done:  # ended without posting: Ray has its error (or its values)
                    values.update(zip(done, _through_ray(cluster, [refs[r] for r in done]),
                                      strict=True))
                    pending[node] = [r for r in results if r not in done]
                    if not pending[node]:
                        del pending[node]
        return values

    def _inputs_of(self, order: list[int]) -> list[tuple[int, int]]:
        """The results of calls the :data:`DRIVER` units ``order`` read, each once."""
        return list(dict.fromkeys(arg[1:] for u in order for arg in self.driver[u][1]
                                  if arg[1] not in self.driver))

    def _run_units(self, order: list[int], values: dict, refs: dict) -> None:
        """Run the :data:`DRIVER` units ``order`` (in wave order) on ``values`` (the calls'
        results they read) and each other's results, kept in ``refs`` as
        :class:`~tensorc.runtime.ray.inline.Inline` values (read-only, as a Ray object is)."""
        for u in order:
            kernel, args = self.driver[u]
            made = kernel(*(refs[arg[1:]].value if arg[1] in self.driver else values[arg[1:]]
                            for arg in args))
            for j, result in enumerate(made if kernel.results > 1 else (made,)):
                refs[(u, j)] = made_here(result)

    def _send(self, c: int, cluster, workers, endpoints, threads, prefix: str, bind,
              refs: dict, reports: list, posted_reads: dict | None = None) -> None:
        """Submit call ``c`` (:meth:`submit`), its wave results bound from ``refs``, an
        input block offered by another node's worker pulled from it (``endpoints``:
        :func:`~tensorc.runtime.ray.peer_blocks.direct`)."""
        node, args, exports, exported = self.calls[c]
        bound = [posted_reads[arg[1:]] if posted_reads and arg[0] == PENDING
                 and arg[1] in self.driver
                 else refs[arg[1:]] if arg[0] == PENDING else bind(arg, node)
                 for arg in args]  # then a held block, still held, is read there
        bound = [b.value if type(b) is Inline else b if type(b) is PostedRead
                 else direct(read_in_place(b), node, workers, endpoints) for b in bound]
        returned = submit_stage(cluster, workers, node, prefix, self.payloads[c], bound,
                                exports + 1, threads=threads[node] if threads else None)
        refs.update(zip(exported, returned, strict=False))
        reports.append(returned[-1])

    def _run_in_driver(self, cluster, units, refs: dict) -> float:
        """Run the :data:`DRIVER` units among ``units`` not run yet, and those they read,
        here on the results of the calls they read (submitted: their level is lower),
        fetched at once; each result goes in ``refs`` as an
        :class:`~tensorc.runtime.ray.inline.Inline` (read-only, as a Ray object is).
        Returns the seconds spent waiting for those results."""
        todo: set[int] = set()
        stack = [u for u in units if u in self.driver and (u, 0) not in refs]
        while stack:
            u = stack.pop()
            if u in todo:
                continue
            todo.add(u)
            stack.extend(arg[1] for arg in self.driver[u][1] if arg[0] == PENDING
                         and arg[1] in self.driver and (arg[1], 0) not in refs)
        if not todo:
            return 0.0
        order = sorted(todo)  # wave order is topological
        fetch = self._inputs_of(order)
        started = time.perf_counter()
        values = dict(zip(fetch, _through_ray(cluster, [refs[r] for r in fetch]), strict=True))
        waited = time.perf_counter() - started
        self._run_units(order, values, refs)
        return waited


_REACHES: dict[tuple, bool] = {}  # (cluster, its workers' epoch, servers) -> checked


def _handover_reaches(cluster) -> bool:
    """Whether the driver and the node workers reach each other's block servers (checked
    once per set of workers: the driver connects to each worker's, one worker to the
    driver's); a driver that cannot (a client of a remote cluster, a firewall) hands
    nothing over."""
    import ray

    servers = peer_endpoints(cluster, offered_only=False)
    if not servers or any(server is None for server in servers):
        return False
    key = (id(cluster), cluster.workers_epoch, tuple(servers))
    if key not in _REACHES:
        found = all(peer_blocks.reachable(server) for server in servers)
        if found:
            try:
                found = bool(ray.get(node_workers(cluster)[0].reaches.remote(
                    peer_blocks.serve()), timeout=10))
            except (OSError, ray.exceptions.RayError):
                found = False
        _REACHES.clear()  # one cluster at a time
        _REACHES[key] = found
    return _REACHES[key]


def _posted_key(result: tuple[int, int]) -> str:
    """The key, relative to a run's prefix, a call posts a unit's result under."""
    return f"{result[0]}.{result[1]}"


def _driver_key(prefix: str, result: tuple[int, int]) -> str:
    """The key the driver posts a :data:`DRIVER` unit's result under, in the run
    ``prefix``."""
    return prefix + "d" + _posted_key(result)


def _through_ray(cluster, refs: list) -> list:
    """The calls' results ``refs`` the driver's units read, through Ray, waiting for their
    calls (:func:`~tensorc.runtime.ray.calls.fetch_results`)."""
    return fetch_results(cluster, refs, "a block program's task in the driver", timed=False)


def _pickled(payload) -> bytes:
    """``payload`` as bytes: the standard pickle (a third of cloudpickle's time here), or
    cloudpickle for what it cannot pickle by reference."""
    try:
        return pickle.dumps(payload, protocol=5)
    except (pickle.PicklingError, AttributeError, TypeError):
        from ray import cloudpickle

        return cloudpickle.dumps(payload, protocol=5)
