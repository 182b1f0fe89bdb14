"""The gather-scatter kernel's commonest shape as one compiled loop (numba).

Contract: :func:`scatter_products` ``(out, rows, values, factors)`` adds, for every
non-zero ``n``, ``values[n] * f[g[n], :] * ...`` over the one or two ``(g, f)`` pairs of
``factors`` (a gathered dense matrix and the non-zeros' rows in it) to ``out[rows[n], :]``
(``out`` 2-d, any strides). That is an MTTKRP in any mode (``ijk,jf,kf->if``,
``ijk,if,kf->jf``, ...), or one gathered matrix with the other sparse indices summed
(``ijk,kf->fj``). One pass over the non-zeros with no temporaries and no sort: numpy's path gathers
the rows (non-zeros × width each), multiplies them and sorts the output positions to sum
them by segment. :func:`served` says whether a dtype is (float32 and float64).

The loops compile on first use in each process (numba, under a second; not cached on
disk, so no stale compiled code outlives a change of this file) and release the GIL,
so the task pool's workers run them side by side.
"""

from __future__ import annotations

import numpy as np

SERVED = (np.dtype("float32"), np.dtype("float64"))
_COMPILED: dict[int, object] = {}


def served(dtype) -> bool:
    """Whether :func:`scatter_products` computes in ``dtype``."""
    return np.dtype(dtype) in SERVED


def _one(out, rows, values, g0, f0):
    width = out.shape[1]
    for n in range(values.shape[0]):
        o, a, v = rows[n], g0[n], values[n]
        for q in range(width):
            out[o, q] += v * f0[a, q]


def _two(out, rows, values, g0, f0, g1, f1):
    width = out.shape[1]
    for n in range(values.shape[0]):
        o, a, b, v = rows[n], g0[n], g1[n], values[n]
        for q in range(width):
            out[o, q] += v * f0[a, q] * f1[b, q]


def _loop(count: int):
    found = _COMPILED.get(count)
    if found is None:
        import numba

        found = _COMPILED[count] = numba.njit(nogil=True)(
            _one if count == 1 else _two)
    return found


def scatter_products(out: np.ndarray, rows: np.ndarray, values: np.ndarray,
                     factors: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Add each non-zero's product of gathered rows into ``out`` (module docstring)."""
    if not 1 <= len(factors) <= 2:
        raise ValueError(f"one or two gathered factors, got {len(factors)}")
    arguments = [argument for gathered, matrix in factors for argument in (gathered, matrix)]
    _loop(len(factors))(out, rows, values, *arguments)
