"""tensorc on a 4-node local Ray cluster against Dask distributed on 4 workers, on the clock.

For each contraction (MTTKRP in both forms and the double contraction), N = ``--n``, F =
``--f``, float64, ``--blocks`` blocks per large dimension (F is never split):

- **tensorc LSHS** and **tensorc round-robin**: a private Ray cluster of ``--nodes`` one-CPU
  nodes (``tc.init(num_nodes=...)``), inputs from ``tc.random`` (every block made on its
  node), one ``tc.einsum`` per timed call, the result left on the cluster;
- **Dask distributed** at its best: ``LocalCluster(n_workers=nodes, threads_per_worker=1)``,
  inputs ``da.random.random(...).persist()`` with the same chunks, and
  ``da.einsum(..., optimize=True).persist()`` waited for;
- **numpy**: ``numpy.einsum(optimize=True)`` on one process, the same sizes.

Every timed call gets a fresh input set, made and settled before the clock starts (Dask hands
back a result it still holds when the same graph is submitted again, and Ray keeps the copies
an earlier call made, so reusing inputs flatters both). The median of ``--repeats`` calls is
reported, after one warm-up call. Bytes: for tensorc one more call with ``measure=True``
(Ray's object directory, off the timed calls), for Dask the workers' outgoing transfer
counters. Each tensorc result is checked against numpy once.

Targets (docs/performance.md): LSHS at least 3x faster than Dask distributed on each
contraction, no slower than round-robin and at most half its bytes.

Usage: ``.venv/bin/python benchmarks/distributed.py [--n 256] [--f 64] [--blocks 4]
[--nodes 4] [--repeats 5] [--json PATH] [--plot PATH]``. Needs the ``bench`` extra (Dask
distributed, matplotlib): ``.venv/bin/pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

# this file is named like Dask's ``distributed`` package: keep its folder off the import
# path, or ``dask.distributed`` would import this script instead
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

CONTRACTIONS = {
    "ijk,if,jf->if": ["X", "B", "C"],
    "ijk,jf,kf->if": ["X", "B", "C"],
    "ijk,jkf->if": ["X", "Y"],
}


def shapes(n: int, f: int) -> dict[str, tuple[int, ...]]:
    return {"X": (n, n, n), "B": (n, f), "C": (n, f), "Y": (n, n, f)}


def grids(blocks: int) -> dict[str, tuple[int, ...]]:
    return {"X": (blocks,) * 3, "B": (blocks, 1), "C": (blocks, 1), "Y": (blocks, blocks, 1)}


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


def run_tensorc(args) -> dict:
    import ray

    import tensorc as tc

    session = tc.init(num_nodes=args.nodes)
    print(f"tensorc: {session.cluster.describe()}", flush=True)
    out: dict = {}
    serial = [0]

    def fresh(names, seed=None):
        serial[0] += 1
        seed = serial[0] if seed is None else seed
        made = [tc.random(shapes(args.n, args.f)[k], grid=grids(args.blocks)[k],
                          seed=seed * 10 + i) for i, k in enumerate(names)]
        refs = [r for a in made for r in a.blocks.refs.values()]
        ray.wait(refs, num_returns=len(refs), fetch_local=False)  # made, not fetched
        return made

    try:
        for subscripts, names in CONTRACTIONS.items():
            for scheduler in ("lshs", "round_robin"):
                # equal seeds give equal blocks: gather one set for numpy, run on the other
                # (the gathered set has copies on the driver's node)
                expected = np.einsum(subscripts, *[a.numpy() for a in fresh(names, 0)],
                                     optimize=True)
                inputs = fresh(names, 0)
                first = time.perf_counter()
                result = tc.einsum(subscripts, *inputs, scheduler=scheduler)
                first = time.perf_counter() - first
                times, plans, runs = [], [], []
                for _ in range(args.repeats):
                    inputs = fresh(names)
                    started = time.perf_counter()
                    tc.einsum(subscripts, *inputs, scheduler=scheduler)
                    times.append(time.perf_counter() - started)
                    stats = tc.last_stats()
                    plans.append(stats["plan_seconds"])
                    runs.append(stats["run_seconds"])
                tc.einsum(subscripts, *fresh(names), scheduler=scheduler, measure=True)
                stats = tc.last_stats()
                ok = np.allclose(result.numpy(), expected, rtol=1e-10)
                out[(subscripts, f"tensorc {scheduler}")] = {
                    "ms": median_ms(times), "first_ms": first * 1e3,
                    "plan_ms": median_ms(plans), "run_ms": median_ms(runs),
                    "bytes": stats["measured_inter_node_bytes"],
                    "modelled_bytes": stats["inter_node_bytes"],
                    "calls": stats["remote_calls"], "tasks": stats["tasks"], "ok": ok,
                }
                print(f"  {subscripts:15s} {scheduler:12s} {median_ms(times):8.1f} ms "
                      f"(plan {median_ms(plans):.1f}, run {median_ms(runs):.1f}; "
                      f"{stats['remote_calls']} calls) bytes "
                      f"{stats['measured_inter_node_bytes']:,} {'OK' if ok else 'WRONG'}",
                      flush=True)
        tiny = [tc.random((64, 64, 64), grid=(4, 4, 4), seed=1),
                tc.random((64, 16), grid=(4, 1), seed=2), tc.random((64, 16), grid=(4, 1), seed=3)]
        tc.einsum("ijk,if,jf->if", *tiny)
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            tc.einsum("ijk,if,jf->if", *tiny)
            times.append(time.perf_counter() - started)
        out[("overhead N=64", "tensorc lshs")] = {"ms": median_ms(times)}
        print(f"  fixed overhead, N=64 MTTKRP (cached plan): {median_ms(times):.1f} ms")
    finally:
        tc.shutdown()
    return out


def run_dask(args) -> dict:
    import dask.array as da
    from dask.distributed import Client, LocalCluster, wait

    cluster = LocalCluster(n_workers=args.nodes, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    print(f"dask: LocalCluster of {args.nodes} workers x 1 thread", flush=True)

    def sent() -> int:
        return sum(client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total)
                   .values())

    out: dict = {}
    try:
        for subscripts, names in CONTRACTIONS.items():
            def fresh(names=names):
                made = []
                for k in names:
                    shape, grid = shapes(args.n, args.f)[k], grids(args.blocks)[k]
                    chunks = tuple(-(-n // g) for n, g in zip(shape, grid, strict=True))
                    made.append(da.random.random(shape, chunks=chunks).persist())
                wait(made)
                return made

            def call(inputs, subscripts=subscripts):
                result = da.einsum(subscripts, *inputs, optimize=True).persist()
                wait(result)
                return result

            call(fresh())
            times, moved = [], []
            for _ in range(args.repeats):
                inputs = fresh()
                before = sent()
                started = time.perf_counter()
                result = call(inputs)
                times.append(time.perf_counter() - started)
                moved.append(sent() - before)
                del result
            out[(subscripts, "dask distributed")] = {
                "ms": median_ms(times), "bytes": int(statistics.median(moved))}
            print(f"  {subscripts:15s} dask         {median_ms(times):8.1f} ms bytes "
                  f"{int(statistics.median(moved)):,}", flush=True)
        tiny_inputs = [da.random.random((64, 64, 64), chunks=(16, 16, 16)).persist(),
                       da.random.random((64, 16), chunks=(16, 16)).persist(),
                       da.random.random((64, 16), chunks=(16, 16)).persist()]
        wait(tiny_inputs)
        times = []
        for _ in range(args.repeats + 1):
            started = time.perf_counter()
            wait(da.einsum("ijk,if,jf->if", *tiny_inputs, optimize=True).persist())
            times.append(time.perf_counter() - started)
        out[("overhead N=64", "dask distributed")] = {"ms": median_ms(times[1:])}
    finally:
        client.close()
        cluster.close()
    return out


def run_numpy(args) -> dict:
    rng = np.random.default_rng(0)
    out = {}
    for subscripts, names in CONTRACTIONS.items():
        times = []
        for _ in range(args.repeats + 1):
            inputs = [rng.random(shapes(args.n, args.f)[k]) for k in names]
            started = time.perf_counter()
            np.einsum(subscripts, *inputs, optimize=True)
            times.append(time.perf_counter() - started)
        out[(subscripts, "numpy")] = {"ms": median_ms(times[1:]), "bytes": 0}
        print(f"  {subscripts:15s} numpy        {median_ms(times[1:]):8.1f} ms", flush=True)
    return out


SYSTEMS = ("tensorc lshs", "tensorc round_robin", "dask distributed", "numpy")


def table(results: dict) -> list[dict]:
    rows = []
    for subscripts in CONTRACTIONS:
        row = {"contraction": subscripts}
        for system in SYSTEMS:
            row[system] = results.get((subscripts, system))
        rows.append(row)
    return rows


def verdicts(results: dict) -> list[tuple[str, bool]]:
    found = []
    for subscripts in CONTRACTIONS:
        lshs = results.get((subscripts, "tensorc lshs"))
        rr = results.get((subscripts, "tensorc round_robin"))
        dask = results.get((subscripts, "dask distributed"))
        if lshs and dask:
            found.append((f"{subscripts}: LSHS >= 3x faster than Dask distributed "
                          f"({dask['ms'] / lshs['ms']:.1f}x)", dask["ms"] >= 3 * lshs["ms"]))
        if lshs and rr:
            found.append((f"{subscripts}: LSHS no slower than round-robin "
                          f"({lshs['ms']:.0f} vs {rr['ms']:.0f} ms)", lshs["ms"] <= rr["ms"]))
            found.append((f"{subscripts}: LSHS moves at most half of round-robin's bytes",
                          lshs["bytes"] <= 0.5 * rr["bytes"]))
    overhead = results.get(("overhead N=64", "tensorc lshs"))
    if overhead:
        found.append((f"fixed overhead at N=64 under 20 ms ({overhead['ms']:.1f} ms)",
                      overhead["ms"] < 20))
    return found


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.2
    xs = np.arange(len(CONTRACTIONS))
    for k, system in enumerate(SYSTEMS):
        ms = [(results.get((c, system)) or {}).get("ms", 0) for c in CONTRACTIONS]
        left.bar(xs + k * width, ms, width, label=system)
        moved = [((results.get((c, system)) or {}).get("bytes") or 0) / 2**20
                 for c in CONTRACTIONS]
        right.bar(xs + k * width, moved, width, label=system)
    for axis, title in ((left, "time per call (ms, median)"),
                        (right, "bytes moved between nodes (MiB)")):
        axis.set_xticks(xs + 1.5 * width, list(CONTRACTIONS))
        axis.set_title(title)
    left.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--f", type=int, default=64)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--systems", default="tensorc,dask,numpy")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args(argv)
    print(f"N={args.n}, F={args.f}, float64, {args.blocks} blocks per large dimension, "
          f"{args.nodes} nodes, median of {args.repeats} calls on fresh inputs")
    chosen = args.systems.split(",")
    results: dict = {}
    if "numpy" in chosen:
        results.update(run_numpy(args))
    if "tensorc" in chosen:
        results.update(run_tensorc(args))
    if "dask" in chosen:
        try:
            results.update(run_dask(args))
        except ImportError as err:
            print(f"dask distributed unavailable: {err}; install the 'bench' extra")
    print()
    print(f"{'contraction':16s}" + "".join(f"{s:>22s}" for s in SYSTEMS))
    for row in table(results):
        cells = []
        for system in SYSTEMS:
            found = row[system]
            cells.append(f"{found['ms']:12.1f} ms" if found else f"{'-':>15s}")
            cells[-1] = f"{cells[-1]:>22s}"
        print(f"{row['contraction']:16s}" + "".join(cells))
    print()
    passed = verdicts(results)
    for text, ok in passed:
        print(f"[{'PASS' if ok else 'MISS'}] {text}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "results": [
                {"case": c, "system": s, **v} for (c, s), v in results.items()],
                "verdicts": [{"target": t, "met": ok} for t, ok in passed]}, handle, indent=2)
    if args.plot:
        plot(results, args.plot)
    wrong = [k for k, v in results.items() if v.get("ok") is False]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
