"""The public API: ``einsum``, ``tensordot``, ``plan``, ``last_stats``.

``einsum`` and ``tensordot`` take numpy arrays (or anything ``np.asarray`` accepts, Python
scalars included) and return what ``numpy.einsum``/``numpy.tensordot`` return: same values
up to floating-point rounding, same dtype, same shape, same keyword arguments with numpy's
meaning. A call with lazy ``tc.Array`` operands joins their program (or runs now when they
are evaluated); any other goes to the driver (:func:`tensorc.driver.einsum.run_einsum`),
which plans it (cached by subscripts, shapes, dtypes and options) and runs it on the
session's executor. ``plan`` compiles without running.
"""

from __future__ import annotations

import weakref

import numpy as np

from tensorc import session
from tensorc.driver import fast_path
from tensorc.driver.einsum import NO_OPERANDS, parse, run_einsum
from tensorc.driver.stats import last_stats
from tensorc.errors import AxisError, PlanError, ShapeError, UnsupportedError
from tensorc.frontend.einsum import result_dtype
from tensorc.lazy import linear
from tensorc.lazy.array_object import Array as LazyArray
from tensorc.lazy.array_object import expr_of
from tensorc.lazy.data_types import astype
from tensorc.lazy.graph import leaf
from tensorc.lazy.not_made import creation_of
from tensorc.planning.options import check_plan_options
from tensorc.planning.paths import normalise_optimize
from tensorc.planning.plan import EINSUM_PLANS, Plan, einsum_plan
from tensorc.runtime.local import memory_order
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.task_pool import available_cores
from tensorc.sparse.einsum import plan_sparse_einsum
from tensorc.sparse.formats import is_sparse
from tensorc.stored import StoredArray, stored_chunks

__all__ = ["clear_plan_cache", "einsum", "last_stats", "matmul", "plan", "tensordot"]


def clear_plan_cache() -> None:
    """Forget every cached einsum plan."""
    EINSUM_PLANS.clear()
    fast_path.clear()


def einsum(
    subscripts=NO_OPERANDS,
    *operands,
    out: np.ndarray | None = None,
    optimize: object = "auto",
    backend: str | None = None,
    dtype: object = None,
    order: str = "K",
    casting: str = "safe",
    **plan_options,
):
    """Evaluate an einsum like ``numpy.einsum``, compiled to a block task graph.

    Args:
        subscripts: numpy subscripts (``"ijk,if,jf->if"``), or the first operand of numpy's
            interleaved form ``einsum(op0, sublist0, op1, sublist1, ..., [sublistout])``.
        *operands: arrays or scalars.
        out: array to write the result into (numpy's ``out=``).
        optimize: numpy's meaning (``False``, ``True``, ``"greedy"``, ``"optimal"``, an
            explicit path), or ``"auto"`` to let tensorc's cost model choose.
        backend: ``None`` or ``"local"`` (the in-process executor).
        dtype: compute and return in this dtype (numpy's ``dtype=``, checked by ``casting``).
        order: memory order of the result (``"K"``, ``"A"``, ``"C"``, ``"F"``).
        casting: numpy's casting rule for ``dtype=`` and ``out=``.
        **plan_options: ``grid`` / ``block_shape`` to force the blocking, ``workers``; on
            Ray also ``scheduler`` and ``measure`` (read the bytes Ray moved; default: the
            session's ``tc.init(measure=...)``).

    Returns:
        The result as numpy would return it (a numpy scalar for a 0-d result unless ``out``).
    """
    if isinstance(subscripts, LazyArray) or any(isinstance(op, LazyArray) for op in operands):
        return _on_lazy_arrays(einsum, linear.lazy_einsum, (subscripts, *operands), out=out,
                               optimize=optimize, backend=backend, dtype=dtype, order=order,
                               casting=casting, **plan_options)
    return run_einsum(subscripts, operands, out=out, optimize=optimize, backend=backend,
                      dtype=dtype, order=order, casting=casting, plan_options=plan_options)


def tensordot_subscripts(a_ndim: int, b_ndim: int, axes, a_shape, b_shape) -> str:
    """numpy.tensordot's ``axes`` as einsum subscripts."""
    if isinstance(axes, (int, np.integer)):
        count = max(int(axes), 0)  # numpy: a negative count contracts nothing (outer product)
        if count > a_ndim or count > b_ndim:
            raise ShapeError(
                f"tensordot axes={count} but the operands have {a_ndim} and {b_ndim} dimensions"
            )
        axes_a = list(range(a_ndim - count, a_ndim))
        axes_b = list(range(count))
    else:
        try:
            axes_a, axes_b = axes
        except (TypeError, ValueError) as err:
            raise ShapeError(
                f"tensordot axes must be an int or a pair of axis sequences, got {axes!r}"
            ) from err
        axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
        axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
        if len(axes_a) != len(axes_b):
            raise ShapeError(
                f"shape-mismatch for sum: {len(axes_a)} axes of a against {len(axes_b)} of b"
            )
    norm_a = [_normalise_axis(x, a_ndim, "a") for x in axes_a]
    norm_b = [_normalise_axis(x, b_ndim, "b") for x in axes_b]
    for axis_a, axis_b in zip(norm_a, norm_b, strict=True):
        if a_shape[axis_a] != b_shape[axis_b]:
            raise ShapeError(
                f"shape-mismatch for sum: axis {axis_a} of a has size {a_shape[axis_a]} "
                f"but axis {axis_b} of b has size {b_shape[axis_b]}"
            )
    if len(set(norm_a)) != len(norm_a) or len(set(norm_b)) != len(norm_b):
        raise ShapeError("tensordot axes repeat an axis")
    if a_ndim + b_ndim > 52:
        raise ShapeError("tensordot supports at most 52 dimensions in all")
    letters = [chr(ord("a") + k) if k < 26 else chr(ord("A") + k - 26) for k in range(52)]
    a_sub = letters[:a_ndim]
    b_sub = letters[a_ndim : a_ndim + b_ndim]
    for axis_a, axis_b in zip(norm_a, norm_b, strict=True):
        b_sub[axis_b] = a_sub[axis_a]
    free_a = [a_sub[k] for k in range(a_ndim) if k not in norm_a]
    free_b = [b_sub[k] for k in range(b_ndim) if k not in norm_b]
    return "".join(a_sub) + "," + "".join(b_sub) + "->" + "".join(free_a + free_b)


def _on_lazy_arrays(eager, lazy, args: tuple, **options):
    """A call with ``tc.Array`` operands: run now when every one is evaluated (the value
    comes back as an evaluated ``tc.Array``, statistics in ``tc.last_stats()``), else join
    their program lazily (plan options then have no meaning: the program is planned whole).
    Operands not made yet (``tc.random``, ``zeros``, … on Ray, never read) with the others
    evaluated: the call runs now as a program that makes them where its plan reads them, or,
    given plan options, on them made in their default layout."""
    arrays = [a for a in args if isinstance(a, LazyArray)]
    not_made = [a for a in arrays if creation_of(expr_of(a)) is not None]
    if not_made and all(a.evaluated or creation_of(expr_of(a)) is not None for a in arrays):
        if not _plan_options_given(options):
            result = lazy(*args)
            dtype = options.get("dtype")
            return (result if dtype is None else astype(result, dtype)).compute()
        for a in not_made:
            a.compute()  # made in the default layout
    if all(a.evaluated for a in args if isinstance(a, LazyArray)):
        values = [a.value() if isinstance(a, LazyArray) else a for a in args]
        result = eager(*values, **options)
        if is_sparse(result):  # a sparse einsum's sparse result is no tc.Array
            return result
        value = result if isinstance(result, DistributedArray) else np.asarray(result)
        made = LazyArray(leaf(value))
        if isinstance(value, DistributedArray):
            made._again = _call_again(eager, values, options)
        return made
    if any(is_sparse(a) for a in args):
        raise UnsupportedError("a scipy/pydata sparse operand cannot join a lazy tc.Array "
                               "program: compute the tc.Array operands first (x.compute()), "
                               "then the call runs now as a sparse einsum")
    given = _plan_options_given(options)
    if given:
        raise PlanError(f"{', '.join(sorted(given))}= apply to an immediate call; an "
                        "unevaluated tc.Array operand makes this call part of its lazy "
                        "program, which is planned whole (call .compute() on the operands "
                        "first to run it now)")
    result = lazy(*args)
    dtype = options.get("dtype")
    return result if dtype is None else astype(result, dtype)


def _call_again(eager, values: list, options: dict):
    """The call run again on the same operand values, while they live (held weakly, so
    nothing is kept alive for it), or ``None`` once one is gone: what a first gather of the
    result uses when a block of it was lost with its node."""
    held = [weakref.ref(v) if isinstance(v, DistributedArray | np.ndarray) else v
            for v in values]

    def again():
        found = [v() if isinstance(v, weakref.ref) else v for v in held]
        if any(v is None for v in found):
            return None
        result = eager(*found, **options)
        return result if isinstance(result, DistributedArray) else None

    return again


def _plan_options_given(options: dict) -> dict:
    """The options of an immediate call that a lazy program has no use for."""
    return {k: v for k, v in options.items()
            if v is not None and k not in ("optimize", "order", "casting", "dtype")}


def _normalise_axis(axis, ndim: int, which: str) -> int:
    value = int(axis)
    if not -ndim <= value < ndim:
        raise AxisError(f"axis {value} is out of bounds for {which} of dimension {ndim}")
    return value % ndim


def tensordot(a, b, axes=2, backend: str | None = None, **plan_options):
    """``numpy.tensordot`` compiled like :func:`einsum`.

    ``plan_options`` as for :func:`einsum`; ``grid=(grid_of_a, grid_of_b)`` gives block
    counts per dimension of each operand.
    """
    if isinstance(a, LazyArray) or isinstance(b, LazyArray):
        return _on_lazy_arrays(
            lambda x, y, **kw: tensordot(x, y, axes=axes, **kw),
            lambda x, y: linear.tensordot(x, y, axes=axes), (a, b), backend=backend,
            **plan_options)
    a_arr = a if isinstance(a, DistributedArray) or is_sparse(a) else np.asarray(a)
    b_arr = b if isinstance(b, DistributedArray) or is_sparse(b) else np.asarray(b)
    subscripts = tensordot_subscripts(a_arr.ndim, b_arr.ndim, axes, a_arr.shape, b_arr.shape)
    result = einsum(subscripts, a_arr, b_arr, backend=backend, **plan_options)
    kept = isinstance(result, DistributedArray) or is_sparse(result)
    return result if kept else np.asarray(result)


def matmul(x1, x2, /):
    """``x1 @ x2``: the array namespace's ``matmul`` (lazy), or with a scipy or pydata sparse
    operand a sparse :func:`einsum` (numpy's matmul rules: vectors, broadcast batches; the
    result is sparse when both operands are)."""
    if not (is_sparse(x1) or is_sparse(x2)):
        return linear.matmul(x1, x2)
    a, b = np.ndim(x1), np.ndim(x2)
    if a == 0 or b == 0:
        raise ShapeError("matmul takes arrays of at least one dimension, not 0-d")
    left = "j" if a == 1 else "...ij"
    right = "j" if b == 1 else "...jk"
    output = "..." * (a > 1 or b > 1) + "i" * (a > 1) + "k" * (b > 1)
    return einsum(f"{left},{right}->{output}", x1, x2)


def plan(subscripts: str, *shapes_or_arrays, nodes: int = 1, planner: str = "auto",
         optimize: object = "auto", dtype: object = "float64", **plan_options) -> Plan:
    """Compile without running: ``shapes_or_arrays`` are shape tuples or arrays.

    With ``nodes > 1`` the ``planner`` (``auto``, ``heuristic``, ``greedy``, ``smt``,
    ``exhaustive``) chooses the index grid and block counts under the shared cost model.
    With a scipy or pydata sparse array among ``shapes_or_arrays`` the plan is a sparse
    one (:class:`~tensorc.sparse.plan.SparsePlan`, local only), blocked by non-zeros.
    ``plan.explain()`` prints the IR after each pass, the blocking, the task counts and,
    for several nodes, the grid, the modelled loads per node, the lower bound and the
    ratio; ``plan.stats`` holds ``tasks``, ``cost``, ``inter_node_bytes``,
    ``max_node_recv_bytes``, ``max_node_memory_bytes``, ``lower_bound_bytes``, ``planner``
    and ``optimal`` (``True`` proved under the model, ``False`` out of budget, ``None``
    no claim).
    """
    if any(is_sparse(item) for item in shapes_or_arrays):
        return plan_sparse_einsum(subscripts, *shapes_or_arrays, optimize=optimize,
                                  nodes=nodes, **plan_options)
    plan_options = {**plan_options, "nodes": nodes, "planner": planner}
    check_plan_options(plan_options)
    shapes: list[tuple[int, ...]] = []
    dtypes: list[np.dtype] = []
    orders: list[str] = []
    placed = None
    shapes_or_arrays = tuple(item.value() if isinstance(item, LazyArray) else item
                             for item in shapes_or_arrays)
    if any(isinstance(item, DistributedArray) for item in shapes_or_arrays):
        placed = session.executor_for(None, shapes_or_arrays).layouts_of(shapes_or_arrays) or None
    stored = stored_chunks(shapes_or_arrays)
    for item in shapes_or_arrays:
        if isinstance(item, (DistributedArray, StoredArray)):
            shapes.append(item.shape)
            dtypes.append(item.dtype)
            orders.append(item.order if isinstance(item, StoredArray) else "C")
        elif isinstance(item, (tuple, list)):
            shapes.append(tuple(int(d) for d in item))
            dtypes.append(np.dtype(dtype))
            orders.append("C")
        else:
            array = np.asarray(item)
            shapes.append(array.shape)
            dtypes.append(array.dtype)
            orders.append(memory_order(array))
    optimize = normalise_optimize(optimize, len(shapes))
    stand_ins = [np.zeros((1,) * len(s), dtype=d) for s, d in zip(shapes, dtypes, strict=True)]
    spec = parse(subscripts, tuple(shapes))
    _, compute = result_dtype(subscripts, stand_ins, None, "safe", None, 0)
    budget, source = session.current().memory_budget(plan_options.get("memory_limit"))
    plan_options["memory_limit"] = budget
    built, _ = einsum_plan(subscripts, spec, tuple(shapes), tuple(d.str for d in dtypes),
                           tuple(orders), compute, optimize, plan_options,
                           default_workers=available_cores(), placed=placed, stored=stored,
                           memory_source=source)
    return built
