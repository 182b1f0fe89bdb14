"""Output densities observed on earlier runs: the correction the planner applies when a call
repeats.

Contract: a sparse einsum whose result is sparse records, after it runs, the non-zeros its
result had against the non-zeros the independence model estimated for it
(:func:`record`), under the call's signature (:func:`signature`: subscripts, operand shapes,
dtypes and non-zero counts, compute dtype). A later plan of a call with the same signature
asks :func:`factor` for observed / modelled and, when that is over 1, scales the last
step's estimated density by it (:func:`~tensorc.codegen.sparse_lower.lower_sparse`), so the
memory model prices the result by what it was, not by the model (whose independence
assumption misses clustered non-zeros by orders of magnitude). It is never lowered: the
signature does not see the operands' values. At most :data:`KEPT` signatures are
remembered, least recently used dropped first; each is one float pair.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

KEPT = 256
"""Signatures remembered."""

_seen: OrderedDict = OrderedDict()
_lock = threading.Lock()


def signature(subscripts: str, operands: Sequence[object], compute, options=()) -> tuple:
    """What identifies a repeated call: the same operands' shapes, dtypes and non-zeros,
    and the same blocking options (``options``: hashable)."""
    return (subscripts, np.dtype(compute).str, options,
            tuple((tuple(op.shape), np.dtype(op.dtype).str, getattr(op, "nnz", None))
                  for op in operands))


def record(key: tuple, modelled: float, observed: int) -> None:
    """Remember that the model said ``modelled`` non-zeros and the run made ``observed``."""
    with _lock:
        _seen[key] = (float(modelled), int(observed))
        _seen.move_to_end(key)
        while len(_seen) > KEPT:
            _seen.popitem(last=False)


def factor(key: tuple) -> tuple[float, int] | None:
    """``(observed / modelled, observed)`` from the last run of a call of signature
    ``key`` when that is over 1, else ``None`` (never run; the model said no non-zeros, so
    no block of the result had a task; or the model said at least as many). The correction
    only ever raises an estimate: a signature does not see the operands' values (a dense
    operand of zeros makes an empty result), and a call priced below what it makes would
    break its memory budget."""
    with _lock:
        found = _seen.get(key)
    if found is None:
        return None
    modelled, observed = found
    if modelled <= 0 or observed <= modelled:
        return None
    return observed / modelled, observed
