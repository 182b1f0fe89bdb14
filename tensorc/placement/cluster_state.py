"""A simulated cluster: per-node memory and network bytes, and where every block lives.

Contract: ``ClusterState(nodes, sizes, uses, retained)`` models ``nodes`` nodes and one block
per entry of ``sizes`` (a task graph's task indices; :meth:`ClusterState.add_block` appends
more, e.g. the result of a local fold). Nothing here runs data: a transition only moves
counters, so a whole graph is simulated at a few 10⁵ tasks per second (large graphs take
the compiled loop of :mod:`tensorc.placement.lshs_compiled`, which keeps the same state).

Model (the one the schedulers and the Ray executor share):

- a block may live on several nodes at once (Ray caches copies): ``holders`` is a bit mask
  of nodes per block (bit ``n`` set = node ``n`` holds a copy);
- :meth:`ClusterState.run` simulates computing one block on one node: each input the node
  does not hold is copied from a holder — the holder with the least ``net_out`` so far, ties
  to the lowest node id — adding its bytes to ``net_out`` of the source, ``net_in`` of the
  node and ``mem`` of the node (the copy stays cached there); then the output's bytes are
  added to ``mem`` of the node and ``peak`` is updated;
- a block's ``uses`` count its remaining consumers (one per occurrence in a task's inputs).
  When the last one has run the block is freed from every holder, except a *retained*
  block (a final output or a user's input) which keeps the copy on its home node (where it
  was produced) and drops only the cached copies. A block nobody reads and nobody retains
  is freed right after it is produced;
- the scheduling objective is ``max(peak) + max(net_in) + max(net_out)`` over nodes after a
  transition, with ``peak`` each node's high-water mark of live bytes (reached at the end of
  a task, before its inputs are freed). All three terms only grow, so memory and network
  bytes weigh alike; with live memory instead, a transient intermediate would buy a
  permanent transfer. :meth:`ClusterState.cost` computes it for a hypothetical transition without
  mutating anything, in time linear in the number of inputs (the three maxima are kept up
  to date incrementally).

Every copy is recorded as a :class:`Transfer` in ``transfers``; ``sum(net_in) ==
sum(net_out) == sum(t.nbytes for t in transfers)`` always holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np


class Transfer(NamedTuple):
    """One modelled copy of ``block`` from node ``src`` to node ``dst`` for ``task``."""

    task: int
    block: int
    src: int
    dst: int
    nbytes: int


class TransferLog(Sequence):
    """The copies of a schedule placed on arrays (one row ``(task, block, src, dst,
    nbytes)`` each), read as :class:`Transfer` records only when asked for."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, position):
        if isinstance(position, slice):
            return [Transfer(*row) for row in self.rows[position].tolist()]
        return Transfer(*self.rows[position].tolist())

    def __iter__(self) -> Iterator[Transfer]:
        return (Transfer(*row) for row in self.rows.tolist())


def mask_nodes(mask: int) -> list[int]:
    """The node ids whose bits are set in ``mask``, ascending."""
    nodes = []
    while mask:
        low = mask & -mask
        nodes.append(low.bit_length() - 1)
        mask ^= low
    return nodes


class ClusterState:
    """Memory, network counters and block locations of a simulated cluster (see module)."""

    def __init__(
        self,
        nodes: int,
        sizes: Sequence[int],
        uses: Sequence[int],
        retained: Iterable[int] = (),
    ) -> None:
        if nodes < 1:
            raise ValueError(f"a cluster needs at least one node, got {nodes}")
        if len(sizes) != len(uses):
            raise ValueError(f"{len(sizes)} block sizes but {len(uses)} use counts")
        self.nodes = nodes
        self.size: list[int] = list(sizes)
        self.uses: list[int] = list(uses)
        self.retained = bytearray(len(self.size))
        for block in retained:
            self.retained[block] = 1
        self.holders: list[int] = [0] * len(self.size)
        self.home: list[int] = [-1] * len(self.size)
        self.mem = [0] * nodes
        self.peak = [0] * nodes
        self.net_in = [0] * nodes
        self.net_out = [0] * nodes
        self.max_peak = 0
        self.max_in = 0
        self.max_out = 0
        self.transfers: list[Transfer] = []

    # -- blocks ---------------------------------------------------------------------------

    def add_block(self, nbytes: int, uses: int, retained: bool = False) -> int:
        """Declare one more block (not a graph task, e.g. a local fold); returns its id."""
        self.size.append(nbytes)
        self.uses.append(uses)
        self.retained.append(1 if retained else 0)
        self.holders.append(0)
        self.home.append(-1)
        return len(self.size) - 1

    def holder_nodes(self, block: int) -> list[int]:
        """Nodes holding a copy of ``block``, ascending."""
        return mask_nodes(self.holders[block])

    def held_bytes(self, inputs: Sequence[int], node: int) -> int:
        """Bytes of ``inputs`` already on ``node`` (each occurrence counted once)."""
        bit = 1 << node
        held = 0
        for position, block in enumerate(inputs):
            if self.holders[block] & bit and block not in inputs[:position]:
                held += self.size[block]
        return held

    def _source(self, mask: int, extra: dict[int, int] | None = None) -> int:
        """The holder in ``mask`` with the least net_out (plus ``extra``), lowest id on ties."""
        if not mask & (mask - 1):
            return mask.bit_length() - 1
        net_out = self.net_out
        best = -1
        best_out = 0
        while mask:
            low = mask & -mask
            node = low.bit_length() - 1
            mask ^= low
            sent = net_out[node] + (extra.get(node, 0) if extra else 0)
            if best < 0 or sent < best_out:
                best, best_out = node, sent
        return best

    # -- the objective --------------------------------------------------------------------

    def objective(self) -> int:
        """``max(peak) + max(net_in) + max(net_out)`` of the current state."""
        return self.max_peak + self.max_in + self.max_out

    def cost(self, inputs: Sequence[int], nbytes: int, node: int) -> int:
        """The objective after computing an ``nbytes`` block from ``inputs`` on ``node``,
        without changing the state (the same copies :meth:`run` would make)."""
        bit = 1 << node
        holders = self.holders
        moved = 0
        max_out = self.max_out
        extra: dict[int, int] | None = None
        copied: list[int] | None = None
        for block in inputs:
            mask = holders[block]
            if mask & bit:
                continue
            if copied is None:
                copied = [block]
                extra = {}
            elif block in copied:
                continue
            else:
                copied.append(block)
            size = self.size[block]
            src = self._source(mask, extra)
            sent = extra.get(src, 0) + size
            extra[src] = sent
            sent += self.net_out[src]
            if sent > max_out:
                max_out = sent
            moved += size
        mem = self.mem[node] + moved + nbytes
        received = self.net_in[node] + moved
        return (
            (mem if mem > self.max_peak else self.max_peak)
            + (received if received > self.max_in else self.max_in)
            + max_out
        )

    def evaluate(self, distinct: Sequence[int], nbytes: int, node: int) -> tuple[int, int]:
        """``(objective, bytes copied)`` of computing an ``nbytes`` block from the
        *distinct* input blocks ``distinct`` on ``node`` — :meth:`cost` and the bytes it
        would copy there (the inputs' bytes minus :meth:`held_bytes`) in one pass."""
        bit = 1 << node
        holders = self.holders
        size = self.size
        net_out = self.net_out
        moved = 0
        max_out = self.max_out
        extra: dict[int, int] | None = None
        for block in distinct:
            mask = holders[block]
            if mask & bit:
                continue
            nbytes_in = size[block]
            src = self._source(mask, extra)
            if extra is None:
                extra = {src: nbytes_in}
                sent = nbytes_in
            else:
                sent = extra.get(src, 0) + nbytes_in
                extra[src] = sent
            sent += net_out[src]
            if sent > max_out:
                max_out = sent
            moved += nbytes_in
        mem = self.mem[node] + moved + nbytes
        received = self.net_in[node] + moved
        peak = self.max_peak
        top_in = self.max_in
        return (
            (mem if mem > peak else peak) + (received if received > top_in else top_in) + max_out,
            moved,
        )

    # -- the transition -------------------------------------------------------------------

    def run(self, block: int, inputs: Sequence[int], node: int, task: int = -1) -> None:
        """Simulate computing ``block`` from ``inputs`` on ``node`` (see the module policy);
        ``task`` labels the recorded transfers (defaults to ``block``)."""
        if task < 0:
            task = block
        bit = 1 << node
        holders = self.holders
        size = self.size
        net_out = self.net_out
        moved = 0
        for source_block in inputs:
            mask = holders[source_block]
            if mask & bit:
                continue
            nbytes = size[source_block]
            src = self._source(mask) if mask & (mask - 1) else mask.bit_length() - 1
            sent = net_out[src] + nbytes
            net_out[src] = sent
            if sent > self.max_out:
                self.max_out = sent
            moved += nbytes
            holders[source_block] = mask | bit
            self.transfers.append(Transfer(task, source_block, src, node, nbytes))
        if moved:
            received = self.net_in[node] + moved
            self.net_in[node] = received
            if received > self.max_in:
                self.max_in = received
        live = self.mem[node] + moved + size[block]
        self.mem[node] = live
        holders[block] |= bit
        self.home[block] = node
        if live > self.peak[node]:
            self.peak[node] = live
            if live > self.max_peak:
                self.max_peak = live
        uses = self.uses
        for source_block in inputs:
            left = uses[source_block] - 1
            uses[source_block] = left
            if not left:
                self._free(source_block)
        if not uses[block]:
            self._free(block)

    def add_copy(self, block: int, node: int) -> None:
        """Record a copy of ``block`` that already sits on ``node`` (Ray cached it there
        before this graph ran): no transfer, but it occupies the node's memory."""
        bit = 1 << node
        if self.holders[block] & bit:
            return
        self.holders[block] |= bit
        self.mem[node] += self.size[block]
        if self.mem[node] > self.peak[node]:
            self.peak[node] = self.mem[node]
            if self.mem[node] > self.max_peak:
                self.max_peak = self.mem[node]

    def _free(self, block: int) -> None:
        """Drop ``block`` from its holders (a retained block keeps its home copy)."""
        mask = self.holders[block]
        if self.retained[block]:
            mask &= ~(1 << self.home[block])
            self.holders[block] = 1 << self.home[block]
        else:
            self.holders[block] = 0
        nbytes = self.size[block]
        mem = self.mem
        while mask:
            low = mask & -mask
            mem[low.bit_length() - 1] -= nbytes
            mask ^= low

    # -- reports --------------------------------------------------------------------------
