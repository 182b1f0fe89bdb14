"""Contraction algebra: what an einsum step computes, independent of any cost or plan.

Keys are tuples of index names. A *path* is opt_einsum's linear format: a sequence of
position tuples into the shrinking operand list (``((1, 2), (0, 1))``). These helpers say
which operands each step of a path takes, the key of each intermediate, how many operations
a step does and whether opt_einsum runs a pair as BLAS. Codegen uses them to build kernels
and the cost model to price them, so both see the same steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from opt_einsum import get_symbol
from opt_einsum.blas import can_blas

Key = tuple[str, ...]


def volume(key: Sequence[str], sizes: dict[str, int]) -> int:
    """Number of elements of a tensor keyed by ``key``."""
    return math.prod(sizes[name] for name in key)


def flops_per_element(inputs: Sequence[Key], output: Key) -> int:
    """Operations per element of the joined index space of one einsum step: ``n - 1``
    multiplies plus one add when an index is summed (so a GEMM is 2·m·n·k in all and a sum
    over one operand is its volume)."""
    union = {name for key in inputs for name in key}
    return (len(inputs) - 1) + (1 if union - set(output) else 0)


def contraction_flops(inputs: Sequence[Key], output: Key, sizes: dict[str, int]) -> int:
    """Floating-point operations of one einsum step (see :func:`flops_per_element`)."""
    union = {name for key in inputs for name in key}
    return volume(sorted(union), sizes) * flops_per_element(inputs, output)


def uses_blas(inputs: Sequence[Key], output: Key) -> bool:
    """Whether opt_einsum hands this pairwise step to BLAS."""
    if len(inputs) != 2:
        return False
    union = sorted({name for key in inputs for name in key})
    removed = set(union) - set(output)
    if not removed:
        return False
    symbol = {name: get_symbol(k) for k, name in enumerate(union)}

    def text(key: Sequence[str]) -> str:
        return "".join(symbol[name] for name in key)

    kind = can_blas([text(inputs[0]), text(inputs[1])], text(output), frozenset(text(removed)))
    return kind in ("GEMM", "DOT", "TDOT")


def path_operands(count: int, path: Sequence[tuple[int, ...]]) -> list[list[int]]:
    """For each step of ``path`` (positions into the shrinking operand list), the operands it
    takes as stable numbers: ``0..count-1`` are the inputs, ``count + s`` is step ``s``'s
    result."""
    live = list(range(count))
    taken_per_step: list[list[int]] = []
    for number, step in enumerate(path):
        taken_per_step.append([live[p] for p in sorted(step)])
        for p in sorted(step, reverse=True):
            live.pop(p)
        live.append(count + number)
    return taken_per_step


def path_steps(
    inputs: Sequence[Key],
    output: Key,
    path: Sequence[tuple[int, ...]],
    sizes: dict[str, int],
) -> list[tuple[list[Key], Key]]:
    """The (step inputs, step output) of each step of ``path``; the last step yields ``output``.

    Intermediates are keyed in the memory order of the largest input, then the output's
    order, so the step that later meets the large operand can view both as matrices without
    copying (opt_einsum's own choice, ``kfj`` for MTTKRP, forces a transpose of X).
    """
    keys = [tuple(k) for k in inputs]
    largest = max(keys, key=lambda k: (volume(k, sizes), -keys.index(k)))
    reference = {n: r for r, n in enumerate(dict.fromkeys([*largest, *output, *sizes]))}
    remaining = list(keys)
    steps: list[tuple[list[Key], Key]] = []
    for count, pair in enumerate(path):
        taken = [remaining[p] for p in sorted(pair)]
        for p in sorted(pair, reverse=True):
            remaining.pop(p)
        if count == len(path) - 1 and not remaining:
            result = tuple(output)
        else:
            needed = {n for key in remaining for n in key} | set(output)
            union = {n for key in taken for n in key}
            result = tuple(sorted((n for n in union if n in needed), key=reference.__getitem__))
        steps.append((taken, result))
        remaining.append(result)
    return steps
