"""Diagnostics: what a ``.tc`` user sees when a program is wrong.

Contract: a :class:`Diagnostic` is a code (``E-parse``, ``E-undefined``, ``E-rank``, ``E-size``,
``E-reduce``, ``E-type``, ``E-loop``, ``E-input``, ``E-unsupported``, and for block programs
``E-arity``, ``E-affine``, ``E-unwritten``, ``E-block``, ``E-cycle``), a message, a
:class:`Span` in a :class:`Source`, and a hint. ``Diagnostic.format()`` renders it exactly as
``docs/language.md`` ("Errors") shows::

    error[E-reduce]: index 'k' appears only on the right of '=', so it is never reduced
     --> matmul.tc:7:9
      |
    7 | C[i, j] = A[i, k] * B[k, j]
      |         ^ use '+=' to sum over k, or write sum[k](...)

:class:`Diagnostics` collects them so one pass can report every independent error;
``raise_if_any()`` raises one :class:`~tensorc.errors.TcError` whose ``str()`` holds them all.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from tensorc.errors import TcError, tc_error_class

CODES = (
    "E-parse",
    "E-undefined",
    "E-rank",
    "E-size",
    "E-reduce",
    "E-type",
    "E-loop",
    "E-input",
    "E-unsupported",
    # block programs (tensorc.frontend.block_check)
    "E-arity",
    "E-affine",
    "E-unwritten",
    "E-block",
    "E-cycle",
)


@dataclass(frozen=True, slots=True)
class Span:
    """A 1-based source range: the start ``line:col`` and the end (exclusive column)."""

    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


NO_SPAN = Span(1, 1, 1, 2)


@dataclass(frozen=True)
class Source:
    """The text of a program and the name it is reported under (a path or ``<source>``)."""

    name: str
    text: str

    def line(self, number: int) -> str:
        lines = self.text.splitlines()
        return lines[number - 1] if 1 <= number <= len(lines) else ""


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span
    hint: str
    source: Source

    def format(self) -> str:
        """The rustc-style block: header, location, source line, caret and hint."""
        line = self.span.line
        gutter = " " * len(str(line))
        text = self.source.line(line).expandtabs(1)
        start = min(max(self.span.col, 1), len(text) + 1)
        end = self.span.end_col if self.span.end_line == line else len(text) + 1
        width = max(1, min(end, len(text) + 1) - start)
        caret = " " * (start - 1) + "^" * width
        if self.hint:
            caret += " " + self.hint
        return "\n".join(
            [
                f"error[{self.code}]: {self.message}",
                f"{gutter}--> {self.source.name}:{line}:{self.span.col}",
                f"{gutter} |",
                f"{line} | {text}".rstrip(),
                f"{gutter} | {caret}",
            ]
        )


def did_you_mean(name: str, candidates: list[str] | set[str] | tuple[str, ...]) -> str:
    """``"did you mean 'x'?"`` for the closest candidate, or ``""``."""
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else ""


@dataclass
class Diagnostics:
    """An ordered, de-duplicated collection of diagnostics for one source."""

    source: Source
    items: list[Diagnostic] = field(default_factory=list)

    def error(self, code: str, message: str, span: Span | None, hint: str = "") -> None:
        assert code in CODES, code
        diagnostic = Diagnostic(code, message, span or NO_SPAN, hint, self.source)
        if diagnostic not in self.items:
            self.items.append(diagnostic)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise make_error(self.items)


def make_error(items: list[Diagnostic]) -> TcError:
    """One exception carrying every diagnostic, sorted by position."""
    ordered = sorted(items, key=lambda d: (d.span.line, d.span.col))
    text = "\n\n".join(d.format() for d in ordered)
    if len(ordered) > 1:
        text += f"\n\n{len(ordered)} errors"
    cls = tc_error_class(ordered[0].code, ordered[0].message)
    return cls(text, ordered)
