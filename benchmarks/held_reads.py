"""A block program's result read by an einsum on 4 Ray nodes: read in place in the workers
that hold it, against storing it first.

On the private cluster ``tc.init(num_nodes=4)``, each chain makes a result with a block
program and reads it with one einsum, both waited for with ``tc.wait``:

- ``tsqr``: ``Q, _ = tc.linalg.qr(x)`` (``--rows`` x 40, 8 row blocks), then
  ``tc.einsum("ij,ik->jk", Q, b)`` (``b``: ``--rows`` x 4, the same row blocks);
- ``cholesky``: ``L = tc.linalg.cholesky(a)`` (order ``--n``, 4 x 4 blocks), then
  ``tc.einsum("ij,jk->ik", L, b)`` (``b``: n x 64, the same row blocks).

Each chain runs three ways, alternated in ``--rounds`` rounds (this machine's speed drifts
between minutes; alternating puts every way through the same drifts):

- ``in place``: as tensorc runs it: the result's large blocks stay held in the workers that
  made them, and the einsum's calls on those nodes read them there;
- ``released first``: the result's held blocks are stored in Ray before the einsum
  (``DistributedArray.blocks``), as every einsum did before it read held blocks in place;
- ``stored``: nothing is held (``held.HELD_SHARE = 0``): the block program's calls
  return every block, stored by Ray before the calls count as done.

Per way: the medians of ``--repeats`` chains (after one warm-up, each on fresh inputs made
and put on the cluster before the clock) of the block program's time, the einsum's, and the
chain's, and the highest peak over the chain of the summed resident memory of this process
and every process it started (the Ray nodes, their object stores and workers), above what
they held before it (sampled every 3 ms). Usage: ``.venv/bin/python
benchmarks/held_reads.py [--rows 65536] [--n 1536] [--repeats 9] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from common import TreeMemory

import tensorc as tc
from tensorc.runtime.ray import block_replay, held

WAYS = ("in place", "released first", "stored")


def chains(args, rng):
    """``{name: (make inputs, the block program's call, the einsum's subscripts)}``."""
    n = args.n

    def spd():
        r = rng.random((n, n))
        a = r + r.T
        a[np.diag_indices(n)] += 2 * n
        return a

    return {
        "tsqr": (lambda: (tc.asarray(rng.random((args.rows, 40)),
                                     block_shape=(args.rows // 8, 40)),
                          tc.asarray(rng.random((args.rows, 4)),
                                     block_shape=(args.rows // 8, 4))),
                 lambda x: tc.linalg.qr(x)[0], "ij,ik->jk"),
        "cholesky": (lambda: (tc.asarray(spd(), block_shape=(n // 4, n // 4)),
                              tc.asarray(rng.random((n, 64)), block_shape=(n // 4, 64))),
                     tc.linalg.cholesky, "ij,jk->ik"),
    }


def set_way(way: str) -> None:
    """Hold results (``in place``, ``released first``) or not (``stored``); forget the
    recorded runs, which replay what they held."""
    held.HELD_SHARE = 0.0 if way == "stored" else 0.5
    block_replay.RECORDINGS.clear()


def run_chain(way: str, make, program, subscripts: str) -> tuple[float, float, int]:
    """One chain on fresh inputs (:func:`set_way` first): ``(the program's seconds, the
    einsum's, peak bytes)``. The product is checked, off the clock, against numpy's einsum
    of the gathered result and ``b``."""
    x, b = make()
    tc.wait(x, b)
    memory = TreeMemory(interval=0.003)
    memory.start()
    started = time.perf_counter()
    result = program(x)
    tc.wait(result)
    made = time.perf_counter()
    if way == "released first":
        result.value().blocks  # noqa: B018 - stores the held blocks, as einsums did
    product = tc.einsum(subscripts, result, b)
    tc.wait(product)
    finished = time.perf_counter()
    memory.stop()
    peak = memory.rise
    expected = np.einsum(subscripts, np.asarray(result), np.asarray(b))
    if not np.allclose(np.asarray(product), expected, rtol=1e-10, atol=1e-12):
        raise SystemExit(f"{way}: the einsum's product differs from numpy's")
    return made - started, finished - made, peak


def main() -> None:
    made = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    made.add_argument("--rows", type=int, default=65536)
    made.add_argument("--n", type=int, default=1536)
    made.add_argument("--repeats", type=int, default=9)
    made.add_argument("--rounds", type=int, default=3)
    args = made.parse_args()
    tc.init(num_nodes=4)
    rng = np.random.default_rng(0)
    found: dict[tuple[str, str], list] = {}
    for _ in range(args.rounds):
        for way in WAYS:
            set_way(way)
            for name, (make, program, subscripts) in chains(args, rng).items():
                runs = [run_chain(way, make, program, subscripts)
                        for _ in range(args.repeats + 1)][1:]
                found.setdefault((name, way), []).append(
                    [statistics.median(r[k] for r in runs) for k in range(3)])
    tc.shutdown()
    print(f"{'chain':10s} {'way':15s} per round: program + einsum = chain ms (peak MB)")
    for (name, way), rounds in found.items():
        print(f"{name:10s} {way:15s} " + "   ".join(
            f"{p * 1e3:.1f} + {e * 1e3:.1f} = {(p + e) * 1e3:.1f} ({m / 2**20:.0f})"
            for p, e, m in rounds))


if __name__ == "__main__":
    main()
