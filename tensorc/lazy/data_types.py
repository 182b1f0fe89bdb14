"""The standard's data types and data type functions (numpy's dtypes and rules)."""

from __future__ import annotations

import builtins
from dataclasses import dataclass

import numpy as np

from tensorc.errors import TypeCheckError
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.graph import ArrayNode, NodeKind

bool = np.dtype("bool")  # noqa: A001 - the standard's name
int8, int16, int32, int64 = (np.dtype(f"int{n}") for n in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (np.dtype(f"uint{n}") for n in (8, 16, 32, 64))
float32, float64 = np.dtype("float32"), np.dtype("float64")
complex64, complex128 = np.dtype("complex64"), np.dtype("complex128")

KINDS = {
    "bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
    "real floating": "f", "complex floating": "c", "numeric": "iufc",
}


def astype(x, dtype, /, *, copy: builtins.bool = True, device=None) -> Array:
    """``x`` converted to ``dtype`` (a ``cast`` node); ``x`` itself when it already has the
    dtype and ``copy`` is false, else a new array (so ``x[key] = value`` later leaves it
    alone)."""
    node = expr_of(x)
    dtype = np.dtype(dtype)
    if node.dtype == dtype:
        return x if isinstance(x, Array) and not copy else wrap(node)
    return wrap(ArrayNode(NodeKind.CAST, None, (node,), None, node.shape, dtype))


def can_cast(from_, to, /) -> builtins.bool:
    """Whether ``from_`` (a dtype or an array) casts to ``to`` by the promotion rules."""
    source = from_.dtype if hasattr(from_, "dtype") else from_
    return builtins.bool(np.can_cast(np.dtype(source), np.dtype(to), casting="safe"))


@dataclass(frozen=True)
class FInfo:
    """The standard's ``finfo`` object: Python numbers, and the real ``dtype`` (a complex
    type's is the type of its parts)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


def finfo(type, /) -> FInfo:  # noqa: A002 - the standard's name
    info = np.finfo(type.dtype if hasattr(type, "dtype") else type)
    return FInfo(bits=int(info.bits), eps=float(info.eps), max=float(info.max),
                 min=float(info.min), smallest_normal=float(info.smallest_normal),
                 dtype=np.dtype(info.dtype))


def iinfo(type, /):  # noqa: A002 - the standard's name
    return np.iinfo(type.dtype if hasattr(type, "dtype") else type)


def isdtype(dtype, kind) -> builtins.bool:
    """Whether ``dtype`` is of ``kind`` (a dtype, a kind name, or a tuple of them)."""
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in KINDS:
            raise TypeCheckError(f"unknown dtype kind {kind!r}; kinds are {', '.join(KINDS)}")
        return np.dtype(dtype).kind in KINDS[kind]
    return np.dtype(dtype) == np.dtype(kind)


def result_type(*arrays_and_dtypes):
    """The dtype numpy's (and the standard's) promotion gives."""
    values = [a.dtype if isinstance(a, Array) else a for a in arrays_and_dtypes]
    return np.result_type(*values)
