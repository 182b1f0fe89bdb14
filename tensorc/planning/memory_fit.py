"""A plan within its memory budget: the modelled peak of a task graph, and the blocking
refined until the peak fits.

Contract: :func:`fit_blocking` takes a program, a starting blocking and the planning context
(``memory_limit``: the budget of one worker, in bytes; ``stored``: the inputs read from
storage, by name, with their chunk shapes) and returns ``(blocking, graph, model)``:

- blocks of stored inputs are aligned with their chunks (a block is whole chunks, so no
  chunk is read twice);
- the graph's peak is modelled by simulating the local runtime's policy on it
  (:func:`modelled_peak`): ``workers`` threads take the lowest-numbered ready task, compute
  before reads; a read allocates its block, a compute task its output (a final block lands
  in the result, which is held from the start), and a block is freed when its last consumer
  finishes; reads of in-memory operands are views and cost nothing;
- while the peak exceeds the budget, the block indices of the task holding the most memory
  are halved (the largest first, in whole chunks), up to the chunk (or one element);
- if nothing finer fits even when reads wait for memory (the runtime's admission rule), a
  :class:`~tensorc.errors.MemoryLimitError` names the smallest budget that works (the
  finest blocking run on one thread) and the operation that needs it, before anything runs.

``model`` (:class:`MemoryModel`) is what ``explain()`` and ``tc.last_stats()`` report next to
the budget. Without a budget nothing is refined and ``model`` is ``None``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

from tensorc.codegen.blocking import Blocking
from tensorc.codegen.taskgraph import LOAD, TaskGraph
from tensorc.errors import MemoryLimitError
from tensorc.ir.keys import key_of
from tensorc.ir.nodes import Function
from tensorc.planning.blocking import scan_indices

READ_BYTES_PER_SECOND = 1.5e9
"""Modelled rate of a read from storage (only the order of events matters here)."""
FLOPS_PER_SECOND = 2e9
MEMORY_BYTES_PER_SECOND = 5e9
READ_OVERHEAD = 2.0
"""A read holds this many times its block more while it runs: the store's bytes before they
are decoded into the block, and the allocator's reuse of freed read buffers (measured:
zarr reads of 16 MB chunks on two threads)."""
STREAM_BLOCK_BYTES = 16 << 20
"""Reads from storage are cut at most this large, so reading overlaps computing."""
MAX_REFINEMENTS = 48
MAX_TASKS = 400_000


@dataclass(frozen=True)
class MemoryModel:
    """The modelled memory of one plan's run on one worker (process or node)."""

    budget: int
    peak: int
    """Modelled peak bytes the run holds (reads, intermediates, the result)."""
    result: int
    largest_block: int
    """The largest single allocation (a block read or a task's output)."""
    waits: bool
    """Whether reads must wait for memory to fit (the blocks could be no finer)."""
    admit: int | None = None
    """The budget the runtime admits reads against (``0``: one read at a time, only when
    nothing else can run; ``None``: the budget)."""

    def describe(self) -> str:
        wait = "; reads wait for memory to stay within it" if self.waits else ""
        return (f"modelled peak {format_bytes(self.peak)} of a {format_bytes(self.budget)} "
                f"budget (result {format_bytes(self.result)}, largest block "
                f"{format_bytes(self.largest_block)}){wait}")


def format_bytes(count: float, up: bool = False) -> str:
    """``count`` bytes to three significant digits (rounded up with ``up``: a minimum)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            value = count / size
            if up:
                step = 10.0 ** (math.floor(math.log10(value)) - 2)
                value = math.ceil(value / step - 1e-9) * step
            return f"{value:.3g} {unit}"
    return f"{math.ceil(count)} B"


def allocations(graph: TaskGraph, stored: set[int], sink: bool = False) -> list[int]:
    """Bytes each task allocates: a read of a stored operand (positions in ``stored``) or a
    load whose kernel ``allocates`` (a sparse block built from its coordinates, priced by
    its non-zeros) its block, a compute task its output unless it lands in the result
    (with a ``sink``, a final block is held until it is written), a view nothing. A block
    nothing reads is freed when its task finishes."""
    final = set() if sink else {index for index, _ in graph.outputs}
    sizes = []
    for index, task in enumerate(graph.tasks):
        if task.kind == LOAD:
            copies = task.source[0] in stored or getattr(graph.kernels[task.kernel],
                                                         "allocates", False)
            sizes.append(task.nbytes if copies else 0)
        else:
            sizes.append(0 if index in final else task.nbytes)
    return sizes


def transients(graph: TaskGraph, alloc: list[int]) -> list[int]:
    """Bytes a task holds only while it runs: a read from storage decodes through a buffer
    as large as its block (:data:`READ_OVERHEAD`)."""
    return [int(READ_OVERHEAD * size) if task.kind == LOAD else 0
            for task, size in zip(graph.tasks, alloc, strict=True)]


def _seconds(graph: TaskGraph, alloc: list[int]) -> list[float]:
    times = []
    for task, size in zip(graph.tasks, alloc, strict=True):
        if task.kind == LOAD:
            times.append(1e-6 + size / READ_BYTES_PER_SECOND)
        else:
            times.append(1e-5 + task.flops / FLOPS_PER_SECOND
                         + task.nbytes / MEMORY_BYTES_PER_SECOND)
    return times


def modelled_peak(graph: TaskGraph, alloc: list[int], workers: int, base: int,
                  budget: int | None = None) -> int:
    """The peak bytes of running ``graph`` with ``workers`` threads (see the module
    docstring); with ``budget``, a read starts only when it fits or nothing else runs."""
    tasks = graph.tasks
    consumers = graph.consumers()
    waiting = [len(t.inputs) for t in tasks]
    uses = [len(c) for c in consumers]
    seconds = _seconds(graph, alloc)
    extra = transients(graph, alloc)
    computes: list[int] = []
    reads: list[int] = []
    for index, task in enumerate(tasks):
        if not task.inputs:
            heapq.heappush(reads if task.kind == LOAD else computes, index)
    running: list[tuple[float, int]] = []
    live = peak = base
    now = 0.0
    while True:
        while len(running) < workers:
            if computes and (not reads or computes[0] < reads[0]):
                index = heapq.heappop(computes)
            elif reads and (budget is None or (not running and not computes)
                            or live + alloc[reads[0]] + extra[reads[0]] <= budget):
                index = heapq.heappop(reads)
            elif computes:
                index = heapq.heappop(computes)
            else:
                break
            live += alloc[index] + extra[index]
            peak = max(peak, live)
            heapq.heappush(running, (now + seconds[index], index))
        if not running:
            return peak
        now, index = heapq.heappop(running)
        live -= extra[index]
        if not consumers[index]:  # a final block: in the result, or written to the sink
            live -= alloc[index]
        for source in tasks[index].inputs:
            uses[source] -= 1
            if uses[source] == 0:
                live -= alloc[source]
        for consumer in consumers[index]:
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                heapq.heappush(reads if tasks[consumer].kind == LOAD else computes, consumer)


def ceiling(graph: TaskGraph, alloc: list[int], workers: int, result: int) -> int:
    """A peak no run of ``graph`` can exceed: every allocation held at once, counted twice
    (room for the allocator's slack), the decode buffers of the ``workers`` largest reads,
    and the result."""
    extra = sorted(transients(graph, alloc))[-workers:]
    return 2 * sum(alloc) + sum(extra) + result


def chunk_alignment(program: Function, stored: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """Index name → the chunk extent its blocks must be whole multiples of."""
    scans = scan_indices(program)
    align: dict[str, int] = {}
    for name, chunks in stored.items():
        indices = scans.get(name, ())
        if len(indices) != len(chunks):
            continue
        for index, chunk in zip(indices, chunks, strict=True):
            align[index] = max(align.get(index, 1), int(chunk))
    return align


def aligned(blocking: Blocking, align: dict[str, int]) -> Blocking:
    """``blocking`` with every aligned index's block rounded up to whole chunks."""
    sizes = dict(blocking.sizes)
    block = []
    for name, size in blocking.block:
        step = align.get(name)
        if step and size % step and size < sizes[name]:
            size = min(sizes[name], math.ceil(size / step) * step)
        block.append((name, size))
    return Blocking(sizes=blocking.sizes, block=tuple(block))


def _heaviest(graph: TaskGraph, alloc: list[int]) -> int:
    """The task whose own block plus its inputs' hold the most memory."""
    best, best_bytes = 0, -1
    for index, task in enumerate(graph.tasks):
        held = alloc[index] + sum(alloc[s] for s in task.inputs)
        if held > best_bytes:
            best, best_bytes = index, held
    return best


def _split(graph: TaskGraph, alloc: list[int], blocking: Blocking,
           align: dict[str, int]) -> Blocking | None:
    """``blocking`` with one index halved: the largest block index of the heaviest task's
    largest input (or of the task itself); ``None`` when none can be split."""
    heaviest = _heaviest(graph, alloc)
    task = graph.tasks[heaviest]
    owner = graph.tasks[max((heaviest, *task.inputs), key=lambda i: (alloc[i], i))]
    blocks = dict(blocking.block)
    for names in (graph.stage_dims.get(owner.key[0], ()),
                  graph.stage_dims.get(task.key[0], ())):
        options = []
        for position, name in enumerate(dict.fromkeys(names)):
            size = blocks.get(name, 1)
            step = align.get(name, 1)
            smaller = max(step, math.ceil(size / 2 / step) * step)
            if smaller < size:  # ties: the leading dimension (longer contiguous reads)
                options.append((size, -position, name, smaller))
        if options:
            _, _, name, smaller = max(options)
            blocks[name] = smaller
            return Blocking(sizes=blocking.sizes,
                            block=tuple((n, blocks[n]) for n, _ in blocking.block))
    return None


def fit_blocking(program: Function, blocking: Blocking, *, budget: int | None,
                 stored: dict[str, tuple[int, ...]], workers: int, what: str,
                 lower: Callable[[Function, Blocking], TaskGraph], refine: bool = True,
                 sink_chunks: tuple[int, ...] | None = None
                 ) -> tuple[Blocking, TaskGraph, MemoryModel | None]:
    """The blocking of ``program`` within ``budget`` (see the module docstring); ``what``
    names the operation in an error. ``refine=False`` (a blocking the caller forced) keeps
    the blocking and only checks it. ``sink_chunks`` (not ``None``): the result streams to
    a sink, block by block, never held whole; its blocks align with these chunks."""
    sink = sink_chunks is not None
    align = chunk_alignment(program, stored)
    if sink_chunks:
        for index, chunk in zip(key_of(program.output), sink_chunks, strict=False):
            align[index] = max(align.get(index, 1), int(chunk))
    if align:
        blocking = aligned(blocking, align)
    graph = lower(program, blocking)
    if budget is None:
        return blocking, graph, None
    positions = {k for k, decl in enumerate(program.inputs) if decl.name in stored}
    itemsize = graph.dtype.itemsize
    result = 0 if sink else math.prod(graph.output_shape) * graph.dtype.itemsize
    if result > budget:
        raise MemoryLimitError(
            f"memory_limit {format_bytes(budget)} is too small for {what}: its result alone "
            f"holds {format_bytes(result)}; give memory_limit of at least "
            f"{format_bytes(result, up=True)} plus room for its blocks, or write the result "
            "block by block with tc.to_zarr(lazy_array, path)")
    stream = max(STREAM_BLOCK_BYTES, max(math.prod(c) for c in stored.values()) * itemsize
                 ) if stored else None
    for _ in range(MAX_REFINEMENTS if refine else 1):
        alloc = allocations(graph, positions, sink)
        largest = max(alloc, default=0)
        streams = stream is None or largest <= stream
        bound = ceiling(graph, alloc, workers, result)
        if streams and bound <= budget:  # fits whatever the order: no simulation needed
            return blocking, graph, MemoryModel(budget, bound, result, largest, False)
        peak = modelled_peak(graph, alloc, workers, result)
        if streams and peak <= budget:
            return blocking, graph, MemoryModel(budget, peak, result, largest, False)
        finer = (_split(graph, alloc, blocking, align)
                 if refine and len(graph.tasks) < MAX_TASKS else None)
        if finer is None:
            break
        blocking, graph = finer, lower(program, finer)
    alloc = allocations(graph, positions, sink)
    peak = modelled_peak(graph, alloc, workers, result, budget)
    if peak <= budget:
        return blocking, graph, MemoryModel(budget, peak, result, max(alloc), True)
    need = modelled_peak(graph, alloc, workers, result, 0)  # reads one at a time
    if need <= budget:
        return blocking, graph, MemoryModel(budget, need, result, max(alloc), True, 0)
    heaviest = graph.tasks[_heaviest(graph, alloc)]
    largest = max(alloc)
    raise MemoryLimitError(
        f"memory_limit {format_bytes(budget)} is too small for {what}: even at its finest "
        f"blocking ({blocking.describe()}) one worker needs {format_bytes(need)} (the result "
        f"holds {format_bytes(result)}, the largest block {format_bytes(largest)}, in task "
        f"{heaviest.key[0]!r}); give memory_limit of at least {format_bytes(need, up=True)}, "
        "or write a "
        "result larger than memory with tc.to_zarr")
