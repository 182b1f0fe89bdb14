"""The FROSTT ``.tns`` text format: ``tc.sparse.load_tns`` and ``tc.sparse.save_tns``.

A ``.tns`` file holds one non-zero per line: its 1-based integer coordinates, then its value,
separated by whitespace. Lines that are blank or start with ``#`` are skipped.

Contract:

- :func:`load_tns` reads the whole file with numpy's C parser, then checks it: every line
  has the first data line's number of fields, every coordinate is an integer ``>= 1`` (and
  within ``shape`` when given), every value a number. A file that breaks a rule raises
  :class:`~tensorc.errors.StorageError` naming the file, the line and the column (1-based
  character position of the field), and what was wrong (``x.tns:17:9: 'abc' is not a
  number``). Repeated coordinates are summed. The result is a pydata ``COO`` (or
  ``format=``, as :func:`~tensorc.sparse.construct.from_coo`); ``shape=None`` is the
  smallest shape holding every coordinate.
- :func:`save_tns` writes a scipy or pydata sparse array in that format (coordinates
  1-based, values with 17 significant digits, so a float64 array reads back exactly),
  through a temporary file renamed into place.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from tensorc.codegen.coo import INDEX
from tensorc.errors import StorageError, TypeCheckError
from tensorc.sparse.construct import check_bounds, from_coo
from tensorc.sparse.formats import canonical

WRITE_ROWS = 1 << 16


def load_tns(path, *, shape=None, dtype=np.float64, format: str = "coo") -> object:
    """A sparse array from a FROSTT ``.tns`` file; see the module docstring."""
    path = Path(path)
    if not path.is_file():
        raise StorageError(f"{path}: no such .tns file")
    try:
        table = np.loadtxt(path, dtype=np.float64, comments="#", ndmin=2)
    except ValueError:
        _diagnose(path)  # names the line and column; raises
        raise  # pragma: no cover - _diagnose always raises when loadtxt does
    if table.shape[0] == 0:
        if shape is None:
            raise StorageError(f"{path}: no entries, and no shape= to give the array one")
        return from_coo(np.zeros((len(tuple(shape)), 0), INDEX), np.zeros(0, dtype), shape,
                        format=format)
    if table.shape[1] < 2:
        raise StorageError(f"{path}:1: a line has one field; a .tns line is the coordinates "
                           "then the value")
    coords = table[:, :-1]
    bad = (coords != np.floor(coords)) | (coords < 1)
    if bad.any():
        row, column = (int(x) for x in np.argwhere(bad)[0])
        _diagnose(path, row, column)
    coords = coords.astype(INDEX).T - 1
    values = table[:, -1].astype(dtype)
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        try:
            check_bounds(coords, shape)
        except Exception as err:  # noqa: BLE001 - re-raised naming the line
            row = int(np.argmax(np.any((coords < 0) | (coords >= np.asarray(
                shape, INDEX)[:, None]), axis=0))) if coords.shape[0] == len(shape) else 0
            raise StorageError(f"{path}:{_line_of(path, row)}: {err}") from err
    return from_coo(coords, values, shape, format=format)


def _data_lines(path: Path):
    """``(line number, text)`` of each data line (not blank, not a comment)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.split("#", 1)[0]
            if text.strip():
                yield number, text


def _line_of(path: Path, row: int) -> int:
    for k, (number, _) in enumerate(_data_lines(path)):
        if k == row:
            return number
    return 0


def _fields(text: str) -> list[tuple[int, str]]:
    """The whitespace-separated fields of a line with their 1-based columns."""
    found, position = [], 0
    for field in text.split():
        position = text.index(field, position)
        found.append((position + 1, field))
        position += len(field)
    return found


def _diagnose(path: Path, bad_row: int | None = None, bad_column: int | None = None) -> None:
    """Find the first line breaking the format (or the data line ``bad_row``, whose
    coordinate ``bad_column`` the fast check refused) and raise a StorageError naming it."""
    width, first = None, 0
    for k, (number, text) in enumerate(_data_lines(path)):
        fields = _fields(text)
        if width is None:
            width, first = len(fields), number
        if len(fields) != width:
            column = len(text.rstrip()) + 1 if len(fields) < width else fields[width][0]
            raise StorageError(
                f"{path}:{number}:{column}: {len(fields)} fields, expected {width} "
                f"({width - 1} coordinates and a value, as on line {first})")
        for position, (column, field) in enumerate(fields):
            what = "coordinate" if position < width - 1 else "value"
            try:
                value = float(field)
            except ValueError:
                raise StorageError(f"{path}:{number}:{column}: {what} {field!r} is not a "
                                   "number") from None
            if what == "value" or (bad_row is not None and k != bad_row):
                continue
            if not np.isfinite(value) or value != int(value):
                raise StorageError(f"{path}:{number}:{column}: coordinate {field!r} is not "
                                   "an integer")
            if value < 1:
                raise StorageError(f"{path}:{number}:{column}: coordinate {field!r} is below "
                                   "1 (.tns coordinates are 1-based)")
    raise StorageError(f"{path}: not a .tns file (numpy could not parse it)")


def save_tns(path, array) -> None:
    """Write a sparse array as a ``.tns`` file; see the module docstring."""
    data = canonical(array)
    if data.dtype.kind == "c":
        raise TypeCheckError("a .tns file holds real values; this array is complex")
    path = Path(path)
    value_format = "%d" if data.dtype.kind in "biu" else "%.17g"
    line = " ".join(["%d"] * data.ndim + [value_format]) + "\n"
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w") as handle:
            for start in range(0, data.nnz, WRITE_ROWS):
                stop = min(start + WRITE_ROWS, data.nnz)
                columns = [c[start:stop] + 1 for c in data.coords]
                rows = zip(*(c.tolist() for c in columns), data.values[start:stop].tolist(),
                           strict=True)
                handle.write("".join(line % row for row in rows))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
