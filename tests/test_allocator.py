"""A worker's allocator keeps freed block memory: a block-sized result no longer faults its
pages in afresh in every call (runtime/allocator.py). Run in a child process, so this test
process's allocator is left as it is."""

import subprocess
import sys

import pytest

CHILD = """
import resource, sys
import numpy as np
from tensorc.runtime.allocator import keep_freed_memory
took = keep_freed_memory(int(sys.argv[1])) if sys.argv[1] != "none" else None
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):  # warm up: the heap grows to hold the blocks once
    a = np.ones((8192, 40)); b = a * 2.0; del a, b
before = faults()
for _ in range(20):
    a = np.ones((8192, 40)); b = a * 2.0; del a, b
print(took, (faults() - before) / 20)
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")


def _faults_per_round(setting: str) -> tuple[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, setting], capture_output=True,
                         text=True, check=True).stdout.split()
    return out[0], float(out[1])


def test_kept_memory_is_reused_without_faults():
    took, faults = _faults_per_round(str(2**32))  # per arena: 4 GiB over the cores + 1
    assert took == "True"
    assert faults < 50  # two 2.6 MB blocks a round would be 1,280 faults


def test_default_allocator_faults_blocks_in_each_round():
    """The baseline the tuning removes (so the test above can fail)."""
    took, faults = _faults_per_round("none")
    assert took == "None"
    assert faults > 500


def test_zero_leaves_the_allocator_alone():
    took, faults = _faults_per_round("0")
    assert took == "False"
    assert faults > 500
