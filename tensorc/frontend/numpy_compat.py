"""numpy.einsum's argument conventions that sit outside subscripts and shapes.

- :func:`normalise_order`: ``order=`` as numpy takes it (one letter, any case);
- :func:`allocate`: the memory order of the result, numpy's own
  answer: ``C``/``F`` as asked, ``A`` Fortran when every operand is, ``K`` the axis order
  numpy's iterator picks from the operands' strides (asked of ``numpy.einsum`` on tiny
  stand-ins with the operands' stride order, cached per stride-order signature);
- :func:`numpy_optimize`: ``optimize`` as numpy takes it, so that
  :func:`~tensorc.frontend.einsum.result_dtype` asks numpy's own ``out=`` casting rule, which
  depends on it: numpy's single einsum loop (``optimize=False``) checks ``casting``, its
  pairwise path often writes the last product into ``out`` by assignment and checks nothing
  (numpy's gh-31350 test relies on that);
- :func:`delegate_to_numpy`: object operands, whose arithmetic is Python's, are computed by
  ``numpy.einsum`` itself (tensorc's kernels are for numeric dtypes).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from tensorc.errors import ArgumentError, ParseError

ORDERS = ("K", "A", "C", "F")


def normalise_order(order: object) -> str:
    """numpy accepts ``order`` as one letter in either case (``None`` is ``K``)."""
    if order is None:
        return "K"
    if isinstance(order, str) and len(order) == 1 and order.upper() in ORDERS:
        return order.upper()
    raise ParseError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")


def check_out(out: object) -> None:
    if out is not None and not isinstance(out, np.ndarray):
        raise ArgumentError(f"out must be a numpy.ndarray, got {type(out).__name__}")


def _stride_signature(array: np.ndarray) -> object:
    """What decides numpy's K order about one operand: ``"C"`` for C-contiguous arrays,
    else the axes from the largest absolute stride down and which axes have size 1."""
    if array.flags.c_contiguous:
        return "C"
    strides = [abs(s) for s in array.strides]
    order = tuple(sorted(range(array.ndim), key=lambda k: -strides[k]))
    return order, tuple(d == 1 for d in array.shape)


@lru_cache(maxsize=4096)
def _k_axes(subscripts: str, signatures: tuple, ndims: tuple[int, ...]) -> tuple[int, ...]:
    """The result's axes from outermost to innermost in memory under numpy's ``order='K'``."""
    stand_ins = []
    for signature, ndim in zip(signatures, ndims, strict=True):
        if signature == "C":
            stand_ins.append(np.zeros((2,) * ndim, dtype=np.int8))
            continue
        order, ones = signature
        shape = [1 if ones[k] else 2 for k in range(ndim)]
        outer_first = np.zeros([shape[k] for k in order], dtype=np.int8)
        stand_ins.append(outer_first.transpose(np.argsort(order)))
    try:
        result = np.asarray(np.einsum(subscripts, *stand_ins, order="K"))
    except ValueError:  # sizes of 2 against size-1 broadcasting the stand-ins cannot show
        return tuple(range(len(np.asarray(np.einsum(subscripts, *[
            np.zeros((1,) * n, dtype=np.int8) for n in ndims])).shape)))
    strides = [abs(s) if d > 1 else 0 for s, d in zip(result.strides, result.shape, strict=True)]
    return tuple(sorted(range(result.ndim), key=lambda k: (-strides[k], k)))


def allocate(shape: tuple[int, ...], dtype, order: str, arrays: Sequence[np.ndarray],
             subscripts: str) -> np.ndarray:
    """An empty result in numpy's memory order for ``order`` (see the module docstring)."""
    if order == "C" or len(shape) < 2:
        return np.empty(shape, dtype=dtype)
    if order == "F":
        return np.empty(shape, dtype=dtype, order="F")
    if order == "A":
        fortran = all(a.flags.f_contiguous for a in arrays)
        return np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    signatures = tuple(_stride_signature(a) for a in arrays)
    axes = _k_axes(subscripts, signatures, tuple(a.ndim for a in arrays))
    if axes == tuple(range(len(shape))):
        return np.empty(shape, dtype=dtype)
    outer_first = np.empty([shape[k] for k in axes], dtype=dtype)
    return outer_first.transpose(np.argsort(axes))


def delegate_to_numpy(arrays: Sequence[np.ndarray]) -> bool:
    """Whether the call is numpy's to compute: an operand of object dtype."""
    return any(a.dtype.kind == "O" for a in arrays)


def numpy_optimize(optimize: object) -> object:
    """``optimize`` in a form numpy.einsum takes (tensorc's ``"auto"`` is numpy's default)."""
    if optimize == "auto":
        return False
    if isinstance(optimize, str) and optimize not in ("greedy", "optimal"):
        return True
    return optimize
