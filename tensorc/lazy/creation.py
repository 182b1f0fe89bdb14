"""The standard's creation functions, plus ``tc.random``: arrays made where they will be
used.

In this process they are evaluated at once (numpy, by the session's executor). With a Ray
session ``tc.random``, ``zeros``, ``ones``, ``full``, ``empty`` and ``asarray`` (of data
larger than the driver keeps, or with a blocking) return an array *not made yet*: a
``deferred`` node whose callable is a :class:`~tensorc.lazy.not_made.Creation` (its
:class:`~tensorc.placement.recipes.Recipe`). The first program that reads it makes it in the
layout the plan of the statement reading it wants (each block's creation task on the node
that statement's plan reads it on: the reads need no transfer; ``explain()`` says which
statement chose it). Used as it is instead (``x.compute()``, ``x.blocks``, an immediate
``tc.einsum``), it is made in the default layout: its own blocking, block-cyclic over the
nodes (:mod:`tensorc.runtime.ray.arrays`), so arrays of the same shape and blocking made
that way hold block ``g`` on the same node. Its values never depend on the layout.
``block_shape=``/``grid=`` choose the blocking on Ray (``tc.random``'s values depend on
it); ``asarray`` of a lazy array with a blocking stays lazy (a ``deferred`` node that
re-cuts its value on the nodes when it is needed)."""

from __future__ import annotations

import functools
import operator

import numpy as np

from tensorc import session
from tensorc.errors import PlanError, ShapeError, TypeCheckError
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.data_types import astype
from tensorc.lazy.graph import deferred, leaf
from tensorc.lazy.manipulation import broadcast_to, expand_dims, reshape
from tensorc.lazy.not_made import Creation
from tensorc.placement.blocks import normalised_shape
from tensorc.placement.recipes import Recipe
from tensorc.runtime.ray import arrays as ray_arrays
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.ray.statements import DRIVER_BYTES
from tensorc.sparse.formats import is_sparse
from tensorc.sparse.tensor import SparseTensor

DEFAULT_FLOAT = np.dtype("float64")


def _shape(shape, name: str = "full") -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints) as a tuple; a size that is not an integer
    (``2.5``) or is negative raises, naming the function."""
    sizes = (shape,) if getattr(shape, "ndim", None) == 0 or not hasattr(
        shape, "__len__") else shape
    try:
        sizes = tuple(operator.index(n) for n in sizes)
    except TypeError as err:
        raise TypeCheckError(f"{name}: shape must be an int or a sequence of ints, got "
                             f"{shape!r}") from err
    if any(n < 0 for n in sizes):
        raise ShapeError(f"{name}: negative dimensions are not allowed: {sizes}")
    return normalised_shape(sizes)


def _dtype(dtype, default=DEFAULT_FLOAT) -> np.dtype:
    return np.dtype(default if dtype is None else dtype)


def _check_device(device) -> None:
    if device not in (None, "cpu"):
        raise TypeCheckError(f"tensorc arrays live on device 'cpu', not {device!r}")


def _not_made(recipe: Recipe) -> Array:
    return wrap(deferred(Creation(recipe), (), recipe.shape, recipe.dtype, recipe.name))


def _from_value(value: np.ndarray, block_shape=None, grid=None) -> Array:
    """A leaf of ``value`` in this process; on Ray, an array not made yet (module
    docstring), unless it is small and no blocking is asked for: it then stays on the
    driver, and the programs that read it pass it inside their calls."""
    executor = session.current().executor
    if executor.in_process or _small(value, block_shape, grid):
        return wrap(leaf(executor.place(value, block_shape, grid)))
    return _not_made(ray_arrays.recipe("data", value.shape, block_shape, grid,
                                       dtype=value.dtype, data=value))


def _small(value: np.ndarray, block_shape, grid) -> bool:
    """Whether the Ray executor keeps ``value`` on the driver (no blocking asked for, at
    most a statement's driver size)."""
    return block_shape is None and grid is None and value.nbytes <= DRIVER_BYTES


def asarray(obj, /, *, dtype=None, device=None, copy=None, block_shape=None,
            grid=None) -> Array | SparseTensor:
    """An array from ``obj`` (an ``Array``, a numpy array, nested sequences, a scalar);
    on Ray its blocks are placed on their nodes. An ``Array`` is returned as is unless
    ``copy=True`` or another dtype asks for a new one (``copy=False`` then raises
    ``ValueError``): ``x[key] = value`` on one shows in the other exactly when it is the
    same array. A scipy or pydata sparse array becomes a
    :class:`~tensorc.sparse.tensor.SparseTensor` (cut by each call's plan, by its
    non-zeros: no ``block_shape`` or ``grid``)."""
    _check_device(device)
    if is_sparse(obj):
        if block_shape is not None or grid is not None:
            raise PlanError("tc.asarray of a sparse array takes no block_shape= or grid=: "
                            "each call's plan cuts a sparse operand by its non-zeros")
        return SparseTensor(obj, dtype=dtype, copy=copy)
    if isinstance(obj, Array):
        converts = dtype is not None and np.dtype(dtype) != obj.dtype
        if converts and copy is False:
            raise ValueError(f"copy=False but converting {obj.dtype} to {np.dtype(dtype)} "
                             "needs a copy")
        source = astype(obj, obj.dtype if dtype is None else dtype, copy=True)
        if block_shape is None and grid is None:
            return astype(obj, source.dtype, copy=bool(copy))
        if session.current().executor.in_process:  # one process: nothing to re-cut
            return source
        node = expr_of(source)
        return wrap(deferred(functools.partial(_reblocked, block_shape, grid), (node,),
                             node.shape, node.dtype, "asarray (re-blocked)"))
    if isinstance(obj, DistributedArray):
        return wrap(leaf(obj))
    if copy is False and dtype is not None and np.asarray(obj).dtype != np.dtype(dtype):
        raise ValueError("copy=False but converting to the dtype asked for needs a copy")
    value = np.array(obj, dtype=dtype, copy=True)
    if value.dtype.hasobject:
        raise TypeCheckError(f"cannot make an array of {type(obj).__name__} values")
    return _from_value(value, block_shape, grid)


def _reblocked(block_shape, grid, value):
    """``value`` (an evaluated array) in the blocking ``block_shape``/``grid`` asks for: the
    callable of the ``deferred`` node ``asarray(x, block_shape=…)`` of a lazy ``x`` makes
    (:meth:`~tensorc.runtime.executor.Executor.reblock`: a distributed value is re-cut where
    it is, never gathered)."""
    return session.current().executor.reblock(value, block_shape, grid)


def full(shape, fill_value, *, dtype=None, device=None, block_shape=None, grid=None) -> Array:
    """An array of ``shape`` filled with ``fill_value``: a Python or numpy scalar, or a 0-d
    ``tc.Array`` (lazy: the result is its value broadcast, in ``dtype`` when given)."""
    _check_device(device)
    shape = _shape(shape)
    if isinstance(fill_value, Array):
        if fill_value.ndim != 0:
            raise ShapeError(f"full: fill_value must be a scalar or a 0-d array, got shape "
                             f"{fill_value.shape}")
        value = fill_value if dtype is None else astype(fill_value, dtype)
        return broadcast_to(value, shape)
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
        if dtype.kind == "i":
            dtype = np.dtype("int64")
    dtype = np.dtype(dtype)
    executor = session.current().executor
    if executor.in_process:
        return wrap(leaf(executor.full(shape, fill_value, dtype, block_shape, grid)))
    return _not_made(ray_arrays.recipe("full", shape, block_shape, grid, dtype=dtype,
                                       value=fill_value))


def zeros(shape, *, dtype=None, device=None, block_shape=None, grid=None) -> Array:
    return full(_shape(shape, "zeros"), 0, dtype=_dtype(dtype), device=device,
                block_shape=block_shape, grid=grid)


def ones(shape, *, dtype=None, device=None, block_shape=None, grid=None) -> Array:
    return full(_shape(shape, "ones"), 1, dtype=_dtype(dtype), device=device,
                block_shape=block_shape, grid=grid)


def empty(shape, *, dtype=None, device=None, block_shape=None, grid=None) -> Array:
    """Like ``zeros`` (tensorc never hands out uninitialised memory)."""
    return zeros(_shape(shape, "empty"), dtype=dtype, device=device, block_shape=block_shape,
                 grid=grid)


def _like(x, dtype):
    return _dtype(dtype, expr_of(x).dtype), expr_of(x).shape


def zeros_like(x, /, *, dtype=None, device=None) -> Array:
    dtype, shape = _like(x, dtype)
    return zeros(shape, dtype=dtype, device=device)


def ones_like(x, /, *, dtype=None, device=None) -> Array:
    dtype, shape = _like(x, dtype)
    return ones(shape, dtype=dtype, device=device)


def empty_like(x, /, *, dtype=None, device=None) -> Array:
    dtype, shape = _like(x, dtype)
    return zeros(shape, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None) -> Array:
    dtype, shape = _like(x, dtype)
    return full(shape, fill_value, dtype=dtype, device=device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None) -> Array:
    _check_device(device)
    value = np.arange(start, stop, step, dtype=dtype)
    if dtype is None and value.dtype.kind == "i":
        value = value.astype("int64")
    return _from_value(value)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True) -> Array:
    """``num`` evenly spaced values from ``start`` to ``stop``; in ``dtype`` when given
    (an integer dtype rounds towards minus infinity, as numpy's), else floating point."""
    _check_device(device)
    try:
        num = operator.index(num)
    except TypeError as err:
        raise TypeCheckError(f"linspace: num must be an integer, got {num!r}") from err
    if num < 0:
        raise ShapeError(f"linspace: num must be non-negative, got {num}")
    if dtype is None:
        kind = np.result_type(start, stop, 1.0)
        kind = kind if kind.kind in "fc" else DEFAULT_FLOAT
    else:
        kind = np.dtype(dtype)
    return _from_value(np.linspace(start, stop, num, endpoint=endpoint, dtype=kind))


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None) -> Array:
    _check_device(device)
    return _from_value(np.eye(n_rows, n_cols, k=k, dtype=_dtype(dtype)))


def meshgrid(*arrays, indexing="xy") -> list[Array]:
    """Coordinate matrices from coordinate vectors (numpy's: each input is flattened), lazy:
    each result is its input with size-1 axes inserted, broadcast to the grid's shape."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    flat = [reshape(a, (-1,)) for a in arrays]
    shape = [f.shape[0] for f in flat]
    swap = indexing == "xy" and len(flat) > 1  # "xy": the first two axes exchanged
    if swap:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for k, f in enumerate(flat):
        axis = 1 - k if swap and k < 2 else k
        others = tuple(d for d in range(len(flat)) if d != axis)
        out.append(broadcast_to(expand_dims(f, others) if others else f, tuple(shape)))
    return out


def from_dlpack(x, /, *, device=None, copy=None) -> Array:
    _check_device(device)
    return _from_value(np.array(np.from_dlpack(x)))


def random(shape, *, block_shape=None, grid=None, seed: int = 0, dtype="float64") -> Array:
    """Uniform [0, 1) values. Block ``g`` of the blocking is drawn from numpy's PCG64 seeded
    with ``(seed, *g)``, so values depend on the seed and the blocking; on Ray each block is
    generated on its node."""
    shape = _shape(shape, "random")
    dtype = np.dtype(dtype)
    executor = session.current().executor
    if executor.in_process:
        return wrap(leaf(executor.random(shape, dtype, seed, block_shape, grid)))
    return _not_made(ray_arrays.recipe("random", shape, block_shape, grid, seed, dtype))
