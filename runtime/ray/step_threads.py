"""BLAS threads for a threaded call's steps: all the cores for a large step left alone.

Contract: a node worker's call that runs its steps on several threads (``threads``, each step
on ``cores // threads`` BLAS threads) keeps a :class:`StepThreads` on the thread that drives
it — the worker's own thread, the one threadpoolctl lets change BLAS's thread count (it
ignores the others). Before a step is started, :meth:`StepThreads.starting` gives BLAS all
``cores`` when the step starts *alone* (no other step runs or is ready) and reads a block of
at least :data:`ALONE_BYTES`, and ``cores // threads`` otherwise; after steps finish,
:meth:`StepThreads.left` does the same for the one step still running when nothing else is
ready (its later BLAS calls take the cores: a triangular solve in halves is many calls);
:meth:`StepThreads.done` restores the call's count. No other step starts while a step
holds all the cores, so BLAS's threads never outnumber them.

Why: a block program's chain of factorisations leaves one step running at a time at its
head and tail (a 4096² Cholesky on one node, 4 x 4 blocks: the first diagonal factor, and
the last factor, solve, update and factor), one core idle beside it. Small steps keep one
thread: a BLAS call on two threads waits for its second thread at each of its barriers, and
on cores that other nodes' processes share that thread is often not running (a 1536²
Cholesky's 384² steps took up to 47 ms instead of 1 ms). OpenBLAS's idle threads spin for
2^28 cycles (about 0.1 s) after each threaded call before they sleep, taking a core from
the steps that follow: node workers are started with ``OPENBLAS_THREAD_TIMEOUT`` =
:data:`OPENBLAS_TIMEOUT` (2^20 cycles, about 0.4 ms; :data:`WORKER_ENV`). Measured in
docs/performance.md.
"""

from __future__ import annotations

from tensorc.runtime.task_pool import blas_controller

ALONE_BYTES = 4 * 2**20
"""The largest block a step reads must be at least this large for the step to take all the
cores when alone (a 724² float64 block; the Cholesky's 1024² steps do, its 384² ones not)."""

OPENBLAS_TIMEOUT = 20
"""log2 of the cycles an idle OpenBLAS thread spins before it sleeps, in node workers."""

WORKER_ENV = {"OPENBLAS_THREAD_TIMEOUT": str(OPENBLAS_TIMEOUT)}
"""Environment variables node workers are started with (read when BLAS loads)."""


def largest(blocks) -> int:
    """The bytes of the largest of ``blocks`` (0 for what is not an array)."""
    return max((int(getattr(block, "nbytes", 0) or 0) for block in blocks), default=0)


class StepThreads:
    """A threaded call's BLAS thread count (module docstring)."""

    def __init__(self, cores: int, threads: int) -> None:
        self.cores, self.shared = cores, max(1, cores // threads)
        self.libraries = [library for library in blas_controller().lib_controllers
                          if library.user_api == "blas"]  # not OpenMP's
        self.now = self.shared  # the call's own limit set it so

    def starting(self, blocks, alone: bool) -> None:
        """Before a step reading ``blocks`` starts; ``alone``: nothing else runs or is
        ready."""
        self._set(self.cores if alone and largest(blocks) >= ALONE_BYTES else self.shared)

    def left(self, blocks) -> None:
        """One step, reading ``blocks``, runs on with nothing ready beside it."""
        if largest(blocks) >= ALONE_BYTES:
            self._set(self.cores)

    def done(self) -> None:
        self._set(self.shared)

    def _set(self, count: int) -> None:
        if count != self.now:
            for library in self.libraries:
                library.set_num_threads(count)
            self.now = count
