"""The block programs tensorc ships: ``.tc`` sources that ``tc.linalg`` runs.

Contract: :func:`source(name)` returns the text of ``<name>.tc`` from this package
(``cholesky``, ``tsqr``, ``tsqr_q``, ``lu``, ``lu_solve``, ``lower_solve``, ``upper_solve``);
the files are installed as package data and are the same files as ``examples/<name>.tc``.
"""

from __future__ import annotations

from importlib.resources import files

NAMES = ("cholesky", "tsqr", "tsqr_q", "lu", "lu_solve", "lower_solve", "upper_solve")


def source(name: str) -> str:
    """The text of the shipped block program ``name``."""
    if name not in NAMES:
        raise KeyError(f"no shipped block program {name!r}; there are {', '.join(NAMES)}")
    return files(__package__).joinpath(f"{name}.tc").read_text(encoding="utf-8")


def path(name: str) -> str:
    """Where the shipped block program ``name`` is installed (for messages)."""
    return str(files(__package__).joinpath(f"{name}.tc"))
