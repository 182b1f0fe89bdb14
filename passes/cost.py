"""One cost model for local planning decisions: seconds on this kind of machine.

Every choice the compiler makes between alternatives (contraction order, fused join versus
pairwise stages, block counts) asks this module, so the choices agree with each other. The
model is deliberately simple and its constants come from ``shared/docs/PERFORMANCE.md``:

- a contraction of blocks costs ``flops / rate + bytes / bandwidth``, where ``rate`` is the
  BLAS rate when opt_einsum can hand the pair to BLAS (GEMM/TDOT/DOT) and numpy's einsum loop
  rate otherwise, and ``bytes`` are its inputs plus its output;
- every task costs a fixed dispatch overhead;
- work spreads over ``workers`` cores, the overhead does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from opt_einsum.blas import can_blas

BLAS_FLOPS_PER_CORE = 50e9
EINSUM_FLOPS_PER_CORE = 2e9
MEMORY_BYTES_PER_SECOND = 14e9
DISPATCH_SECONDS = 40e-6

Key = tuple[str, ...]


def volume(key: Sequence[str], sizes: dict[str, int]) -> int:
    """Number of elements of a tensor keyed by ``key``."""
    return math.prod(sizes[name] for name in key)


def contraction_flops(inputs: Sequence[Key], output: Key, sizes: dict[str, int]) -> int:
    """Floating-point operations of one einsum step: ``n - 1`` multiplies per element of the
    joined index space plus one add when an index is summed (so a GEMM is 2·m·n·k and a
    sum over one operand is its volume)."""
    union = {name for key in inputs for name in key}
    summed = union - set(output)
    factor = (len(inputs) - 1) + (1 if summed else 0)
    return volume(sorted(union), sizes) * factor


def uses_blas(inputs: Sequence[Key], output: Key) -> bool:
    """Whether opt_einsum hands this pairwise step to BLAS."""
    if len(inputs) != 2:
        return False
    union = {name for key in inputs for name in key}
    removed = frozenset(union - set(output))
    if not removed:
        return False
    kind = can_blas(["".join(_chars(inputs[0], union)), "".join(_chars(inputs[1], union))],
                    "".join(_chars(output, union)), frozenset(_chars(sorted(removed), union)))
    return kind in ("GEMM", "DOT", "TDOT")


def _chars(key: Sequence[str], union: set[str]) -> list[str]:
    from opt_einsum import get_symbol

    alphabet = {name: get_symbol(k) for k, name in enumerate(sorted(union))}
    return [alphabet[name] for name in key]


def step_seconds(inputs: Sequence[Key], output: Key, sizes: dict[str, int], itemsize: int) -> float:
    """Modelled seconds of one einsum step on one core."""
    flops = contraction_flops(inputs, output, sizes)
    rate = BLAS_FLOPS_PER_CORE if uses_blas(inputs, output) else EINSUM_FLOPS_PER_CORE
    moved = itemsize * (sum(volume(k, sizes) for k in inputs) + volume(output, sizes))
    return flops / rate + moved / MEMORY_BYTES_PER_SECOND


def path_seconds(
    inputs: Sequence[Key],
    output: Key,
    path: Sequence[tuple[int, ...]],
    sizes: dict[str, int],
    itemsize: int,
) -> float:
    """Modelled seconds of a whole contraction path (opt_einsum's linear path format)."""
    return sum(s for s in path_steps_seconds(inputs, output, path, sizes, itemsize))


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


def path_steps_seconds(
    inputs: Sequence[Key],
    output: Key,
    path: Sequence[tuple[int, ...]],
    sizes: dict[str, int],
    itemsize: int,
) -> list[float]:
    return [
        step_seconds(step_inputs, step_output, sizes, itemsize)
        for step_inputs, step_output in path_steps(inputs, output, path, sizes)
    ]


def parallel_seconds(work_seconds: float, tasks: int, workers: int) -> float:
    """Wall time of ``tasks`` tasks doing ``work_seconds`` in all on ``workers`` cores."""
    usable = max(1, min(workers, tasks))
    return work_seconds / usable + tasks * DISPATCH_SECONDS
