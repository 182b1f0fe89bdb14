"""The Ray executor on one node, inputs already distributed, against Dask and numpy.

Starts a private one-node Ray (all this machine's CPUs), makes the inputs with ``tc.random``
and runs the mission benchmarks:

- at ``--n`` (default 256) with ``--blocks`` (default 4) blocks per dimension, against Dask
  Array on the threaded scheduler with the same chunks, its inputs persisted in memory
  first (target: tensorc at least 5× faster);
- at ``--big-n`` (default 512) with tensorc's default blocking (one block per CPU), against
  ``numpy.einsum(optimize=True)`` on the gathered arrays (target: within 1.5×).

Every result is checked against numpy. Usage: ``.venv/bin/python
benchmarks/ray_single_node.py [--n 256] [--f 100] [--big-n 512] [--repeats 5] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
from common import RAY_BENCHMARKS, measure, ray_inputs

import tensorc as tc

# common imported, this folder leaves the import path: it holds sparse.py and
# distributed.py, which ``import dask.array`` would otherwise take for pydata's ``sparse``
# and Dask's ``distributed``
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]


def median_ms(fn, repeats: int) -> float:
    return statistics.median(measure(fn, repeats)) * 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--f", type=int, default=100)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--big-n", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    import dask
    import dask.array as da

    session = tc.init(backend="ray")
    print(f"{session.cluster.describe()}")
    rows, verdicts, ok = [], [], True
    try:
        for name, (subscripts, names) in RAY_BENCHMARKS.items():
            arrays = ray_inputs(names, args.n, args.f, args.blocks)
            gathered = [a.numpy() for a in arrays]
            expected = np.einsum(subscripts, *gathered, optimize=True)
            ok &= np.allclose(tc.einsum(subscripts, *arrays).numpy(), expected, rtol=1e-8)
            tc_ms = median_ms(lambda s=subscripts, a=arrays: tc.einsum(s, *a), args.repeats)
            stats = tc.last_stats()
            chunks = [da.from_array(g, chunks=tuple(max(1, -(-d // args.blocks)) if d > 100
                                                    else d for d in g.shape)).persist()
                      for g in gathered]
            with dask.config.set(scheduler="threads"):
                got = da.einsum(subscripts, *chunks, optimize=True).compute()
                ok &= np.allclose(got, expected, rtol=1e-8)
                dask_ms = median_ms(
                    lambda s=subscripts, c=chunks: da.einsum(s, *c, optimize=True).compute(),
                    args.repeats)
            rows.append({"benchmark": name, "n": args.n, "tensorc_ms": tc_ms,
                         "dask_ms": dask_ms, "tasks": stats["tasks"],
                         "speedup_vs_dask": dask_ms / tc_ms})
            verdicts.append((f"N={args.n} {name}: >= 5x faster than Dask (same chunks)",
                             dask_ms / tc_ms >= 5))
            del arrays, gathered, chunks
            big = ray_inputs(names, args.big_n, args.f, None)
            big_gathered = [a.numpy() for a in big]
            expected = np.einsum(subscripts, *big_gathered, optimize=True)
            ok &= np.allclose(tc.einsum(subscripts, *big).numpy(), expected, rtol=1e-8)
            tc_big = median_ms(lambda s=subscripts, a=big: tc.einsum(s, *a), args.repeats)
            np_big = median_ms(
                lambda s=subscripts, g=big_gathered: np.einsum(s, *g, optimize=True),
                args.repeats)
            rows.append({"benchmark": name, "n": args.big_n, "tensorc_ms": tc_big,
                         "numpy_ms": np_big, "ratio_to_numpy": tc_big / np_big})
            verdicts.append((f"N={args.big_n} {name}: within 1.5x of numpy",
                             tc_big / np_big <= 1.5))
            del big, big_gathered
    finally:
        tc.shutdown()
    for row in rows:
        print("  ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in row.items()))
    print()
    for what, passed in verdicts:
        print(f"{'PASS' if passed else 'FAIL'}  {what}")
    print("all results match numpy" if ok else "SOME RESULTS DIFFER FROM NUMPY")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "rows": rows,
                       "verdicts": [list(v) for v in verdicts]}, handle, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
