"""Several staged calls submitted as one: their calls merged per node and level.

Contract: a :class:`CallBatch` collects the staged calls
(:class:`~tensorc.runtime.ray.stages.StagedCalls`) of consecutive statements of one array
program instead of submitting each statement's calls on its own. :meth:`CallBatch.add` takes
staged calls and their operands' :class:`~tensorc.placement.blocks.Blocks` and returns, per call,
:class:`Deferred` stand-ins for the refs the call will return (its exports, then its node
report), so the next statement can be staged on them at once. :meth:`CallBatch.flush` then
submits everything:

- every call gets a *level* across the whole batch, as :mod:`tensorc.runtime.ray.stages` levels
  units: the largest level of the calls it reads, plus one when one of them is on another
  node. Calls with the same node and level become one call (one Ray actor call), their steps
  concatenated in batch order, which is a topological order. A merged call reads nothing
  made on another node at its level or later, so the merged calls form a DAG, and they are
  submitted in level order under the executor's submission lock (each worker's queue
  follows one topological order);
- a step result that a merged call only uses itself is not returned (it never enters the
  object store); one that another merged call reads, or that a tracked ``Blocks`` which was
  not dropped holds, is returned;
- once submitted, every tracked ``Blocks`` holds real refs; a dropped one (an intermediate
  the caller said nobody reads after the batch) is emptied, so a misuse fails loudly;
- an operand given as :class:`Inline` blocks (a small driver array) travels inside the call
  messages as a value, with no task to place it; a tracked ``Blocks`` that still holds one
  after the flush gets it ``ray.put``. An operand read from storage (a
  :class:`~tensorc.stored.StoredArray`, argument ``("st", position)``) travels the same way,
  as its path: the calls read its blocks;
- a merged call's memory budget is the smallest of its calls'.

The merged calls' steps travel once per batch *shape* (the same programs bound the same
way: an iteration of a loop), put in Ray once per session and cached (:data:`PLANS_KEPT`).
The flush returns the merged calls' node-report refs; the caller waits on them
(:func:`~tensorc.runtime.ray.calls.wait_for_calls`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from tensorc.placement.blocks import Blocks
from tensorc.runtime.ray.calls import SUBMITTING, node_workers, put_payloads, submit_stage
from tensorc.runtime.ray.held import Held, read_in_place
from tensorc.runtime.ray.held import bind as bind_held
from tensorc.runtime.ray.inline import Inline
from tensorc.runtime.ray.stages import INPUT, STORED, NodeCall, StagedCalls

PLANS_KEPT = 32
"""Merged plans (batch shapes) a session keeps, least recently used dropped first."""

REPORT = -1
"""The :attr:`Deferred.slot` of a call's node report."""


class Deferred:
    """The ref a batched call will return: export ``slot`` of batch call ``entry``
    (:data:`REPORT` for its node report)."""

    __slots__ = ("entry", "slot")

    def __init__(self, entry: int, slot: int) -> None:
        self.entry = entry
        self.slot = slot

    def __repr__(self) -> str:
        return f"Deferred(call {self.entry}, slot {self.slot})"


@dataclass(frozen=True)
class MergedCall:
    """One submitted call: ``steps`` on ``node``; ``args[i]`` is ``("d", entry, slot)`` (a
    batch call's export, from another merged call) or ``("a", entry, k)`` (argument ``k``
    as batch call ``entry`` bound it); ``exports`` the ``(entry, slot)`` it returns, the
    results of its steps ``export_steps``."""

    node: int
    level: int
    steps: tuple
    args: tuple
    exports: tuple[tuple[int, int], ...]
    export_steps: tuple[int, ...]
    entries: tuple[int, ...]
    """The batch calls merged into it."""
    budget: int | None = None
    """The node's memory budget: the smallest of the merged calls' budgets."""


@dataclass
class MergedPlan:
    """The merged calls of one batch shape, and the payload refs of one session."""

    calls: list[MergedCall]
    staged: tuple
    """The staged calls of the shape (held so their ids stay theirs)."""
    payloads: list | None = None


_PLANS_LOCK = threading.Lock()


class CallBatch:
    """Calls of consecutive statements' staged calls, merged when flushed (module docstring)."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.calls: list[tuple[NodeCall, list]] = []
        self.staged: list[StagedCalls] = []
        self._tracked: list[tuple[Blocks, bool]] = []
        self.submitted_calls = 0

    def __len__(self) -> int:
        return len(self.calls)

    def add(self, staged: StagedCalls, inputs: list[Blocks],
            stored: dict | None = None) -> list[list[Deferred]]:
        """Take ``staged``'s calls, bound to ``inputs`` (and ``stored``, the operands read
        from storage by position); returns each call's refs to be: its exports, then its
        node report."""
        first = len(self.calls)
        self.staged.append(staged)
        returned: list[list[Deferred]] = []
        workers = None  # asked for once, if a held block is read
        for c, call in enumerate(staged.calls):
            bound = []
            for source in call.args:
                if source[0] == STORED:
                    bound.append(Inline(stored[source[1]]))
                elif source[0] == INPUT:  # a held block read elsewhere is released now
                    ref = inputs[source[1]].refs[source[2]]
                    if type(ref) is Held and workers is None:
                        workers = node_workers(self.cluster)
                    bound.append(bind_held(ref, workers, call.node))
                else:
                    bound.append(returned[source[1]][source[2]])
            entry = first + c
            self.calls.append((call, bound))
            returned.append([Deferred(entry, k) for k in range(len(call.exports))]
                            + [Deferred(entry, REPORT)])
        return returned

    def track(self, blocks: Blocks, keep: bool = False) -> None:
        """Patch ``blocks``'s refs when the batch is submitted; ``keep``: never drop it."""
        self._tracked.append((blocks, keep))

    def discard(self) -> None:
        """Forget the batch without submitting it (its program failed on the driver): every
        tracked ``Blocks`` is emptied, so nothing can read its stand-ins."""
        for blocks, _ in self._tracked:
            blocks.refs.clear()
            blocks.reported.clear()
        self.calls.clear()
        self.staged.clear()
        self._tracked.clear()

    def flush(self, drop: Iterable[Blocks] = ()) -> list:
        """Submit the batch (module docstring); ``drop`` lists tracked ``Blocks`` nobody reads
        after it. Returns the report refs of the submitted calls; the batch is empty after."""
        if not self.calls:
            self._tracked.clear()
            return []
        dropped = {id(b) for b in drop}
        kept = [(b, keep) for b, keep in self._tracked if keep or id(b) not in dropped]
        wanted = set()
        for blocks, _ in kept:
            for ref in (*blocks.refs.values(), *blocks.reported.values()):
                if type(ref) is Deferred:
                    wanted.add((ref.entry, ref.slot))
        plan = self._plan(frozenset(wanted))
        results, reports = self._submit(plan)
        for blocks, _ in kept:
            _patch(blocks, results)
        for blocks, keep in self._tracked:
            if not keep and id(blocks) in dropped:
                blocks.refs.clear()
                blocks.reported.clear()
        self.submitted_calls += len(plan.calls)
        self.calls.clear()
        self.staged.clear()
        self._tracked.clear()
        return reports

    # -- merging -------------------------------------------------------------------------
    def _shape(self, wanted: frozenset) -> tuple:
        bindings = tuple(
            (id(call), tuple((ref.entry, ref.slot) if type(ref) is Deferred else None
                             for ref in bound))
            for call, bound in self.calls)
        return (tuple(id(p) for p in self.staged), bindings, wanted)

    def _plan(self, wanted: frozenset) -> MergedPlan:
        plans = _session_plans(self.cluster)
        key = self._shape(wanted)
        with _PLANS_LOCK:
            plan = plans.get(key)
            if plan is not None:
                plans.move_to_end(key)
                return plan
        plan = MergedPlan(merge(self.calls, wanted), tuple(self.staged))
        with _PLANS_LOCK:
            plans[key] = plan
            while len(plans) > PLANS_KEPT:
                plans.popitem(last=False)
        return plan

    def _submit(self, plan: MergedPlan) -> tuple[dict, list]:
        cluster = self.cluster
        if plan.payloads is None or plan.payloads[0] is not cluster:
            plan.payloads = (cluster, put_payloads((call.steps, call.export_steps, call.budget)
                                                   for call in plan.calls))
        workers = node_workers(cluster)
        results: dict[tuple[int, int], object] = {}
        reports = []
        with SUBMITTING:
            # blocks the calls were given bound first: a held block read on another node is
            # released before any call queues on its holder (a release after its call
            # would wait for it); one released since is read by its ref
            given = [{k: bind_held(self.calls[entry][1][slot], workers, merged.node)
                      for k, (kind, entry, slot) in enumerate(merged.args) if kind != "d"}
                     for merged in plan.calls]
            for merged, bound, (key, payload) in zip(plan.calls, given, plan.payloads[1],
                                                     strict=True):
                args = []
                for k, (kind, entry, slot) in enumerate(merged.args):
                    args.append(bind_held(results[(entry, slot)], workers, merged.node)
                                if kind == "d" else bound[k])
                args = [read_in_place(a) for a in args]
                refs = submit_stage(cluster, workers, merged.node, key, payload, args,
                                    len(merged.exports) + 1)
                for export, ref in zip(merged.exports, refs, strict=False):
                    results[export] = ref
                for entry in merged.entries:
                    results[(entry, REPORT)] = refs[-1]
                reports.append(refs[-1])
        return results, reports


def merge(calls: list[tuple[NodeCall, list]], wanted: frozenset) -> list[MergedCall]:
    """The merged calls of batch ``calls`` (module docstring), ``wanted`` the ``(entry,
    slot)`` exports that must be returned whatever reads them."""
    count = len(calls)
    level = [0] * count
    for i, (call, bound) in enumerate(calls):
        for ref in bound:
            if type(ref) is Deferred:
                j = ref.entry
                level[i] = max(level[i], level[j] + (calls[j][0].node != call.node))
    keys = sorted({(level[i], calls[i][0].node) for i in range(count)})
    group_index = {key: g for g, key in enumerate(keys)}
    group_of = [group_index[(level[i], calls[i][0].node)] for i in range(count)]
    members: list[list[int]] = [[] for _ in keys]
    for i, g in enumerate(group_of):
        members[g].append(i)
    returned = set(wanted)
    for i, (_, bound) in enumerate(calls):
        for ref in bound:
            if type(ref) is Deferred and group_of[ref.entry] != group_of[i]:
                returned.add((ref.entry, ref.slot))
    offset = [0] * count
    merged = []
    for g, (lvl, node) in enumerate(keys):
        steps: list = []
        args: list[tuple] = []
        for i in members[g]:
            call, bound = calls[i]
            offset[i] = len(steps)
            for step, inputs in call.steps:
                remapped = []
                for kind, k in inputs:
                    if kind == "t":
                        remapped.append(("t", offset[i] + k))
                        continue
                    ref = bound[k]
                    if type(ref) is Deferred and group_of[ref.entry] == g:
                        producer = calls[ref.entry][0]
                        remapped.append(("t", offset[ref.entry] + producer.exports[ref.slot]))
                        continue
                    if type(ref) is Deferred:
                        args.append(("d", ref.entry, ref.slot))
                    else:
                        args.append(("a", i, k))
                    remapped.append(("x", len(args) - 1))
                steps.append((step, tuple(remapped)))
        exports = tuple((i, slot) for i in members[g]
                        for slot in range(len(calls[i][0].exports)) if (i, slot) in returned)
        export_steps = tuple(offset[i] + calls[i][0].exports[slot] for i, slot in exports)
        budgets = [calls[i][0].budget for i in members[g] if calls[i][0].budget is not None]
        merged.append(MergedCall(node, lvl, tuple(steps), tuple(args), exports, export_steps,
                                 tuple(members[g]), min(budgets) if budgets else None))
    return merged


def _patch(blocks: Blocks, results: dict) -> None:
    """Real refs in place of ``blocks``'s stand-ins (an inline block is put in Ray)."""
    for coords, ref in list(blocks.refs.items()):
        if type(ref) is Deferred:
            blocks.refs[coords] = results[(ref.entry, ref.slot)]
        elif type(ref) is Inline:
            import ray

            blocks.refs[coords] = ray.put(ref.value)
            blocks.reported.pop(coords, None)
    for coords, ref in list(blocks.reported.items()):
        if type(ref) is Deferred:
            blocks.reported[coords] = results[(ref.entry, REPORT)]


def _session_plans(cluster) -> OrderedDict:
    plans = getattr(cluster, "merged_plans", None)
    if plans is None:
        plans = OrderedDict()
        cluster.merged_plans = plans
    return plans
