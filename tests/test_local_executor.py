"""The local executor against real task graphs: results, freeing, failures, BLAS threads."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tensorc as tc
from tensorc.codegen.taskgraph import PAIR
from tensorc.runtime.task_pool import TaskPool, _Run


def _graph(subscripts, *shapes, **options):
    return tc.plan(subscripts, *shapes, **options).graph


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_serial_and_parallel_runs_agree_with_numpy(workers):
    rng = np.random.default_rng(3)
    a, b = rng.random((30, 20)), rng.random((20, 10))
    graph = _graph("ik,kj->ij", a, b, grid={"i": 3, "k": 2, "j": 2})
    executor = TaskPool(workers)
    result = executor.run(graph, None, [a, b])
    np.testing.assert_allclose(result, a @ b)
    assert executor.last_run["workers"] == min(workers, graph.max_width())


def test_intermediates_are_freed_after_their_last_consumer():
    rng = np.random.default_rng(4)
    a, b = rng.random((30, 20)), rng.random((20, 10))
    graph = _graph("ik,kj->ij", a, b, grid={"i": 3, "k": 2, "j": 2})
    state = _Run(graph, [a, b], np.empty((30, 10)))
    TaskPool._run_serial(state)
    assert all(value is None for value in state.values)


def test_a_failing_kernel_stops_the_run_and_names_the_task():
    a, b = np.ones((8, 4)), np.ones((4, 6))
    graph = _graph("ik,kj->ij", a, b, grid={"i": 2})

    def broken(*blocks, out=None):
        raise FloatingPointError("overflow in block")

    pair = next(t for t in graph.tasks if t.kind == PAIR)
    kernels = list(graph.kernels)
    kernels[pair.kernel] = broken
    bad = dataclasses.replace(graph, kernels=kernels)
    for workers in (1, 2):
        with pytest.raises(tc.ExecutionError) as info:
            TaskPool(workers).run(bad, None, [a, b], np.empty((8, 6)))
        assert "failed: FloatingPointError: overflow in block" in str(info.value)
        assert f"task {pair.key} (pair) failed" in str(info.value)


def test_blas_threads_are_restored_after_a_parallel_run():
    from threadpoolctl import threadpool_info

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    a = np.ones((64, 64))
    tc.einsum("ik,kj->ij", a, a, grid={"i": 4}, workers=2)
    assert tc.last_stats()["workers"] == 2
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert before == after


def test_final_blocks_are_written_into_out_in_place():
    rng = np.random.default_rng(5)
    a, b = rng.random((16, 8)), rng.random((8, 4))
    out = np.full((16, 4), np.nan)
    result = tc.einsum("ik,kj->ij", a, b, out=out, grid={"i": 4, "k": 2})
    assert result is out
    np.testing.assert_allclose(out, a @ b)


@pytest.mark.parametrize(
    "subscripts,shapes",
    [
        ("ijk,if,jf->if", [(64, 64, 64), (64, 16), (64, 16)]),
        ("ijk,jf,kf->if", [(64, 64, 64), (64, 16), (64, 16)]),
        ("ijk,jkf->if", [(64, 64, 64), (64, 64, 16)]),
    ],
)
def test_no_large_intermediate_is_materialised(subscripts, shapes):
    import tracemalloc

    rng = np.random.default_rng(6)
    operands = [rng.random(s) for s in shapes]
    tc.einsum(subscripts, *operands)  # plan and warm up outside the trace
    inputs = sum(o.nbytes for o in operands)
    tracemalloc.start()
    try:
        result = tc.einsum(subscripts, *operands)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(result, np.einsum(subscripts, *operands, optimize=True))
    # the Khatri-Rao intermediate of ijk,jf,kf is J*K*F = F/I of X; nothing N^4-like
    assert peak <= 0.5 * inputs, f"peak {peak} bytes for {inputs} bytes of inputs"


def test_concurrent_parallel_runs_restore_blas_threads():
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    a = np.random.default_rng(10).random((128, 64))

    def call(_):
        for _ in range(30):
            np.testing.assert_allclose(
                tc.einsum("ik,kj->ij", a, a.T, grid={"i": 4}, workers=2), a @ a.T
            )

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(call, range(3)))
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert before == after
