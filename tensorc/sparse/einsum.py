"""One einsum call with sparse operands: checked, planned by non-zeros, run on the
session's executor, returned in the type the operands imply.

Contract: :func:`run_sparse_einsum` takes a ``tc.einsum`` call in which some operand is a
scipy or pydata sparse array (:func:`sparse_call`) and returns ``(result, statistics)``;
the driver records the statistics. It is :func:`prepare_sparse_einsum` (checked, planned,
a :class:`PreparedCall`) then the run; :func:`run_prepared_together` runs several prepared
calls on a Ray session as one call per node (a ``.tc`` program's independent statements).
:func:`plan_sparse_einsum` plans the same call without running it (``tc.plan``). The rules:

- operands: scipy sparse matrices and arrays (2-d, 1-d), pydata sparse arrays (any rank),
  ``SparseTensor`` (``tc.asarray`` of one: a call's result then has the wrapped array's
  type, and on Ray its pieces are kept in the object store for later calls) and anything
  ``numpy.asarray`` takes, mixed freely; sparse operands are planned from
  their :func:`~tensorc.sparse.formats.source` (CSR, or canonical coordinates) and never
  densified. A lazy, distributed or
  stored tensorc array next to a sparse operand is refused (:class:`~tensorc.errors.
  UnsupportedError`);
- where it runs: in this process on the local executor's task pool; on a Ray session
  (an executor not in this process) block by block on the nodes
  (:func:`~tensorc.sparse.distributed.run_on_nodes`: output blocks spread by non-zeros,
  operand blocks sent in compact form, one call per node, the result gathered here and
  returned as locally), planned for the cluster's CPUs; ``backend="local"`` runs it in
  this process on a Ray session;
- dtypes are numpy's (``dtype=``, ``casting=`` as numpy checks them);
- the result (:func:`~tensorc.sparse.rules.sparse_result`): a numpy scalar for a 0-d
  result; a sparse array (:func:`~tensorc.sparse.formats.result_format`) when the operands
  imply one; else an ndarray (``out=`` receives it; ``out=`` with a sparse result is
  refused). Plan options ``grid``, ``block_shape``, ``workers`` and ``memory_limit`` have
  their dense meaning.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np

from tensorc import session
from tensorc.errors import ParseError, PlanError, ShapeError, UnsupportedError
from tensorc.frontend.einsum import result_dtype
from tensorc.frontend.subscripts import EinsumSpec, parse_einsum, sublist_to_subscripts
from tensorc.planning.options import check_backend, check_casting, check_plan_options
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.task_pool import available_cores
from tensorc.sparse import observed
from tensorc.sparse.distributed import run_on_nodes, run_together
from tensorc.sparse.formats import held, is_sparse, result_format, source
from tensorc.sparse.plan import SparsePlan, plan_sparse
from tensorc.sparse.results import SparseResultSink, empty_result
from tensorc.sparse.rules import sparse_result
from tensorc.sparse.tensor import SparseTensor
from tensorc.stored import StoredArray

SPARSE_OPTIONS = ("grid", "block_shape", "workers", "memory_limit")


def sparse_call(subscripts: object, operands: tuple) -> bool:
    """Whether an einsum call has a sparse operand (interleaved form included)."""
    return is_sparse(subscripts) or any(is_sparse(op) for op in operands)


class _Call:
    """A checked sparse call: subscripts, operands (sparse sources or ndarrays), the original
    sparse operands, the parsed spec."""

    def __init__(self, subscripts, operands: tuple, plan_options: dict) -> None:
        if not isinstance(subscripts, str):
            subscripts, listed = sublist_to_subscripts((subscripts, *operands))
            operands = tuple(listed)
        if not operands:
            raise ParseError("No input operands: einsum needs at least one operand")
        plan_options = dict(plan_options)
        plan_options.pop("scheduler", None)
        plan_options.pop("measure", None)
        check_plan_options(plan_options)
        for name in plan_options:
            if name not in SPARSE_OPTIONS:
                raise UnsupportedError(
                    f"plan option {name}= with sparse operands: a sparse einsum "
                    f"takes {', '.join(SPARSE_OPTIONS)}")
        for position, op in enumerate(operands):
            if isinstance(op, (DistributedArray, StoredArray)) or hasattr(op, "compute"):
                raise UnsupportedError(
                    f"operand {position} is a {type(op).__name__} next to a sparse operand: "
                    "sparse einsums take scipy/pydata sparse arrays and numpy arrays only "
                    "(gather it with numpy.asarray first)")
        self.subscripts = subscripts
        self.originals = operands
        self.sparse = [held(op) for op in operands if is_sparse(op)]
        self.kept = {k: op for k, op in enumerate(operands) if isinstance(op, SparseTensor)}
        """Operands given as ``SparseTensor``, by position: their pieces are kept on Ray."""
        self.operands = [source(op) if is_sparse(op) else np.asarray(op)
                         for op in operands]
        self.options = plan_options
        shapes = tuple(op.shape for op in self.operands)
        self.spec: EinsumSpec = parse_einsum(subscripts, shapes)
        self.stand_ins = [np.zeros(tuple(1 if d == 1 else 2 for d in op.shape), op.dtype)
                          for op in self.operands]

    def flags(self) -> list[bool]:
        return [not isinstance(op, np.ndarray) for op in self.operands]

    def signature(self, compute) -> tuple:
        """What identifies a repeat of this call (:func:`tensorc.sparse.observed.signature`)."""
        options = tuple((k, repr(self.options.get(k))) for k in BLOCKING_OPTIONS)
        return observed.signature(self.subscripts, self.operands, compute, options)


BLOCKING_OPTIONS = ("grid", "block_shape", "workers")
"""The call options a result's modelled density depends on (through the blocking)."""


def _plan(call: _Call, compute, result_sparse: bool, optimize, budget, source,
          executor=None) -> tuple:
    options = call.options
    remote = executor is not None and not executor.in_process
    workers = options.get("workers") or (executor.cpus if remote else available_cores())
    # a split over a summed first index keeps its one output block on one node
    node_workers = (max(1, workers // max(1, executor.nodes))
                    if remote and not options.get("workers") else workers)
    fmt = result_format(call.sparse, len(call.spec.output), compute) if result_sparse else (
        "dense")

    def make():
        found = observed.factor(call.signature(compute)) if result_sparse else None
        return plan_sparse(call.subscripts, call.spec, call.operands, compute, result_sparse,
                           _describe(fmt), optimize=optimize, workers=workers,
                           grid=options.get("grid"), block_shape=options.get("block_shape"),
                           budget=budget, memory_source=source, observed=found,
                           spread=remote, node_workers=node_workers,
                           kept_cuts=call.kept)

    sparse_positions = [k for k, op in enumerate(call.operands)
                        if not isinstance(op, np.ndarray)]
    if len(sparse_positions) != 1 or sparse_positions[0] not in call.kept:
        return make()
    position = sparse_positions[0]
    tensor = call.kept[position]
    key = (call.subscripts, position, np.dtype(compute).str, result_sparse, repr(optimize),
           workers, node_workers, remote, repr(options.get("grid")),
           repr(options.get("block_shape")), budget,
           tuple((op.shape, op.dtype.str) for op in call.operands if isinstance(op, np.ndarray)))
    started = time.perf_counter()
    found = tensor.cached_plan(key)
    if found is None:
        plan, inputs = make()
        tensor.keep_plan(key, plan, inputs[position])  # not the dense operands of this call
        return plan, inputs
    plan, cut = found
    again = copy.copy(plan)
    again.stats = {**plan.stats, "plan_seconds": time.perf_counter() - started,
                   "plan_cached": True}
    return again, [cut if k == position else op for k, op in enumerate(call.operands)]


def _describe(fmt: str) -> str:
    return {"dense": "dense numpy.ndarray", "coo": "sparse (pydata COO)",
            "gcxs": "sparse (pydata GCXS)", "csr_array": "sparse (scipy csr_array)",
            "csr_matrix": "sparse (scipy csr_matrix)",
            "coo_array": "sparse (scipy coo_array)"}[fmt]


@dataclass
class PreparedCall:
    """A sparse einsum call checked and planned, its result's target made, not yet run."""

    call: _Call
    executor: object
    plan: SparsePlan
    inputs: list
    target: object
    out: object
    result_type: object
    compute: object
    result_sparse: bool
    fmt: str | None
    shape: tuple
    started: float
    budget: int
    """The memory budget of one worker set the call was planned within."""


def prepare_sparse_einsum(subscripts, operands: tuple, *, out, optimize, backend, dtype,
                          order, casting, plan_options: dict) -> PreparedCall:
    """Check and plan one sparse einsum call (the first half of :func:`run_sparse_einsum`)."""
    started = time.perf_counter()
    check_backend(backend)
    check_casting(casting)
    call = _Call(subscripts, operands, plan_options)
    executor = session.executor_for(backend, ())
    spec = call.spec
    shape = spec.output_shape()
    if out is not None and tuple(np.shape(out)) != shape:
        raise ShapeError(f"out has shape {np.shape(out)} but einsum {call.subscripts!r} "
                         f"produces shape {shape}")
    result_type, compute = result_dtype(call.subscripts, call.stand_ins, dtype, casting,
                                        out, len(shape))
    result_sparse = sparse_result(spec, call.flags())
    if result_sparse and out is not None:
        raise PlanError(f"out= takes a dense array, but einsum {call.subscripts!r} of these "
                        "sparse operands has a sparse result; drop out=")
    budget, source = session.current().memory_budget(call.options.get("memory_limit"))
    plan, inputs = _plan(call, compute, result_sparse, optimize, budget, source, executor)
    fmt = result_format(call.sparse, len(shape), compute) if result_sparse else None
    if result_sparse:
        ranges = [plan.blocking.ranges(n) for n in spec.output]
        target = SparseResultSink(shape, compute, ranges)
    else:
        target = np.zeros(shape, compute, order="F" if order == "F" else "C")
    return PreparedCall(call, executor, plan, inputs, target, out, result_type, compute,
                        result_sparse, fmt, shape, started, budget)


def _finish(prepared: PreparedCall, stats: dict) -> tuple[object, dict]:
    """The result of a prepared call whose run wrote its target."""
    target, result_type = prepared.target, prepared.result_type
    if prepared.result_sparse:
        result = target.assemble(prepared.fmt) if prepared.plan.graph.outputs else (
            empty_result(prepared.shape, prepared.compute, prepared.fmt))
        observed.record(prepared.call.signature(prepared.compute),
                        prepared.plan.stats["model_output_nnz"], result.nnz)
        if np.dtype(result_type) != prepared.compute:
            result = result.astype(result_type)
        return result, stats
    if prepared.out is not None:
        np.copyto(prepared.out, target, casting="unsafe")
        return prepared.out, stats
    value = target if target.dtype == result_type else target.astype(result_type)
    return (value[()] if value.ndim == 0 else value), stats


def run_sparse_einsum(subscripts, operands: tuple, *, out, optimize, backend, dtype, order,
                      casting, plan_options: dict) -> tuple[object, dict]:
    """One sparse einsum call; see the module docstring."""
    return run_prepared(prepare_sparse_einsum(
        subscripts, operands, out=out, optimize=optimize, backend=backend, dtype=dtype,
        order=order, casting=casting, plan_options=plan_options))


def run_prepared(prepared: PreparedCall) -> tuple[object, dict]:
    """Run one prepared call on its executor; its result and statistics."""
    executor, plan = prepared.executor, prepared.plan
    if executor.in_process:
        _, stats = executor.run_plan(plan, prepared.inputs, out=prepared.target,
                                     result_type=prepared.result_type,
                                     workers=prepared.call.options.get("workers"),
                                     cached=plan.stats.get("plan_cached", False),
                                     plan_seconds=time.perf_counter() - prepared.started)
    else:
        stats = run_on_nodes(executor, plan, prepared.inputs, prepared.target,
                             prepared.call.kept)
    return _finish(prepared, stats)


def run_prepared_together(prepared: list[PreparedCall]) -> list[tuple[object, dict]]:
    """Several prepared calls on one executor out of this process, none reading another's
    result, run as one call per node (:func:`~tensorc.sparse.distributed.run_together`);
    their results and statistics in order. When their modelled peaks together exceed the
    smallest of their budgets (a node would hold all of them at once), each runs on its
    own."""
    peaks = sum(p.plan.stats.get("modelled_peak_bytes", 0) for p in prepared)
    if peaks > min(p.budget for p in prepared):
        return [run_prepared(p) for p in prepared]
    executor = prepared[0].executor
    stats = run_together(executor, [(p.plan, p.inputs, p.target, p.call.kept)
                                    for p in prepared])
    return [_finish(p, s) for p, s in zip(prepared, stats, strict=True)]


def plan_sparse_einsum(subscripts: str, *operands, optimize="auto", dtype=None,
                       **plan_options) -> SparsePlan:
    """The plan of a sparse einsum without running it (``tc.plan``)."""
    nodes = plan_options.pop("nodes", 1)
    plan_options.pop("planner", None)
    if nodes != 1:
        raise UnsupportedError("a sparse einsum is planned for the local executor only; "
                               "nodes= over 1 is not implemented for sparse operands")
    call = _Call(subscripts, operands, plan_options)
    _, compute = result_dtype(call.subscripts, call.stand_ins, dtype, "safe", None,
                              len(call.spec.output))
    budget, source = session.current().memory_budget(call.options.get("memory_limit"))
    plan, _ = _plan(call, compute, sparse_result(call.spec, call.flags()), optimize, budget,
                    source)
    return plan
