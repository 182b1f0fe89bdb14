"""einsum and tensordot front end: numpy operands and options → a checked IR Function.

Contract: ``einsum_program(spec, dtypes, compute_dtype)`` lowers a checked
:class:`~tensorc.frontend.subscripts.EinsumSpec` into
``ReduceByKey(+, Map(#0 * … * #n, Join(Scan(in0), …)), key=output)`` — the same IR a ``.tc``
statement ``out[...] += in0[...] * …`` lowers to. Operands are named ``in0``, ``in1``, ….

``result_dtype`` answers numpy's dtype question exactly by asking numpy itself on tiny
stand-in operands (two elements per dimension, one where the operand has one), with the
caller's ``optimize``, so every dtype rule, ``dtype=``/``casting=`` check and ``out=`` casting
check is numpy's own (numpy's ``out=`` check depends on its path); the stand-ins cost
microseconds and the answer is cached per dtype and shape-pattern signature.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from tensorc.errors import TypeCheckError
from tensorc.frontend.subscripts import EinsumSpec
from tensorc.ir.keys import join_of, key_of
from tensorc.ir.nodes import Function, InputDecl, Map, ReduceByKey, Scan, mul_of_args


def operand_name(position: int) -> str:
    return f"in{position}"


def einsum_program(
    spec: EinsumSpec, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[str], compute_dtype: str
) -> Function:
    """The element-level IR of one einsum."""
    decls = tuple(
        InputDecl(operand_name(k), tuple(shape), str(dtype))
        for k, (shape, dtype) in enumerate(zip(shapes, dtypes, strict=True))
    )
    scans = tuple(Scan(d.name, names) for d, names in zip(decls, spec.inputs, strict=True))
    if len(scans) == 1:
        body = Map(mul_of_args(1), scans[0], tuple(dict.fromkeys(spec.inputs[0])))
    else:
        join = join_of(scans)
        body = Map(mul_of_args(len(scans)), join, key_of(join))
    output = ReduceByKey("+", body, spec.output)
    return Function(decls, spec.sizes, output, compute_dtype)


@lru_cache(maxsize=1024)
def _numpy_result_dtype(
    subscripts: str,
    stand_ins: tuple[tuple[tuple[int, ...], str], ...],
    dtype: str | None,
    casting: str,
    out_dtype: str | None,
    optimize: object,
) -> tuple[str, str]:
    operands = [np.zeros(shape, dtype=d) for shape, d in stand_ins]
    kwargs: dict = {"casting": casting}
    if dtype is not None:
        kwargs["dtype"] = dtype
    result = np.einsum(subscripts, *operands, **kwargs)
    if dtype is not None and result.dtype != np.dtype(dtype):
        # numpy returns a one-operand view einsum (``ij->ji``) as a view of the operand,
        # ignoring dtype=; tensorc honours it, checked by numpy's casting rule
        if not np.can_cast(operands[0].dtype, dtype, casting):
            raise TypeError(f"Cannot cast einsum operand 0 from dtype('{operands[0].dtype}') "
                            f"to dtype('{np.dtype(dtype)}') according to the rule {casting!r}")
        result = result.astype(dtype)
    if out_dtype is not None:
        out = np.zeros(np.shape(result), dtype=out_dtype)
        try:
            np.einsum(subscripts, *operands, out=out, optimize=_thaw(optimize), **kwargs)
        except (ValueError, RuntimeError):  # a path numpy cannot take: its default rule
            np.einsum(subscripts, *operands, out=out, **kwargs)
    compute = dtype if dtype is not None else str(result.dtype)
    return str(result.dtype), compute


def _pattern(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(1 if d == 1 else 2 for d in shape)


def _thaw(optimize: object) -> object:
    return list(optimize) if isinstance(optimize, tuple) else optimize


def result_dtype(
    subscripts: str,
    arrays: Sequence[np.ndarray],
    dtype: object,
    casting: str,
    out: np.ndarray | None,
    out_ndim: int,
    optimize: object = False,
) -> tuple[np.dtype, np.dtype]:
    """``(result dtype, compute dtype)`` exactly as numpy.einsum decides them; ``optimize``
    in numpy's form (it decides numpy's ``out=`` casting check).

    Raises:
        TypeCheckError: numpy refuses the combination (``dtype=``/``casting=``/``out=``).
    """
    for position, array in enumerate(arrays):
        if array.dtype.kind not in "biufc":
            raise TypeCheckError(
                f"operand {position} has dtype {array.dtype}; tensorc computes with numeric "
                "dtypes (bool, integer, floating, complex)"
            )
    key_dtype = None if dtype is None else str(np.dtype(dtype))
    stand_ins = tuple((_pattern(a.shape), a.dtype.str) for a in arrays)
    if isinstance(optimize, list):
        optimize = tuple(tuple(s) if isinstance(s, list) else s for s in optimize)
    try:
        result, compute = _numpy_result_dtype(
            subscripts,
            stand_ins,
            key_dtype,
            casting,
            None if out is None else out.dtype.str,
            optimize if out is not None else False,
        )
    except TypeError as err:
        raise TypeCheckError(str(err)) from err
    return np.dtype(result), np.dtype(compute)
