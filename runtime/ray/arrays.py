"""Distributed arrays: :class:`DistributedArray` and its creation functions.

A :class:`DistributedArray` (the value of an evaluated ``tc.Array`` on Ray) is a grid of
blocks, each a Ray ObjectRef (or a stand-in, below), laid out hierarchically and cyclically
over a node grid (NumS): with node grid ``(C0, C1, …)``, block ``(g0, g1, …)`` is made on node
``ravel(g0 % C0, g1 % C1, …)`` of the cluster's node order (the node grid factors the node
count over the block grid, inner dimensions first:
:func:`~tensorc.placement.layout.node_grid`). Contract:

- :func:`random`, :func:`zeros`, :func:`ones`, :func:`full` make every block *on its node*
  (nothing passes through the driver): blocks above the cluster's inline size by the
  node's worker, which holds them (:func:`_held_made`, :mod:`~tensorc.runtime.ray.held`)
  while it has room, else by one task per node and batch of blocks. An array made and
  held so is made again by tasks, with the same values, when a worker that made it dies
  (:meth:`DistributedArray.made_again`). :func:`random` seeds block ``g`` with
  ``(seed, *g)``, so its values depend on the seed and the blocking, not on the cluster;
- :func:`asarray` cuts a driver array into blocks and places each on its node;
- :func:`join_columns` sets arrays cut in the same rows side by side without a copy, as one
  block program input;
- the public ``tc.random``, ``tc.zeros``, … of a Ray session make nothing: they hold a
  :class:`~tensorc.placement.recipes.Recipe` (:func:`recipe`), an array not made yet.
  :func:`generate` makes it in the layout a plan reading it wants (each block on the node
  the plan loads it on), :func:`made_default` in the default layout above (its own
  blocking, block-cyclic); its values are the same either way;
- ``block_shape=`` or ``grid=`` (blocks per dimension) choose the blocking; by default the
  cluster's CPUs are factored over the dimensions, largest extent first, so every CPU gets a
  block; the node grid factors the node count the same way over the block grid;
- ``arr.numpy()`` / ``np.asarray(arr)`` gather the blocks into one driver array;
- a block program's large final blocks may be *held* in the node workers that made them
  (:mod:`~tensorc.runtime.ray.held`), and the blocks no statement wrote are made by no
  call (:class:`~tensorc.runtime.ray.held.Unwritten`): :attr:`DistributedArray.blocks`
  stores them in Ray
  the first time it is read (readers of refs go through it, but for a gather, which
  takes them from their workers and leaves them held, and a call on their worker's node, a
  block program's, an einsum's or a block-by-block operation's, which reads them there:
  calls bind blocks with :func:`~tensorc.runtime.ray.held.bind`, from
  :attr:`DistributedArray.layout` or :attr:`DistributedArray.blocks_in_place`, and a
  binding for any other node releases the array; readers of the bounds and nodes alone
  use :attr:`DistributedArray.layout`, which releases nothing), :func:`wait` waits for
  the calls that made held blocks (:meth:`DistributedArray.making`) and nothing more;
- the blocks of a small result whose last fold across nodes ran in the driver
  (:mod:`~tensorc.runtime.ray.calls`) stay there, each an
  :class:`~tensorc.runtime.ray.inline.Inline` recorded on the driver's node: a call reading
  one gets it inside its message, a gather copies it, and :attr:`DistributedArray.blocks`
  puts it in Ray the first time a reader wants refs;
- an array keeps the re-laid-out copies of itself that calls made (a repartition the plan
  chose), so a later call that wants the same layout reads them instead of re-cutting: arrays
  are immutable, so a copy never goes stale. At most :data:`RELAID_PER_ARRAY` layouts per
  array, and all arrays' kept copies together at most :data:`RELAID_BUDGET` of the cluster's
  object store; the least recently used go first.

Arrays need a Ray session (``tc.init(backend="ray")`` or an address).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from tensorc.codegen.block_layout import block_slices
from tensorc.errors import NodeLostError, TypeCheckError
from tensorc.placement.blocks import (
    RANDOM_DTYPES,
    Blocks,
    block_bounds,
    default_blocking,
    factor_over,  # noqa: F401 - callers take it from here
    normalised_shape,
)
from tensorc.placement.layout import block_cyclic_node, node_grid
from tensorc.placement.recipes import Recipe, random_piece
from tensorc.runtime.ray.calls import SUBMITTING, node_workers, submit
from tensorc.runtime.ray.cluster import connected as ray_cluster
from tensorc.runtime.ray.held import Held, Unwritten, made_by_workers, release
from tensorc.runtime.ray.held import drop as drop_held
from tensorc.runtime.ray.held import peek as peek_held
from tensorc.runtime.ray.held import room as held_room
from tensorc.runtime.ray.inline import INLINE_BYTES, Inline
from tensorc.runtime.ray.peer_blocks import offer_blocks, offering

RELAID_PER_ARRAY = 2
"""Re-laid-out copies an array keeps."""

RELAID_BUDGET = 0.25
"""Share of the cluster's object store all kept copies may take."""

_KEPT: OrderedDict = OrderedDict()  # (weakref to array, layout key) -> bytes, LRU first
_RELEASING = threading.Lock()  # an array's held blocks are released once


class DistributedArray:
    """A distributed array: its :class:`~tensorc.placement.blocks.Blocks` (Ray ObjectRefs on the
    nodes of the cluster, or the stand-ins of the module docstring) and the node grid of its
    block-cyclic layout."""

    def __init__(self, blocks: Blocks, node_grid: tuple[int, ...]) -> None:
        self._blocks = blocks
        self.node_grid = node_grid
        self._held = {coords: ref for coords, ref in blocks.refs.items()
                      if isinstance(ref, Held)}
        self._held_once = bool(self._held)  # its gather maps a dead worker to NodeLostError
        self._zeros = {coords: ref for coords, ref in blocks.refs.items()
                       if isinstance(ref, Unwritten)}  # for good: a call makes them
        self._zeros_put = not self._zeros  # whether their refs stand in _blocks
        # whether it had blocks kept in the driver (a batch's flush may put them in Ray
        # since: _kept_blocks reads them as they are now)
        self._kept = any(type(ref) is Inline for ref in blocks.refs.values())
        self._unread = (weakref.finalize(self, drop_held, tuple(self._held.values()))
                        if self._held else None)  # an array that dies unread frees them
        for block in self._held.values():  # a reader elsewhere releases them all, once
            block.owner = weakref.WeakMethod(self._release_held)
        self._relaid: dict[tuple, Blocks] = {}
        self.made_on: frozenset = frozenset()
        """The ids of the nodes whose workers made its blocks and held them
        (:func:`_held_made`; empty once it is made again by tasks)."""
        self.makers: frozenset = frozenset()
        """Those workers' handles, kept while it lives (a worker replaced after a failure
        lives on until the arrays it made die or are made again): a block one of them
        held, or stored when something read it, is lost if it died."""
        self._remake = None  # the recipe those blocks were made of: made_again
        self._made_held: dict = {}  # the Held blocks they were made as
        self.origin: str | None = None
        """Where its layout came from, for ``explain()`` (``None``: a computed result)."""

    def forget_unsubmitted(self) -> None:
        """Drop kept re-laid-out copies whose blocks were never made (their refs were
        emptied when the batch of calls that was to make them was discarded)."""
        for key, blocks in list(self._relaid.items()):
            if not blocks.refs:
                for entry in [e for e in _KEPT if e[0]() is self and e[1] == key]:
                    _forget(entry)
                self._relaid.pop(key, None)

    def relaid(self, layout_key: tuple) -> Blocks | None:
        """A kept copy of this array in the layout ``Blocks.key()`` gives, if any."""
        found = self._relaid.get(layout_key)
        if found is not None:
            for entry in _KEPT:
                if entry[0]() is self and entry[1] == layout_key:
                    _KEPT.move_to_end(entry)
                    break
        return found

    def keep_relaid(self, blocks: Blocks, store_bytes: int) -> None:
        """Keep ``blocks`` (this array re-laid out) for later calls (module docstring)."""
        key = blocks.key()
        if key == self._blocks.key():
            return
        self._relaid[key] = blocks
        _KEPT[(weakref.ref(self), key)] = self.nbytes
        mine = [e for e in _KEPT if e[0]() is self]
        for entry in mine[:-RELAID_PER_ARRAY]:
            _forget(entry)
        budget = RELAID_BUDGET * store_bytes
        for entry in list(_KEPT):
            if entry[0]() is None:
                del _KEPT[entry]
        while _KEPT and sum(_KEPT.values()) > budget:
            _forget(next(iter(_KEPT)))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._blocks.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._blocks.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def grid(self) -> tuple[int, ...]:
        """Blocks per dimension."""
        return self._blocks.grid

    @property
    def block_shape(self) -> tuple[int, ...]:
        """The shape of block (0, 0, …) (edge blocks may be smaller)."""
        return tuple(b[1] - b[0] if len(b) > 1 else 0 for b in self._blocks.bounds)

    @property
    def blocks(self) -> Blocks:
        """Its blocks, each an ObjectRef: blocks held in their workers are stored in Ray
        first (:func:`~tensorc.runtime.ray.held.release`), blocks kept in the driver and
        unwritten blocks of zeros put in Ray."""
        self._release_held()
        kept = self._kept_blocks()
        if kept:
            import ray

            stored = {coords: ray.put(block.value) for coords, block in kept.items()}
            with _RELEASING:  # the first reader's puts stand; a later one's are dropped
                for coords, block in kept.items():
                    if self._blocks.refs.get(coords) is block:
                        self._blocks.refs[coords] = stored[coords]
        return self.blocks_in_place

    def _kept_blocks(self) -> dict:
        """Its blocks kept in the driver now (:class:`~tensorc.runtime.ray.inline.Inline`)."""
        if not self._kept:
            return {}
        return {coords: ref for coords, ref in list(self._blocks.refs.items())
                if type(ref) is Inline}

    @property
    def blocks_in_place(self) -> Blocks:
        """Its blocks as calls that may read held blocks in place bind them: unwritten ones
        put in Ray (as :attr:`blocks`), held ones still a
        :class:`~tensorc.runtime.ray.held.Held`, which a call binds with
        :func:`~tensorc.runtime.ray.held.bind` (read in place on its holder's node; for
        any other reader this array's held blocks are released first), blocks kept in the
        driver an :class:`~tensorc.runtime.ray.inline.Inline` (bound as their value)."""
        if not self._zeros_put:  # each shape put in Ray once (Unwritten.stored)
            for coords, zeros in self._zeros.items():
                self._blocks.refs[coords] = zeros.stored()
            self._zeros_put = True
        return self._blocks

    def _release_held(self) -> None:
        """Store its held blocks in Ray (:func:`~tensorc.runtime.ray.held.release`), their
        refs in place of the :class:`~tensorc.runtime.ray.held.Held` in its blocks."""
        if self._held:
            with SUBMITTING, _RELEASING:  # once, and never between a call's binding of a
                # held block by key and the call's submission (calls.SUBMITTING)
                if self._held:
                    release(self._held.values())
                    for coords, held in self._held.items():
                        self._blocks.refs[coords] = held.ref
                    self._held = {}
                    self._unread.detach()

    def made_again(self) -> None:
        """Make its blocks again from its recipe, by tasks on the nodes alive now, which
        Ray can rebuild (node workers made it, and one of them died, or its node: the
        blocks that worker held died with it, those it stored when something read them
        with its node). All of them, block-cyclic over the nodes alive: the values are the
        recipe's, the same. In place: its :class:`~tensorc.placement.blocks.Blocks` (which
        a run that binds it holds) gets the new refs and nodes, each
        :class:`~tensorc.runtime.ray.held.Held` it was made as the new ref (which a caller
        that bound it reads), and its kept re-laid-out copies are forgotten. An array that
        took some of its blocks by ref before (an einsum's result passing one through) is
        not mended: its blocks die with their node as a block program's stored ones do."""
        with SUBMITTING, _RELEASING:  # as a release: no call binds its blocks meanwhile
            if self._remake is None:
                return
            blocks = self._blocks
            name, args_of = _recipe_arguments(self._remake, blocks.bounds)
            fresh = _spread(self._remake.shape, self._remake.dtype, blocks.bounds, name,
                            args_of).layout
            drop_held(self._held.values())  # not released: their bytes counted out
            for coords, held in self._made_held.items():
                held.ref = fresh.refs[coords]
            for mine, new in ((blocks.refs, fresh.refs), (blocks.nodes, fresh.nodes),
                              (blocks.reported, fresh.reported)):
                mine.clear()
                mine.update(new)
            blocks.copies.clear()
            blocks.epoch = fresh.epoch
            self.node_grid = node_grid_for(blocks.grid, ray_cluster().nodes)
            self._held, self._made_held, self._remake = {}, {}, None
            self.made_on = self.makers = frozenset()
            self.origin = (f"made again by tasks when a node worker that made it died: "
                           f"block-cyclic over node grid {self.node_grid}")
            if self._unread is not None:
                self._unread.detach()
            for entry in [e for e in _KEPT if e[0]() is self]:
                _forget(entry)  # each kept copy is in _KEPT: _forget drops it from _relaid

    @property
    def layout(self) -> Blocks:
        """Its blocks' bounds and nodes, for readers of the layout alone: a held block's
        ref is a :class:`~tensorc.runtime.ray.held.Held` here, an unwritten one's a
        :class:`~tensorc.runtime.ray.held.Unwritten`, one kept in the driver an
        :class:`~tensorc.runtime.ray.inline.Inline` (read refs from :attr:`blocks`)."""
        return self._blocks

    @property
    def held_blocks(self) -> int:
        """How many of its blocks are held in their workers, not stored in Ray yet."""
        return len(self._held)

    def unwritten(self, coords: tuple[int, ...]) -> Unwritten | None:
        """Block ``coords`` if no statement wrote it (zeros a call makes where it reads
        them, whether or not they were put in Ray since)."""
        return self._zeros.get(coords)

    def making(self) -> list:
        """The reports of the calls that made its held blocks (each done once they exist):
        what :func:`wait` waits for besides its stored blocks."""
        reported = self._blocks.reported
        return list(dict.fromkeys(reported[coords] for coords in self._held
                                  if coords in reported))

    def stored_refs(self) -> list:
        """The ObjectRefs of its blocks made on the nodes (held blocks are not stored,
        unwritten ones made by no call, those kept in the driver made already)."""
        return [ref for coords, ref in self._blocks.refs.items()
                if coords not in self._held and coords not in self._zeros
                and type(ref) is not Inline]

    def block_nodes(self) -> dict[tuple[int, ...], int | None]:
        """Node index (in the session's node order) holding each block's primary copy, as
        the workers that made the blocks reported it."""
        cluster = ray_cluster()
        self._blocks.resolve(cluster.locate, cluster.epoch, verify=True)
        return dict(sorted(self._blocks.nodes.items()))

    def numpy(self) -> np.ndarray:
        """Gather every block into one driver ndarray (Ray keeps a copy of each stored block
        on the driver's node, node 0, which later calls may read for free; held blocks come
        one object per worker and stay held). A block lost with its node, and that Ray
        cannot rebuild, raises :class:`~tensorc.errors.NodeLostError`."""
        import ray

        with _RELEASING:  # a release sent after the peeks runs after them
            held = dict(self._held)
            peeked = peek_held(held.values()) if held else []
            kept = {k: block.value for k, block in self._kept_blocks().items()}
        keys = sorted(k for k in self._blocks.refs
                      if k not in held and k not in self._zeros and k not in kept)
        try:
            found = ray.get([ref for _, ref in peeked] + [self._blocks.refs[k] for k in keys])
        except (ray.exceptions.ObjectLostError,  # made by a call on a node now gone
                ray.exceptions.RayActorError) as err:  # or held by a worker now gone
            if self._remake is not None:  # made by node workers: made again, same values
                self.made_again()
                return self.numpy()
            if not self._held_once and not isinstance(err, ray.exceptions.ObjectLostError):
                raise  # a call's worker died while making it: its program runs again
            raise NodeLostError(f"a block of this {self.shape} array was lost with the node "
                                f"that held it ({type(err).__name__})") from err
        for key in keys:
            self._blocks.add_copies(key, (0,))
        out = np.empty(self.shape, dtype=self.dtype)
        for key in self._zeros:  # zeros, put in Ray or not
            out[self._blocks.block_slices(key)] = 0
        for key, value in kept.items():
            out[self._blocks.block_slices(key)] = value
        for key, value in zip(keys, found[len(peeked):], strict=True):
            out[self._blocks.block_slices(key)] = value
        where = {block: coords for coords, block in held.items()}
        for (blocks, _), values in zip(peeked, found, strict=False):
            for block, value in zip(blocks, values, strict=True):
                out[self._blocks.block_slices(where[block])] = value
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        result = self.numpy()
        return result if dtype is None else result.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return (f"DistributedArray(shape={self.shape}, dtype={self.dtype}, grid={self.grid}, "
                f"node_grid={self.node_grid})")


def _forget(entry) -> None:
    """Drop one kept copy (its blocks are freed once no call reads them)."""
    _KEPT.pop(entry, None)
    owner = entry[0]()
    if owner is not None:
        owner._relaid.pop(entry[1], None)  # noqa: SLF001 - the cache is this module's


def node_grid_for(grid: Sequence[int], nodes: int) -> tuple[int, ...]:
    """The node grid of a block grid (:func:`~tensorc.placement.layout.node_grid`)."""
    return node_grid(grid, nodes) if grid else ()


def _layout_node(coords, node_grid, node_of=None) -> int:
    """The node of block ``coords``: ``node_of``'s (a plan's layout) when it has one, else
    the block-cyclic layout's over ``node_grid``."""
    node = (node_of or {}).get(coords)
    return block_cyclic_node(coords, node_grid) if node is None else node


def _spread(shape, dtype, bounds, name: str, args_of, node_of=None) -> DistributedArray:
    """Blocks made by remote ``name`` (``generate`` or ``run``) on their layout nodes
    (block-cyclic, or ``node_of[coords]`` when a plan gives the nodes); ``args_of`` gives
    each block's arguments from its coordinates and slices."""
    return _made_by_tasks(name, *_laid_out(shape, dtype, bounds, args_of, node_of))


def _laid_out(shape, dtype, bounds, args_of, node_of=None) -> tuple[Blocks, tuple, list]:
    """The layout of blocks cut at ``bounds`` (:func:`_spread`): its
    :class:`~tensorc.placement.blocks.Blocks` (nodes, no refs yet), its node grid, and each
    block's ``(coordinates, arguments, bytes)``."""
    cluster = ray_cluster()
    blocks = Blocks(shape, dtype, bounds, epoch=cluster.epoch)
    node_grid = node_grid_for(blocks.grid, cluster.nodes)
    itemsize = np.dtype(dtype).itemsize
    items = []
    for coords in np.ndindex(*blocks.grid):
        blocks.nodes[coords] = _layout_node(coords, node_grid, node_of)
        slices = blocks.block_slices(coords)
        items.append((coords, args_of(coords, slices),
                      itemsize * math.prod(s.stop - s.start for s in slices)))
    return blocks, node_grid, items


def _made_by_tasks(name: str, blocks: Blocks, node_grid, items: list) -> DistributedArray:
    """The blocks :func:`_laid_out` gave, made by remote ``name``: a node's blocks in
    batches (:func:`_batched`), each block its own return."""
    cluster = ray_cluster()
    _batched(cluster, blocks, items,
             lambda node, batch: submit(cluster, "make_many", node, name, batch,
                                        returns=len(batch) + 1))
    return DistributedArray(blocks, node_grid)


def _offered(array: DistributedArray) -> DistributedArray:
    """``array``, its blocks offered to their nodes' workers for block programs' calls
    elsewhere to pull (:mod:`~tensorc.runtime.ray.peer_blocks`). Only the arrays of data
    the driver placed offer (:func:`asarray`, and ``tc.asarray``'s recipe made in its
    own layout: :func:`made_default`): the data a program is given. Each offered block
    costs its worker a borrowed ref, and its owner the messages that go with it, when it
    is offered and when it is withdrawn (about 5 ms for an operand of 64 blocks,
    measured on a contraction whose operands ``tc.random`` made); an array a plan makes
    is made where the plan reads it."""
    cluster = ray_cluster()
    if offering(cluster):
        offer_blocks(cluster, functools.partial(node_workers, cluster), array.layout, array)
    return array


def _batched(cluster, blocks: Blocks, items: list, send) -> None:
    """Send ``items`` (``(coords, value, bytes)``: a block's arguments or data) to the
    nodes ``blocks.nodes`` names, in batches: one task per batch (``send(node, values)``
    returns the blocks' refs, then the task's report), each batch at most
    :data:`PLACE_BATCH_BYTES` and at most a CPU's share of the node's blocks, so every CPU
    of a node gets work and no batch crowds its object store; records each block's ref and
    report."""
    per_node: dict[int, int] = {}
    for coords, _, _ in items:
        per_node[blocks.nodes[coords]] = per_node.get(blocks.nodes[coords], 0) + 1
    cpus = cluster.cpus
    share = {node: -(-count // max(1, int(cpus[node]) if node < len(cpus) else 1))
             for node, count in per_node.items()}  # most blocks in one of a node's batches
    batches: dict[int, list] = {}  # node -> its open batch of (coordinates, value)
    batch_bytes: dict[int, int] = {}

    def flush(node: int) -> None:
        batch = batches.pop(node)
        batch_bytes.pop(node)
        *refs, report = send(node, [value for _, value in batch])
        for (coords, _), ref in zip(batch, refs, strict=True):
            blocks.refs[coords], blocks.reported[coords] = ref, report

    for coords, value, nbytes in items:
        node = blocks.nodes[coords]
        if node in batches and (batch_bytes[node] + nbytes > PLACE_BATCH_BYTES
                                or len(batches[node]) >= share[node]):
            flush(node)  # full: at most one open batch per node is held here
        batches.setdefault(node, []).append((coords, value))
        batch_bytes[node] = batch_bytes.get(node, 0) + nbytes
    for node in list(batches):
        flush(node)


def recipe(kind: str, shape, block_shape=None, grid=None, seed: int = 0, dtype="float64",
           value=0, data: np.ndarray | None = None) -> Recipe:
    """A :class:`~tensorc.placement.recipes.Recipe` of ``kind`` (``random``, ``full``,
    ``data``) in the blocking ``block_shape``/``grid`` ask for (default: the cluster's CPUs
    factored over the dimensions), nothing made yet."""
    cluster = ray_cluster()
    cluster.refresh()
    shape = normalised_shape(shape)
    dtype = np.dtype(dtype)
    if kind == "random" and dtype.name not in RANDOM_DTYPES:
        raise TypeCheckError(f"tc.random makes {' or '.join(RANDOM_DTYPES)}, not {dtype}")
    bounds = block_bounds(shape, default_blocking(shape, block_shape, grid, cluster.total_cpus))
    return Recipe(kind, shape, dtype, bounds, int(seed), value, data)


def _make(kind: str, shape, block_shape, grid, seed: int, dtype, value=0) -> DistributedArray:
    return made_default(recipe(kind, shape, block_shape, grid, seed, dtype, value))


def random(shape, *, block_shape=None, grid=None, seed: int = 0,
           dtype="float64") -> DistributedArray:
    """Uniform [0, 1) values, each block generated on its node."""
    return _make("random", shape, block_shape, grid, seed, dtype)


def zeros(shape, *, block_shape=None, grid=None, dtype="float64") -> DistributedArray:
    return _make("full", shape, block_shape, grid, 0, dtype, 0)


def ones(shape, *, block_shape=None, grid=None, dtype="float64") -> DistributedArray:
    return _make("full", shape, block_shape, grid, 0, dtype, 1)


def full(shape, value, *, block_shape=None, grid=None, dtype="float64") -> DistributedArray:
    """Every element ``value``, each block made on its node."""
    return _make("full", shape, block_shape, grid, 0, dtype, value)


def asarray(array, *, block_shape=None, grid=None) -> DistributedArray:
    """Distribute a driver array: cut into blocks, each placed on its layout node."""
    if isinstance(array, DistributedArray):
        if block_shape is None and grid is None:
            return array
        array = array.numpy()
    data = np.asarray(array)
    if data.dtype.hasobject:
        raise TypeCheckError(f"cannot distribute an array of dtype {data.dtype}")
    cluster = ray_cluster()
    cluster.refresh()
    blocking = default_blocking(data.shape, block_shape, grid, cluster.total_cpus)
    bounds = block_bounds(data.shape, blocking)
    return _offered(place(data, bounds))


def wait(*arrays: DistributedArray) -> None:
    """Block until every block of ``arrays`` exists on its node (nothing is fetched to the
    driver): what a benchmark does before starting its clock."""
    import ray

    refs = list(dict.fromkeys(ref for array in arrays
                              for ref in (*array.stored_refs(), *array.making())))
    if refs:  # once each: blocks of zeros may share one object
        ray.wait(refs, num_returns=len(refs), fetch_local=False)


def inline(data: np.ndarray, bounds: tuple[tuple[int, ...], ...], node_of=None) -> Blocks:
    """``data`` cut at ``bounds`` as blocks that travel by value in the messages of the
    batched calls that read them (:class:`~tensorc.runtime.ray.inline.Inline`): no task
    places them. Each block is recorded on the node ``place`` would use."""
    cluster = ray_cluster()
    blocks = Blocks(data.shape, data.dtype, bounds, epoch=cluster.epoch)
    node_grid = node_grid_for(blocks.grid, cluster.nodes)
    for coords in np.ndindex(*blocks.grid):
        blocks.nodes[coords] = _layout_node(coords, node_grid, node_of)
        blocks.refs[coords] = Inline(np.array(data[blocks.block_slices(coords)], order="C"))
    return blocks


def stored_layout(shape: tuple[int, ...], dtype, bounds: tuple[tuple[int, ...], ...],
                  node_of=None) -> Blocks:
    """The layout (no data) of an operand read from storage by the calls that use it
    (:mod:`tensorc.runtime.ray.stages`), cut at ``bounds``: each block recorded on the node
    ``place`` would put it on, where the schedule expects it read."""
    cluster = ray_cluster()
    blocks = Blocks(tuple(shape), dtype, bounds, epoch=cluster.epoch)
    node_grid = node_grid_for(blocks.grid, cluster.nodes)
    for coords in np.ndindex(*blocks.grid):
        blocks.nodes[coords] = _layout_node(coords, node_grid, node_of)
    return blocks


def generate(recipe: Recipe, bounds: tuple[tuple[int, ...], ...],
             node_of=None) -> DistributedArray:
    """Make a :class:`~tensorc.placement.recipes.Recipe` on the nodes, cut at ``bounds``,
    block ``g`` on ``node_of[g]`` (the layout the plan reading it wants; block-cyclic where
    it gives none), nothing through the driver but a ``data`` recipe's blocks
    (:func:`place`: batched per node). Blocks of ``random`` chunks and of ``full`` that
    would not travel inside messages are made and held by the node workers
    (:func:`_held_made`) when they have room; otherwise one task per node and batch of
    blocks makes them (:func:`_spread`). Its values are the recipe's whatever ``bounds``
    are (a ``random`` block that is not one of its chunks draws the chunks it overlaps).
    The first array made is kept as ``recipe.made``."""
    if recipe.kind == "data":
        made = place(recipe.data, bounds, node_of)
    else:
        name, args_of = _recipe_arguments(recipe, bounds)
        laid = _laid_out(recipe.shape, recipe.dtype, bounds, args_of, node_of)
        made = _held_made(recipe, name, *laid) or _made_by_tasks(name, *laid)
    if recipe.made is None:
        recipe.made = made
        recipe.sent.clear()  # the blocks block programs sent from the driver: made now
    return made


def _recipe_arguments(recipe: Recipe, bounds) -> tuple[str, object]:
    """The remote body (``generate`` or ``run``) that makes a ``random`` or ``full``
    recipe's blocks cut at ``bounds``, and its arguments for each block (from its
    coordinates and slices)."""
    if recipe.kind == "full":
        def full_args(coords, slices):
            extent = tuple(s.stop - s.start for s in slices)
            return "full", extent, np.dtype(recipe.dtype).str, (0,), recipe.value

        return "generate", full_args
    if recipe.aligned(bounds):  # exactly its chunks: as tc.random makes them
        def chunk_args(coords, slices):
            extent = tuple(s.stop - s.start for s in slices)
            return "random", extent, np.dtype(recipe.dtype).str, (int(recipe.seed), *coords), 0

        return "generate", chunk_args

    def piece_args(coords, slices):
        return (functools.partial(random_piece, int(recipe.seed),
                                  np.dtype(recipe.dtype).str, recipe.chunks, slices),)

    return "run", piece_args


_MADE_HELD = itertools.count()  # numbers the arrays the node workers made and hold


def _held_made(recipe: Recipe, name: str, blocks: Blocks, node_grid,
               items: list) -> DistributedArray | None:
    """``recipe``'s blocks (laid out by :func:`_laid_out`, made by the body ``name``:
    :func:`_recipe_arguments`) made by the node workers, one call per node, and held there
    (:mod:`~tensorc.runtime.ray.held`): a call on the same node reads them in place, with
    no object to fetch and deserialize (about 45 us a block argument in a worker and 15 in
    the driver, here), and the calls start in about a millisecond where a task's lease
    takes several. ``None`` (make them by tasks) when its largest block would travel
    inside Ray's messages (at most the cluster's inline size: no store to save; an array
    held is held whole, its small edge blocks too) or some node's worker has no room for
    its blocks. A held block dies with its worker; the array is then made again from the
    recipe (:meth:`DistributedArray.made_again`)."""
    cluster = ray_cluster()
    if not items or max(nbytes for _, _, nbytes in items) <= cluster.inline_bytes:
        return None
    per_node: dict[int, list] = {}
    for item in items:
        per_node.setdefault(blocks.nodes[item[0]], []).append(item)
    workers = node_workers(cluster)
    share = cluster.node_store_bytes
    if any(node >= len(workers) or sum(n for _, _, n in mine) > held_room(workers[node], share)
           for node, mine in per_node.items()):
        return None
    prefix = f"made{next(_MADE_HELD)}/"
    for node, mine in per_node.items():
        keys = [prefix + ",".join(map(str, coords)) for coords, _, _ in mine]
        report = workers[node].make.remote(name, [(key, args) for key, (_, args, _)
                                                  in zip(keys, mine, strict=True)])
        for key, (coords, _, nbytes) in zip(keys, mine, strict=True):
            blocks.refs[coords] = Held(workers[node], key, nbytes)
            blocks.reported[coords] = report
    made = DistributedArray(blocks, node_grid)
    made.made_on = frozenset(cluster.node_ids[node] for node in per_node)
    made.makers = frozenset(workers[node] for node in per_node)
    # a copy of its recipe without the link back to what it made: no reference cycle, so
    # the array dies (and its workers drop its blocks) as soon as its last reader lets go
    made._remake = dataclasses.replace(recipe, made=None, made_for=None, sent={},  # noqa: SLF001
                                       sent_on=None)
    made._made_held = dict(made._held)  # noqa: SLF001 - this module's own
    made_by_workers(made)
    return made


def made_default(recipe: Recipe) -> DistributedArray:
    """A recipe made in the default layout (its own chunks, block-cyclic): what an array no
    program has read yet becomes when it is used as it is."""
    if recipe.made is None:
        made = generate(recipe, recipe.chunks)
        if recipe.kind == "data":  # tc.asarray's, made as it was given
            _offered(made)
        made.origin = (f"made on its own: its blocking {made.grid}, block-cyclic over node "
                       f"grid {made.node_grid}")
    return recipe.made


PLACE_BATCH_BYTES = 64 * 2**20
"""Most bytes of blocks one task places on (or makes on) a node: one put and one transfer
per batch, not per block (a put costs a few milliseconds whatever its size), and no batch so
large that it crowds a node's object store."""


DIRECT_PUT_BYTES = 2**20
"""A block at least this large bound for the driver's own node is put into its object store
directly (no task, no second copy); smaller ones travel in batches like any node's, since a
put costs about a millisecond here whatever its size."""


def join_columns(parts: Sequence) -> DistributedArray | None:
    """``parts`` (distributed arrays or driver arrays, each a matrix or a vector, which joins
    as one column) side by side, without a copy: each block of the result is a block of one
    part, where it is; a driver array's is cut at the distributed parts' row blocks and
    read from the driver's node (:func:`driver_block`). ``None`` when they do not line up
    (another dtype, other row blocks, or no part on the cluster). A block program that
    reads a block across parts stitches it in the call that reads it. For a block program's
    input only: a block is not an array of the joined one's dimensions. A driver array's
    blocks are sent once for driver data's life (:func:`sent_block`)."""
    placed = [p for p in parts if isinstance(p, DistributedArray)]
    if not placed or any(np.ndim(p) not in (1, 2) or np.dtype(p.dtype) != placed[0].dtype
                         or np.shape(p)[0] != placed[0].shape[0] for p in parts):
        return None
    rows = placed[0].layout.bounds[0]
    if any(p.layout.bounds[0] != rows for p in placed):
        return None
    cluster = ray_cluster()
    inners = [p.layout.bounds[1] if isinstance(p, DistributedArray) and p.ndim == 2
              else (0, p.shape[1]) if p.ndim == 2 else (0, 1) for p in parts]
    edges, offsets = [0], []
    for inner in inners:
        offsets.append(len(edges) - 1)
        edges.extend(edges[-1] + e for e in inner[1:])
    joined = Blocks((rows[-1], edges[-1]), placed[0].dtype, (rows, tuple(edges)),
                    epoch=cluster.epoch)
    for part, inner, offset in zip(parts, inners, offsets, strict=True):
        if isinstance(part, DistributedArray):
            stored = part.blocks.resolve(cluster.locate, cluster.epoch)
            for table, out in ((stored.nodes, joined.nodes), (stored.refs, joined.refs),
                               (stored.reported, joined.reported),
                               (stored.copies, joined.copies)):
                out.update({(c[0], offset + (c[1] if part.ndim == 2 else 0)): value
                            for c, value in table.items()})
            continue
        edges_of = (rows, inner) if part.ndim == 2 else (rows,)
        for i in range(len(rows) - 1):
            joined.refs[(i, offset)] = sent_block(part, edges_of, (i, 0)[:part.ndim])
            joined.nodes[(i, offset)] = 0  # the driver's node: first in the session's order
    return DistributedArray(joined, node_grid_for(joined.grid, cluster.nodes))


def driver_block(value: np.ndarray, region):
    """A driver array's block as a call reads it: by value when small, else put in Ray."""
    import ray

    block = np.ascontiguousarray(value[region])
    return block if block.nbytes <= INLINE_BYTES else ray.put(block)


def sent_block(value: np.ndarray, edges, coords):
    """Block ``coords`` of a driver array cut at ``edges`` (per dimension, its bounds) as a
    call reads it (:func:`driver_block`); driver data not made yet (``sent``:
    :class:`~tensorc.placement.recipes.DriverData`) keeps it for later reads cut the same
    way, which read it again instead of sending it again."""
    sent = getattr(value, "sent", None)
    key = (edges, coords)
    if sent is not None and key in sent:
        return sent[key]
    block = driver_block(value, block_slices(edges, coords))
    if sent is not None:
        sent[key] = block
    return block


def place(data: np.ndarray, bounds: tuple[tuple[int, ...], ...], node_of=None) -> DistributedArray:
    """Place ``data`` cut at ``bounds`` on the nodes of the block-cyclic layout, or on
    ``node_of[block coordinates]`` when given (a plan's layout): the blocks bound for another
    node travel together in batches (:func:`_batched`), one task each; those of the driver's
    own node of :data:`DIRECT_PUT_BYTES` or more are put into its object store, no task."""
    import ray

    cluster = ray_cluster()
    blocks = Blocks(data.shape, data.dtype, bounds, epoch=cluster.epoch)
    node_grid = node_grid_for(blocks.grid, cluster.nodes)
    driver_node = cluster.index_of(cluster.driver_node)
    items = []
    for coords in np.ndindex(*blocks.grid):
        node = _layout_node(coords, node_grid, node_of)
        blocks.nodes[coords] = node
        # a C-ordered slice as it is (Ray copies it into the store), else a copy; 0-d stays 0-d
        value = np.array(data[blocks.block_slices(coords)], order="C", copy=None)
        if node == driver_node and value.nbytes >= DIRECT_PUT_BYTES:
            blocks.refs[coords] = ray.put(value)  # this process's store: one put, no task
            continue
        items.append((coords, value, value.nbytes))
    _batched(cluster, blocks, items,
             lambda node, batch: submit(cluster, "place", node, batch, returns=len(batch) + 1))
    return DistributedArray(blocks, node_grid)
