"""Contractions: ``matmul``/``@``, ``tensordot``, ``vecdot``, ``matrix_transpose`` and
:func:`lazy_einsum` (what ``tc.einsum`` builds for lazy operands). Each is one ``contract``
node (a sum of products over named indices), so its statement runs as BLAS block products
and its operands' transposes are free."""

from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.frontend.subscripts import parse_einsum, sublist_to_subscripts
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.elementwise import conj
from tensorc.lazy.graph import ArrayNode, NodeKind, broadcast_shapes
from tensorc.lazy.manipulation import expand_dims, matrix_transpose, squeeze

__all__ = ["lazy_einsum", "matmul", "matrix_transpose", "tensordot", "vecdot"]


def contract(nodes: list[ArrayNode], letters: list[tuple[str, ...]],
             output: tuple[str, ...]) -> Array:
    """The sum over every index not in ``output`` of the product of ``nodes``."""
    sizes: dict[str, int] = {}
    for node, subs in zip(nodes, letters, strict=True):
        for name, extent in zip(subs, node.shape, strict=True):
            if sizes.setdefault(name, extent) != extent:
                raise ShapeError(f"index {name!r} has extents {sizes[name]} and {extent}")
    dtype = np.result_type(*(n.dtype for n in nodes))
    shape = tuple(sizes[n] for n in output)
    params = (tuple(tuple(s) for s in letters), tuple(output))
    return wrap(ArrayNode(NodeKind.CONTRACT, None, tuple(nodes), params, shape, dtype))


def lazy_einsum(subscripts, *operands) -> Array:
    """``numpy.einsum`` semantics, lazily (one contraction node)."""
    if not isinstance(subscripts, str):
        subscripts, operands = sublist_to_subscripts((subscripts, *operands))
    nodes = [expr_of(op) for op in operands]
    spec = parse_einsum(subscripts, [n.shape for n in nodes])
    return contract(nodes, list(spec.inputs), spec.output)


def matmul(x1, x2, /) -> Array:
    a, b = expr_of(x1), expr_of(x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError("matmul takes arrays of at least one dimension, not 0-d")
    if a.ndim == 1 and b.ndim == 1:
        if a.shape != b.shape:
            raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} do not align")
        return contract([a, b], [("k",), ("k",)], ())
    va, vb = a.ndim == 1, b.ndim == 1
    if va and b.ndim == 2:
        return contract([a, b], [("k",), ("k", "n")], ("n",))
    if vb and a.ndim == 2:
        return contract([a, b], [("m", "k"), ("k",)], ("m",))
    if va:
        a = expand_dims(a, 0)._expr  # noqa: SLF001
    if vb:
        b = expand_dims(b, 1)._expr  # noqa: SLF001
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"matmul: shapes {expr_of(x1).shape} and {expr_of(x2).shape} do not "
                         f"align ({a.shape[-1]} != {b.shape[-2]})")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    names = tuple(f"b{k}" for k in range(len(batch)))

    def batch_names(node: ArrayNode, tag: str) -> tuple[str, ...]:
        offset = len(batch) - (node.ndim - 2)
        return tuple(f"b{offset + d}~{tag}" if n == 1 and batch[offset + d] != 1
                     else f"b{offset + d}" for d, n in enumerate(node.shape[:-2]))

    result = contract([a, b], [(*batch_names(a, "a"), "m", "k"), (*batch_names(b, "b"), "k", "n")],
                      (*names, "m", "n"))
    if va:
        result = squeeze(result, -2)
    if vb:
        result = squeeze(result, -1)
    return result


def tensordot(x1, x2, /, *, axes=2) -> Array:
    a, b = expr_of(x1), expr_of(x2)
    if isinstance(axes, int):
        if axes < 0 or axes > min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot: axes={axes} for arrays of {a.ndim} and {b.ndim} dims")
        pairs = (tuple(range(a.ndim - axes, a.ndim)), tuple(range(axes)))
    else:
        pairs = (tuple(axes[0]), tuple(axes[1]))
        if len(pairs[0]) != len(pairs[1]):
            raise ShapeError("tensordot: the two axes lists differ in length")
    sa = [f"a{d}" for d in range(a.ndim)]
    sb = [f"b{d}" for d in range(b.ndim)]
    for k, (da, db) in enumerate(zip(*pairs, strict=True)):
        if a.shape[da] != b.shape[db]:
            raise ShapeError(f"tensordot: axis {da} of the first ({a.shape[da]}) does not match "
                             f"axis {db} of the second ({b.shape[db]})")
        sa[da] = sb[db] = f"s{k}"
    output = tuple(n for n in sa if not n.startswith("s")) + tuple(
        n for n in sb if not n.startswith("s"))
    return contract([a, b], [tuple(sa), tuple(sb)], output)


def vecdot(x1, x2, /, *, axis=-1) -> Array:
    a, b = expr_of(x1), expr_of(x2)
    if a.dtype.kind == "c":
        a = conj(wrap(a))._expr  # noqa: SLF001
    shape = broadcast_shapes(a.shape, b.shape)
    n = len(shape)
    axis = axis % n if n else 0
    if a.shape[axis - n] != b.shape[axis - n] if n else False:
        raise ShapeError(f"vecdot: axis {axis} has {a.shape[axis - n]} and {b.shape[axis - n]}")
    names = [f"d{k}" for k in range(n)]

    def subs(node: ArrayNode, tag: str) -> tuple[str, ...]:
        offset = n - node.ndim
        return tuple(f"d{offset + d}~{tag}" if e == 1 and shape[offset + d] != 1 and
                     offset + d != axis else f"d{offset + d}" for d, e in enumerate(node.shape))

    output = tuple(x for k, x in enumerate(names) if k != axis)
    return contract([a, b], [subs(a, "a"), subs(b, "b")], output)

