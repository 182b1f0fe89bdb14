"""``tensorc demo``: MTTKRP ``ijk,if,jf->if`` on a 4-node local Ray cluster, end to end.

Starts a private ``ray.cluster_utils.Cluster`` of ``nodes`` one-CPU nodes, makes the inputs
with ``tc.random`` (blocks generated on their nodes), runs the contraction under LSHS and
under round-robin placement, checks both against ``numpy.einsum`` on the gathered inputs, and
prints per node the modelled memory and network load and the bytes Ray measured, plus times.
``--local`` runs the in-process executor against numpy instead (no Ray).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import tensorc as tc

SUBSCRIPTS = "ijk,if,jf->if"


def _median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:8.2f}"


def ray_demo(n: int, f: int, repeats: int, nodes: int, blocks: int) -> int:
    print(f"tensorc demo: MTTKRP {SUBSCRIPTS} with I=J=K={n}, F={f}, float64")
    started = time.perf_counter()
    session = tc.init(num_nodes=nodes)
    print(f"started {session.cluster.describe()} in {time.perf_counter() - started:.1f} s")
    try:
        def inputs():
            return (tc.random((n, n, n), grid=(blocks,) * 3, seed=0),
                    tc.random((n, f), grid=(blocks, 1), seed=1),
                    tc.random((n, f), grid=(blocks, 1), seed=2))

        # equal seeds and blocks give equal values: gather one set for numpy and keep the
        # other only on the nodes that made it (a gathered block is cached on the driver's
        # node, which would make every placement look free)
        expected = np.einsum(SUBSCRIPTS, *[a.numpy() for a in inputs()], optimize=True)
        x, b, c = inputs()
        print(f"inputs made on the nodes: X {x.shape} in {x.grid} blocks "
              f"(node grid {x.node_grid}), B and C {b.shape} in {b.grid} blocks")
        ok = True
        for scheduler in ("lshs", "round_robin"):
            result = tc.einsum(SUBSCRIPTS, x, b, c, scheduler=scheduler)
            stats = tc.last_stats()
            good = np.allclose(result.numpy(), expected, rtol=1e-10, atol=0)
            ok &= good
            ms = _median_ms(lambda s=scheduler: tc.einsum(SUBSCRIPTS, x, b, c, scheduler=s),
                            repeats)
            print()
            print(f"== scheduler {scheduler}: result {'OK' if good else 'MISMATCH'} vs numpy, "
                  f"{stats['tasks']} tasks, median {ms:.1f} ms over {repeats} runs ==")
            print("  node   memory MiB   recv MiB   send MiB   measured recv MiB")
            for node in range(stats["nodes"]):
                print(f"  {node:4d}   {_mib(stats['node_memory_bytes'][node])}   "
                      f"{_mib(stats['node_recv_bytes'][node])}   "
                      f"{_mib(stats['node_send_bytes'][node])}   "
                      f"{_mib(stats['measured_node_recv_bytes'][node])}")
            print(f"  inter-node bytes: modelled {stats['inter_node_bytes']:,}, "
                  f"measured {stats['measured_inter_node_bytes']:,}; busiest node receives "
                  f"{stats['max_node_recv_bytes']:,} (lower bound {stats['lower_bound_bytes']:,})")
            print(f"  plan {stats['plan_seconds'] * 1e3:.1f} ms, run "
                  f"{stats['run_seconds'] * 1e3:.1f} ms")
        return 0 if ok else 1
    finally:
        tc.shutdown()


def local_demo(n: int, f: int, repeats: int) -> int:
    rng = np.random.default_rng(0)
    x = rng.random((n, n, n))
    b = rng.random((n, f))
    c = rng.random((n, f))
    print(f"tensorc demo: MTTKRP {SUBSCRIPTS} with I=J=K={n}, F={f}, float64, local executor")
    result = tc.einsum(SUBSCRIPTS, x, b, c)
    expected = np.einsum(SUBSCRIPTS, x, b, c, optimize=True)
    ok = np.allclose(result, expected, rtol=1e-10, atol=0)
    error = float(np.max(np.abs(result - expected)) / np.max(np.abs(expected)))
    print(f"result check vs numpy.einsum: {'OK' if ok else 'MISMATCH'} (max rel error {error:.2e})")
    tc_ms = _median_ms(lambda: tc.einsum(SUBSCRIPTS, x, b, c), repeats)
    np_ms = _median_ms(lambda: np.einsum(SUBSCRIPTS, x, b, c, optimize=True), repeats)
    stats = tc.last_stats()
    print(f"tensorc        median {tc_ms:8.2f} ms  ({stats['tasks']} tasks, "
          f"{stats['workers']} worker(s), blocking {stats['blocking']})")
    print(f"numpy.einsum   median {np_ms:8.2f} ms  (optimize=True)")
    print(f"ratio tensorc / numpy: {tc_ms / np_ms:.2f}")
    print()
    explained = tc.plan(SUBSCRIPTS, x, b, c).explain()
    print("== decisions ==" + explained.split("== decisions ==")[1])
    return 0 if ok else 1
