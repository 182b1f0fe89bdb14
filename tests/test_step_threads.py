"""A node worker's threaded call's BLAS threads (``runtime/ray/step_threads.py``): all the
cores for a large step alone, each step's share otherwise, the call's own count restored
after (a failed step too); and node workers started with a short OpenBLAS spin (on Ray)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from threadpoolctl import OpenBLASController, threadpool_limits

from tensorc.runtime.ray.stages import READ, RUN, Step
from tensorc.runtime.ray.step_threads import ALONE_BYTES, WORKER_ENV, StepThreads
from tensorc.runtime.ray.tasks import _largest, run_steps
from tensorc.runtime.task_pool import blas_controller

CORES = os.cpu_count() or 1
SHARED = max(1, CORES // 2)  # each step's share on a call of 2 threads
BIG = np.zeros(ALONE_BYTES // 8)
SMALL = np.zeros(ALONE_BYTES // 8 - 1)

pytestmark = pytest.mark.skipif(CORES < 2, reason="needs two cores to tell the counts apart")


@pytest.fixture(autouse=True)
def blas_set_from_here():
    """threadpoolctl lets one thread set OpenBLAS's threads (the first to, until it ends or
    lets go; other tests may have left a kept pool thread in charge): this test's, as a
    node worker's own thread is in its process."""
    OpenBLASController.clear_controlling_thread(force=True)
    yield
    OpenBLASController.clear_controlling_thread(force=True)


def blas_threads() -> int:
    return max(library.num_threads for library in blas_controller().lib_controllers
               if library.user_api == "blas")


def _until(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.001)


def recorder(seen: list, name, wait_for=None, hold_for=None, fail: bool = False):
    """A step that records the BLAS thread count it runs with under ``name``. With
    ``wait_for``, it first waits until that step has recorded and then until BLAS has all
    the cores (at most 5 s each), and records the count it ends with; with ``hold_for``, it
    returns only once that step has recorded (so it cannot leave it alone before); with
    ``fail``, it raises after recording."""

    def step(*blocks):
        if wait_for is not None:
            _until(lambda: wait_for in dict(seen))
            _until(lambda: blas_threads() == CORES)
        seen.append((name, blas_threads()))
        if hold_for is not None:
            _until(lambda: hold_for in dict(seen))
        if fail:
            raise RuntimeError("step failed")
        return blocks[0]

    return Step(RUN, step)


@pytest.mark.parametrize("case, inputs, widen, expected", [
    ("large alone", ((("x", 0),), (("t", 0),)), True, CORES),  # a chain: each step alone
    ("side by side", ((("x", 0),), (("x", 1),)), True, SHARED),  # both ready at once
    ("small alone", ((("x", 1),), (("t", 0),)), True, SHARED),
    ("not a node worker's call", ((("x", 0),), (("t", 0),)), False, SHARED),
])
def test_a_large_step_alone_gets_every_core_and_others_their_share(case, inputs, widen,
                                                                     expected):
    seen: list = []
    side_by_side = case == "side by side"  # neither leaves the other alone before it records
    steps = tuple((recorder(seen, j, hold_for=1 - j if side_by_side else None), reads)
                  for j, reads in enumerate(inputs))
    with threadpool_limits(CORES, "blas"):
        run_steps(steps, (BIG, SMALL), (1,), threads=2, widen=widen)
        assert blas_threads() == CORES  # the caller's count is back
    assert dict(seen) == {0: expected, 1: expected}


def test_the_share_comes_back_when_a_step_alone_on_every_core_fails():
    seen: list = []
    steps = ((recorder(seen, 0, fail=True), (("x", 0),)), (recorder(seen, 1), (("t", 0),)))
    with threadpool_limits(SHARED, "blas"):
        with pytest.raises(RuntimeError, match="step failed"):
            run_steps(steps, (BIG, SMALL), (1,), threads=2, widen=True)
        assert blas_threads() == SHARED
    assert dict(seen) == {0: CORES}


def test_an_lu_step_alone_keeps_its_share():
    """LU makes many small BLAS calls: its step keeps its share even alone and large."""
    from tensorc.ir.block_program import BlockRef, Kernel, Read

    lu = Kernel("lu", (Read(BlockRef("A", ())),))
    seen: list = []
    step = recorder(seen, 0)
    steps = ((Step(RUN, _WithExpr(step.kernel, lu)), (("x", 0),)),
             (recorder(seen, 1), (("t", 0),)))
    with threadpool_limits(SHARED, "blas"):
        run_steps(steps, (BIG, SMALL), (1,), threads=2, widen=True)
    assert dict(seen) == {0: SHARED, 1: CORES}


class _WithExpr:
    """A step kernel carrying a block program's kernel expression, as a
    :class:`~tensorc.runtime.ray.block_waves.BlockKernel` does."""

    def __init__(self, run, expr) -> None:
        self.run, self.expr = run, expr

    def __call__(self, *blocks):
        return self.run(*blocks)


def test_a_large_step_left_running_alone_takes_the_cores_for_its_later_calls():
    seen: list = []
    steps = (
        (recorder(seen, "small"), (("x", 1),)),
        (recorder(seen, "big", wait_for="small"), (("x", 0),)),
    )
    with threadpool_limits(SHARED, "blas"):
        run_steps(steps, (BIG, SMALL), (1,), threads=2, widen=True)
        assert blas_threads() == SHARED
    assert dict(seen) == {"small": SHARED, "big": CORES}


def test_step_threads_set_nothing_for_a_small_step_or_a_read_and_restore_the_share():
    run, read = Step(RUN, None), Step(READ, None)
    assert _largest([SMALL, "not an array"]) == SMALL.nbytes
    with threadpool_limits(SHARED, "blas"):
        threads = StepThreads(CORES, 2)
        threads.starting(run, SMALL.nbytes, alone=True)
        assert blas_threads() == SHARED
        threads.starting(read, BIG.nbytes, alone=True)  # a read: no BLAS, its size the file's
        assert blas_threads() == SHARED
        threads.starting(run, BIG.nbytes, alone=False)
        assert blas_threads() == SHARED
        threads.left_alone(run, BIG.nbytes)
        assert blas_threads() == CORES
        threads.done()
        assert blas_threads() == SHARED


def test_node_workers_start_with_a_short_openblas_spin(ray_cluster):
    import ray

    from tensorc.runtime.ray.calls import node_workers

    def environment(self):
        return os.environ.get("OPENBLAS_THREAD_TIMEOUT")

    workers = node_workers(ray_cluster)
    found = ray.get([worker.__ray_call__.remote(environment) for worker in workers])
    # OPENBLAS_TIMEOUT, or the driver's own setting when it has one
    assert found == [WORKER_ENV["OPENBLAS_THREAD_TIMEOUT"]] * len(workers)
