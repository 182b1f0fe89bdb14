"""The remote functions every Ray task of tensorc runs.

Each returns two objects: the block and the id of the node the worker ran on, so the
executor can check placement and attribute copies to the producing node. Blocks are plain
numpy arrays; Ray stores them in the node's shared-memory object store and moves them when a
task on another node reads them.

- ``generate(kind, shape, dtype, seed, value)`` — a block of ``tc.random`` (``seed`` is a
  tuple of ints; the generator is numpy's PCG64 seeded with it) or of a constant ``value``
  (``tc.zeros``, ``tc.ones``, ``.tc`` fills), made on the node;
- ``place(block)`` — a driver block copied to the node the task runs on (``tc.asarray``);
- ``run(kernel, *blocks)`` — a block kernel of the task graph;
- ``fused(steps, *blocks)`` — a chain of block kernels the schedule put on one node, whose
  intermediates have a single consumer: one call instead of several;
- ``load(kernel, slices, layout, *pieces)`` — a load whose block spans several stored blocks
  (or needs a diagonal or a cast): the pieces are stitched, then the load kernel applied.

Workers limit BLAS to ``TENSORC_WORKER_BLAS_THREADS`` threads (default 1: Ray runs one task
per CPU, so one BLAS thread per task fills the node without oversubscribing it). Task
retries are on (``max_retries``), so Ray's lineage reconstruction can recompute a lost block.
"""

from __future__ import annotations

import os

import numpy as np

MAX_RETRIES = 3

_REMOTES: dict[str, object] = {}
_BLAS_SET = False


def _worker_setup() -> str:
    global _BLAS_SET
    import ray

    if not _BLAS_SET:
        from threadpoolctl import threadpool_limits

        threadpool_limits(int(os.environ.get("TENSORC_WORKER_BLAS_THREADS", "1")), "blas")
        _BLAS_SET = True
    return ray.get_runtime_context().get_node_id()


def _generate(kind: str, shape: tuple[int, ...], dtype: str, seed: tuple[int, ...], value=0):
    node = _worker_setup()
    if kind == "full":
        return np.full(shape, value, dtype=dtype), node
    rng = np.random.default_rng(list(seed))
    return rng.random(shape, dtype=np.dtype(dtype)), node


def _place(block: np.ndarray):
    return np.array(block), _worker_setup()


def _run(kernel, *blocks: np.ndarray):
    node = _worker_setup()
    return kernel(*blocks), node


def _fused(steps: tuple, *blocks: np.ndarray):
    """Several kernels in one call: ``steps[k] = (kernel, inputs)`` where each input is
    ``("x", i)`` (the i-th block argument) or ``("t", j)`` (step j's result)."""
    node = _worker_setup()
    results: list = []
    for kernel, inputs in steps:
        results.append(kernel(*[blocks[k] if kind == "x" else results[k] for kind, k in inputs]))
    return results[-1], node


def stitch(shape: tuple[int, ...], layout: tuple, pieces) -> np.ndarray:
    """One array of ``shape`` from stored blocks; ``layout[k] = (into, out_of)``: the region
    slices block ``k`` fills and the slices of block ``k`` that fill them."""
    if len(pieces) == 1:
        part = np.asarray(pieces[0][layout[0][1]])  # a 0-d block indexed by () is a scalar
        if part.shape == tuple(shape):
            return part
    region = np.empty(shape, dtype=pieces[0].dtype)
    for (into, out_of), piece in zip(layout, pieces, strict=True):
        region[into] = piece[out_of]
    return region


def _load(kernel, slices, shape, layout, *pieces):
    node = _worker_setup()
    region = stitch(shape, layout, pieces)
    return kernel(region, slices), node


def remote(name: str):
    """The Ray remote function ``name`` (defined once per process, after ``ray`` is up)."""
    fn = _REMOTES.get(name)
    if fn is None:
        import ray

        body = {"generate": _generate, "place": _place, "run": _run, "load": _load,
                "fused": _fused}[name]
        fn = ray.remote(num_returns=2, max_retries=MAX_RETRIES, num_cpus=1)(body)
        _REMOTES[name] = fn
    return fn
