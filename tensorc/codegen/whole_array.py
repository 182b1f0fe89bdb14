"""Whole-array operations: the array operations the block IR does not express.

Contract: :func:`apply_whole(op, *arrays)` applies ``op = (name, *params)`` to numpy arrays
and returns a numpy array. ``name`` is one of :data:`WHOLE_OPERATIONS` (a closed table; the
parameters are plain hashable data — shapes, axes, encoded index keys — never user code).
The array front end uses these for shape-changing manipulation (``reshape``, ``concat``,
``stack``), indexing and ``x[key] = value``, positional searches (``argmax``), sorting,
cumulative sums and small linear algebra (``solve``, ``inv``, ``svd``, ``eigh``, …). A
runtime runs one as a single task on whole operands, so they suit operands that fit one node.

Indexing keys are encoded by :func:`encode_index` (slices as ``("slice", start, stop,
step)``, ``None`` as ``("newaxis",)``, ``...`` as ``("ellipsis",)``, integers as themselves),
so a statement holding one stays hashable; an index array is an operand of the operation and
stands in the key as ``("array", k)``, ``k`` its place among the key's arrays.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorc.errors import LinAlgError


def encode_index(key: tuple) -> tuple:
    """A hashable form of a basic index (slices, integers, ``None``, ``...``)."""
    out = []
    for item in key:
        if isinstance(item, slice):
            out.append(("slice", item.start, item.stop, item.step))
        elif item is None:
            out.append(("newaxis",))
        elif item is Ellipsis:
            out.append(("ellipsis",))
        else:
            out.append(int(item))
    return tuple(out)


def decode_index(key: tuple) -> tuple:
    """The index :func:`encode_index` encoded."""
    out = []
    for item in key:
        if isinstance(item, tuple):
            kind = item[0]
            out.append(slice(*item[1:]) if kind == "slice" else None if kind == "newaxis"
                       else Ellipsis)
        else:
            out.append(item)
    return tuple(out)


def _getitem(x: np.ndarray, key: tuple) -> np.ndarray:
    return np.array(x[decode_index(key)])


def _array_key(key: tuple, arrays: tuple) -> tuple:
    """The index :func:`encode_index` encoded, ``("array", k)`` standing for ``arrays[k]``."""
    return tuple(arrays[item[1]] if isinstance(item, tuple) and item[0] == "array"
                 else decode_index((item,))[0] for item in key)


def _getitem_arrays(x: np.ndarray, *arrays_and_key) -> np.ndarray:
    *arrays, key = arrays_and_key
    return np.array(x[_array_key(key, tuple(arrays))])


def _setitem(x: np.ndarray, value: np.ndarray, *arrays_and_key) -> np.ndarray:
    """A copy of ``x`` with ``x[key] = value`` (numpy's assignment; ``x`` is untouched)."""
    *arrays, key = arrays_and_key
    out = np.array(x, copy=True)
    out[_array_key(key, tuple(arrays))] = value
    return out


FFTS = {name: getattr(np.fft, name) for name in
        ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn", "rfftn", "irfftn")}


def _fft(x: np.ndarray, name: str, points: tuple, axes: tuple, norm: str) -> np.ndarray:
    """numpy's transform ``name`` of ``x`` with ``points`` data points along ``axes``."""
    if name.endswith("n"):
        return FFTS[name](x, s=points, axes=axes, norm=norm)
    return FFTS[name](x, n=points[0], axis=axes[0], norm=norm)


def _argsearch(fn) -> Callable:
    def search(x: np.ndarray, axis, keepdims: bool) -> np.ndarray:
        return np.asarray(fn(x, axis=axis, keepdims=keepdims))

    return search


def _sort(x: np.ndarray, axis: int, descending: bool, stable: bool) -> np.ndarray:
    kind = "stable" if stable else None
    if descending:
        return np.flip(np.sort(np.flip(x, axis=axis), axis=axis, kind=kind), axis=axis)
    return np.sort(x, axis=axis, kind=kind)


def _argsort(x: np.ndarray, axis: int, descending: bool, stable: bool) -> np.ndarray:
    kind = "stable" if stable else None
    if not descending:
        return np.argsort(x, axis=axis, kind=kind)
    n = x.shape[axis]
    flipped = np.argsort(np.flip(x, axis=axis), axis=axis, kind=kind)
    return np.flip(n - 1 - flipped, axis=axis)


def _cumulative(fn) -> Callable:
    def cumulative(x: np.ndarray, axis: int, dtype: str | None, include_initial: bool):
        out = fn(x, axis=axis, dtype=dtype)
        if include_initial:
            shape = list(out.shape)
            shape[axis] = 1
            start = np.zeros(shape, out.dtype) if fn is np.cumsum else np.ones(shape, out.dtype)
            out = np.concatenate([start, out], axis=axis)
        return out

    return cumulative


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if b.ndim == 1:  # the standard: a 1-d b is a vector, even when a is a stack
        return np.linalg.solve(a, b[..., None])[..., 0]
    return np.linalg.solve(a, b)


WHOLE_OPERATIONS: dict[str, Callable[..., np.ndarray]] = {
    "reshape": lambda x, shape: np.reshape(x, shape),
    "getitem": _getitem,
    "getitem_arrays": _getitem_arrays,
    "setitem": _setitem,
    "concat": lambda *xs_axis: np.concatenate(xs_axis[:-1], axis=xs_axis[-1]),
    "stack": lambda *xs_axis: np.stack(xs_axis[:-1], axis=xs_axis[-1]),
    "broadcast_to": lambda x, shape: np.array(np.broadcast_to(x, shape)),
    "argmax": _argsearch(np.argmax),
    "argmin": _argsearch(np.argmin),
    "sort": _sort,
    "argsort": _argsort,
    "cumulative_sum": _cumulative(np.cumsum),
    "cumulative_prod": _cumulative(np.cumprod),
    "flip": lambda x, axis: np.flip(x, axis=axis),
    "roll": lambda x, shift, axis: np.roll(x, shift, axis=axis),
    "tile": lambda x, reps: np.tile(x, reps),
    "repeat": lambda x, repeats, axis: np.repeat(x, repeats, axis=axis),
    "take": lambda x, indices, axis: np.take(x, indices, axis=axis),
    "tril": lambda x, k: np.tril(x, k),
    "triu": lambda x, k: np.triu(x, k),
    "searchsorted": lambda x, v, side: np.searchsorted(x, v, side=side),
    "diff": lambda x, axis, n: np.diff(x, n=n, axis=axis),
    "take_along_axis": lambda x, indices, axis: np.take_along_axis(x, indices, axis=axis),
    "solve": _solve,
    "cholesky": lambda a, upper: np.linalg.cholesky(a, upper=upper),
    "qr": lambda a, mode, part: np.linalg.qr(a, mode=mode)[part],
    "qr_r": lambda a: np.linalg.qr(a, mode="r"),
    "inv": lambda a: np.linalg.inv(a),
    "det": lambda a: np.asarray(np.linalg.det(a)),
    "diagonal": lambda x, offset: np.array(np.diagonal(x, offset, axis1=-2, axis2=-1)),
    "trace": lambda x, offset, dtype: np.asarray(
        np.trace(x, offset, axis1=-2, axis2=-1, dtype=dtype)),
    "fft": _fft,
    "cross": lambda a, b, axis: np.linalg.cross(a, b, axis=axis),
    "eigh": lambda a, part: np.linalg.eigh(a)[part],
    "eigvalsh": lambda a: np.linalg.eigvalsh(a),
    "matrix_norm": lambda a, keepdims, ord: np.asarray(  # noqa: A006 - numpy's name
        np.linalg.matrix_norm(a, keepdims=keepdims, ord=ord)),
    "matrix_power": lambda a, n: np.linalg.matrix_power(a, n),
    "matrix_rank": lambda a, rtol=None: np.asarray(np.linalg.matrix_rank(a, rtol=rtol)),
    "pinv": lambda a, rtol=None: np.linalg.pinv(a, rtol=rtol),
    "slogdet": lambda a, part: np.asarray(np.linalg.slogdet(a)[part]),
    "svd": lambda a, full_matrices, part: np.linalg.svd(a, full_matrices=full_matrices)[part],
    "svdvals": lambda a: np.linalg.svdvals(a),
}
"""Every whole-array operation by name: ``fn(*arrays, *params) -> ndarray``."""


def apply_whole(op: tuple, *arrays: np.ndarray) -> np.ndarray:
    """Apply ``op = (name, *params)`` to ``arrays``. numpy's ``LinAlgError`` (a singular
    matrix) is raised as :class:`~tensorc.errors.LinAlgError`, with numpy's message."""
    name, *params = op
    try:
        return np.asarray(WHOLE_OPERATIONS[name](*arrays, *params))
    except np.linalg.LinAlgError as err:
        if isinstance(err, LinAlgError):
            raise
        raise LinAlgError(str(err)) from err
