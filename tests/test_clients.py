"""Real clients on tc arrays: scikit-learn's own array API estimator check.

Every estimator that passes scikit-learn's ``check_array_api_input`` under
``array_api_strict`` (the reference namespace; the list is computed here, not written down)
must pass it under ``tensorc``, in this process's executor and on a Ray cluster. Each run is
a fresh process (``SCIPY_ARRAY_API=1`` has to be set before scipy is imported).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("array_api_strict")

SCRIPT = Path(__file__).resolve().parent / "clients" / "sklearn_array_api.py"


def _check(namespace: str, *extra: str) -> dict:
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    done = subprocess.run([sys.executable, str(SCRIPT), namespace, *extra], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def reference() -> dict:
    found = _check("array_api_strict")
    assert len(found["passed"]) >= 10, found  # the check ran on the estimators
    return found


def test_every_estimator_the_reference_passes_passes_on_tensorc(reference):
    found = _check("tensorc")
    missing = {name: found["failed"].get(name, "not run")
               for name in reference["passed"] if name not in found["passed"]}
    assert not missing, missing


@pytest.mark.ray
def test_every_estimator_the_reference_passes_passes_on_a_ray_cluster(reference):
    found = _check("tensorc", "2")
    missing = {name: found["failed"].get(name, "not run")
               for name in reference["passed"] if name not in found["passed"]}
    assert not missing, missing
