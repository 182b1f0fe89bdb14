"""Hot element-wise expressions as one compiled loop (numba), once they have cost enough.

Contract: :func:`evaluate` returns what :func:`tensorc.ir.semantics.evaluate_map_expr`
returns for a map expression over aligned blocks, with numpy's values: the same operations
in the same order on float64 scalars, so ``+ - * /``, ``sqrt``, ``abs``, comparisons,
``max``/``min`` (NaN wins) and ``select`` (one branch per element, as ``np.where`` reads
it) give numpy's bits, division by zero and a logarithm's domain give numpy's ``inf`` and
``nan``; ``exp``, ``log``, ``tanh`` and the other transcendental functions are the C
library's, which may differ from numpy's vectorised ones in the last bit. It only chooses
how. numpy evaluates an expression one whole-array operation at a time: ``sub(select(le(x,
-37), e, select(le(x, -2), log1p(e), ...)), mul(y, x))`` (scikit-learn's logistic loss on the
array API) is about 15 passes over 200,000-element temporaries, with every branch's
logarithm computed for every element. A compiled loop makes one pass and computes only the
branch each element takes (17 ms against 2 ms here).

Compiling costs about a second the first time numba is loaded and 0.2-0.5 s per expression
after that, so an expression is compiled only once it is *hot*: once numpy has spent
:data:`COMPILE_AFTER_SECONDS` on it (summed over calls of at least :data:`MIN_ELEMENTS`
elements; a loop such as lbfgs's iterations gets there, a one-off expression never does).
Only what the loop reproduces is compiled: float64 expressions of at least
:data:`MIN_OPERATORS` ufunc calls from :data:`FLOAT_OPS`, :data:`COMPARISONS`,
:data:`PREDICATES`, :data:`LOGICAL_OPS` and ``select``, whose operands are float64 or bool
blocks of the result's shape or single elements (other broadcasts, float32, integers, ``pow``
and the rest stay numpy's). Anything else
stays numpy's. Compiled kernels are kept per process (:data:`CACHE_SIZE` expressions), keyed
by the expression and its operands' kinds; ``ENABLED = False`` turns the path off.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from tensorc.ir.nodes import CALL_ARITY, Arg, Const, Expr, OpCall
from tensorc.ir.semantics import evaluate_map_expr

ENABLED = True
COMPILE_AFTER_SECONDS = 0.25
"""numpy seconds an expression must have cost before it is compiled (about one compile)."""
MIN_ELEMENTS = 1 << 14
"""Blocks smaller than this are left to numpy (and do not count towards compiling)."""
MIN_OPERATORS = 3
"""An expression of fewer ufunc calls is a pass or two in numpy already."""
CACHE_SIZE = 256

FLOAT_OPS = {
    "add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "div": "({} / {})",
    "neg": "(-{})", "abs": "abs({})", "square": "({0} * {0})", "reciprocal": "(1.0 / {})",
    "exp": "np.exp({})", "expm1": "np.expm1({})", "log": "np.log({})",
    "log1p": "np.log1p({})", "log2": "np.log2({})", "log10": "np.log10({})",
    "sqrt": "np.sqrt({})", "tanh": "np.tanh({})", "sin": "np.sin({})", "cos": "np.cos({})",
    "sigmoid": "(0.5 * (np.tanh(0.5 * {}) + 1.0))", "max": "_maximum({}, {})",
    "min": "_minimum({}, {})",
}
"""float64 operators and their scalar form (numpy's order of operations, e.g. ``sigmoid``
as :mod:`tensorc.ir.semantics` defines it)."""
COMPARISONS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
LOGICAL_OPS = {"and": "({} and {})", "or": "({} or {})", "not": "(not {})"}
PREDICATES = {"isnan": "np.isnan({})", "isfinite": "np.isfinite({})",
              "isinf": "np.isinf({})"}

_FLOAT = np.dtype(np.float64)
_BOOL = np.dtype(bool)
_LOCK = threading.Lock()
_NUMBA: dict = {}


class _Entry:
    """One expression with one operand pattern: its loop's source (``None``: not
    compilable), numpy seconds spent on it so far, and the kernel once compiled."""

    __slots__ = ("source", "constants", "seconds", "kernel")

    def __init__(self, source: str | None, constants: dict) -> None:
        self.source = source
        self.constants = constants
        self.seconds = 0.0
        self.kernel = None


_ENTRIES: OrderedDict[tuple, _Entry] = OrderedDict()


def evaluate(fn: Expr, values: Sequence[np.ndarray], dtype: np.dtype,
             shape: tuple[int, ...]) -> np.ndarray:
    """``fn`` over ``values`` (aligned blocks broadcasting to ``shape``), computed in
    ``dtype``: by the compiled loop when the expression is hot, else by numpy (see the
    module docstring)."""
    if (not ENABLED or not isinstance(fn, OpCall) or dtype != _FLOAT
            or math.prod(shape) < MIN_ELEMENTS):
        return evaluate_map_expr(fn, values, dtype)
    pattern = _pattern(values, shape)
    if pattern is None:
        return evaluate_map_expr(fn, values, dtype)
    key = (fn, pattern)
    entry = _ENTRIES.get(key)
    if entry is None:
        entry = _Entry(*_loop_source(fn, pattern))
        with _LOCK:
            entry = _ENTRIES.setdefault(key, entry)
            if len(_ENTRIES) > CACHE_SIZE:
                _ENTRIES.popitem(last=False)
    if entry.source is None:
        return evaluate_map_expr(fn, values, dtype)
    if entry.kernel is None and entry.seconds < COMPILE_AFTER_SECONDS:
        started = time.perf_counter()
        result = evaluate_map_expr(fn, values, dtype)
        entry.seconds += time.perf_counter() - started
        return result
    kernel = entry.kernel or _compiled(entry, pattern)
    if kernel is None:
        return evaluate_map_expr(fn, values, dtype)
    out = np.empty(shape, _FLOAT)
    kernel(*(np.ravel(v) for v in values), out.reshape(-1))
    return out


def compiled_count() -> int:
    """How many expressions this process has compiled (for tests and statistics)."""
    return sum(1 for entry in _ENTRIES.values() if entry.kernel is not None)


def _pattern(values: Sequence[np.ndarray], shape: tuple[int, ...]) -> tuple | None:
    """Each operand's ``(kind, whole)``: ``"f"`` float64 or ``"b"`` bool; ``whole`` when it
    has the result's shape, not when it is one element; ``None`` for anything else."""
    pattern = []
    for value in values:
        dtype = getattr(value, "dtype", None)
        kind = "f" if dtype == _FLOAT else "b" if dtype == _BOOL else None
        if kind is None:
            return None
        if tuple(value.shape) == shape:
            pattern.append((kind, True))
        elif value.size == 1:
            pattern.append((kind, False))
        else:
            return None
    return tuple(pattern)


class _Unsupported(Exception):
    pass


def _loop_source(fn: OpCall, pattern: tuple) -> tuple[str | None, dict]:
    """The loop's Python source and its constants, or ``(None, {})``."""
    constants: dict[str, float] = {}
    operators = [0]

    def emit(expr) -> tuple[str, str]:
        if isinstance(expr, Arg):
            return f"x{expr.position}", pattern[expr.position][0]
        if isinstance(expr, Const):
            value = expr.value
            if isinstance(value, (bool, np.bool_)):
                return ("True" if value else "False"), "b"
            if not isinstance(value, (int, float, np.integer, np.floating)):
                raise _Unsupported
            name = f"c{len(constants)}"
            constants[name] = np.float64(value)
            return name, "f"
        if not isinstance(expr, OpCall):
            raise _Unsupported
        op = expr.op
        args = [emit(a) for a in expr.args]
        codes, kinds = [a[0] for a in args], [a[1] for a in args]
        variadic = CALL_ARITY.get(op, 0) is None
        operators[0] += len(codes) - 1 if variadic else 1  # numpy's ufunc calls
        if not variadic and len(codes) != CALL_ARITY.get(op):
            raise _Unsupported
        if op in FLOAT_OPS and set(kinds) == {"f"}:
            if variadic:  # folded left, as numpy folds it
                code = codes[0]
                for other in codes[1:]:
                    code = FLOAT_OPS[op].format(code, other)
                return code, "f"
            return FLOAT_OPS[op].format(*codes), "f"
        if op in COMPARISONS and kinds == ["f", "f"]:
            return f"({codes[0]} {COMPARISONS[op]} {codes[1]})", "b"
        if op in PREDICATES and kinds == ["f"]:
            return PREDICATES[op].format(codes[0]), "b"
        truths = [_truth(code, kind) for code, kind in args]
        if op in LOGICAL_OPS:
            if op == "not":
                return LOGICAL_OPS[op].format(truths[0]), "b"
            code = truths[0]
            for other in truths[1:]:
                code = LOGICAL_OPS[op].format(code, other)
            return code, "b"
        if op == "select" and kinds[1:] == ["f", "f"]:
            return f"({codes[1]} if {truths[0]} else {codes[2]})", "f"
        raise _Unsupported

    try:
        code, kind = emit(fn)
    except (_Unsupported, KeyError):
        return None, {}
    if kind != "f" or operators[0] < MIN_OPERATORS:
        return None, {}
    names = [f"a{k}" for k in range(len(pattern))]
    lines = [f"def kernel({', '.join(names)}, out):"]
    lines += [f"    x{k} = a{k}[0]" for k, (_, whole) in enumerate(pattern) if not whole]
    lines.append("    for i in range(out.shape[0]):")
    lines += [f"        x{k} = a{k}[i]" for k, (_, whole) in enumerate(pattern) if whole]
    lines.append(f"        out[i] = {code}")
    return "\n".join(lines) + "\n", constants


def _truth(code: str, kind: str) -> str:
    """A condition's truth as numpy reads it: a float is true when it is not zero (NaN
    too)."""
    return code if kind == "b" else f"({code} != 0.0)"


def _compiled(entry: _Entry, pattern: tuple):
    """``entry``'s kernel, compiled now (once, whichever thread asks first); ``None`` if
    numba cannot compile it (the entry then stays numpy's)."""
    with _LOCK:
        if entry.kernel is not None or entry.source is None:
            return entry.kernel
        try:
            numba = _numba()
            namespace = {"np": np, **entry.constants, **_NUMBA["helpers"]}
            exec(compile(entry.source, "<tensorc fused loop>", "exec"), namespace)  # noqa: S102
            kernel = numba.njit(nogil=True, error_model="numpy")(namespace["kernel"])
            kernel(*(np.zeros(1, _FLOAT if kind == "f" else _BOOL) for kind, _ in pattern),
                   np.empty(1, _FLOAT))  # compiled here, under the lock
            entry.kernel = kernel
        except Exception:  # noqa: BLE001 - a loop numba refuses stays numpy's
            entry.source = None
        return entry.kernel


def _numba():
    """numba, imported on first compile (it takes about half a second), and the scalar
    helpers the loops call."""
    if not _NUMBA:
        import numba

        @numba.njit(inline="always")
        def _maximum(a, b):  # np.maximum: a NaN on either side wins
            return a if (a >= b or a != a) else b

        @numba.njit(inline="always")
        def _minimum(a, b):
            return a if (a <= b or a != a) else b

        _NUMBA["module"] = numba
        _NUMBA["helpers"] = {"_maximum": _maximum, "_minimum": _minimum}
    return _NUMBA["module"]
