"""Operations whose result shape depends on the data: ``unique_values``, ``unique_counts``,
``unique_inverse``, ``unique_all``, ``nonzero`` and boolean-mask selection (``x[mask]``).

Contract: each one is a *synchronisation point*, run at the call, not lazily. A planned
program must know every shape before it runs, and a ``deferred`` node
(:mod:`tensorc.lazy.graph`) must know its shape up front, so neither fits. Instead the
lazy program is cut at the operation:

1. its operands are evaluated now, as one array program (:func:`~tensorc.lazy.evaluate.
   evaluate_graph`: on Ray where the data is, nothing gathered);
2. the operation runs on their values through the session's executor
   (:meth:`~tensorc.runtime.executor.Executor.select`, ``unique``, ``nonzero``: numpy in
   this process; on Ray block by block on the nodes holding the blocks, the result left
   distributed, :mod:`tensorc.runtime.ray.data_dependent`);
3. each result is an evaluated ``tc.Array`` (a leaf), so everything after the cut stays
   lazy and builds on it: ``(x[x > 0.5] * 2).sum()`` evaluates ``x > 0.5`` and ``x`` at
   the indexing, and the product and sum when asked.

``explain()`` of a result names the synchronisation point and shows the program evaluated
there (:func:`sync_point`); a later program lists such an input as coming from it.

numpy 2's semantics: ``unique_*`` as ``np.unique_values`` and friends (``equal_nan=False``:
each NaN is its own value), with values *sorted* as ``np.unique`` sorts them (NaNs last) —
numpy 2.4's ``np.unique_values`` may give integers in hash order, which the standard allows;
indices, counts and inverse indices are int64, the inverse in ``x``'s shape. ``nonzero``
returns a tuple of 1-d int64 arrays (a 0-d ``x`` raises ``ValueError`` as in numpy 2).
``x[mask]`` takes a boolean mask of ``x``'s leading dimensions (or all of them), first in
the key and followed by anything basic (``x[mask, :]``, ``x[mask, ..., 1:3]``); a 0-d mask
(or ``True``/``False``) adds a dimension of length 1 or 0 as numpy does.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import NamedTuple

import numpy as np

from tensorc import session
from tensorc.lazy import evaluate
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.graph import ArrayNode, leaf
from tensorc.lazy.manipulation import expand_dims


class UniqueAllResult(NamedTuple):
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    values: Array
    inverse_indices: Array


_SYNC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Result node -> (operation, description of the program evaluated at the cut)."""

_BY_VALUE: dict[int, tuple] = {}
"""id(result value) -> (weak reference to the value, operation): inputs of later programs."""


def _describe(name: str, operands: list[ArrayNode]) -> str:
    lines = [f"synchronisation point of {name}: its operands were evaluated at the call, "
             "then its result shape became known"]
    for k, node in enumerate(operands):
        found = evaluate.last_program(node)
        what = f"  operand {k}: {node.dtype}{list(node.shape)}"
        if found is None:
            lines.append(what + ", a value already evaluated (no program)")
            continue
        lowered, where, stats = found
        lines.append(what + f", evaluated by a program of {len(lowered.unrolled.statements)} "
                     f"statement(s) on backend {where}:")
        lines.extend(f"    == {st.text}   # {st.dtype}{list(st.shape)}"
                     for st in lowered.unrolled.statements)
    return "\n".join(lines)


def _results(name: str, operands: list[ArrayNode], values) -> list[Array]:
    described = _describe(name, operands)
    for key in [k for k, (ref, _) in _BY_VALUE.items() if ref() is None]:
        del _BY_VALUE[key]
    out = []
    for value in values:
        node = leaf(value)
        _SYNC[node] = (name, described)
        with contextlib.suppress(TypeError):  # a value without weak references: no note
            _BY_VALUE[id(value)] = (weakref.ref(value), name)
        out.append(wrap(node))
    return out


def sync_point(expr: ArrayNode) -> str | None:
    """What ``explain()`` shows of a result of a synchronisation point (``None`` for any
    other node)."""
    found = _SYNC.get(expr)
    return None if found is None else found[1]


def sync_input(value) -> str | None:
    """The operation whose synchronisation point made ``value`` (an input of a later
    program), if one did."""
    found = _BY_VALUE.get(id(value))
    return found[1] if found is not None and found[0]() is value else None


def _evaluated(*arrays) -> list[ArrayNode]:
    nodes = [expr_of(a) for a in arrays]
    evaluate.evaluate_graph(nodes)
    return nodes


def _executor():
    return session.current().executor


def unique_values(x, /) -> Array:
    (node,) = _evaluated(x)
    (values,) = _executor().unique(node.value, "values")
    return _results("unique_values", [node], [values])[0]


def unique_counts(x, /) -> UniqueCountsResult:
    (node,) = _evaluated(x)
    found = _executor().unique(node.value, "counts")
    return UniqueCountsResult(*_results("unique_counts", [node], found))


def unique_inverse(x, /) -> UniqueInverseResult:
    (node,) = _evaluated(x)
    found = _executor().unique(node.value, "inverse")
    return UniqueInverseResult(*_results("unique_inverse", [node], found))


def unique_all(x, /) -> UniqueAllResult:
    (node,) = _evaluated(x)
    found = _executor().unique(node.value, "all")
    return UniqueAllResult(*_results("unique_all", [node], found))


def nonzero(x, /) -> tuple[Array, ...]:
    node = expr_of(x)
    if node.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d("
                         "scalar).nonzero() instead.")
    _evaluated(node)
    return tuple(_results("nonzero", [node], _executor().nonzero(node.value)))


def select(x, mask, rest: tuple) -> Array:
    """``x[(mask, *rest)]``: ``mask`` a boolean ``Array`` first in the key, ``rest`` basic
    items (slices, integers, ``None``, ``...``) applied lazily to the selection."""
    node, mask_node = expr_of(x), expr_of(mask)
    k = mask_node.ndim
    if k > node.ndim:
        raise IndexError(f"too many indices for array: array is {node.ndim}-dimensional, "
                         f"but {k} were indexed")
    for axis, (m, n) in enumerate(zip(mask_node.shape, node.shape, strict=False)):
        if m != n and m != 0:  # numpy takes an empty mask axis (it selects nothing)
            raise IndexError(f"boolean index did not match indexed array along axis {axis}; "
                             f"size of axis is {n} but size of corresponding boolean axis "
                             f"is {m}")
    if 0 in mask_node.shape:  # selects nothing, whatever the data
        empty = np.empty((0, *node.shape[k:]), node.dtype)
        chosen = _results("boolean-mask selection x[mask]", [], [empty])[0]
    elif k == 0:  # numpy: a new axis of length 1 (True) or 0 (False)
        _evaluated(mask_node)
        chosen = scalar_mask(node, bool(np.asarray(mask_node.value)))
    else:
        _evaluated(node, mask_node)
        value = _executor().select(node.value, mask_node.value)
        chosen = _results("boolean-mask selection x[mask]", [node, mask_node], [value])[0]
    if all(item is Ellipsis or item == slice(None) for item in rest):
        return chosen
    return chosen[(slice(None), *rest)]


def scalar_mask(node: ArrayNode, keep: bool) -> Array:
    """``x[True]`` / ``x[False]``: ``x`` with a new first axis of length 1 or 0 (lazy: the
    shape does not depend on the data)."""
    widened = expand_dims(wrap(node), 0)
    return widened if keep else widened[0:0]
