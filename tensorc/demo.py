"""``tensorc demo``: MTTKRP ``ijk,if,jf->if`` on a 4-node local Ray cluster, end to end.

Starts a private ``ray.cluster_utils.Cluster`` of ``nodes`` one-CPU nodes, makes the inputs
with ``tc.random`` (blocks generated on their nodes), runs the contraction under LSHS and
under round-robin placement, checks both against ``numpy.einsum`` on the gathered inputs, and
prints per node the modelled memory and network load and the bytes Ray measured (one extra
call with ``measure=True``), the median time of calls on fresh inputs, where that time went
(plan, run, the bytes moved inside the run), and numpy's time for reference.
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
    print(f"cost model calibrated at start-up: {session.machine.describe()}")
    try:
        serial = [0]

        def inputs(seed=None):
            serial[0] += 1
            seed = serial[0] if seed is None else seed
            return (tc.random((n, n, n), grid=(blocks,) * 3, seed=3 * seed),
                    tc.random((n, f), grid=(blocks, 1), seed=3 * seed + 1),
                    tc.random((n, f), grid=(blocks, 1), seed=3 * seed + 2))

        # equal seeds and blocks give equal values: gather one set for numpy and keep the
        # other only on the nodes that made it (a gathered block is cached on the driver's
        # node, which would make every placement look free)
        gathered = [a.numpy() for a in inputs(0)]
        expected = np.einsum(SUBSCRIPTS, *gathered, optimize=True)
        numpy_ms = _median_ms(lambda: np.einsum(SUBSCRIPTS, *gathered, optimize=True), repeats)
        x, b, _ = inputs(0)
        print(f"inputs made on the nodes: X {x.shape} in {x.grid} blocks "
              f"(node grid {x.node_grid}), B and C {b.shape} in {b.grid} blocks; every timed "
              "call gets a fresh set")
        ok = True
        summary = {}
        for scheduler in ("lshs", "round_robin"):
            result = tc.einsum(SUBSCRIPTS, *inputs(0), scheduler=scheduler)
            good = np.allclose(result.numpy(), expected, rtol=1e-10, atol=0)
            ok &= good
            times, stats = [], {}
            for _ in range(repeats):
                fresh = inputs()
                tc.wait(*fresh)
                begun = time.perf_counter()
                tc.einsum(SUBSCRIPTS, *fresh, scheduler=scheduler)
                times.append(time.perf_counter() - begun)
                stats = tc.last_stats()
            ms = statistics.median(times) * 1e3
            tc.einsum(SUBSCRIPTS, *inputs(), scheduler=scheduler, measure=True)
            measured = tc.last_stats()
            summary[scheduler] = (ms, measured["measured_inter_node_bytes"])
            print()
            print(f"== scheduler {scheduler}: result {'OK' if good else 'MISMATCH'} vs numpy, "
                  f"{stats['tasks']} block tasks in {stats['remote_calls']} Ray calls "
                  f"({stats['stages']} stages), median {ms:.1f} ms over {repeats} calls ==")
            print("  node   memory MiB   recv MiB   send MiB   measured recv MiB")
            for node in range(measured["nodes"]):
                print(f"  {node:4d}   {_mib(measured['node_memory_bytes'][node])}   "
                      f"{_mib(measured['node_recv_bytes'][node])}   "
                      f"{_mib(measured['node_send_bytes'][node])}   "
                      f"{_mib(measured['measured_node_recv_bytes'][node])}")
            print(f"  inter-node bytes: modelled {measured['inter_node_bytes']:,}, "
                  f"measured {measured['measured_inter_node_bytes']:,}; busiest node receives "
                  f"{measured['max_node_recv_bytes']:,} (lower bound "
                  f"{measured['lower_bound_bytes']:,})")
            rest = ms - (stats["plan_seconds"] + stats["run_seconds"]) * 1e3
            print(f"  where the time went: plan {stats['plan_seconds'] * 1e3:.1f} ms, "
                  f"run {stats['run_seconds'] * 1e3:.1f} ms (moving "
                  f"{_mib(stats['transfer_bytes']).strip()} MiB between nodes inside it), "
                  f"the rest {max(rest, 0):.1f} ms")
        lshs, rr = summary["lshs"], summary["round_robin"]
        print()
        print(f"LSHS {lshs[0]:.1f} ms against round-robin {rr[0]:.1f} ms "
              f"({rr[0] / lshs[0]:.1f}x), moving {lshs[1] / max(rr[1], 1):.1%} of its bytes; "
              f"numpy.einsum in one process {numpy_ms:.1f} ms")
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
