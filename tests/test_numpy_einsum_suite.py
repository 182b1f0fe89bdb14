"""numpy's own einsum tests, every ``np.einsum`` routed to ``tensorc.einsum``.

numpy ships ``numpy/_core/tests/test_einsum.py`` in its wheel. This module loads a private
copy of it whose ``np`` is a proxy of numpy with ``einsum`` replaced by ``tensorc.einsum``
(the copy's ``import numpy as np`` is answered with the proxy; nothing else of numpy, and no
other module, is touched), and hands its test classes and functions to pytest as tests of
this module. So every numpy test runs against tensorc, parametrisations included (the
``einsum_fn`` of ``test_einsum_errors`` is the routed einsum too).

Everything numpy passes must pass, except :data:`DIFFERENCES`: the deliberate differences
documented in the README, each marked ``xfail(strict=True)`` so it fails the suite the day
it starts passing (then drop it from the list). ``test_routing_is_live`` checks that a
broken routed einsum makes numpy's tests fail, so a green run is tensorc's doing.
"""

from __future__ import annotations

import builtins
import importlib.util
import types
from pathlib import Path

import numpy
import pytest

import tensorc as tc

NUMPY_TESTS = Path(numpy.__file__).parent / "_core" / "tests" / "test_einsum.py"

#: numpy tests (``Class::method`` or function name) that fail on purpose, with the reason;
#: README.md, "What the compiler decides where numpy is silent", argues each.
DIFFERENCES: dict[str, str] = {}


def load_routed(einsum, name: str = "numpy_einsum_suite_routed") -> types.ModuleType:
    """A fresh copy of numpy's test module whose ``np.einsum`` is ``einsum``."""
    proxy = types.ModuleType("numpy")

    def delegate(attribute: str):
        return getattr(numpy, attribute)

    proxy.__getattr__ = delegate  # module-level __getattr__ (PEP 562)
    proxy.einsum = einsum

    def importer(module, globals=None, locals=None, fromlist=(), level=0):
        if module == "numpy" and not fromlist and level == 0:
            return proxy
        return builtins.__import__(module, globals, locals, fromlist, level)

    spec = importlib.util.spec_from_file_location(name, NUMPY_TESTS)
    routed = importlib.util.module_from_spec(spec)
    routed.__builtins__ = {**builtins.__dict__, "__import__": importer}
    spec.loader.exec_module(routed)
    assert routed.np is proxy
    return routed


def _mark_differences(module: types.ModuleType) -> None:
    for name, reason in DIFFERENCES.items():
        owner_name, _, attribute = name.rpartition("::")
        owner = getattr(module, owner_name) if owner_name else module
        test = getattr(owner, attribute)
        setattr(owner, attribute, pytest.mark.xfail(strict=True, reason=reason)(test))


if not NUMPY_TESTS.exists():  # pragma: no cover - every numpy wheel since 2.0 ships it
    pytest.skip(f"numpy's tests are not installed ({NUMPY_TESTS})", allow_module_level=True)

_ROUTED = load_routed(tc.einsum)
_mark_differences(_ROUTED)

# numpy's tests, collected by pytest as tests of this module
for _name, _value in vars(_ROUTED).items():
    is_class = _name.startswith("Test") and isinstance(_value, type)
    if is_class or (_name.startswith("test_") and callable(_value)):
        globals()[_name] = _value
del _name, _value


def test_routing_is_live():
    """A broken routed einsum fails numpy's tests: the suite exercises tensorc, not numpy."""
    calls = []

    def broken(*args, **kwargs):
        calls.append(args)
        result = tc.einsum(*args, **kwargs)
        return result + 1

    module = load_routed(broken, "numpy_einsum_suite_broken")
    with pytest.raises(AssertionError):
        module.TestEinsum().test_einsum_misc()
    assert calls
    assert _ROUTED.np.einsum is tc.einsum


def test_differences_name_numpy_tests():
    """Every listed difference names a test numpy's file still has."""
    for name in DIFFERENCES:
        owner_name, _, attribute = name.rpartition("::")
        owner = getattr(_ROUTED, owner_name) if owner_name else _ROUTED
        assert hasattr(owner, attribute), name
