"""Arrays not made yet: the callable of the ``deferred`` node a creation function returns
on Ray (:mod:`tensorc.lazy.creation`).

Contract: a :class:`Creation` holds a :class:`~tensorc.placement.recipes.Recipe`; calling it
makes the recipe in its default layout (block-cyclic over the nodes), or in this process
when the session is no longer a Ray one (the values are the same). :func:`creation_of`
tells a node that is such an array (not evaluated yet) from any other.
"""

from __future__ import annotations

import numpy as np

from tensorc import session
from tensorc.placement.recipes import Recipe
from tensorc.runtime.ray import arrays as ray_arrays


class Creation:
    """The callable of a ``deferred`` node of an array not made yet (module docstring):
    calling it makes the recipe in the default layout, or in this process when the session
    is no longer a Ray one (the values are the same)."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe

    def __call__(self):
        if session.current().executor.in_process:
            return np.asarray(self.recipe)
        return ray_arrays.made_default(self.recipe)

    def __repr__(self) -> str:
        return f"Creation({self.recipe.name}, shape={self.recipe.shape})"


def creation_of(node) -> Recipe | None:
    """The recipe of a node that is an array not made yet, else ``None``."""
    op = getattr(node, "op", None)
    return op.recipe if isinstance(op, Creation) and node.value is None else None
