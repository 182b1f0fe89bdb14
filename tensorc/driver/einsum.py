"""Driving one einsum call: the fast path, numpy's own cases, or plan and run.

Contract: :func:`run_einsum` takes an einsum call as ``tc.einsum`` received it (lazy arrays
already dispatched by the API) and returns what ``numpy.einsum`` returns. The steps go one
way, through the layers:

1. **fast path** (:mod:`tensorc.driver.fast_path`): a repeated small local call replays its
   plan's kernels (one dictionary look-up); a call the fast path cannot take with a scipy or
   pydata sparse operand goes to :mod:`tensorc.sparse.einsum` instead;
2. **front end**: options checked once, subscripts parsed (cached by subscripts and shapes),
   numpy's dtype rules; the executor is chosen by the session (:func:`~tensorc.session.
   executor_for`);
3. **numpy's cases**, in process only: object operands go to ``numpy.einsum``; a view einsum
   (``ij->ji``, ``ii->i``) is the view;
4. **plan** (:func:`~tensorc.planning.plan.einsum_plan`, cached) with the executor's planning
   inputs (its workers; on Ray the placed operands' layouts);
5. **run** on the executor (:meth:`~tensorc.runtime.executor.Executor.run_plan`) and record
   its statistics (:mod:`tensorc.driver.stats`); a distributed result stays distributed when
   an operand was, else it is gathered; ``out=`` receives it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tensorc import session
from tensorc.driver import fast_path
from tensorc.driver.stats import record
from tensorc.errors import ParseError, PlanError, ShapeError
from tensorc.frontend import numpy_compat, views
from tensorc.frontend.einsum import result_dtype
from tensorc.frontend.subscripts import EinsumSpec, parse_einsum, sublist_to_subscripts
from tensorc.planning.options import (
    check_backend,
    check_casting,
    check_plan_options,
    check_scheduler,
)
from tensorc.planning.paths import normalise_optimize
from tensorc.planning.plan import einsum_plan
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.sparse.einsum import run_sparse_einsum, sparse_call
from tensorc.stored import StoredArray, from_memmap, stored_chunks

NO_OPERANDS = object()
"""``einsum()`` called with nothing at all."""


@lru_cache(maxsize=4096)
def parse(subscripts: str, shapes: tuple[tuple[int, ...], ...]) -> EinsumSpec:
    """The parsed einsum, cached by subscripts and shapes."""
    return parse_einsum(subscripts, shapes)


def stand_in(operand: object) -> np.ndarray:
    """The operand itself, or for a distributed or stored array a 1-element array of its
    rank and dtype (shape and dtype are all the front end needs; the data stays on the
    cluster or in its file)."""
    if isinstance(operand, (DistributedArray, StoredArray)):
        return np.zeros((1,) * operand.ndim, dtype=operand.dtype)
    return np.asarray(operand)


@dataclass
class _Call:
    """One einsum call after the front end: checked options, the executor, the operands and
    their stand-ins, the parsed subscripts and numpy's result and compute dtypes."""

    subscripts: str
    operands: tuple
    arrays: list
    executor: object
    scheduler: str
    measure: object
    order: str
    spec: EinsumSpec | None = None
    shapes: tuple = ()


def run_einsum(subscripts, operands: tuple, *, out, optimize, backend, dtype, order, casting,
               plan_options: dict):
    """One einsum call; see the module docstring."""
    fast_key = fast_path.key(subscripts, operands, out, optimize, backend, dtype, order, casting,
                             plan_options)
    entry = fast_path.ENTRIES.get(fast_key)
    if entry is not None:
        return fast_path.run(entry, operands, record)
    if fast_key is None and sparse_call(subscripts, operands):
        result, stats = run_sparse_einsum(subscripts, operands, out=out, optimize=optimize,
                                          backend=backend, dtype=dtype, order=order,
                                          casting=casting, plan_options=plan_options)
        record(stats)
        return result
    started = time.perf_counter()
    call = _checked(subscripts, operands, out, backend, order, casting, plan_options)
    arrays = call.arrays
    if call.executor.in_process and numpy_compat.delegate_to_numpy(arrays):
        return np.einsum(call.subscripts, *arrays, out=out, dtype=dtype, order=call.order,
                         casting=casting, optimize=numpy_compat.numpy_optimize(optimize))
    call.shapes = tuple(op.shape if isinstance(op, (DistributedArray, StoredArray)) else a.shape
                        for op, a in zip(call.operands, arrays, strict=True))
    stored = any(isinstance(op, StoredArray) for op in call.operands)
    call.spec = parse(call.subscripts, call.shapes)
    optimize = normalise_optimize(optimize, len(arrays))
    shape = call.spec.output_shape()
    recipe = (views.view_recipe(call.spec)
              if out is None and call.executor.in_process and not stored else None)
    if recipe is not None and (dtype is None or np.dtype(dtype) == arrays[0].dtype):
        return _view(arrays[0], recipe, fast_key)
    if out is not None and out.shape != shape:
        raise ShapeError(f"out has shape {out.shape} but einsum {call.subscripts!r} produces "
                         f"shape {shape}")
    result_type, compute = result_dtype(call.subscripts, arrays, dtype, casting, out,
                                        len(shape), numpy_compat.numpy_optimize(optimize))
    keeps_arrays = any(isinstance(op, DistributedArray) for op in call.operands)
    if out is not None and keeps_arrays:
        raise PlanError("out= takes a numpy array, but a tc.Array operand gives a tc.Array "
                        "result on the cluster; drop out= (or pass numpy operands)")
    result, plan, stats = _plan_and_run(call, optimize, compute, np.dtype(result_type), out,
                                        plan_options, started)
    if isinstance(result, DistributedArray):
        if keeps_arrays:
            return result
        result = result.numpy()
    else:
        fast_path.learn(fast_key, plan, result, compute, result_type, stats)
    return _delivered(result, out, result_type)


def _checked(subscripts, operands: tuple, out, backend, order, casting,
             plan_options: dict) -> _Call:
    """The front end's checks, once: operands present, numpy's interleaved form turned into
    subscripts, plan options, backend, order and casting valid; the executor chosen."""
    if subscripts is NO_OPERANDS:
        raise ParseError("No input operands: einsum needs at least one operand")
    scheduler = check_scheduler(
        plan_options.pop("scheduler", None) or session.current().scheduler
    )
    measure = plan_options.pop("measure", None)
    if not isinstance(subscripts, str):
        subscripts, operand_list = sublist_to_subscripts((subscripts, *operands))
        operands = tuple(operand_list)
    if not operands:
        raise ParseError("No input operands: einsum needs at least one operand")
    check_plan_options(plan_options)
    check_backend(backend)
    order = numpy_compat.normalise_order(order)
    check_casting(casting)
    operands = tuple(_stored_memmap(op) for op in operands)
    executor = session.executor_for(backend, operands)
    arrays = [stand_in(op) for op in operands]
    numpy_compat.check_out(out)
    return _Call(subscripts, operands, arrays, executor, scheduler, measure, order)


def _plan_and_run(call: _Call, optimize, compute: np.dtype, result_type: np.dtype, out,
                  plan_options: dict, started: float):
    """Plan the call (cached) with the executor's planning inputs and run it there; the
    statistics are recorded. Returns ``(result, plan, statistics)``: in process the result
    is ``out`` when the final blocks could land there, else an array in numpy's memory
    order."""
    executor, arrays = call.executor, call.arrays
    if executor.in_process:
        inputs = [op if isinstance(op, StoredArray) else a
                  for op, a in zip(call.operands, arrays, strict=True)]
    else:
        inputs = list(call.operands)
    budget, source = session.current().memory_budget(plan_options.get("memory_limit"))
    plan_options = {**plan_options, "memory_limit": budget}
    stored = stored_chunks(call.operands)
    options, placed, workers, orders = executor.plan_inputs(call.spec, inputs, plan_options,
                                                            call.scheduler)
    dtypes = tuple(a.dtype.str for a in arrays)
    plan, cached = einsum_plan(call.subscripts, call.spec, call.shapes, dtypes, orders, compute,
                               optimize, options, default_workers=workers, placed=placed,
                               stored=stored, memory_source=source)
    planned = time.perf_counter()
    target = None
    if executor.in_process:
        aliased = out is not None and any(np.may_share_memory(out, a) for a in arrays)
        if out is not None and out.dtype == compute and not aliased:
            target = out  # final blocks land in place; an out that overlaps an input does not
        else:
            target = numpy_compat.allocate(call.spec.output_shape(), compute, call.order,
                                           arrays, call.subscripts)
    result, stats = executor.run_plan(
        plan, inputs, out=target, result_type=result_type, scheduler=call.scheduler,
        measure=call.measure, workers=plan_options.get("workers"), cached=cached,
        plan_seconds=planned - started)
    record(stats)
    return result, plan, stats


def _stored_memmap(operand: object) -> object:
    """A contiguous numpy memmap becomes the file behind it, read block by block (its pages
    are then never held resident by this process); any other operand is itself."""
    if isinstance(operand, np.memmap):
        return from_memmap(operand) or operand
    return operand


def _delivered(result: np.ndarray, out, result_type):
    """What numpy returns: ``out`` (filled) when given, else the result in numpy's dtype, a
    0-d result as a numpy scalar."""
    if out is not None:
        if result is not out:
            np.copyto(out, result, casting="unsafe")
        return out
    if result.dtype != result_type:
        result = result.astype(result_type)
    return result[()] if result.ndim == 0 else result


def _view(array: np.ndarray, recipe, fast_key):
    """A view einsum (``ij->ji``, ``ii->i``): the view itself, recorded as a run of no tasks."""
    stats = {"backend": "local", "scheduler": None, "tasks": 0, "view": True,
             "plan_cached": False, "measured_inter_node_bytes": None}
    record(stats)
    fast_path.learn_view(fast_key, recipe, stats)
    view = views.take_view(array, recipe)
    return view[()] if view.ndim == 0 else view
