"""Contraction-order strategies behind one function, with an ``auto`` pick by the cost model.

``choose_path(inputs, output, sizes, itemsize, optimize)`` returns a path in opt_einsum's
linear format (a list of position tuples, positions into the shrinking operand list) or
``None`` for ``optimize=False`` (numpy's meaning: no path, one fused einsum loop).

``optimize`` keeps numpy's meaning: ``True``/``"greedy"`` is opt_einsum's greedy search,
``"optimal"`` its exhaustive one, any other opt_einsum strategy name is passed through, and an
explicit path (``["einsum_path", (0, 1), …]`` or ``[(0, 1), …]``) is checked and used as given.
``"auto"`` (tensorc's default) scores these candidates with :mod:`tensorc.planning.cost` and
keeps the cheapest, ties going to the earlier candidate:

1. opt_einsum ``optimal`` (``greedy`` beyond 6 operands),
2. opt_einsum ``greedy``,
3. small operands first: contract every operand but the largest among themselves, then the
   largest once — the Khatri-Rao form that turns MTTKRP into a single GEMM.
"""

from __future__ import annotations

from collections.abc import Sequence

import opt_einsum as oe

from tensorc.errors import PathError, PlanError
from tensorc.ir.contraction import Key, volume
from tensorc.planning.cost import path_seconds

Path = list[tuple[int, ...]]


def _symbols(inputs: Sequence[Key], output: Key) -> tuple[list[frozenset[str]], frozenset[str]]:
    return [frozenset(k) for k in inputs], frozenset(output)


def opt_einsum_path(
    strategy: str, inputs: Sequence[Key], output: Key, sizes: dict[str, int]
) -> Path:
    """Run an opt_einsum path strategy on index-name keys."""
    sets, out = _symbols(inputs, output)
    try:
        finder = oe.paths.get_path_fn(strategy)
    except KeyError as err:
        raise PlanError(f"unknown optimize strategy {strategy!r}") from err
    return [tuple(step) for step in finder(sets, out, dict(sizes), None)]


def small_first_path(inputs: Sequence[Key], sizes: dict[str, int]) -> Path:
    """Contract all operands but the largest left to right, then the largest."""
    count = len(inputs)
    largest = max(range(count), key=lambda k: (volume(inputs[k], sizes), -k))
    path: Path = []
    others = [k for k in range(count) if k != largest]
    # positions shift as operands are removed: track a live list
    live = list(range(count))
    acc = None
    for k in others:
        if acc is None:
            acc = k
            continue
        a, b = live.index(acc), live.index(k)
        path.append((min(a, b), max(a, b)))
        live = [x for x in live if x not in (acc, k)] + [("acc", len(path))]
        acc = live[-1]
    if acc is not None:
        a, b = live.index(acc), live.index(largest)
        path.append((min(a, b), max(a, b)))
    return path


def check_path(path: Sequence[object], count: int) -> Path:
    """Validate an explicit path; accept numpy's ``["einsum_path", …]`` prefix."""
    steps = list(path)
    if steps and steps[0] == "einsum_path":
        steps = steps[1:]
    remaining = count
    checked: Path = []
    for step in steps:
        if not isinstance(step, (tuple, list)) or not step:
            raise PlanError(f"path step {step!r} must be a non-empty tuple of operand positions")
        positions = tuple(int(p) for p in step)
        if len(set(positions)) != len(positions) or any(
            p < 0 or p >= remaining for p in positions
        ):
            raise PlanError(
                f"path step {tuple(step)} names positions outside 0..{remaining - 1} "
                "(or repeats one)"
            )
        remaining -= len(positions) - 1
        checked.append(positions)
    if remaining != 1:
        raise PathError(
            f"path {list(path)!r} leaves {remaining} operands uncontracted; it must end in one"
        )
    return checked


def candidate_paths(inputs: Sequence[Key], output: Key, sizes: dict[str, int]) -> list[Path]:
    count = len(inputs)
    candidates = [
        opt_einsum_path("optimal" if count <= 6 else "greedy", inputs, output, sizes),
        opt_einsum_path("greedy", inputs, output, sizes),
    ]
    if count >= 3:
        candidates.append(small_first_path(inputs, sizes))
    return candidates


def choose_path(
    inputs: Sequence[Key],
    output: Key,
    sizes: dict[str, int],
    itemsize: int,
    optimize: object,
) -> Path | None:
    """The contraction path for ``optimize`` (see the module docstring)."""
    count = len(inputs)
    if optimize is False:
        return None
    if count == 1:
        return [(0,)]
    if isinstance(optimize, (list, tuple)):
        return check_path(optimize, count)
    if optimize is True:
        return opt_einsum_path("greedy", inputs, output, sizes)
    if optimize == "auto":
        candidates = candidate_paths(inputs, output, sizes)
        costs = [path_seconds(inputs, output, p, sizes, itemsize) for p in candidates]
        return candidates[costs.index(min(costs))]
    if isinstance(optimize, str):
        return opt_einsum_path(optimize, inputs, output, sizes)
    raise PlanError(
        f"optimize must be False, True, 'auto', an opt_einsum strategy name or a path; "
        f"got {optimize!r}"
    )


def stage_path(
    join: object,
    inputs: Sequence[Key],
    output: Key,
    sizes: dict[str, int],
    itemsize: int,
    optimize: object,
) -> Path | None:
    """The path a stage is modelled with: the one its join carries (``Join.path``, set by
    the contraction-path pass), else the only one a pair has, else (modelling a program
    before that pass decided) ``choose_path``."""
    if len(inputs) == 1:
        return None
    if join is not None and join.path is not None:
        return list(join.path) or None
    if optimize is False:
        return None
    if len(inputs) == 2:
        return [(0, 1)]
    return choose_path(inputs, output, sizes, itemsize, optimize)


def normalise_optimize(optimize: object, count: int) -> object:
    """Check ``optimize`` as numpy would take it and return its canonical form.

    numpy's ``(strategy, memory_limit)`` pair becomes the strategy (tensorc's blocking, not a
    path-search memory cap, bounds intermediates); an explicit path is checked against the
    operand count; a strategy name must be one opt_einsum knows.
    """
    if optimize is False or optimize is True or optimize == "auto":
        return optimize
    if isinstance(optimize, str):
        try:
            oe.paths.get_path_fn(optimize)
        except KeyError as err:
            raise PlanError(f"unknown optimize strategy {optimize!r}") from err
        return optimize
    if isinstance(optimize, (list, tuple)):
        if len(optimize) == 2 and isinstance(optimize[0], str) and optimize[0] != "einsum_path":
            return normalise_optimize(optimize[0], count)
        return ["einsum_path", *check_path(optimize, count)]
    raise PlanError(
        f"optimize must be False, True, 'auto', an opt_einsum strategy name or a path; "
        f"got {optimize!r}"
    )
