"""Arrays not made yet: the callable of the ``deferred`` node a creation function returns
on Ray (:mod:`tensorc.lazy.creation`).

Contract: a :class:`Creation` holds a :class:`~tensorc.placement.recipes.Recipe`; calling it
makes the recipe in its default layout (block-cyclic over the nodes), or in this process
when the session is no longer a Ray one (the values are the same). :func:`creation_of`
tells a node that is such an array (not evaluated yet) from any other.
:func:`driver_data` gives the driver's values of such arrays made from them (``tc.asarray``
of a numpy array), for a reader that cuts and sends their blocks itself (the linear-algebra
block programs), when the driver's node takes them comfortably: together at most
:data:`DRIVER_STORE_SHARE` of its share of the cluster's object store. The blocks sent are
kept with the recipe (``Recipe.sent``) until the array is made.
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
"""The most of the driver's node's object store (the cluster's over its nodes) the driver
values of a block program's arrays not made yet may take together to go in as they are: the
program sends each block it reads from the driver's node, and they stay there until the
array is made."""


def creation_of(node) -> Recipe | None:
    """The recipe of a node that is an array not made yet, else ``None``."""
    op = getattr(node, "op", None)
    return op.recipe if isinstance(op, Creation) and node.value is None else None


def driver_data(*nodes, also: int = 0) -> list[DriverData | None]:
    """For each of ``nodes``: its values when it is an array not made yet from the driver's
    own data (``tc.asarray`` of a numpy array on Ray, not waited for), as a
    :class:`~tensorc.placement.recipes.DriverData` view, else ``None``; in order, as long as
    they and ``also`` bytes (other data the reader sends from the driver) fit together within
    :data:`DRIVER_STORE_SHARE` of the driver's node's share of the object store. A block
    program reading them cuts them by its own blocking and sends each block it reads from
    the driver's node, where its placer knows it is, once for the life of the array: the
    array is not spread over the nodes first and read back (the layout its reader wants);
    it stays not made."""
    found: list[DriverData | None] = [None] * len(nodes)
    if session.current().executor.in_process:
        return found
    cluster = ray_arrays.ray_cluster()
    room = DRIVER_STORE_SHARE * cluster.node_store_bytes - also
    for k, node in enumerate(nodes):
        recipe = creation_of(node)
        if recipe is not None and recipe.data is not None and recipe.data.nbytes <= room:
            if recipe.sent_on is not cluster:  # blocks sent to an earlier session's cluster
                recipe.sent.clear()
                recipe.sent_on = cluster
            found[k] = DriverData.of(recipe)
            room -= recipe.data.nbytes
    return found
