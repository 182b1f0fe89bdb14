"""tensorc on a 4-node local Ray cluster against Dask distributed on 4 workers, on the clock.

For each contraction (MTTKRP in both forms and the double contraction), N = ``--n``, F =
``--f``, float64, ``--blocks`` blocks per large dimension (F is never split):

- **tensorc LSHS** and **tensorc round-robin**: a private Ray cluster of ``--nodes`` one-CPU
  nodes (``tc.init(num_nodes=...)``), one ``tc.einsum`` per timed call, the result left on
  the cluster, on operands in three layouts (``--cases``):

  - ``default``: made on their own by ``tc.random`` (each made as it is used: its own
    blocking, block-cyclic over the node grid of ``tensorc.placement.layout.node_grid``);
  - ``colocated``: made by a lazy program, ``tc.einsum`` on ``tc.random`` operands no
    program has read yet, so each block is made on the node the contraction's plan reads it
    on; the timed call then runs on those arrays (the time of the program that made them
    and ran the contraction once is ``made_ms``);
  - ``adversarial``: every block of operand ``p`` made on the node after the one the
    default layout would use, shifted by ``p`` (no two operands' blocks that meet share
    the default's co-location);
- **Dask distributed** at its best: ``LocalCluster(n_workers=nodes, threads_per_worker=1)``,
  inputs ``da.random.random(...).persist()`` with the same chunks, and
  ``da.einsum(..., optimize=True).persist()`` waited for;
- **numpy**: ``numpy.einsum(optimize=True)`` on one process, the same sizes.

Every timed call gets a fresh input set, made and settled before the clock starts (Dask hands
back a result it still holds when the same graph is submitted again, and Ray keeps the copies
an earlier call made, so reusing inputs flatters both). The median of ``--repeats`` calls is
reported, after one warm-up call. Bytes: for tensorc one more call with ``measure=True``
(Ray's object directory, off the timed calls), for Dask the workers' outgoing transfer
counters. Memory: one more call on fresh inputs with the summed RSS of every process
(this one and its descendants: the Ray nodes and their workers, Dask's workers) sampled
every 2 ms, the peak above where the call started (``peak_mb``; off the timed calls, as
the sampler takes CPU). Each tensorc result is checked against numpy once.

Targets (docs/performance.md): LSHS at least 5x faster than Dask distributed on each
contraction, and on default-made operands no slower than round-robin and at most half its
bytes (the other cases are reported, not judged).

Usage: ``.venv/bin/python benchmarks/distributed.py [--n 256] [--f 64] [--blocks 4]
[--nodes 4] [--repeats 5] [--cases default,colocated,adversarial] [--json PATH]
[--plot PATH]``. Needs the ``bench`` extra (Dask
distributed, matplotlib): ``.venv/bin/pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import importlib
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


def common():
    """The benchmarks' ``common`` module (its folder joins the import path only while it
    loads)."""
    sys.path.insert(0, str(HERE))
    try:
        return importlib.import_module("common")
    finally:
        sys.path.remove(str(HERE))


def name_list(known):
    return common().name_list(known)


def peak_mb(call) -> float:
    """``call()`` run once with the summed RSS of this process and all its descendants (the
    Ray nodes and their workers, or Dask's) sampled every 2 ms: the peak above where the call
    started, MiB (0 when it never rose above it: an earlier result freed meanwhile)."""
    memory = common().TreeMemory(interval=0.002)
    memory.start()
    try:
        call()
    finally:
        memory.stop()
    return memory.rise / 2**20

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


CASES = ("default", "colocated", "adversarial")


def system_name(scheduler: str, case: str) -> str:
    """The result key of tensorc under ``scheduler`` on operands laid out as ``case``."""
    return f"tensorc {scheduler}" + ("" if case == "default" else f" [{case}]")


def run_tensorc(args) -> dict:

    import tensorc as tc
    from tensorc.runtime.ray import arrays

    session = tc.init(num_nodes=args.nodes)
    print(f"tensorc: {session.cluster.describe()}", flush=True)
    out: dict = {}
    serial = [0]

    def settle(made):
        tc.wait(*made)  # made on their nodes (held by the node workers), not fetched
        return made

    def not_made(names, seed):
        return [tc.random(shapes(args.n, args.f)[k], grid=grids(args.blocks)[k],
                          seed=seed * 10 + i) for i, k in enumerate(names)]

    def fresh(names, case, subscripts, seed=None):
        serial[0] += 1
        seed = serial[0] if seed is None else seed
        if case == "adversarial":
            made = []
            for position, name in enumerate(names):
                recipe = arrays.recipe("random", shapes(args.n, args.f)[name],
                                       grid=grids(args.blocks)[name], seed=seed * 10 + position)
                grid = tuple(len(b) - 1 for b in recipe.chunks)
                node_grid = arrays.node_grid_for(grid, args.nodes)
                shifted = {g: (arrays.block_cyclic_node(g, node_grid) + 1 + position)
                           % args.nodes for g in np.ndindex(*grid)}
                made.append(tc.asarray(arrays.generate(recipe, recipe.chunks, shifted)))
            return settle(made)
        inputs = not_made(names, seed)
        if case == "colocated":  # one program makes them where the contraction reads them
            started = time.perf_counter()
            settle([tc.einsum(subscripts, *inputs)])
            fresh.made_ms = (time.perf_counter() - started) * 1e3
        return settle(inputs)

    try:
        for case in args.cases:
            for subscripts, names in CONTRACTIONS.items():
                for scheduler in ("lshs", "round_robin"):
                    # equal seeds give equal values: gather one set for numpy, run on
                    # another (the gathered set has copies on the driver's node)
                    expected = np.einsum(subscripts, *[a.numpy() for a in
                                                       fresh(names, "default", subscripts, 0)],
                                         optimize=True)
                    inputs = fresh(names, case, subscripts, 0)
                    first = time.perf_counter()
                    result = tc.einsum(subscripts, *inputs, scheduler=scheduler)
                    first = time.perf_counter() - first
                    times, plans, runs, made = [], [], [], []
                    for _ in range(args.repeats):
                        inputs = fresh(names, case, subscripts)
                        made.append(getattr(fresh, "made_ms", 0.0))
                        started = time.perf_counter()
                        tc.einsum(subscripts, *inputs, scheduler=scheduler)
                        times.append(time.perf_counter() - started)
                        stats = tc.last_stats()
                        plans.append(stats["plan_seconds"])
                        runs.append(stats["run_seconds"])
                    inputs = fresh(names, case, subscripts)
                    peak = peak_mb(lambda inputs=inputs, subscripts=subscripts,
                                   scheduler=scheduler: tc.einsum(subscripts, *inputs,
                                                                  scheduler=scheduler))
                    tc.einsum(subscripts, *fresh(names, case, subscripts),
                              scheduler=scheduler, measure=True)
                    stats = tc.last_stats()
                    ok = np.allclose(result.numpy(), expected, rtol=1e-10)
                    row = {
                        "ms": median_ms(times), "first_ms": first * 1e3,
                        "plan_ms": median_ms(plans), "run_ms": median_ms(runs),
                        "bytes": stats["measured_inter_node_bytes"],
                        "modelled_bytes": stats["inter_node_bytes"],
                        "calls": stats["remote_calls"], "tasks": stats["tasks"], "ok": ok,
                        "case": case, "peak_mb": peak,
                    }
                    if case == "colocated":
                        row["made_ms"] = statistics.median(made)
                    out[(subscripts, system_name(scheduler, case))] = row
                    print(f"  {case:11s} {subscripts:15s} {scheduler:12s} "
                          f"{median_ms(times):8.1f} ms (plan {median_ms(plans):.1f}, run "
                          f"{median_ms(runs):.1f}; {stats['remote_calls']} calls) bytes "
                          f"{stats['measured_inter_node_bytes']:,}, peak +{peak:.0f} MiB "
                          f"{'OK' if ok else 'WRONG'}", flush=True)
        tiny = settle([tc.random((64, 64, 64), grid=(4, 4, 4), seed=1),
                       tc.random((64, 16), grid=(4, 1), seed=2),
                       tc.random((64, 16), grid=(4, 1), seed=3)])
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
            inputs = fresh()
            peak = peak_mb(lambda inputs=inputs, call=call: call(inputs))
            out[(subscripts, "dask distributed")] = {
                "ms": median_ms(times), "bytes": int(statistics.median(moved)),
                "peak_mb": peak}
            print(f"  {subscripts:15s} dask         {median_ms(times):8.1f} ms bytes "
                  f"{int(statistics.median(moved)):,}, peak +{peak:.0f} MiB", flush=True)
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
        dask = results.get((subscripts, "dask distributed"))
        if lshs and dask:
            found.append((f"{subscripts}: LSHS >= 5x faster than Dask distributed "
                          f"({dask['ms'] / lshs['ms']:.1f}x)", dask["ms"] >= 5 * lshs["ms"]))
        for case in CASES:
            lshs = results.get((subscripts, system_name("lshs", case)))
            rr = results.get((subscripts, system_name("round_robin", case)))
            if not (lshs and rr):
                continue
            found.append((f"{subscripts} [{case}]: LSHS no slower than round-robin "
                          f"({lshs['ms']:.0f} vs {rr['ms']:.0f} ms)", lshs["ms"] <= rr["ms"]))
            ratio = lshs["bytes"] / rr["bytes"] if rr["bytes"] else 0.0
            found.append((f"{subscripts} [{case}]: LSHS moves at most half of round-robin's "
                          f"bytes ({ratio:.3f})", lshs["bytes"] <= 0.5 * rr["bytes"]))
    overhead = results.get(("overhead N=64", "tensorc lshs"))
    if overhead:
        found.append((f"fixed overhead at N=64 under 20 ms ({overhead['ms']:.1f} ms)",
                      overhead["ms"] < 20))
    return found


def case_table(results: dict, cases) -> list[str]:
    """One line per case and contraction: LSHS and round-robin, time and bytes."""
    lines = [f"{'case':12s}{'contraction':16s}{'LSHS ms':>10s}{'RR ms':>10s}"
             f"{'LSHS bytes':>16s}{'RR bytes':>16s}{'bytes LSHS/RR':>15s}"]
    for case in cases:
        for subscripts in CONTRACTIONS:
            lshs = results.get((subscripts, system_name("lshs", case)))
            rr = results.get((subscripts, system_name("round_robin", case)))
            if not (lshs and rr):
                continue
            ratio = lshs["bytes"] / rr["bytes"] if rr["bytes"] else 0.0
            lines.append(f"{case:12s}{subscripts:16s}{lshs['ms']:10.1f}{rr['ms']:10.1f}"
                         f"{lshs['bytes']:16,}{rr['bytes']:16,}{ratio:15.3f}")
    return lines


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
    parser.add_argument("--cases", type=name_list(CASES), default=list(CASES),
                        help="operand layouts to run tensorc on (comma-separated)")
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
    print("peak memory, MiB: the summed RSS of every process (Ray's nodes and workers, Dask's "
          "workers) above where one more call started, sampled every 2 ms (not a timed call)")
    for row in table(results):
        cells = [f"+{row[s]['peak_mb']:.0f}" if row[s] and "peak_mb" in row[s] else "-"
                 for s in SYSTEMS[:3]]
        print(f"{row['contraction']:16s}" + "".join(f"{c:>22s}" for c in cells))
    print()
    for line in case_table(results, args.cases):
        print(line)
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
