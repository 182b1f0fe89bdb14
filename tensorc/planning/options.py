"""Plan and run options, checked once, here.

Contract: every public entry point (``tc.einsum``, ``tc.tensordot``, ``tc.plan``,
``tc.compile``, ``tc.init``) hands its keyword options to :func:`check_plan_options`,
:func:`check_backend`, :func:`check_scheduler` and :func:`check_casting` before doing
anything else; nothing below re-checks them. :func:`pass_options` turns checked options into
the :class:`~tensorc.passes.base.PassOptions` the passes read, and :func:`freeze` makes any
option value hashable for plan-cache keys.
"""

from __future__ import annotations

import numpy as np

from tensorc.errors import ParseError, PlanError, UnknownOptionError
from tensorc.passes.base import PassOptions
from tensorc.placement.schedule import SCHEDULERS
from tensorc.planning.planners import PLANNERS

PLAN_OPTIONS = ("grid", "block_shape", "workers", "nodes", "planner", "node_memory")
BACKENDS = ("local", "ray")

CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def _positive_int(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= 1


def check_plan_options(plan_options: dict) -> dict:
    """Refuse unknown names and bad values of the plan options; returns them unchanged."""
    for name in plan_options:
        if name not in PLAN_OPTIONS:
            raise UnknownOptionError(
                f"unknown plan option {name!r}; tensorc.einsum takes {', '.join(PLAN_OPTIONS)}"
            )
    nodes = plan_options.get("nodes")
    if nodes is not None and not _positive_int(nodes):
        raise PlanError(f"nodes must be a positive integer, got {nodes!r}")
    planner = plan_options.get("planner")
    if planner is not None and planner not in PLANNERS:
        raise PlanError(f"unknown planner {planner!r}; choose one of {', '.join(PLANNERS)}")
    memory = plan_options.get("node_memory")
    if memory is not None and not _positive_int(memory):
        raise PlanError(f"node_memory must be a positive number of bytes, got {memory!r}")
    workers = plan_options.get("workers")
    if workers is not None and not _positive_int(workers):
        raise PlanError(f"workers must be a positive integer, got {workers!r}")
    return plan_options


def check_backend(backend: object) -> None:
    if backend not in (None, *BACKENDS):
        raise PlanError(
            f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)} (or None: the "
            "session's, see tc.init)"
        )


def check_scheduler(scheduler: object) -> str:
    if scheduler not in SCHEDULERS:
        raise PlanError(
            f"unknown scheduler {scheduler!r}; choose one of {', '.join(SCHEDULERS)}"
        )
    return scheduler  # type: ignore[return-value]


def check_casting(casting: object) -> None:
    """numpy's ``casting=`` values (``order=`` is normalised by the front end)."""
    if casting not in CASTINGS:
        raise ParseError(f"casting must be one of {', '.join(CASTINGS)}, got {casting!r}")


def freeze(option: object) -> object:
    """A hashable form of an option value (dicts and lists become sorted tuples)."""
    if option is None:
        return None
    if isinstance(option, dict):
        return ("dict", tuple(sorted((str(k), freeze(v)) for k, v in option.items())))
    if isinstance(option, (list, tuple)):
        return tuple(freeze(v) for v in option)
    return option


def pass_options(plan_options: dict, optimize: object, orders: dict[str, str], *,
                 default_workers: int, placed: dict | None = None) -> PassOptions:
    """The :class:`PassOptions` of checked plan options."""
    return PassOptions(
        optimize=optimize,
        workers=int(plan_options.get("workers") or default_workers),
        grid=plan_options.get("grid"),
        block_shape=plan_options.get("block_shape"),
        orders=orders,
        nodes=int(plan_options.get("nodes") or 1),
        planner=plan_options.get("planner") or "auto",
        node_memory=plan_options.get("node_memory"),
        placed=placed,
    )
