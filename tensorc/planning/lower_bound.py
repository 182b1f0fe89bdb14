"""The communication lower bound of one contraction on P nodes (memory-independent).

Contract: :func:`communication_lower_bound` returns the bytes that the busiest node must
receive, whatever the plan, for the einsum ``operands -> output`` over index extents
``sizes`` on ``nodes`` nodes (``docs/performance.md``, "The communication lower bound"):

1. some node computes at least ``1/P`` of the iteration space ``∏ N_i``; the data it must
   touch is at least ``min Σ_A ∏_{i∈A} b_i`` over box extents ``b`` with
   ``∏_i b_i ≥ ∏_i N_i / P`` and ``1 ≤ b_i ≤ N_i`` (``A`` ranges over the operands and the
   output, each as its set of distinct indices);
2. it owns at most an even share ``Σ_A |A| / P`` of that data (the bound assumes every
   array is spread evenly, so it is loose when ``P`` exceeds the iteration count). A
   block-granular layout can put more than ``1/P`` of an array on one node (a scalar, or
   an array of fewer blocks than nodes, lives whole on one node); ``owned`` then gives,
   per array, the largest fraction of it any one node holds, and the owned term becomes
   ``Σ_A owned_A · |A|`` — the bound *for that layout*, never above the even one;
3. the bound is the difference, clamped at 0, times ``itemsize``. ``P = 1`` gives 0.

The program is convex in ``x = log b``: minimise ``Σ_A exp(Σ_{i∈A} x_i)`` subject to
``Σ_i x_i ≥ log(∏N / P)`` and ``0 ≤ x_i ≤ log N_i``. It is solved here with a log-barrier
Newton method (numpy only, deterministic, about a hundred small Newton steps, a few
milliseconds); the value returned is
the barrier solution's objective minus its duality-gap certificate ``m / t``, so the result
never exceeds the true optimum by more than rounding. For a matmul this reproduces the
known three-case bound; for MTTKRP with a large tensor ``N·R·(I/P)^(1/N) − R·Σ_k I_k/P``
words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from tensorc.errors import PlanError

_GAP = 1e-11  # relative duality gap at which the barrier method stops
_MU = 20.0  # barrier parameter growth per outer step


def communication_lower_bound(
    operands: Sequence[Sequence[str]],
    output: Sequence[str],
    sizes: Mapping[str, int],
    nodes: int,
    itemsize: int,
    owned: Sequence[float] | None = None,
) -> int:
    """Bytes the busiest of ``nodes`` nodes must receive to compute the contraction.

    Args:
        operands: the index letters of each operand (e.g. ``["ijk", "jf", "kf"]``).
        output: the index letters of the output (e.g. ``"if"``).
        sizes: extent of every index.
        nodes: number of nodes P (at least 1).
        itemsize: bytes per element.
        owned: per array (the operands in order, then the output), the largest fraction
            of it that any one node holds, between ``1/nodes`` (spread evenly: the
            default) and 1 (held whole by one node). A layout-specific bound: a plan whose
            layout puts more than ``1/P`` of an array on one node can receive less than
            the even-share bound, never less than this one.

    Returns:
        The bound in bytes (an int, at least 0).

    Raises:
        PlanError: ``nodes < 1``, an index without an extent, or ``owned`` not one
            fraction in ``[1/nodes, 1]`` per array.
    """
    if nodes < 1:
        raise PlanError(f"the lower bound needs at least one node, got nodes={nodes}")
    arrays = [tuple(dict.fromkeys(a)) for a in [*operands, output]]
    indices = sorted({i for a in arrays for i in a})
    missing = [i for i in indices if i not in sizes]
    if missing:
        raise PlanError(f"no extent for index {', '.join(missing)}")
    if owned is not None and (
        len(owned) != len(arrays) or not all(1 / nodes - 1e-12 <= f <= 1 + 1e-12 for f in owned)
    ):
        raise PlanError(
            f"owned needs one fraction in [1/{nodes}, 1] per array ({len(arrays)}), "
            f"got {list(owned)}"
        )
    if nodes == 1 or any(sizes[i] == 0 for i in indices):
        return 0
    volumes = [math.prod(sizes[i] for i in a) for a in arrays]
    if owned is None:
        held = sum(volumes) / nodes
    else:
        held = sum(f * v for f, v in zip(owned, volumes, strict=True))
    accessed = _min_accessed(arrays, indices, sizes, nodes)
    words = accessed - held
    return max(0, math.floor(words * itemsize * (1 + 1e-9)))  # 1e-9: float noise only


def min_accessed_elements(
    arrays: Sequence[Sequence[str]], sizes: Mapping[str, int], nodes: int, gap: float = 1e-6
) -> float:
    """``min Σ_A ∏_{i∈A} b_i`` over boxes with ``∏ b_i ≥ (∏ N_i) / P`` and ``1 ≤ b_i ≤ N_i``
    (the indices being those of ``arrays``): the elements of ``arrays`` that a node doing
    ``1/P`` of the iteration space touches at least (step 1 of the module contract, for
    any subset of a contraction's arrays; a certified lower estimate — never above the
    optimum, and within the relative duality ``gap`` of it)."""
    arrays = [tuple(dict.fromkeys(a)) for a in arrays]
    indices = sorted({i for a in arrays for i in a})
    if nodes < 1 or any(sizes[i] == 0 for i in indices):
        return 0.0
    return _min_accessed(arrays, indices, sizes, nodes, gap)


def _min_accessed(
    arrays: Sequence[tuple[str, ...]],
    indices: Sequence[str],
    sizes: Mapping[str, int],
    nodes: int,
    gap: float = _GAP,
) -> float:
    """``min Σ_A ∏_{i∈A} b_i`` over the feasible boxes (a certified lower estimate)."""
    free = [i for i in indices if sizes[i] > 1]  # extent-1 indices are fixed at b = 1
    constant = sum(1 for a in arrays if not any(i in free for i in a))
    if not free:
        return float(constant)
    column = {name: k for k, name in enumerate(free)}
    rows = [a for a in arrays if any(i in column for i in a)]
    incidence = np.zeros((len(rows), len(free)))
    for r, a in enumerate(rows):
        for i in a:
            if i in column:
                incidence[r, column[i]] = 1.0
    upper = np.array([math.log(sizes[i]) for i in free])
    need = float(upper.sum()) - math.log(nodes)  # Σ x ≥ need
    return constant + _barrier_minimum(incidence, upper, need, gap)


def _barrier_minimum(
    incidence: np.ndarray, upper: np.ndarray, need: float, gap: float = _GAP
) -> float:
    """Minimise ``Σ_r exp(incidence[r] · x)`` s.t. ``Σ x ≥ need``, ``0 ≤ x ≤ upper``.

    The objective grows in every ``x_i``, so the volume constraint is tight at the optimum
    (or ``x = 0`` is optimal when ``need ≤ 0``): Newton steps keep ``Σ x = need`` exactly
    (a KKT solve) and only the box is a barrier, which keeps the systems well conditioned.
    """
    n = len(upper)
    if need <= 0:
        return float(len(incidence))
    x = (need / float(upper.sum())) * upper  # on the constraint, strictly inside the box
    scale = float(np.exp(incidence @ x).sum())  # objective units of the start point
    constraints = 2 * n
    kkt = np.zeros((n + 1, n + 1))
    kkt[:n, n] = kkt[n, :n] = 1.0
    rhs = np.zeros(n + 1)

    def phi(x: np.ndarray, t: float) -> float:
        if np.any(x <= 0) or np.any(x >= upper):
            return math.inf
        value = np.exp(incidence @ x).sum() / scale
        return t * value - np.log(upper - x).sum() - np.log(x).sum()

    t = float(constraints)
    while True:
        for _ in range(50):  # Newton steps on the barrier problem at this t
            terms = np.exp(incidence @ x) / scale
            grad = t * (incidence.T @ terms) + 1.0 / (upper - x) - 1.0 / x
            kkt[:n, :n] = t * (incidence.T * terms) @ incidence
            kkt[:n, :n] += np.diag(1.0 / (upper - x) ** 2 + 1.0 / x**2)
            rhs[:n] = -grad
            step = np.linalg.solve(kkt, rhs)[:n]
            decrement = float(-grad @ step)
            if decrement / 2.0 <= 1e-8:  # centred up to float noise
                break
            size, current = 1.0, phi(x, t)
            while phi(x + size * step, t) > current - 0.25 * size * decrement:
                size *= 0.5
                if size < 1e-12:  # no progress left at machine precision
                    break
            else:
                x = x + size * step
                continue
            break
        value = float(np.exp(incidence @ x).sum()) / scale
        if constraints / t <= gap * value:
            return (value - constraints / t) * scale
        t *= _MU


def cholesky_lower_bound(n: int, nodes: int, itemsize: int) -> int:
    """Bytes the busiest of ``nodes`` nodes must receive to factor an ``n x n`` matrix by
    Cholesky, whatever the schedule (memory-independent, like the einsum bound above).

    The trailing updates ``A[i,j] -= L[i,k] L[j,k]`` (``k < j <= i``) are ``V = n^3/6``
    iterations; some node runs at least ``V/P``. By Loomis-Whitney those touch ``a``
    elements of ``A`` and ``l >= max(|L[i,k]|, |L[j,k]|)`` of ``L`` with ``a l^2 >= (V/P)^2``,
    so ``a + l >= 3 (V/P)^(2/3) / 4^(1/3)``. The node owns at most an even share of ``A``'s
    and ``L``'s lower triangles, ``n^2 / P``. The bound is the difference, clamped at 0
    (it is 0 when ``P`` is small against the work: then no transfer is forced)."""
    if nodes <= 1 or n <= 0:
        return 0
    per_node = n**3 / 6 / nodes
    touched = 3 * per_node ** (2 / 3) / 4 ** (1 / 3)
    return max(0, int((touched - n * n / nodes) * itemsize))
