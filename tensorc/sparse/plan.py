"""The plan of one sparse einsum: blocking by non-zeros, the graph over non-empty blocks,
its modelled memory, and what ``explain()`` shows.

Contract: :func:`plan_sparse` takes the parsed call (spec, the operands as
:func:`~tensorc.sparse.formats.source` or ndarray, compute dtype, result sparsity,
options) and returns ``(plan, inputs)``: a :class:`SparsePlan` and the operands as the
graph's load tasks read them (a sparse operand :func:`~tensorc.sparse.blocks.cut` into
blocks, a dense one as it is). Steps:

1. the blocking: ``grid=``/``block_shape=`` when given (checked as for dense calls), else
   :func:`~tensorc.sparse.rules.nnz_blocking` (one index split by non-zeros);
2. each sparse operand cut into blocks (one vectorised pass), its non-zeros per block
   counted; the graph lowered over the non-empty blocks
   (:func:`~tensorc.codegen.sparse_lower.lower_sparse`);
3. the modelled peak of the local run (:func:`~tensorc.planning.memory_fit.modelled_peak`,
   sparse blocks priced by their non-zeros through ``allocations``) over the result, held
   throughout: a dense result's bytes, or a sparse result's estimated bytes (its blocks are
   kept until assembled, each dropped once copied into the whole). A result larger than
   the budget is refused at once; otherwise, over the budget, the split index's block
   count doubles while that lowers the peak (a forced blocking is only checked); if
   nothing fits, a :class:`~tensorc.errors.MemoryLimitError` names the smallest budget that
   works.

Sparse plans are not cached: the blocking depends on where the non-zeros are, which only a
pass over the operand tells.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from tensorc.codegen.blocking import Blocking
from tensorc.codegen.coo import CooData
from tensorc.codegen.sparse_lower import (
    SparseLowering,
    SparseScan,
    lower_sparse,
    sparse_bytes,
)
from tensorc.errors import MemoryLimitError
from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import EinsumSpec
from tensorc.planning.blocking import choose_blocking
from tensorc.planning.memory_fit import MemoryModel, allocations, format_bytes, modelled_peak
from tensorc.planning.pricing import planning_context
from tensorc.sparse.blocks import CutOperand, cut
from tensorc.sparse.rules import BLOCK_NNZ, nnz_blocking, plan_steps, split_count, split_index

MAX_REFINEMENTS = 10
MAX_TASKS = 200_000


class SparsePlan:
    """A planned sparse einsum: its graph, memory model and statistics; :meth:`explain`."""

    def __init__(self, subscripts: str, spec: EinsumSpec, lowering: SparseLowering,
                 blocking: Blocking, memory: MemoryModel | None, operands: list[dict],
                 result: str, memory_source: str, seconds: float,
                 observed: tuple[float, int] | None = None) -> None:
        self.subscripts = subscripts
        self.spec = spec
        self.lowering = lowering
        self.graph = lowering.graph
        self.blocking = blocking
        self.memory = memory
        self.operands = operands
        self.result = result
        self.memory_source = memory_source
        final = lowering.steps[-1]
        self.stats = {
            **self.graph.summary(),
            "sparse": True,
            "plan_seconds": seconds,
            "blocking": blocking.describe(),
            "operands": operands,
            "result": result,
            "estimated_output_nnz": final.estimated_nnz,
            "estimated_output_density": final.estimated_density,
            "model_output_nnz": final.model_nnz,
            "density_correction": None if observed is None else observed[0],
            "last_run_output_nnz": None if observed is None else observed[1],
            "steps": [{"equation": s.equation, "kernel": s.library, "tasks": s.tasks,
                       "reduce_tasks": s.reduce_tasks, "sparse": s.sparse_out,
                       "estimated_density": s.estimated_density} for s in lowering.steps],
            "memory_limit": None if memory is None else memory.budget,
            "modelled_peak_bytes": None if memory is None else memory.peak,
        }

    def explain(self) -> str:
        lines = [f"sparse einsum {self.subscripts!r} (local executor)", "operands:"]
        for k, info in enumerate(self.operands):
            shape = "×".join(str(d) for d in info["shape"]) or "scalar"
            if not info["sparse"]:
                lines.append(f"  in{k}  dense   {shape}")
                continue
            lines.append(
                f"  in{k}  sparse  {shape}  nnz {info['nnz']:,} (density "
                f"{info['density']:.3g}); blocks {'×'.join(map(str, info['grid'])) or '1'}: "
                f"{info['nonempty_blocks']} non-empty of {info['blocks']}; non-zeros per "
                f"non-empty block min/mean/max {info['block_nnz_min']:,} / "
                f"{info['block_nnz_mean']:,.0f} / {info['block_nnz_max']:,}")
        lines.append(f"blocking: {self.blocking.describe()}")
        lines.append("steps:")
        for number, step in enumerate(self.lowering.steps):
            kind = "sparse" if step.sparse_out else "dense"
            lines.append(
                f"  step{number}  {step.equation}  {step.library}: {step.tasks} tasks, "
                f"{step.reduce_tasks} reduce; result {kind}, estimated density "
                f"{step.estimated_density:.3g} ({step.estimated_nnz:,.0f} non-zeros)")
        stats = self.stats
        lines.append(f"result: {self.result}, estimated density "
                     f"{stats['estimated_output_density']:.3g}")
        if stats["density_correction"] is not None:
            lines.append(f"  corrected from the last run of this call: "
                         f"{stats['last_run_output_nnz']:,} non-zeros where the model said "
                         f"{stats['model_output_nnz']:,.0f} (×{stats['density_correction']:.3g})")
        lines.append(f"tasks: {stats['tasks']} (load {stats['load_tasks']}, pair "
                     f"{stats['pair_tasks']}, apply {stats['apply_tasks']}, reduce "
                     f"{stats['reduce_tasks']})")
        if self.memory is not None:
            lines.append(f"memory: {self.memory.describe()}; budget from "
                         f"{self.memory_source or 'the call'}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"SparsePlan({self.subscripts!r}, tasks={self.stats['tasks']})"


def _is_cut(value: object) -> bool:
    return isinstance(value, CutOperand)


def _operand_info(value: object, blocks: CutOperand | None) -> dict:
    if blocks is None:
        return {"sparse": False, "shape": tuple(np.shape(value))}
    counts = list(blocks.counts.values())
    return {
        "sparse": True, "shape": blocks.shape, "nnz": blocks.nnz,
        "density": blocks.nnz / math.prod(blocks.shape) if math.prod(blocks.shape) else 0.0,
        "grid": blocks.grid, "blocks": math.prod(blocks.grid),
        "nonempty_blocks": len(counts),
        "block_nnz_min": min(counts, default=0), "block_nnz_max": max(counts, default=0),
        "block_nnz_mean": sum(counts) / len(counts) if counts else 0.0,
    }


def _cut(spec: EinsumSpec, operands: Sequence[object], blocking: Blocking,
         kept: Mapping[int, object] | None = None) -> list:
    """Each sparse operand cut into the blocking's blocks: a kept tensor's cut of these
    blocks where it has one (``kept[k].cached_cut(steps)``), else cut here."""
    step = dict(blocking.block)
    kept = kept or {}
    inputs = []
    for k, (op, names) in enumerate(zip(operands, spec.inputs, strict=True)):
        if isinstance(op, np.ndarray):
            inputs.append(op)
            continue
        steps = tuple(step[n] for n in names)
        found = kept[k].cached_cut(steps) if k in kept else None
        inputs.append(found if found is not None else cut(op, steps))
    return inputs


def _lower(spec: EinsumSpec, inputs: list, steps, blocking: Blocking, compute,
           factor: float = 1.0):
    scans = [SparseScan(names, True, op.counts) if _is_cut(op)
             else SparseScan(names, False) for op, names in zip(inputs, spec.inputs,
                                                                 strict=True)]
    return lower_sparse(scans, steps, blocking, compute, factor)


def _result_bytes(lowering: SparseLowering, compute: np.dtype, result_sparse: bool) -> int:
    """Bytes the result holds: dense, or its estimated non-zeros as a sparse array."""
    shape = lowering.graph.output_shape
    if result_sparse:
        return sparse_bytes(lowering.steps[-1].estimated_nnz, len(shape), compute)
    return math.prod(shape) * compute.itemsize


def _peak(lowering: SparseLowering, compute: np.dtype, result_sparse: bool,
          workers: int, merged: bool = False) -> int:
    """The modelled peak: the run's blocks over the result, which is held throughout (a
    dense result from the start; a sparse one's blocks are kept until assembled). Row
    blocks of a CSR result are each dropped once copied into it; blocks that are merged
    (``merged``: several block columns, or coordinates sorted into one array) are all held
    until the assembled result is whole, so the result counts twice."""
    alloc = allocations(lowering.graph, set(), result_sparse)
    base = _result_bytes(lowering, compute, result_sparse) * (2 if merged else 1)
    return modelled_peak(lowering.graph, alloc, workers, base)


ROW_TRIES = 3
"""Row cuts a plan tries for a CSR result that its column cut would have to merge over the
budget (row blocks are dropped as copied): enough blocks that the workers' blocks in flight
fit beside the result, then twice and four times as many."""


def _merged(result_sparse: bool, result: str, spec: EinsumSpec, blocking) -> bool:
    """Whether assembling the result merges its blocks (:func:`_peak`): a sparse result that
    is not a CSR matrix cut into row blocks only."""
    if not result_sparse:
        return False
    rows_only = len(spec.output) == 2 and blocking.count(spec.output[1]) == 1
    return not ("csr" in result and rows_only)


def plan_sparse(subscripts: str, spec: EinsumSpec, operands: Sequence[object], compute,
                result_sparse: bool, result: str, *, optimize: object, workers: int,
                grid=None, block_shape=None, budget: int | None = None,
                memory_source: str = "", observed: tuple[float, int] | None = None,
                spread: bool = False, kept_cuts: Mapping[int, object] | None = None,
                node_workers: int | None = None) -> tuple[SparsePlan, list]:
    """The plan and the operands its loads read; see the module docstring. ``observed``:
    ``(factor, non-zeros)`` of the result on the last run of this call
    (:mod:`tensorc.sparse.observed`), which corrects the estimated density. ``spread``:
    the plan runs on several nodes, which share out its output blocks; from
    :data:`SPREAD_NNZ` non-zeros the default split is then along an output index (a split
    along a summed first dimension, whose partial results sum into one output block, puts
    all the work on one node). ``kept_cuts``: by operand position, the ``SparseTensor`` an
    operand came from; the plan reads its kept cut when it has the one chosen, and has it
    keep the chosen cut (never one the planner tried and dropped). ``node_workers``: the
    workers of one node (default ``workers``), which a split over a summed first index is
    sized for: its partial results sum into one output block, which one node computes."""
    started = time.perf_counter()
    compute = np.dtype(compute)
    sparse = [not isinstance(op, np.ndarray) for op in operands]
    steps = plan_steps(spec, sparse, result_sparse, optimize)
    forced = grid is not None or block_shape is not None
    nonzeros = {k: op.nnz for k, op in enumerate(operands) if sparse[k]}
    if forced:
        shapes = [tuple(op.shape) for op in operands]
        program = einsum_program(spec, shapes, [compute.str] * len(shapes), compute.str)
        blocking = choose_blocking(program, planning_context(grid=grid, block_shape=block_shape,
                                                             workers=workers))
    else:
        spread = spread and max(nonzeros.values(), default=0) >= SPREAD_NNZ
        rows_first = {} if spread else _rows_first(spec, operands, compute, result_sparse,
                                                   node_workers or workers)
        blocking = nnz_blocking(spec, nonzeros, workers, rows_first=rows_first)
        finer = _finer_for_skew(spec, operands, blocking, workers)
        if finer is not None:
            blocking = nnz_blocking(spec, nonzeros, workers, finer)
    inputs = _cut(spec, operands, blocking, kept_cuts)
    factor = observed[0] if observed is not None else 1.0
    lowering = _lower(spec, inputs, steps, blocking, compute, factor)
    memory = None
    if budget is not None:
        result_bytes = _result_bytes(lowering, compute, result_sparse)
        if result_bytes > budget:
            raise MemoryLimitError(
                f"memory_limit {format_bytes(budget)} is too small for sparse einsum "
                f"{subscripts!r}: its result alone holds {format_bytes(result_bytes)} "
                f"(estimated density {lowering.steps[-1].estimated_density:.3g}); give "
                f"memory_limit of at least {format_bytes(result_bytes, up=True)} plus room "
                "for its blocks")

        def priced(candidate: Blocking) -> tuple[list, SparseLowering, int]:
            """A blocking's cut operands, its lowering and its modelled peak."""
            cut_inputs = _cut(spec, operands, candidate, kept_cuts)
            lowered = _lower(spec, cut_inputs, steps, candidate, compute, factor)
            return cut_inputs, lowered, _peak(lowered, compute, result_sparse, workers,
                                              _merged(result_sparse, result, spec, candidate))

        peak = _peak(lowering, compute, result_sparse, workers,
                     _merged(result_sparse, result, spec, blocking))
        split = (split_index(spec, nonzeros, frozenset(rows_first) if not forced
                             else frozenset())
                 or _largest_index(spec))
        for _ in range(0 if forced else MAX_REFINEMENTS):
            if peak <= budget or split is None or len(lowering.graph.tasks) > MAX_TASKS:
                break
            count = blocking.count(split) * 2
            if count > dict(blocking.sizes)[split]:
                break
            finer = nnz_blocking(spec, nonzeros, workers, {split: count})
            finer_inputs, finer_lowering, finer_peak = priced(finer)
            if finer_peak >= peak:
                break  # finer blocks no longer help
            blocking, inputs, lowering, peak = finer, finer_inputs, finer_lowering, finer_peak
        if peak > budget and not forced and _merged(result_sparse, result, spec, blocking) and (
                "csr" in result and len(spec.output) == 2):
            # rows: no merge; enough that the blocks in flight fit beside the result
            least = workers * result_bytes / max(1, budget - result_bytes)
            first = workers * 2 ** max(0, math.ceil(math.log2(max(1.0, least / workers))))
            for count in (first * 2 ** k for k in range(ROW_TRIES)):
                rows = nnz_blocking(spec, nonzeros, workers, {spec.output[0]: count})
                rows_inputs, rows_lowering, rows_peak = priced(rows)
                if rows_peak <= budget:
                    blocking, inputs, lowering, peak = rows, rows_inputs, rows_lowering, rows_peak
                    break
        if peak > budget:
            need = _peak(lowering, compute, result_sparse, 1,
                         _merged(result_sparse, result, spec, blocking))
            if need > budget:
                raise MemoryLimitError(
                    f"memory_limit {format_bytes(budget)} is too small for sparse einsum "
                    f"{subscripts!r}: at blocking ({blocking.describe()}) one worker needs "
                    f"{format_bytes(need)} (sparse blocks priced by their non-zeros, the "
                    f"result included); give memory_limit of at least "
                    f"{format_bytes(need, up=True)}")
            peak = need
        alloc = allocations(lowering.graph, set(), result_sparse)
        memory = MemoryModel(budget, peak, result_bytes, max(alloc, default=0), False)
    step = dict(blocking.block)
    for k, tensor in (kept_cuts or {}).items():
        if _is_cut(inputs[k]):
            tensor.keep_cut(tuple(step[n] for n in spec.inputs[k]), inputs[k])
    infos = [_operand_info(op, b if _is_cut(b) else None)
             for op, b in zip(operands, inputs, strict=True)]
    plan = SparsePlan(subscripts, spec, lowering, blocking, memory, infos, result,
                      memory_source, time.perf_counter() - started, observed)
    return plan, inputs


def _rows_first(spec: EinsumSpec, operands: Sequence[object], compute: np.dtype,
                result_sparse: bool, workers: int) -> dict[int, int]:
    """Positions of the sparse operands that may be split along their first dimension when
    it is summed over (:func:`~tensorc.sparse.rules.split_index`): a scipy CSR matrix (its
    row blocks are slices of it) or coordinates in canonical, row-major order (their blocks
    along the first dimension are already contiguous: no sort, no copy; a CP-ALS sweep's
    MTTKRPs for the second and third modes otherwise sort the whole tensor by that mode),
    when the result is dense and its partial copies, one per worker at least, take no more
    bytes than the operand's entries (``E.T @ U`` of a 2M-entry CSR error matrix and a
    20,000 × 64 ``U``: row blocks, not 8 column blocks that sort its coordinates in every
    call). By position, the blocks to cut: at most as many as hold partial copies within
    that, and blocks of up to four times :data:`~tensorc.sparse.rules.BLOCK_NNZ` when
    those are balanced, since each block costs a partial result (a PageRank step on a
    million edges: 4.5 ms in 4 blocks, 3.9 ms in 2; scipy 3.6 ms)."""
    if result_sparse:
        return {}
    result_bytes = math.prod(spec.size_of[n] for n in spec.output) * compute.itemsize
    found = {}
    for position, operand in enumerate(operands):
        if sp.issparse(operand) and operand.format == "csr" and operand.ndim == 2:
            entries = operand.nnz * (operand.data.itemsize + 8)
        elif isinstance(operand, CooData) and operand.ndim >= 2:
            entries = operand.coords.nbytes + operand.values.nbytes
        else:
            continue
        most = entries // max(result_bytes, 1)
        if most < workers:
            continue
        count = min(split_count(operand.nnz, workers), most // workers * workers)
        fewer = split_count(operand.nnz, workers, 4 * BLOCK_NNZ)
        if fewer < count and _balanced(operand, fewer):
            count = fewer
        found[position] = count
    return found


SPREAD_NNZ = 1 << 23
"""Non-zeros from which a plan for several nodes splits along an output index to spread
its work. Below, the calls' fixed costs outweigh one node's share of the work: on this
machine's four nodes a PageRank step on a million edges took 97 ms spread (16 column
blocks) against 34 ms on one node, and a 2M-entry MTTKRP over a summed first index
0.57-0.94 s against 0.38-0.51 s."""

SKEW_STEPS = 3
"""Times the default split may double for a skewed operand (at most 8 times the blocks)."""


def _finer_for_skew(spec: EinsumSpec, operands: Sequence[object], blocking: Blocking,
                    workers: int) -> dict[str, int] | None:
    """More blocks along the default split (an output index), doubling up to
    :data:`SKEW_STEPS` times, while the largest block of the operand with the most
    non-zeros holds more than 1.25 times a worker's share of them: skewed (power-law)
    coordinates then spread evenly over the workers or nodes (the NELL-2-like tensor in 8
    blocks along its first index: 707k of its 2M non-zeros in the first, more than a
    quarter for 4 nodes). ``None`` when the default is fine (or no index is split, or the
    split index is summed: each block there costs a partial result)."""
    split = [name for name, _ in blocking.sizes if blocking.count(name) > 1]
    if len(split) != 1 or split[0] not in spec.output:
        return None
    name = split[0]
    holders = [(op.nnz, k) for k, op in enumerate(operands)
               if not isinstance(op, np.ndarray) and name in spec.inputs[k] and op.nnz]
    if not holders:
        return None
    _, position = max(holders)
    histogram = _histogram(operands[position], spec.inputs[position].index(name))
    size = histogram.shape[0]
    count = blocking.count(name)
    wanted = 1.25 * int(histogram.sum()) / workers
    for _ in range(SKEW_STEPS):
        if _block_sums(histogram, count).max() <= wanted or count * 2 > size:
            break
        count *= 2
    return {name: count} if count != blocking.count(name) else None


def _histogram(operand, dim: int) -> np.ndarray:
    """Non-zeros per coordinate of dimension ``dim`` of a sparse operand (its first
    dimension's without a pass over the entries: CSR row pointers, or a search of the
    row-major coordinates)."""
    size = operand.shape[dim]
    if sp.issparse(operand):
        if dim == 0:
            return np.diff(operand.indptr)
        return np.bincount(operand.indices, minlength=size)
    if dim == 0:
        return np.diff(np.searchsorted(operand.coords[0], np.arange(size + 1)))
    return np.bincount(operand.coords[dim], minlength=size)


def _block_sums(histogram: np.ndarray, blocks: int) -> np.ndarray:
    """Non-zeros of each of ``blocks`` equal blocks of the coordinates ``histogram`` counts."""
    step = math.ceil(histogram.shape[0] / blocks)
    return np.add.reduceat(histogram, np.arange(0, histogram.shape[0], step))


def _balanced(operand, blocks: int) -> bool:
    """Whether cutting ``operand``'s first dimension in ``blocks`` equal blocks gives each
    at most 1.25 times the mean non-zeros (a power-law first dimension does not: then
    more, smaller blocks let the workers even the load out)."""
    per_block = _block_sums(_histogram(operand, 0), blocks)
    return per_block.max(initial=0) <= 1.25 * max(per_block.mean(), 1)


def _largest_index(spec: EinsumSpec) -> str | None:
    sizes = spec.size_of
    names = [n for n in spec.output if sizes[n] > 1]
    return max(names, key=lambda n: sizes[n]) if names else None
