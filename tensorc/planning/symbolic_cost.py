"""The symbolic cost model: a candidate priced in closed form, without its task graph.

Contract: ``figures(problem, candidate)`` returns the per-node figures the task-level model
(:func:`tensorc.planning.distribution.model`: lower, lay out, simulate LSHS) would give the
candidate — bytes received, flops and tasks run, the final resident bytes, and a bound on
the peak memory — computed from the index grid, the block counts and the structure of the
statement alone; ``price(problem, candidate)`` turns them into the model's price with the
same formula (:func:`tensorc.planning.cost.node_seconds`). Nothing is lowered and nothing is
simulated: the work is numpy over arrays of one value per node and over the *within-cell*
block coordinates of each stage (``∏ c_i / p_i`` points, the tasks one node runs times the
nodes a stage spreads over), never over the task graph.

What it models (the plan's grid places everything, :mod:`tensorc.placement.layout`):

- every array a stage reads or writes sits on its grid node (:func:`grid_node`: the
  coordinate ``a_i mod p_i`` along the axes the array has, the within-cell rank spread in
  mixed radix over the axes it lacks); every compute task runs on its iteration block's grid
  node, which is where LSHS's grid hints put it (a node already holding every input is only
  ever that node for these layouts: ``tests/test_symbolic_cost.py`` holds the two together);
- a node receives each block it needs and does not hold, once (copies stay cached until
  the block's last consumer ran): the blocks of an input needed by the tasks of a node,
  minus the one it holds, in closed form per (within-cell block, spread code) pair;
- a reduction (summed indices cut in several blocks) folds its partial blocks on each node
  that made two or more, and the final fold on the output block's grid node receives one
  block from every other node that made some (none when one node made them all: it is then
  the grid node too) and counts the reduce's flops and task;
- replication is what the grid does when it splits an index an array lacks (each node
  along that axis needs it); pairwise versus fused joins and reductions pushed into
  operands are the stages of the final IR; operands the plan repartitions are read where
  the grid puts them, their pieces held elsewhere received and stitched
  (``problem.repartition``, the same bytes as :func:`distribution.layout` counts).

Received bytes, flops and tasks equal the simulation's exactly, node by node; so does the
resident memory after the run (inputs on their nodes and the output blocks). The peak of
the simulation depends on the order tasks run in; ``memory`` here is what a node ever holds
(its inputs, every block it receives and every block it makes), never below the simulated
peak and equal to it when nothing is freed before the last task — the price's memory term
is therefore conservative.

Outside its domain — an operand computed in a layout of its own (placed and not
repartitioned), a block count that is not a multiple of its grid size (an uneven problem or
a forced blocking), a value read by two stages, a ``Merge`` — :func:`supported` says why and
:func:`price` falls back to the task-level model (such problems are small: the operands
already sit on a real cluster, or an extent is smaller than the node count).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from tensorc.codegen.reduce_scatter import Scatter, member_pieces, round_tasks
from tensorc.ir.contraction import flops_per_element
from tensorc.ir.keys import key_of, unique
from tensorc.ir.nodes import Join, Map, Merge, Scan, post_order
from tensorc.ir.stages import folded_maps, stage_parts
from tensorc.placement.layout import grid_nodes
from tensorc.planning import cost as price_model
from tensorc.planning.cost import CostReport
from tensorc.planning.reduce_scatter import scatter_for

# -- the statement's structure (per problem) ----------------------------------------------


@dataclass(frozen=True)
class Value:
    """A blocked value: a scanned operand (``position``, ``indices`` as read) or a stage's
    result; ``dims`` are its block coordinates' index names."""

    dims: tuple[str, ...]
    position: int | None = None
    indices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stage:
    """One stage: its iteration indices (the lowering's order), the values it reads, its
    output indices, its flops per iteration element and the value it makes."""

    dims: tuple[str, ...]
    inputs: tuple[int, ...]
    output: tuple[str, ...]
    per_element: int
    value: int


@dataclass(frozen=True)
class Structure:
    """The values and stages of a statement (children first) and the value it returns;
    ``unsupported`` says why the closed form does not apply, or is None."""

    values: tuple[Value, ...]
    stages: tuple[Stage, ...]
    final: int
    unsupported: str | None


def structure(problem) -> Structure:
    """The statement's :class:`Structure` (memoised per problem)."""
    return problem.memo("symbolic_structure", lambda: _structure(problem.program))


def _structure(program) -> Structure:
    values: list[Value] = []
    stages: list[Stage] = []
    ids: dict = {}
    reasons: list[str] = []
    positions = {d.name: k for k, d in enumerate(program.inputs)}
    folded = folded_maps(program.output)
    for node in post_order(program.output):
        if isinstance(node, Scan):
            ids[node] = len(values)
            values.append(Value(tuple(key_of(node)), positions[node.tensor], tuple(node.indices)))
        elif isinstance(node, Join) or (isinstance(node, Map) and node in folded):
            continue
        elif isinstance(node, Merge):
            reasons.append("a merge (op= update)")
        else:
            inputs, _, output, _ = stage_parts(node)
            if any(child not in ids for child in inputs):
                reasons.append("a stage reads a value the closed form does not follow")
                continue
            keys = [values[ids[child]].dims for child in inputs]
            dims = tuple(unique([n for k in keys for n in k]))
            if not set(output) <= set(dims):
                reasons.append("an output index no input has")
                continue
            ids[node] = len(values)
            values.append(Value(tuple(output)))
            stages.append(Stage(dims, tuple(ids[child] for child in inputs), tuple(output),
                                flops_per_element(keys, output), ids[node]))
    readers: dict[int, int] = {}
    for stage in stages:
        for value in set(stage.inputs):
            readers[value] = readers.get(value, 0) + 1
    if any(count > 1 for count in readers.values()):
        reasons.append("a value read by two stages")
    final = ids.get(program.output, -1)
    if final < 0:
        reasons.append("an output the closed form does not follow")
    return Structure(tuple(values), tuple(stages), final, "; ".join(reasons) or None)


def closed_form(problem) -> bool:
    """Whether every candidate of ``problem`` is priced in closed form (:func:`unforced`,
    and every count is a multiple of its grid size: the split is even)."""
    return unforced(problem) and problem.even_split()


def unforced(problem) -> bool:
    """Whether the closed form prices every candidate whose counts are multiples of its
    grid sizes: the structure is supported, no operand keeps a layout of its own and no
    blocking is forced."""
    return (
        structure(problem).unsupported is None
        and not (problem.placed and set(problem.placed) - set(problem.repartition))
        and not problem.placed_counts
    )


def supported(problem, candidate) -> str | None:
    """Why ``candidate`` is outside the closed form's domain (module contract), or None."""
    found = structure(problem).unsupported
    if found:
        return found
    if problem.placed and set(problem.placed) - set(problem.repartition):
        return "an operand computed in a layout of its own"
    grid = dict(candidate.grid)
    for index, count in candidate.counts:
        if count % grid[index]:
            return f"index '{index}': {count} blocks over {grid[index]} nodes"
    if any(size < 1 for size in problem.sizes.values()):
        return "an empty index"
    return None


# -- the grid of one candidate --------------------------------------------------------------


class _Grid:
    """Grid sizes, counts, block extents and node strides of one candidate, and the
    within-cell block coordinates of each set of indices (cached)."""

    def __init__(self, problem, candidate) -> None:
        self.axes = problem.indices
        self.nodes = math.prod(p for _, p in candidate.grid)  # the nodes the grid spans
        self.p = dict(candidate.grid)
        self.c = dict(candidate.counts)
        self.m = {i: self.c[i] // self.p[i] for i in self.axes}
        fixed = problem.placed_blocks or {}
        sizes = problem.sizes
        self.step = {i: fixed.get(i) or max(1, math.ceil(sizes[i] / self.c[i])) for i in self.axes}
        self.last = {i: sizes[i] - (self.c[i] - 1) * self.step[i] for i in self.axes}
        self.stride = {}
        stride = 1
        for index in reversed(self.axes):
            self.stride[index] = stride
            stride *= self.p[index]
        self.shape = tuple(self.p[i] for i in self.axes)
        self.grid_key = tuple(candidate.grid)
        self._points: dict = {}
        self._homes: dict = {}
        # what depends on the grid alone (node coordinates, offsets outside a set of
        # indices) is shared by every candidate over the same grid
        self._keep: dict = _grid_facts(problem, tuple(candidate.grid))

    def ragged(self, dims) -> list[str]:
        """Indices of ``dims`` whose last block is smaller than the others (sorted)."""
        return [i for i in sorted(set(dims)) if self.last[i] != self.step[i]]

    def points(self, dims) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
        """Every within-cell coordinate ``q`` of blocks over ``dims`` (``q_i`` in
        ``[0, c_i / p_i)``; rows in sorted index order, columns row-major, so a column's
        position is its row-major rank), and the node offset its within-cell rank spreads
        it to over the indices ``dims`` lacks (:func:`tensorc.placement.layout.grid_nodes`)."""
        key = tuple(sorted(set(dims)))
        found = self._points.get(key)
        if found is not None:
            return found
        radices = [self.m[i] for i in key]
        count = math.prod(radices)
        q = np.indices(radices, dtype=np.int64).reshape(len(key), count)
        within = np.zeros(count, dtype=np.int64)
        for row, index in enumerate(key):
            within = within * self.m[index] + q[row]
        offset = np.zeros(count, dtype=np.int64)
        for index in reversed(self.axes):
            p = self.p[index]
            if index in key or p == 1:
                continue
            offset += (within % p) * self.stride[index]
            within //= p
        found = (key, q, offset)
        self._points[key] = found
        return found

    def rank(self, key, q, dims) -> np.ndarray:
        """Row-major within-cell rank over ``dims`` of the points ``q`` (rows ``key``)."""
        rank = np.zeros(q.shape[1], dtype=np.int64)
        for index in sorted(set(dims)):
            rank = rank * self.m[index] + q[key.index(index)]
        return rank

    def part(self, offset: np.ndarray, dims) -> np.ndarray:
        """The part of node offsets ``offset`` on the indices ``dims``."""
        out = np.zeros_like(offset)
        for index in set(dims):
            p = self.p[index]
            if p > 1:
                out += (offset // self.stride[index]) % p * self.stride[index]
        return out

    def masks(self, key, q, ragged: list[str]) -> np.ndarray:
        """Per point, bit ``j`` set when ``q`` is the last within-cell coordinate along
        ``ragged[j]`` (where the last, smaller block can be)."""
        mask = np.zeros(q.shape[1], dtype=np.int64)
        for bit, index in enumerate(ragged):
            mask |= (q[key.index(index)] == self.m[index] - 1).astype(np.int64) << bit
        return mask

    def counts(self, residues, offsets: np.ndarray, masks: np.ndarray | None, bits: int,
               multiplier: np.ndarray | None = None) -> np.ndarray:
        """Points per (spread offset, mask): an integer table with a row per offset over the
        indices outside ``residues`` (:meth:`_outside`'s order; ``offsets`` are such
        offsets) and ``2**bits`` columns (each point counted ``multiplier`` times when
        given)."""
        classes = 1 << bits
        rows, inverse = self._outside(residues)
        keys = inverse[offsets] if len(rows) > 1 else np.zeros(len(offsets), dtype=np.int64)
        if masks is not None:
            keys = keys * classes + masks
        table = np.bincount(keys, weights=multiplier, minlength=len(rows) * classes)
        if multiplier is not None:
            table = np.rint(table).astype(np.int64)
        return table.reshape(len(rows), classes)

    def expand(self, residues, weights, ragged: list[str], table: np.ndarray) -> np.ndarray:
        """Per node: ``table`` (:meth:`counts`, masks over ``ragged``) summed with each
        point weighted by ``∏_{i∈weights}`` of its block's extents and placed at every
        residue of ``residues`` (the extent along a ragged index is the last block's at
        the last residue and the last point, the step otherwise)."""
        weights = set(weights)
        classes = tuple(i for i in ragged if i in weights)
        values = _weight_table(
            tuple(ragged), classes, math.prod(self.step[i] for i in weights),
            tuple((self.step[i], self.last[i]) for i in classes))
        weighed = table @ values  # per offset over the indices outside the residues
        if weighed.size == 1:
            return np.full(self.nodes, weighed[0, 0], dtype=np.int64)
        return weighed.reshape(-1).take(self._spot(residues, classes))

    def _spot(self, residues, classes: tuple) -> np.ndarray:
        """Per node, its entry in :meth:`expand`'s flattened table: the row of its own
        offset outside ``residues``, the column of its class over ``classes`` (cached)."""
        key = ("spot", residues, classes)
        found = self._keep.get(key)
        if found is None:
            _, inverse = self._outside(residues)
            found = inverse * (1 << len(classes))
            if classes:
                found = found + self._kind(classes)
            self._keep[key] = found
        return found

    def _outside(self, residues) -> tuple[np.ndarray, np.ndarray]:
        """The node offsets over the indices not in ``residues`` (every such coordinate,
        the others at 0), and for every node the position of its own among them."""
        key = ("outside", residues)
        found = self._keep.get(key)
        if found is None:
            own = np.arange(self.nodes, dtype=np.int64)
            for index in set(residues):
                own = own - self._coordinate(index) * self.stride[index]
            found = np.unique(own, return_inverse=True)
            self._keep[key] = found
        return found

    def _kind(self, classes: tuple) -> np.ndarray:
        """Per node, bit ``j`` set when it sits at the last residue along ``classes[j]``."""
        key = ("kind", classes)
        found = self._keep.get(key)
        if found is None:
            found = np.zeros(self.nodes, dtype=np.int64)
            for bit, index in enumerate(classes):
                last = (self._coordinate(index) == self.p[index] - 1).astype(np.int64)
                found |= last << bit
            self._keep[key] = found
        return found

    def _coordinate(self, index: str) -> np.ndarray:
        """Every node's grid coordinate along ``index`` (cached)."""
        key = ("coordinate", index)
        found = self._keep.get(key)
        if found is None:
            found = np.arange(self.nodes, dtype=np.int64) // self.stride[index] % self.p[index]
            self._keep[key] = found
        return found

    def home(self, dims, weights) -> np.ndarray:
        """Per node: the sum over blocks over ``dims`` laid out on it of ``∏_{i∈weights}``
        of their extents (``weights=()``: how many blocks); cached."""
        cache_key = (tuple(sorted(set(dims))), tuple(sorted(set(weights))))
        found = self._homes.get(cache_key)
        if found is None:
            key, q, offset = self.points(dims)
            ragged = self.ragged(weights)
            table = self.counts(key, offset, self.masks(key, q, ragged), len(ragged))
            found = self._homes[cache_key] = self.expand(key, weights, ragged, table)
        return found


@functools.lru_cache(maxsize=4096)
def _weight_table(ragged: tuple, classes: tuple, base: int, extents: tuple) -> np.ndarray:
    """``values[mask, kind]``: the weight ``base`` (the product of the block steps) of a
    point with ``mask`` (over ``ragged``) at residues of class ``kind`` (over ``classes``,
    whose ``(step, last)`` are ``extents``: the last residue or not), each class index at
    the last point and the last residue taking its last extent instead of its step."""
    masks = np.arange(1 << len(ragged), dtype=np.int64)[:, None]
    kinds = np.arange(1 << len(classes), dtype=np.int64)[None, :]
    values = np.full((len(masks), kinds.shape[1]), base, dtype=np.int64)
    for bit, (index, (step, last)) in enumerate(zip(classes, extents, strict=True)):
        chosen = (kinds >> bit & 1) & (masks >> ragged.index(index) & 1)
        values = np.where(chosen == 1, values // step * last, values)
    values.setflags(write=False)
    return values


# -- the figures ----------------------------------------------------------------------------


@dataclass
class Figures:
    """Per-node figures of one candidate (numpy int64 arrays, one value per node)."""

    received: np.ndarray
    """Bytes each node receives while the graph runs (the simulated ``net_in``)."""
    moved: np.ndarray
    """Bytes each node receives to repartition operands before it runs."""
    copied: np.ndarray
    """Bytes each node stitches into re-laid-out blocks."""
    flops: np.ndarray
    tasks: np.ndarray
    memory: np.ndarray
    """What each node ever holds: a bound on its simulated peak (module contract)."""
    resident: np.ndarray
    """Bytes each node holds after the run (inputs and output blocks)."""

    @property
    def total_received(self) -> np.ndarray:
        return self.received + self.moved


def figures(problem, candidate) -> Figures:
    """The per-node figures of ``candidate`` in closed form (module contract); the
    candidate must be legal and :func:`supported`."""
    shape = structure(problem)
    grid = _Grid(problem, candidate)
    itemsize = problem.itemsize
    zeros = np.zeros(grid.nodes, dtype=np.int64)
    received, flops, tasks, made = zeros.copy(), zeros.copy(), zeros.copy(), zeros.copy()
    homed = zeros.copy()
    for value in shape.values:
        if value.position is not None:
            homed += _shared(problem, grid, ("home", value.dims), value.dims,
                             lambda value=value: grid.home(value.dims, value.dims)) * itemsize
    scatter = scatter_for(problem, candidate)
    for number, stage in enumerate(shape.stages):
        ends = scatter if stage.value == shape.final else None
        stage_received, stage_flops, stage_tasks, stage_made = _shared(
            problem, grid, ("stage", number, ends), stage.dims,
            lambda stage=stage, ends=ends: _stage_figures(grid, shape, stage, ends))
        received += itemsize * stage_received
        flops += stage_flops
        tasks += stage_tasks
        made += itemsize * stage_made
    resident = homed.copy()
    final = shape.values[shape.final]
    if scatter is not None:  # each node of a group keeps one piece of every block
        resident += scatter_pieces(grid, final.dims, scatter)[2] * itemsize
    elif final.position is None:
        resident += grid.home(final.dims, final.dims) * itemsize
    moved, copied = _repartition(problem, candidate, grid, shape)
    spanned = (received, flops, tasks, homed + received + made, resident)
    if grid.nodes < problem.nodes:  # the nodes past the grid's idle
        padded = np.zeros((len(spanned), problem.nodes), dtype=np.int64)
        for row, array in enumerate(spanned):
            padded[row, :grid.nodes] = array
        spanned = tuple(padded)
    received, flops, tasks, memory, resident = spanned
    return Figures(received, moved, copied, flops, tasks, memory, resident)


SHARED_BYTES = 64 << 20
"""Per problem, the bytes of per-node results of a stage or a value's layout that
:func:`figures` keeps for the candidates that share them (the same grid and the same counts
along that stage's or value's indices: a search prices many such in a row); the least
recently used go first."""

GRIDS_KEPT = 64
"""Per problem, the grids whose facts (node coordinates, offsets outside a set of indices)
:class:`_Grid` keeps; a search goes grid by grid, so the least recently used go first."""


class _Kept:
    """A least-recently-used store whose entries weigh ``weigh(entry)`` against a budget."""

    def __init__(self, budget: int, weigh) -> None:
        self.budget = budget
        self.weigh = weigh
        self.items: OrderedDict = OrderedDict()
        self.size = 0

    def get(self, key, compute):
        found = self.items.get(key)
        if found is not None:
            self.items.move_to_end(key)
            return found
        found = self.items[key] = compute()
        self.size += self.weigh(found)
        while self.size > self.budget and len(self.items) > 1:
            self.size -= self.weigh(self.items.popitem(last=False)[1])
        return found


def _array_bytes(found) -> int:
    return sum(array.nbytes for array in (found if isinstance(found, tuple) else (found,)))


def _grid_facts(problem, grid: tuple) -> dict:
    """What depends on ``grid`` alone, shared by the candidates over it (at most
    :data:`GRIDS_KEPT` grids kept per problem)."""
    kept = problem.memo("grid facts", lambda: _Kept(GRIDS_KEPT, lambda _: 1))
    return kept.get(grid, dict)


def _shared(problem, grid: _Grid, what: tuple, dims, compute):
    """``compute()``, kept per problem for the candidates with ``grid``'s node grid and its
    counts along ``dims`` (within :data:`SHARED_BYTES`)."""
    kept = problem.memo("symbolic shared", lambda: _Kept(SHARED_BYTES, _array_bytes))
    key = (what, grid.grid_key, tuple(grid.c[i] for i in sorted(set(dims))))
    return kept.get(key, compute)


def _stage_figures(grid: _Grid, shape: Structure, stage: Stage, scatter: Scatter | None = None):
    """One stage's per-node elements received, flops, tasks and elements made (module
    contract), from the grid and the counts along the stage's indices alone (``scatter``:
    the last stage's reduce ends as that reduce-scatter)."""
    key, q, offset = grid.points(stage.dims)
    ragged = grid.ragged(key)
    table = grid.counts(key, offset, grid.masks(key, q, ragged), len(ragged))
    tasks = grid.expand(key, (), ragged, table)
    flops = stage.per_element * grid.expand(key, key, ragged, table)
    made = grid.expand(key, stage.output, ragged, table)
    spread = bool(offset.any())
    received = np.zeros(grid.nodes, dtype=np.int64)
    for value in dict.fromkeys(stage.inputs):
        received += _needed(grid, key, q, offset, spread, shape.values[value].dims)
    summed = set(stage.dims) - set(stage.output)
    if scatter is not None:
        more = _scatter_reduce(grid, stage, summed, scatter)
        received, flops, tasks, made = (a + b for a, b in zip(
            (received, flops, tasks, made), more, strict=True))
    elif math.prod(grid.c[i] for i in summed) > 1:
        more_received, more_flops, more_tasks, more_made = _reduce(
            grid, key, q, offset, spread, stage.output, summed)
        received = received + more_received
        flops = flops + more_flops
        tasks = tasks + more_tasks
        made = made + more_made
    for array in (received, flops, tasks, made):
        array.setflags(write=False)
    return received, flops, tasks, made


def _needed(grid: _Grid, key, q, offset, spread: bool, dims) -> np.ndarray:
    """Elements each node receives of a value over ``dims`` that a stage over ``key`` reads:
    per (within-cell block, spread code) pair the stage's tasks make, the block at every
    node of that code and residue, minus the node holding it."""
    dims = tuple(sorted(set(dims)))
    ragged = grid.ragged(dims)
    bits = len(ragged)
    _, value_q, home = grid.points(dims)
    masks = grid.masks(dims, value_q, ragged)
    if not spread:  # every block is needed on every node of its residues; its home is one
        table = grid.counts(key, np.zeros_like(home), masks, bits)
        return grid.expand(key, dims, ragged, table) - grid.home(dims, dims)
    nodes = grid.nodes
    pairs = np.unique(grid.rank(key, q, dims) * nodes + offset)
    ranks, codes = pairs // nodes, pairs % nodes
    masks = masks[ranks]
    needed = grid.expand(key, dims, ragged, grid.counts(key, codes, masks, bits))
    home = home[ranks]
    held = grid.part(home, [i for i in grid.axes if i not in set(key)]) == codes
    if held.any():
        needed -= grid.expand(dims, dims, ragged,
                              grid.counts(dims, home[held], masks[held], bits))
    return needed


def cell_elements(grid: _Grid, output) -> np.ndarray:
    """Per node, the elements of the output blocks of its grid cell (every block whose
    coordinates are the node's modulo the grid, wherever within the cell it is homed)."""
    total = np.ones(grid.nodes, dtype=np.int64)
    for index in output:
        p, m = grid.p[index], grid.m[index]
        coordinate = grid._coordinate(index)
        extent = m * grid.step[index] - (coordinate == p - 1) * (grid.step[index]
                                                                   - grid.last[index])
        total = total * extent
    return total


def scatter_pieces(grid: _Grid, output, scatter: Scatter) -> tuple[np.ndarray, ...]:
    """Per node, for the blocks of its cell, a reduce-scatter's elements received (its
    rounds' sub-pieces from ``q - 1`` partners each), the elements its rounds make (the
    cuts of its piece and the sums) and the elements of the final pieces it keeps: the node
    is member ``r`` of its group (its coordinates along the scatter's axes), and along each
    cut index its cell holds ``m`` blocks, the last of them the smaller one at the last
    residue (:func:`tensorc.codegen.reduce_scatter.member_pieces`)."""
    cut = [dim for dim, _ in scatter.cuts]
    others = cell_elements(grid, [o for o in output if o not in cut])
    key = ("member", scatter.axes)
    member = grid._keep.get(key)
    if member is None:
        member = np.zeros(grid.nodes, dtype=np.int64)
        for name, p in scatter.axes:
            member = member * p + grid._coordinate(name)
        grid._keep[key] = member
    choices = []
    for dim in cut:
        last = (grid._coordinate(dim) == grid.p[dim] - 1).astype(np.int64)
        choices.append(((grid.step[dim], grid.m[dim] - last), (grid.last[dim], last)))
    found = [np.zeros(grid.nodes, dtype=np.int64) for _ in range(3)]
    for combination in itertools.product(*choices):
        blocks = math.prod(count for _, count in combination)
        extents = tuple(extent for extent, _ in combination)
        for total, value in zip(found, _member_figures(extents, scatter), strict=True):
            total += blocks * value[member]
    return tuple(others * total for total in found)


@functools.lru_cache(maxsize=256)
def _member_figures(extents: tuple[int, ...], scatter: Scatter) -> tuple[np.ndarray, ...]:
    """Per member of a reduce-scatter of blocks ``extents`` long along its cut indices:
    the elements it receives (``q - 1`` sub-pieces a round), makes (each round's cuts and
    sum) and keeps (its final piece), over the cut indices."""
    radices = np.asarray(scatter.rounds, dtype=np.int64)
    before, after, _ = member_pieces(dict(zip([d for d, _ in scatter.cuts], extents,
                                              strict=True)), scatter)
    found = ((radices - 1) * after).sum(axis=1), (before + after).sum(axis=1), after[:, -1]
    for array in found:
        array.setflags(write=False)
    return found


def _scatter_reduce(grid: _Grid, stage: Stage, summed, scatter: Scatter):
    """Per node, a reduce-scatter's received elements, flops, tasks and made elements
    (:mod:`tensorc.codegen.reduce_scatter`): every node is a member of its cell's group,
    for each of the cell's blocks it folds its own partials (when it made several), then
    each round cuts its piece in ``q`` and sums one sub-piece from ``q - 1`` partners."""
    elements = cell_elements(grid, stage.output)
    blocks = math.prod(grid.m[i] for i in stage.output)
    own = math.prod(grid.c[i] for i in summed) // scatter.group
    received, made, _ = scatter_pieces(grid, stage.output, scatter)
    tasks = np.full(grid.nodes, blocks * round_tasks(scatter.rounds), dtype=np.int64)
    flops = received.copy()
    if own > 1:
        tasks += blocks
        flops += (own - 1) * elements
        made = made + elements
    return received, flops, tasks, made


def _reduce(grid: _Grid, key, q, offset, spread: bool, output, summed):
    """Per node, a reduction's received elements, flops, tasks and made elements (local
    folds and final folds), for a stage over ``key`` with output indices ``output``."""
    nodes = grid.nodes
    out_key, out_q, home = grid.points(output)
    ragged = grid.ragged(out_key)
    bits = len(ragged)
    masks = grid.masks(out_key, out_q, ragged)
    across = math.prod(grid.p[i] for i in summed)
    elements = grid.home(out_key, out_key)
    tasks = grid.home(out_key, ())
    flops = elements * (math.prod(grid.c[i] for i in summed) - 1)
    made = elements.copy()
    if not spread:  # each output block's partials are made on `across` nodes, its own one
        received = elements * (across - 1)
        if across > 1 and math.prod(grid.m[i] for i in summed) > 1:
            table = grid.counts(key, np.zeros_like(home), masks, bits)
            made += grid.expand(key, out_key, ragged, table)
        return received, flops, tasks, made
    pairs, parts = np.unique(grid.rank(key, q, out_key) * nodes + offset, return_counts=True)
    ranks, codes = pairs // nodes, pairs % nodes
    codes_per_block = np.bincount(ranks, minlength=len(home))
    outside = [i for i in grid.axes if i not in set(key)]
    made_here = np.isin(np.arange(len(home)) * nodes + grid.part(home, outside), pairs)
    senders = across * codes_per_block - made_here.astype(np.int64)
    received = grid.expand(out_key, out_key, ragged,
                           grid.counts(out_key, home, masks, bits, senders))
    folds = (parts >= 2) & (across * codes_per_block[ranks] > 1)
    if folds.any():
        table = grid.counts(key, codes[folds], masks[ranks[folds]], bits)
        made += grid.expand(key, out_key, ragged, table)
    return received, flops, tasks, made


def _repartition(problem, candidate, grid: _Grid, shape: Structure):
    """Bytes each node receives and stitches to re-lay the repartitioned operands out on
    the grid (what :func:`tensorc.planning.distribution.layout` and ``relayout_copies``
    count per load task), from the operands' blocks, not the task graph: every (new block,
    stored block) overlap at once (:func:`_pieces`, shared by the candidates with the same
    blocks), each new block on its grid node."""
    nodes = problem.nodes
    moved = np.zeros(nodes, dtype=np.int64)
    copied = np.zeros(nodes, dtype=np.int64)
    if not problem.repartition:
        return moved, copied
    itemsize = problem.itemsize
    for value in shape.values:
        if value.position is None or value.position not in problem.repartition:
            continue
        blocks = tuple((grid.c[i], grid.step[i]) for i in value.dims)
        coords, piece, holder, elements, copies = problem.memo(
            ("repartition pieces", value.position, blocks),
            lambda value=value, blocks=blocks: _pieces(problem, value, blocks))
        node = grid_nodes(value.dims, coords, candidate.grid, grid.c)
        away = holder != node[piece]
        moved += itemsize * np.bincount(node[piece][away], weights=elements[away],
                                        minlength=nodes).astype(np.int64)
        copied += itemsize * np.bincount(node, weights=copies,
                                         minlength=nodes).astype(np.int64)
    return moved, copied


def _pieces(problem, value: Value, blocks: tuple[tuple[int, int], ...]) -> tuple[np.ndarray, ...]:
    """The overlaps of the new blocks of ``value`` (``(count, step)`` along each of its
    dims) with its stored blocks, built dimension by dimension (:func:`_overlaps`): the new
    blocks' coordinates, then per overlap its new block, the stored block's node and the
    overlap's elements, and per new block the elements it stitches (0 when it is exactly
    one stored block)."""
    source = problem.placed[value.position]
    step = {i: s for i, (_, s) in zip(value.dims, blocks, strict=True)}
    extents = {i: _steps(step[i], problem.sizes[i]) for i in value.dims}
    counts = [count for count, _ in blocks]
    coords = np.indices(counts, dtype=np.int64).reshape(len(counts), math.prod(counts)).T
    piece = np.arange(len(coords), dtype=np.int64)  # the new block of each overlap
    stored = np.zeros(len(coords), dtype=np.int64)  # its stored block, flat
    elements = np.ones(len(coords), dtype=np.int64)
    exact = np.ones(len(coords), dtype=bool)  # the new block is one stored block
    for d, index in enumerate(value.indices):
        column = coords[:, value.dims.index(index)]
        ptr, block, length, whole = _overlaps(step[index], problem.sizes[index],
                                              tuple(source.bounds[d]))
        exact &= whole[column]
        per = np.diff(ptr)[column[piece]]
        chosen = _ranges(ptr[column[piece]], per)
        piece = np.repeat(piece, per)
        stored = np.repeat(stored, per) * (len(source.bounds[d]) - 1) + block[chosen]
        elements = np.repeat(elements, per) * length[chosen]
    size = np.ones(len(coords), dtype=np.int64)
    for k, index in enumerate(value.dims):
        size *= np.diff(extents[index])[coords[:, k]]
    found = (coords, piece, _stored_nodes(source)[stored], elements,
             np.where(exact, 0, size))
    for array in found:
        array.setflags(write=False)
    return found


@functools.lru_cache(maxsize=4096)
def _steps(step: int, size: int) -> np.ndarray:
    """The edges ``(0, step, 2·step, …, size)`` of new blocks of ``step`` elements."""
    edges = np.append(np.arange(0, size, step, dtype=np.int64), size)
    edges.setflags(write=False)
    return edges


@functools.lru_cache(maxsize=4096)
def _overlaps(step: int, size: int, bounds: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """The stored blocks (cut at ``bounds``) each new block (``step`` elements of ``size``)
    overlaps, in CSR form: ``ptr`` per new block into ``block`` (the stored block) and
    ``length`` (the overlap's extent), and ``whole`` per new block (it is exactly one
    stored block). Cached: candidates share their counts along an index."""
    edges = _steps(step, size)
    bounds = np.asarray(bounds, dtype=np.int64)
    start, stop = edges[:-1], edges[1:]
    first = np.searchsorted(bounds, start, side="right") - 1
    last = np.searchsorted(bounds, stop, side="left") - 1
    first = np.clip(first, 0, len(bounds) - 2)
    per = np.maximum(last - first + 1, 1)
    ptr = np.zeros(len(start) + 1, dtype=np.int64)
    np.cumsum(per, out=ptr[1:])
    owner = np.repeat(np.arange(len(start), dtype=np.int64), per)
    block = np.clip(_ranges(first, per), 0, len(bounds) - 2)
    length = np.maximum(np.minimum(bounds[block + 1], stop[owner])
                        - np.maximum(bounds[block], start[owner]), 0)
    whole = (per == 1) & (bounds[first] == start) & (bounds[first + 1] == stop)
    for array in (ptr, block, length, whole):
        array.setflags(write=False)
    return ptr, block, length, whole


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``starts[k], starts[k] + 1, …`` (``lengths[k]`` of them) for every ``k``, in order."""
    offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return offsets + np.arange(int(lengths.sum()), dtype=np.int64)


def _stored_nodes(source) -> np.ndarray:
    """The node of every stored block of ``source``, flat in row-major block order."""
    grid = source.grid
    nodes = np.zeros(max(1, math.prod(grid)), dtype=np.int64)
    for coords, node in source.nodes.items():
        nodes[np.ravel_multi_index(coords, grid) if grid else 0] = node
    return nodes


# -- the price --------------------------------------------------------------------------------


def report(problem, candidate, found: Figures | None = None) -> CostReport:
    """The model's price of ``candidate`` from its closed-form figures (a
    :class:`~tensorc.planning.cost.CostReport`, as the task-level model reports it)."""
    found = figures(problem, candidate) if found is None else found
    received = found.total_received
    cost, fits = price_model.node_seconds(
        received, found.copied, found.flops, found.tasks, found.memory, problem.memory_bytes,
        problem.lower_bound_bytes())
    return CostReport(
        cost=cost,
        inter_node_bytes=int(received.sum()),
        max_node_recv_bytes=int(received.max()),
        max_node_memory_bytes=int(found.memory.max()),
        node_recv_bytes=tuple(received.tolist()),
        node_memory_bytes=tuple(found.memory.tolist()),
        node_flops=tuple(found.flops.tolist()),
        node_tasks=tuple(found.tasks.tolist()),
        tasks=int(found.tasks.sum()),
        fits=fits,
    )


def cost(problem, candidate) -> float:
    """The model's cost of ``candidate`` in closed form (the search's hot path)."""
    return cost_of(problem, figures(problem, candidate))


def cost_of(problem, found: Figures) -> float:
    """The model's cost from closed-form figures (:func:`~tensorc.planning.cost.node_seconds`'s
    formula, on the arrays as they are)."""
    return price_model.node_seconds(
        found.total_received, found.copied, found.flops, found.tasks, found.memory,
        problem.memory_bytes, problem.lower_bound_bytes())[0]


def seconds(problem, found: Figures) -> dict[str, float]:
    """The price's terms from closed-form figures (:func:`tensorc.planning.cost.node_parts`);
    the modelled time is the sum of those in :data:`~tensorc.planning.cost.TIME_PARTS`."""
    return price_model.node_parts(
        found.total_received, found.copied, found.flops, found.tasks, found.memory,
        problem.memory_bytes, problem.lower_bound_bytes())
