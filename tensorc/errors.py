"""The tensorc error hierarchy.

Every error tensorc raises on purpose is a :class:`TensorcError`. Errors caused by a bad
einsum string, a wrong operand count or mismatched shapes are also ``ValueError``s, so code
written against ``numpy.einsum`` keeps catching them; their wording follows numpy's and adds
what numpy leaves out (which operand, which label, both sizes).
"""

from __future__ import annotations


class TensorcError(Exception):
    """Base class of every error raised by tensorc."""


class ParseError(TensorcError, ValueError):
    """A subscripts string or a ``.tc`` source that does not parse."""


class ShapeError(TensorcError, ValueError):
    """Operands whose shapes do not fit the subscripts or each other."""


class AxisError(ShapeError, IndexError):
    """An axis number outside an operand's dimensions (numpy raises ``IndexError`` there)."""


class TypeCheckError(TensorcError, TypeError):
    """Operands or options whose dtypes cannot be combined as asked (casting rules)."""


class PlanError(TensorcError, ValueError):
    """Planning options that cannot be honoured (bad block shape, grid, path)."""


class ExecutionError(TensorcError, RuntimeError):
    """A failure while running a task graph (a kernel raised, a node died)."""


class IRVerificationError(TensorcError, AssertionError):
    """An IR or task graph that breaks an invariant; always a bug in a pass, never user error."""
