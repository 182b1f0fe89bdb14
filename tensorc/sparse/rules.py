"""The decisions of a sparse statement that need no data: its result type, its steps, and
its blocking by non-zeros.

Contract:

- :func:`sparse_result` is the result-type rule (the README's): a 0-d result is a numpy
  scalar; otherwise the result is sparse when every operand that is not a scalar is
  sparse, or when some sparse operand's indices all appear in the output (its zeros survive
  into the result: ``ij,ij->ij``, ``ij,j->ij``, ``ij,ik,jk->ij``); else it is dense.
- :func:`plan_steps` splits the statement into steps over the value list (opt_einsum's
  linear path format): one step for one or two operands, and for several operands with
  only one sparse (MTTKRP); several operands with two or more sparse are contracted pairwise
  along opt_einsum's path (``greedy``, or ``optimal`` when asked; ``optimize=False`` keeps
  one step), each intermediate sparse by the same rule applied to its step.
- :func:`nnz_blocking` is the default blocking: only one index is split, the first index of
  the sparse operand with the most non-zeros that is also an output index (so blocks of the
  result are disjoint and need no reduction), into enough blocks that each holds at most
  :data:`BLOCK_NNZ` of its non-zeros and at least one per worker (rounded to a multiple of
  the workers); an operand under :data:`SPLIT_NNZ` non-zeros stays one block, and so does
  a product of two sparse operands whose expected multiply-adds (:func:`product_work`) are
  under :data:`SPLIT_NNZ`: a chain's first products (64 walks times a million-edge graph)
  gain nothing from cutting the graph by columns, which converts its blocks in every
  call. A CSR matrix
  or row-major coordinates whose partial results stay small are split along their first
  dimension instead, even when it is summed over (:func:`split_index`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import opt_einsum as oe

from tensorc.codegen.blocking import Blocking
from tensorc.codegen.kernels import equation
from tensorc.codegen.sparse_lower import SparseStep
from tensorc.frontend.subscripts import EinsumSpec

BLOCK_NNZ = 1 << 18
"""Non-zeros of one block the default blocking aims at (a 3-d COO block of about 8 MB)."""
SPLIT_NNZ = 1 << 16
"""Sparse operands with fewer non-zeros stay one block."""


def _keys(spec: EinsumSpec) -> list[tuple[str, ...]]:
    return [tuple(dict.fromkeys(k)) for k in spec.inputs]


def sparse_result(spec: EinsumSpec, sparse: Sequence[bool]) -> bool:
    """Whether the statement's result is sparse (see the module docstring)."""
    if not spec.output:
        return False
    output = set(spec.output)
    operands = [(set(k), s) for k, s in zip(spec.inputs, sparse, strict=True) if k or s]
    if all(s for _, s in operands):
        return True
    return any(s and names <= output for names, s in operands)


def _step_sparse(keys: Sequence[tuple[str, ...]], sparse: Sequence[bool],
                 output: tuple[str, ...]) -> bool:
    if not output:
        return False
    if all(s for k, s in zip(keys, sparse, strict=True) if k or s):
        return True
    return any(s and set(k) <= set(output) for k, s in zip(keys, sparse, strict=True))


def plan_steps(spec: EinsumSpec, sparse: Sequence[bool], result_sparse: bool,
               optimize: object) -> list[SparseStep]:
    """The statement's steps (see the module docstring)."""
    count = len(spec.inputs)
    everything = SparseStep(tuple(range(count)), tuple(spec.output), result_sparse)
    if count <= 2 or sum(sparse) <= 1 or optimize is False:
        return [everything]
    keys = _keys(spec)
    sizes = spec.size_of
    shapes = [tuple(sizes[n] for n in k) for k in keys]
    how = "optimal" if optimize == "optimal" else "greedy"
    path, _ = oe.contract_path(equation(keys, spec.output), *shapes, shapes=True,
                               optimize=how)
    values = list(zip(keys, sparse, strict=True))
    steps = []
    for number, taken in enumerate(path):
        taken = tuple(sorted(taken))
        inputs = [values[t] for t in taken]
        rest = [v for k, v in enumerate(values) if k not in taken]
        last = number == len(path) - 1
        if last:
            output, out_sparse = tuple(spec.output), result_sparse
        else:
            needed = {n for k, _ in rest for n in k} | set(spec.output)
            output = tuple(dict.fromkeys(n for k, _ in inputs for n in k if n in needed))
            out_sparse = _step_sparse([k for k, _ in inputs], [s for _, s in inputs], output)
        steps.append(SparseStep(taken, output, out_sparse))
        values = [*rest, (output, out_sparse)]
    return steps


def nnz_blocking(spec: EinsumSpec, nonzeros: dict[int, int], workers: int,
                 counts: dict[str, int] | None = None,
                 rows_first: dict[int, int] | None = None) -> Blocking:
    """The default blocking (see the module docstring); ``nonzeros``: operand position →
    its non-zeros; ``counts`` forces blocks per index (a refinement); ``rows_first``: see
    :func:`split_index` (its values: the blocks a split along that operand's summed first
    dimension makes, at most the default count)."""
    rows_first = rows_first or {}
    sizes = spec.size_of
    block = {name: max(size, 1) for name, size in sizes.items()}
    if counts is None:
        counts = {}
        split = split_index(spec, nonzeros, frozenset(rows_first))
        if split is not None:
            count = split_count(max(nonzeros.values()), workers)
            if split not in spec.output:
                chosen = [c for p, c in rows_first.items() if spec.inputs[p][0] == split]
                if chosen:
                    count = min(count, *chosen)
            counts[split] = count
    for name, count in counts.items():
        count = min(max(1, count), max(sizes[name], 1))
        block[name] = max(1, math.ceil(sizes[name] / count))
    ordered = tuple(sorted(sizes.items()))
    return Blocking(sizes=ordered, block=tuple((n, block[n]) for n, _ in ordered))


def split_count(nnz: int, workers: int, block_nnz: int = BLOCK_NNZ) -> int:
    """The blocks the default blocking cuts an operand of ``nnz`` non-zeros into: at most
    ``block_nnz`` (:data:`BLOCK_NNZ`) each and at least one per worker, a multiple of the
    workers."""
    wanted = max(math.ceil(nnz / block_nnz), workers)
    return math.ceil(wanted / workers) * workers


def product_work(spec: EinsumSpec, nonzeros: dict[int, int]) -> float | None:
    """The expected multiply-adds of a matrix-like product of two sparse operands (each with
    an index of its own, every shared index summed; non-zeros spread evenly): ``nnz(a) ·
    nnz(b)`` over the size of the indices they share; ``None`` for any other statement (an
    element-wise product's work is its operands' entries, not their overlap)."""
    if len(spec.inputs) != 2 or sorted(nonzeros) != [0, 1]:
        return None
    first, second = set(spec.inputs[0]), set(spec.inputs[1])
    shared = first & second
    if not shared or shared & set(spec.output) or first <= second or second <= first:
        return None
    return nonzeros[0] * nonzeros[1] / max(1, math.prod(spec.size_of[n] for n in shared))


def split_index(spec: EinsumSpec, nonzeros: dict[int, int],
                rows_first: frozenset[int] = frozenset()) -> str | None:
    """The index the default blocking splits, or ``None`` (nothing worth splitting). An
    operand position in ``rows_first`` (a CSR matrix or row-major coordinates whose partial
    results, one per block, stay small) is split along its first dimension even when that
    is summed over: those blocks are slices of it, while a cut along another dimension
    converts or sorts it (SpMV ``ij,i->j`` of a million entries: 98 ms a call cut by
    columns, 5.8 ms by rows with the partial vectors summed)."""
    if not nonzeros or max(nonzeros.values()) < SPLIT_NNZ:
        return None
    work = product_work(spec, nonzeros)
    if work is not None and work < SPLIT_NNZ:
        return None
    position = max(nonzeros, key=lambda k: (nonzeros[k], -k))
    sizes = spec.size_of
    indices = [n for n in spec.inputs[position] if sizes[n] > 1]
    if position in rows_first and indices and indices[0] == spec.inputs[position][0]:
        return indices[0]
    preferred = [n for n in indices if n in spec.output]
    return (preferred or indices or [None])[0]
