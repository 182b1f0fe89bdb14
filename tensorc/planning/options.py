"""Plan and run options, checked once, here.

Contract: every public entry point (``tc.einsum``, ``tc.tensordot``, ``tc.plan``,
``tc.compile``, ``tc.init``) hands its keyword options to :func:`check_plan_options`,
:func:`check_backend`, :func:`check_scheduler` and :func:`check_casting` before doing
anything else; nothing below re-checks them. :func:`pass_options` turns checked options into
the :class:`~tensorc.passes.base.PassOptions` the passes read, and :func:`freeze` makes any
option value hashable for plan-cache keys.
"""

from __future__ import annotations

import re

import numpy as np

from tensorc.errors import ParseError, PlanError, UnknownOptionError
from tensorc.passes.base import PassOptions
from tensorc.placement.schedule import SCHEDULERS
from tensorc.planning.planners import PLANNERS

PLAN_OPTIONS = ("grid", "block_shape", "workers", "nodes", "planner", "node_memory",
                "memory_limit")
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
    if plan_options.get("memory_limit") is not None:
        plan_options["memory_limit"] = memory_bytes(plan_options["memory_limit"])
    return plan_options


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def memory_bytes(value: object, what: str = "memory_limit") -> int:
    """A memory size in bytes: a positive integer, or a string such as ``"768MB"``,
    ``"4 GB"``, ``"1.5GiB"`` (decimal units KB/MB/GB/TB, binary KiB/MiB/GiB/TiB, as Dask
    and cubed read them)."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        unit = match.group(2).upper() if match else None
        if match is None or unit not in _UNITS:
            raise PlanError(f"{what} must be bytes or a size such as '768MB' or '4GB', got "
                            f"{value!r}")
        value = float(match.group(1)) * _UNITS[unit]
        if value < 1:
            raise PlanError(f"{what} must be at least one byte, got {value!r}")
        return int(value)
    if not _positive_int(value):
        raise PlanError(f"{what} must be a positive number of bytes or a size such as "
                        f"'4GB', got {value!r}")
    return int(value)


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
                 default_workers: int, placed: dict | None = None,
                 stored: dict | None = None, memory_source: str = "") -> PassOptions:
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
        memory_limit=plan_options.get("memory_limit"),
        memory_source=memory_source,
        stored=stored or {},
    )
