"""Evaluating several arrays at once (``tc.compute``) and waiting for distributed blocks
(``tc.wait``)."""

from __future__ import annotations

from tensorc.lazy.array_object import Array, expr_of
from tensorc.lazy.evaluate import evaluate_graph
from tensorc.runtime.ray import arrays as blocks
from tensorc.runtime.ray.arrays import DistributedArray


def compute(*arrays: Array) -> tuple[Array, ...]:
    """Evaluate ``arrays`` together, as one program (shared work computed once)."""
    evaluate_graph([expr_of(a) for a in arrays])
    return arrays


def wait(*arrays) -> None:
    """Evaluate ``arrays`` and block until every block exists on its node (nothing is
    fetched to the driver): what a benchmark does before starting its clock."""
    lazy = [a for a in arrays if isinstance(a, Array)]
    if lazy:
        compute(*lazy)
    stored = [a.value() if isinstance(a, Array) else a for a in arrays]
    blocks.wait(*(s for s in stored if isinstance(s, DistributedArray)))
