"""The tensorc error hierarchy.

Every error tensorc raises on purpose is a :class:`TensorcError`. Errors caused by a bad
einsum string, a wrong operand count or mismatched shapes are also ``ValueError``s, so code
written against ``numpy.einsum`` keeps catching them; their wording follows numpy's and adds
what numpy leaves out (which operand, which label, both sizes).
"""

from __future__ import annotations

import numpy as np


class TensorcError(Exception):
    """Base class of every error raised by tensorc."""


class ParseError(TensorcError, ValueError):
    """A subscripts string or a ``.tc`` source that does not parse."""


class ArgumentError(ParseError, TypeError):
    """An argument of the wrong kind where numpy raises ``TypeError`` (a non-array ``out=``,
    a subscripts argument that is neither a string nor an operand followed by a sublist);
    also a ``ParseError``/``ValueError``, as tensorc raised before it matched numpy."""


class ShapeError(TensorcError, ValueError):
    """Operands whose shapes do not fit the subscripts or each other."""


class AxisError(ShapeError, IndexError):
    """An axis number outside an operand's dimensions (numpy raises ``IndexError`` there)."""


class TypeCheckError(TensorcError, TypeError):
    """Operands or options whose dtypes cannot be combined as asked (casting rules)."""


class PlanError(TensorcError, ValueError):
    """Planning options that cannot be honoured (bad block shape, grid, path)."""


class UnknownOptionError(PlanError, TypeError):
    """A keyword argument einsum does not take (numpy raises ``TypeError``); also a
    ``PlanError``, as tensorc raised before it matched numpy."""


class PathError(PlanError, RuntimeError):
    """An explicit ``optimize=`` path that does not contract every operand into one (numpy
    raises ``RuntimeError``)."""


class ExecutionError(TensorcError, RuntimeError):
    """A failure while running a task graph (a kernel raised, a node died)."""


class NodeLostError(ExecutionError):
    """A node died while work was running on it; the work can run again on the nodes left
    (the sparse einsum driver does so by itself)."""


class MemoryLimitError(PlanError, MemoryError):
    """A plan cannot run within its memory budget (``memory_limit=``); raised before anything
    runs, naming the smallest budget that would work and the operation that needs it."""


class StorageError(TensorcError, OSError):
    """A file or store that cannot be read or written (missing, not the format it claims,
    truncated, or a write that failed part way); the message names the path. Also an
    ``OSError``, as numpy and zarr raise for a missing file."""


class UnsupportedError(TensorcError, NotImplementedError):
    """An operation tensorc does not provide (a function whose result shape depends on the
    data, a numpy function with no tensorc meaning); the message names it."""


class LinAlgError(TensorcError, np.linalg.LinAlgError):
    """A linear-algebra failure (a singular or non-square matrix), also numpy's
    ``LinAlgError`` so code written for numpy keeps catching it."""


class IRVerificationError(TensorcError, AssertionError):
    """An IR or task graph that breaks an invariant; always a bug in a pass, never user error."""


class TcError(TensorcError):
    """A ``.tc`` program error carrying one or more diagnostics (code, file:line:col, caret,
    hint); ``str()`` holds every one of them, ``diagnostics`` the structured list."""

    def __init__(self, message: str, diagnostics: list | None = None) -> None:
        super().__init__(message)
        self.diagnostics = list(diagnostics or [])

    @property
    def codes(self) -> list[str]:
        return [d.code for d in self.diagnostics]


class TcParseError(TcError, ParseError):
    """``.tc`` errors in the program text: syntax, names, indices, reductions, loops."""


class TcShapeError(TcError, ShapeError):
    """``.tc`` errors about ranks and sizes (declared, or bound from run-time inputs)."""


class TcTypeError(TcError, TypeCheckError):
    """``.tc`` dtype errors (in the program, or a run-time input of the wrong dtype)."""


def tc_error_class(code: str, message: str) -> type[TcError]:
    """The exception class for a diagnostic: shapes and sizes are ``ShapeError``s, dtypes are
    ``TypeCheckError``s, everything else about the text is a ``ParseError``. The block-program
    codes (``E-arity``, ``E-affine``, ``E-unwritten``, ``E-cycle``, ``E-block``) are
    ``TypeCheckError``s, except a wrong number of block coordinates (``E-block`` naming
    coordinates), which is a ``ShapeError`` like ``E-rank``."""
    if code == "E-block" and "coordinate" in message:
        return TcShapeError
    if code in ("E-type", "E-arity", "E-affine", "E-unwritten", "E-cycle", "E-block"):
        return TcTypeError
    if code == "E-input" and "dtype" in message:
        return TcTypeError
    if code in ("E-rank", "E-size", "E-input"):
        return TcShapeError
    return TcParseError


def first_line(err: BaseException) -> str:
    """The first line of ``err``'s message (what a wrapping error quotes of its cause), or
    its type's name when it has none."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
