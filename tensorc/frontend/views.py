"""Einsums that are views: one operand, nothing summed (``ij->ji``, ``ii->i``, ``...``).

numpy returns a view of the operand for these (no copy, writes go through, the result's
``base`` is the operand's), and a drop-in does too: :func:`view_recipe` says how to take it
(diagonals, then one transpose), :func:`take_view` takes it. Both touch no data.
"""

from __future__ import annotations

import numpy as np

from tensorc.frontend.subscripts import EinsumSpec

Recipe = tuple[tuple[tuple[int, int], ...], tuple[int, ...]]
"""``(diagonals, permutation)``: axis pairs to take diagonals of, one after the other (each
diagonal becomes the last axis), then the transpose into the output's order."""


def view_recipe(spec: EinsumSpec) -> Recipe | None:
    """How the single operand of ``spec`` views as its result, or ``None`` when the einsum
    sums an index (then it computes, never a view)."""
    if len(spec.inputs) != 1:
        return None
    names = list(spec.inputs[0])
    if set(names) != set(spec.output):
        return None
    diagonals = []
    while len(set(names)) != len(names):
        first = next(n for n in names if names.count(n) > 1)
        p = names.index(first)
        q = names.index(first, p + 1)
        diagonals.append((p, q))
        names = [n for k, n in enumerate(names) if k not in (p, q)] + [first]
    return tuple(diagonals), tuple(names.index(n) for n in spec.output)


def take_view(array: np.ndarray, recipe: Recipe) -> np.ndarray:
    """The view ``recipe`` describes; writeable whenever ``array`` is (as numpy's einsum:
    ``ndarray.diagonal`` alone would give a read-only view)."""
    diagonals, permutation = recipe
    view = array
    for p, q in diagonals:
        view = view.diagonal(0, p, q)
    view = view.transpose(permutation)
    if diagonals and array.flags.writeable:
        view.flags.writeable = True
    return view
