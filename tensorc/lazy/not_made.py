"""Arrays not made yet: the callable of the ``deferred`` node a creation function returns
on Ray (:mod:`tensorc.lazy.creation`).

Contract: a :class:`Creation` holds a :class:`~tensorc.placement.recipes.Recipe`; calling it
makes the recipe in its default layout (block-cyclic over the nodes), or in this process
when the session is no longer a Ray one (the values are the same). :func:`creation_of`
tells a node that is such an array (not evaluated yet) from any other.
:func:`driver_data` gives the driver's values of one made from them (``tc.asarray`` of a
numpy array), for a reader that cuts and places its blocks itself (the linear-algebra block
programs), when the driver's node takes them comfortably: at most
:data:`DRIVER_STORE_SHARE` of its share of the cluster's object store.
"""

from __future__ import annotations

import numpy as np

from tensorc import session
from tensorc.placement.recipes import DriverData, Recipe
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


DRIVER_STORE_SHARE = 0.25
"""The most of the driver's node's object store (the cluster's over its nodes) an array's
driver values may take to go into a block program as they are: the program puts each block
it reads from the driver's node, all of them during the run."""


def creation_of(node) -> Recipe | None:
    """The recipe of a node that is an array not made yet, else ``None``."""
    op = getattr(node, "op", None)
    return op.recipe if isinstance(op, Creation) and node.value is None else None


def driver_data(node) -> DriverData | None:
    """The values of ``node`` when it is an array not made yet from the driver's own data
    (``tc.asarray`` of a numpy array on Ray, not waited for) that fits within
    :data:`DRIVER_STORE_SHARE` of the driver's node's object store, as a
    :class:`~tensorc.placement.recipes.DriverData` view, else ``None``. A block program
    reading them cuts them by its own blocking and puts each block it reads on the driver's
    node, where its placer knows it is: the array is not spread over the nodes first and
    read back (the layout its reader wants); the array itself stays not made."""
    recipe = creation_of(node)
    if recipe is None or recipe.data is None or session.current().executor.in_process:
        return None
    cluster = ray_arrays.ray_cluster()
    share = cluster.store_bytes / max(1, cluster.nodes) if cluster is not None else 0
    if recipe.data.nbytes > DRIVER_STORE_SHARE * share:
        return None
    return DriverData.of(recipe)
