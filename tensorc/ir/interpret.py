"""The numpy reference interpreter for the IR: slow, obvious, and the oracle for passes.

``interpret(program, arrays)`` evaluates the element-level IR directly with numpy: every node
becomes an ndarray whose axes follow the node's key. Tests assert that a pass leaves the
interpreted value unchanged (``interpret(before) == interpret(after)``). It materialises joins
by broadcasting, so use it on small shapes only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from tensorc.ir.keys import key_of
from tensorc.ir.nodes import (
    Function,
    Join,
    Map,
    Merge,
    Node,
    ReduceByKey,
    Scan,
    post_order,
)
from tensorc.ir.semantics import MONOID_UFUNCS, align, evaluate_map_expr


class _Context:
    """What every rule needs besides the environment: inputs, index sizes, dtype."""

    def __init__(self, program: Function, arrays: Mapping[str, np.ndarray]) -> None:
        self.arrays = arrays
        self.sizes = program.size_of
        self.dtype = np.dtype(program.dtype)

    def full_shape(self, names: tuple[str, ...]) -> tuple[int, ...]:
        return tuple(self.sizes[n] for n in names)


class _Joined:
    """A joined tuple of values, each broadcast to the join's key."""

    def __init__(self, values: list[np.ndarray]) -> None:
        self.values = values


def _scan(node: Scan, env: dict, ctx: _Context):
    array = np.asarray(ctx.arrays[node.tensor])
    letters = {}
    for name in node.indices:
        letters.setdefault(name, chr(ord("a") + len(letters)))
    sub = "".join(letters[n] for n in node.indices) + "->" + "".join(letters.values())
    return np.einsum(sub, array).astype(ctx.dtype, copy=False)


def _join(node: Join, env: dict, ctx: _Context):
    key = key_of(node)
    values = []
    for child in node.inputs:
        value = env[child]
        assert not isinstance(value, _Joined), "joins are flat"
        values.append(align(value, key_of(child), key))
    return _Joined(values)


def _map(node: Map, env: dict, ctx: _Context):
    source = env[node.x]
    values = source.values if isinstance(source, _Joined) else [source]
    key = key_of(node.x)
    result = np.asarray(evaluate_map_expr(node.fn, values, ctx.dtype), dtype=ctx.dtype)
    result = np.broadcast_to(result, ctx.full_shape(key))
    return align(result, key, node.key)


def _reduce(node: ReduceByKey, env: dict, ctx: _Context):
    value = env[node.x]
    if isinstance(value, _Joined):
        raise TypeError("reduce_by_key over a join needs a map in between")
    have = key_of(node.x)
    dropped = tuple(k for k, name in enumerate(have) if name not in node.key)
    ufunc = MONOID_UFUNCS[node.monoid]
    full = np.broadcast_to(value, ctx.full_shape(have))
    reduced = ufunc.reduce(full, axis=dropped, dtype=ctx.dtype) if dropped else full
    kept = tuple(name for name in have if name in node.key)
    return np.array(align(reduced, kept, node.key), order="C")


def _merge(node: Merge, env: dict, ctx: _Context):
    old, new = env[node.old], env[node.new]
    aligned = align(new, key_of(node.new), key_of(node.old))
    return MONOID_UFUNCS[node.monoid](old, aligned, dtype=ctx.dtype)


INTERPRET_RULES: dict[type, Callable] = {
    Scan: _scan,
    Join: _join,
    Map: _map,
    ReduceByKey: _reduce,
    Merge: _merge,
}

def interpret(program: Function, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """Evaluate ``program`` on named numpy ``arrays``; axes of the result follow its key."""
    ctx = _Context(program, arrays)
    env: dict[Node, object] = {}
    for node in post_order(program.output):
        env[node] = INTERPRET_RULES[type(node)](node, env, ctx)
    result = env[program.output]
    if isinstance(result, _Joined):
        raise TypeError("a program cannot return a bare join")
    return np.broadcast_to(result, ctx.full_shape(key_of(program.output))).copy()
