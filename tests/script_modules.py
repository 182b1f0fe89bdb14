"""A script of ``benchmarks/`` loaded as a module for a test, its own folder importable
while it is loaded (the scripts import their helpers, ``common`` and others, by name)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType


@contextmanager
def script_module(path: Path, name: str, register: bool = False) -> Iterator[ModuleType]:
    """The script at ``path`` run as module ``name``; its folder leaves ``sys.path`` after.
    ``register``: in ``sys.modules`` while loaded (a script of dataclasses needs it; Ray
    then pickles its classes by reference, which its workers cannot import)."""
    folder = str(path.parent)
    sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        if register:
            sys.modules.pop(name, None)
        if folder in sys.path:  # benchmarks/linalg.py takes its own folder off the path
            sys.path.remove(folder)
