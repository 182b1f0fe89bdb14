"""tensorc: a tensor-algebra compiler for einsum, tensordot and ``.tc`` programs.

``import tensorc as tc`` gives the public API (see ``README.md``; the layers are in
``docs/architecture.md``):
``tc.einsum``, ``tc.tensordot``, ``tc.plan``, ``tc.last_stats``, ``tc.compile`` (``.tc``
programs), the Ray session (``tc.init``, ``tc.shutdown``), distributed arrays (``tc.Array``,
``tc.random``, ``tc.zeros``, ``tc.ones``, ``tc.asarray``) and the error hierarchy.
Heavy dependencies (Ray, z3) are imported only by the parts that need them.
"""

from tensorc.api import clear_plan_cache, einsum, last_stats, plan, tensordot
from tensorc.array import Array, asarray, ones, random, wait, zeros
from tensorc.errors import (
    ArgumentError,
    AxisError,
    ExecutionError,
    IRVerificationError,
    ParseError,
    PathError,
    PlanError,
    ShapeError,
    TcError,
    TcParseError,
    TcShapeError,
    TcTypeError,
    TensorcError,
    TypeCheckError,
    UnknownOptionError,
)
from tensorc.planning.plan import Plan
from tensorc.program import Program, compile
from tensorc.session import init, shutdown

__all__ = [
    "Array",
    "asarray",
    "init",
    "ones",
    "random",
    "shutdown",
    "wait",
    "zeros",
    "ArgumentError",
    "AxisError",
    "ExecutionError",
    "IRVerificationError",
    "ParseError",
    "PathError",
    "Plan",
    "PlanError",
    "Program",
    "ShapeError",
    "TcError",
    "TcParseError",
    "TcShapeError",
    "TcTypeError",
    "TensorcError",
    "TypeCheckError",
    "UnknownOptionError",
    "clear_plan_cache",
    "compile",
    "einsum",
    "last_stats",
    "plan",
    "tensordot",
]
__version__ = "0.1.0"
