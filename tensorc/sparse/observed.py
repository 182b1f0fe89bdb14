"""Output densities observed on earlier runs: the correction the planner applies when a call
repeats.

Contract: a sparse einsum whose result is sparse records, after it runs, the non-zeros its
result had against the non-zeros the independence model estimated for it
(:func:`record`), under the call's signature (:func:`signature`: subscripts, operand shapes,
dtypes and non-zero counts, compute dtype). A later plan of a call with the same signature
asks :func:`factor` for observed / modelled and scales the last step's estimated densities
by it (:func:`~tensorc.codegen.sparse_lower.lower_sparse`), so the memory model prices the
result by what it was, not by the model (whose independence assumption misses clustered
non-zeros by orders of magnitude either way). At most :data:`KEPT` signatures are
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


def signature(subscripts: str, operands: Sequence[object], compute) -> tuple:
    """What identifies a repeated call: the same operands' shapes, dtypes and non-zeros."""
    return (subscripts, np.dtype(compute).str,
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
    ``key``, or ``None`` (never run, or the model said no non-zeros: no block of the result
    had a task, so none had any)."""
    with _lock:
        found = _seen.get(key)
    if found is None:
        return None
    modelled, observed = found
    if modelled <= 0:
        return None
    return observed / modelled, observed
