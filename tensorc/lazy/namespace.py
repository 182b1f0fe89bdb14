"""The namespace registry: how ``tc.Array``'s methods reach the chapter modules and the
``tensorc`` module, with every import edge visible and no import cycle.

Why a registry: every chapter module (``manipulation``, ``linear``, ``indexing``, …) imports
:mod:`tensorc.lazy.array_object` (each one builds ``Array``s), while ``Array``'s methods
(``x.T``, ``x @ y``, ``x[k]``, ``x[k] = v``, ``explain()``, numpy's ``__array_ufunc__``) call
chapter functions, and ``__array_namespace__()`` returns the ``tensorc`` module, which
imports all of ``tensorc.lazy``. Importing either back from ``array_object`` would be a
cycle; loading it by name at run time would hide the cycle from import-linter. So the
dependency is inverted:

- This module is a leaf: it imports nothing of ``tensorc``. ``array_object`` and ``interop``
  import it and read its attributes at call time.
- ``tensorc/lazy/__init__.py`` imports the chapters the ``Array`` class needs with ordinary
  module-level imports and calls :func:`bind_chapters` once (``chapters``). Importing any
  ``tensorc.lazy.<module>`` runs that ``__init__`` first, so the chapters are bound before
  the import that asked for them returns.
- ``tensorc/__init__.py`` calls :func:`set_namespace` with itself as its last statement, so
  ``x.__array_namespace__() is tensorc`` and numpy interop can call ``tc.<function>``.

The edges import-linter sees are then ``tensorc -> tensorc.lazy.* -> array_object ->
namespace`` and ``tensorc.lazy -> chapters``: acyclic.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Chapters:
    """The chapter modules ``Array``'s methods call."""

    explaining: ModuleType  # Array.explain
    indexing: ModuleType  # x[k], x[k] = v
    interop: ModuleType  # __array_ufunc__, __array_function__
    linear: ModuleType  # x @ y, x.mT
    manipulation: ModuleType  # x.T


chapters: Chapters | None = None
"""Set once by :func:`bind_chapters` (from ``tensorc/lazy/__init__.py``)."""

_namespace: ModuleType | None = None


def bind_chapters(bound: Chapters) -> None:
    """Give ``Array``'s methods the chapter modules they call (``tensorc/lazy/__init__.py``
    calls this once, see the module docstring)."""
    global chapters
    chapters = bound


def set_namespace(module: ModuleType) -> None:
    """Register ``module`` (the ``tensorc`` package, which calls this at the end of its
    ``__init__``) as the array API namespace of ``tc.Array``."""
    global _namespace
    _namespace = module


def get_namespace() -> ModuleType:
    """The array API namespace registered by :func:`set_namespace` (the ``tensorc``
    module)."""
    if _namespace is None:
        raise RuntimeError("the tensorc namespace is not registered: tensorc/__init__.py "
                           "must call tensorc.lazy.namespace.set_namespace(<itself>)")
    return _namespace
