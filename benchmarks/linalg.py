"""Block linear algebra: tensorc (local and on a 4-node Ray cluster) against LAPACK through
numpy and against Dask distributed, on the clock.

Cases (``--cases``, a comma list; default all), float64, inputs from
``np.random.default_rng(seed)``:

- ``cholesky``, n in ``--sizes`` (default 2048 4096; 8192 fits in memory here): the lower
  factor of an SPD matrix ``A = R + R^T + 2n I`` (R uniform in [0, 1): diagonally dominant,
  so SPD);
- ``tsqr``: the reduced QR (Q and R) of a tall-skinny ``--tsqr-rows`` x ``--tsqr-cols``
  matrix (default 2^18 x 64), uniform in [0, 1), in ``--tsqr-blocks`` row blocks (default 8);
- ``solve``, n in ``--solve-sizes`` (default 2048): ``A x = b`` with ``A = R + n I``
  (diagonally dominant, so LU needs no pivoting) and one right-hand side b (a vector);
- ``lstsq``: the least-squares solution and residual of TSQR's matrix (the same rows,
  columns and row blocks) and one right-hand side b, uniform in [0, 1) (a vector cut in the
  matrix's row blocks). Reported beside the others; the targets below are theirs.

Systems (``--systems``, a comma list; default all):

- ``numpy``: ``np.linalg.cholesky`` / ``np.linalg.qr(a)`` (reduced) / ``np.linalg.solve`` /
  ``np.linalg.lstsq`` (x and the residuals),
  LAPACK in this process with the BLAS threads pinned by threadpoolctl to ``--blas-threads``
  (default: the cores available) and printed; for tsqr also ``numpy-r``,
  ``np.linalg.qr(a, mode="r")`` (R only). The ratios' baseline is the row computing what
  tensorc computes (Q and R for tsqr);
- ``tensorc-local``: ``tc.linalg.cholesky(x)`` / ``tc.linalg.qr(x)`` / ``tc.linalg.solve(x,
  b)`` / ``tc.linalg.lstsq(x, b)`` on ``x = tc.asarray(a)`` with no Ray session (the local
  backend, its own thread pool);
- ``tensorc-ray``: the same calls on a private Ray cluster of ``--nodes`` one-CPU nodes
  (``tc.init(num_nodes=4)``), the input put on it with ``tc.asarray(a, block_shape=(b, b))``
  (tsqr: ``(rows / tsqr-blocks, cols)``) and ``tc.wait``-ed before the clock starts. The
  result is a ``tc.Array`` whose blocks stay on the nodes; the call is timed until
  ``tc.wait`` on it returns. tensorc's block programs choose their own block counts (the
  input blocking is a preference): the counts used are printed and recorded;
- ``tensorc-in-worker``: ``tensorc-local``'s calls inside a Ray worker (an actor pinned to
  the driver's node of the private cluster of ``tensorc-ray``, otherwise idle), its input
  sent to it off the clock and its result kept there: the compute a cluster run's calls get
  on this machine (Ray runs its workers at niceness 15, beside its own raylets and agents
  on the same cores), the part of a cluster run's limit that is not the transfers
  (``benchmarks/ray_floor.py``). The clock includes one actor call's round trip;
- ``dask``: Dask distributed, ``LocalCluster(n_workers=4, threads_per_worker=1)``, the input
  ``da.from_array(a, chunks=b).persist()`` (tsqr: ``chunks=(rows / tsqr-blocks, cols)``),
  waited for before the clock starts; timed: ``da.linalg.cholesky(x, lower=True)`` /
  ``da.linalg.qr(x)`` (Dask's TSQR for one column of chunks; Q and R) /
  ``da.linalg.solve(x, y)`` / ``da.linalg.lstsq(x, y)`` (x and the residuals), persisted and
  waited for (the result stays on the workers).

The cluster block size b is ``--block``, default n / 4, the same for tensorc's input and
Dask's chunks.

Timing: for every system and case, one warm-up call on the seed-0 input (its time is
reported as ``first``; it includes tensorc's planning of the block counts, cached after,
and on Ray the placement of every task, which later calls on inputs of the same blocks and
nodes replay: ``runtime/ray/block_replay.py``), then ``--repeats`` timed calls (default 3),
each on a fresh input (seeds 1, 2, ...) made and put in place off the clock, so no system
is handed an earlier call's copies or results. The
median is reported. After each timed call's clock stops, its result is gathered into the
driver (``np.asarray``; Dask: ``compute``), and the median of those times is printed as
``gather s``: what a script that reads the result pays next (a tensorc-ray result's final
blocks may stay in the workers that made them until read: their store is paid there).
Systems run one after the other, not interleaved; the Ray cluster is up only while
tensorc-ray runs and Dask's only while dask runs.

Bytes moved between nodes during a timed call (median over the timed calls): tensorc-ray:
``inter_node_bytes`` of ``tc.last_stats()``, the placer's count of the block copies its
schedule makes, summed over every run the call makes (solve runs LU, two triangular solves
and the backward-error check); Dask: the sum of ``total`` over the workers'
``transfer_incoming_log`` (worker-to-worker fetches; the log is cleared before each call).

CPU: around every timed call the machine's busy core-seconds are read from ``/proc/stat``
(every process, the kernel's work included: a cluster's node processes, object stores and
workers count, and so does anything else running). The mean per call is printed (the counters
tick every 10 ms, so one call's count is coarse and their sum is not) with the cores it kept
busy over the mean call: here 2 cores are all there is, so a run near 2.0 is limited by the
machine's CPU, whatever its processes spend it on.

Correctness: the warm-up result of every system is gathered and compared with numpy's on
the same input (tsqr: Q and R with the signs of R's diagonal made positive; solve: x); the
largest difference relative to numpy's largest entry is printed, and above 1e-8 the row is
marked ``WRONG`` and the exit status is 1 (also on an ``ERROR``).

Ray's floor (unless ``--no-floor``; needs ``tensorc-ray``): after tensorc-ray, on a cluster
of its own, ``benchmarks/ray_floor.py``'s skeleton of each case it has one of (4 x 4 square
blocks on 4 nodes, 8 TSQR row blocks): Ray moving and storing the blocks every plan of the
case moves and stores on this layout, with no arithmetic, timed like the systems and its
CPU counted (a square case's blocks moved either through Ray or pulled as tensorc's calls
pull input blocks from the nodes holding them; the way that spends less CPU counts). From
it, per case, the machine's *bound*: ``(arithmetic CPU + floor CPU) / cores``, the
arithmetic's CPU being the least any tensorc run of the case spent on it (the mean CPU of
tensorc-local, of tensorc-in-worker, or of tensorc-ray less the floor's); a cluster run on
this machine spends at least that CPU and so takes at least that time. It holds where the
nodes share the machine's cores, as the private cluster's do.

Targets, printed beside the table: tensorc-local within 1.3x of LAPACK for Cholesky at
n = 4096; on the cluster, tensorc-ray within 1.5x of tensorc-local and at least 2x faster
than Dask on the same blocks. Each is ``PASS``, ``MISS``, or ``BEYOND``: missed, and the
time it asks for is under the machine's bound (printed with the bound's terms).

Usage: ``.venv/bin/python benchmarks/linalg.py [--sizes 2048 4096] [--solve-sizes 2048]
[--tsqr-rows 262144] [--tsqr-cols 64] [--tsqr-blocks 8] [--block B] [--nodes 4]
[--repeats 3] [--cases cholesky,tsqr,solve,lstsq] [--systems numpy,tensorc-local,tensorc-ray,dask]
[--blas-threads N] [--no-floor] [--json PATH] [--plot PATH]``. Dask distributed and
matplotlib are the ``bench`` extra: ``.venv/bin/pip install -e '.[bench]'``. The machine has
2 cores and is shared: quote ratios from one run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import statistics
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# the benchmarks folder holds distributed.py, named like Dask's ``distributed`` package:
# keep it off the import path, or ``dask.distributed`` would import that script
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]


def _load_script(file: str, name: str, register: bool):
    """``benchmarks/<file>`` as module ``name``, by path (its folder is not on the import
    path, see above); ``register``: kept in ``sys.modules`` (dataclasses look their module
    up while it loads). One left out of it is pickled by value by Ray (its workers cannot
    import the script)."""
    if register and name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


common = _load_script("common.py", "common", register=True)

CASES = ("cholesky", "tsqr", "solve", "lstsq")
TARGET_CASES = ("cholesky", "tsqr", "solve")  # the cluster targets' cases
SYSTEMS = ("numpy", "tensorc-local", "tensorc-in-worker", "tensorc-ray", "dask")
ROWS = ("numpy", "numpy-r", "tensorc-local", "tensorc-in-worker", "tensorc-ray",
        "dask")  # numpy-r: tsqr only
TOLERANCE = 1e-8
LOCAL_TARGET = 1.3  # tensorc-local / LAPACK, Cholesky at n = 4096
LOCAL_TARGET_N = 4096
CLUSTER_TARGET = 2.0  # Dask / tensorc-ray
LOCAL_RUN_TARGET = 1.5  # tensorc-ray / tensorc-local


# -- cases and inputs -------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One problem: ``kind`` in CASES, its shape and the cluster block (rows, cols)."""

    kind: str
    n: int  # cholesky/solve: the order; tsqr/lstsq: the rows
    cols: int
    block: tuple[int, int]

    @property
    def label(self) -> str:
        if self.kind in ("tsqr", "lstsq"):
            return f"{self.kind} {self.n}x{self.cols}"
        return f"{self.kind} n={self.n}"


def make_cases(args) -> list[Case]:
    chosen = args.cases
    cases = []
    if "cholesky" in chosen:
        cases += [Case("cholesky", n, n, (args.block or n // 4,) * 2) for n in args.sizes]
    tall_block = (-(-args.tsqr_rows // args.tsqr_blocks), args.tsqr_cols)  # tsqr, lstsq
    if "tsqr" in chosen:
        cases.append(Case("tsqr", args.tsqr_rows, args.tsqr_cols, tall_block))
    if "solve" in chosen:
        cases += [Case("solve", n, n, (args.block or n // 4,) * 2) for n in args.solve_sizes]
    if "lstsq" in chosen:
        cases.append(Case("lstsq", args.tsqr_rows, args.tsqr_cols, tall_block))
    return cases


def make_inputs(case: Case, seed: int) -> tuple[np.ndarray, ...]:
    """The input arrays of ``case`` for ``seed`` (module docstring)."""
    rng = np.random.default_rng(seed)
    n = case.n
    if case.kind == "cholesky":
        r = rng.random((n, n))
        a = r + r.T
        a[np.diag_indices(n)] += 2 * n
        return (a,)
    if case.kind == "tsqr":
        return (rng.random((n, case.cols)),)
    if case.kind == "solve":
        a = rng.random((n, n))
        a[np.diag_indices(n)] += n
        return a, rng.random(n)
    if case.kind == "lstsq":
        return rng.random((n, case.cols)), rng.random(n)
    raise ValueError(f"unknown case {case.kind!r}")


def numpy_call(kind: str, arrays, r_only: bool = False) -> tuple[np.ndarray, ...]:
    """LAPACK through numpy: what every system's result is compared with."""
    if kind == "cholesky":
        return (np.linalg.cholesky(arrays[0]),)
    if kind == "tsqr":
        if r_only:
            return (np.linalg.qr(arrays[0], mode="r"),)
        return tuple(np.linalg.qr(arrays[0]))
    if kind == "lstsq":
        return tuple(np.linalg.lstsq(*arrays, rcond=None)[:2])
    return (np.linalg.solve(*arrays),)


def positive_diagonal(q: np.ndarray | None, r: np.ndarray) -> tuple:
    """``Q, R`` with the signs chosen so that R's diagonal is non-negative (QR is unique up
    to those signs)."""
    signs = np.where(np.diag(r) < 0, -1.0, 1.0)
    return (None if q is None else q * signs), r * signs[:, None]


def max_error(case: Case, result: tuple, reference: tuple) -> float:
    """Largest difference from numpy's result, relative to numpy's largest entry (Q: its
    entries are at most 1, the difference is absolute)."""
    result = tuple(np.asarray(x, dtype=np.float64) for x in result)
    if case.kind == "tsqr" and len(result) == 1:  # numpy-r: R only
        reference = reference[1:]
    for got, want in zip(result, reference, strict=True):
        if got.shape != want.shape:
            raise ValueError(f"result shape {got.shape}, expected {want.shape}")
    if case.kind == "tsqr":
        if len(result) == 1:
            _, r = positive_diagonal(None, result[0])
            _, r_ref = positive_diagonal(None, reference[0])
            return float(np.max(np.abs(r - r_ref)) / np.max(np.abs(r_ref)))
        q, r = positive_diagonal(*result)
        q_ref, r_ref = positive_diagonal(*reference)
        return max(float(np.max(np.abs(r - r_ref)) / np.max(np.abs(r_ref))),
                   float(np.max(np.abs(q - q_ref))))
    return max(float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
               for got, want in zip(result, reference, strict=True))


# -- systems ----------------------------------------------------------------------------------


class NumpySystem:
    """LAPACK in this process; ``r_only``: ``np.linalg.qr(a, mode="r")``."""

    def __init__(self, args, r_only: bool = False) -> None:
        self.r_only = r_only

    def start(self) -> str:
        return "numpy " + np.__version__

    def stop(self) -> None:
        pass

    def put(self, case: Case, arrays):
        return arrays

    def call(self, case: Case, inputs):
        return numpy_call(case.kind, inputs, self.r_only)

    def fetch(self, result) -> tuple:
        return result

    def moved(self) -> tuple[int | None, dict]:
        return None, {}

    def block_text(self, case: Case, info: dict) -> str:
        return "-"


@contextlib.contextmanager
def recorded_runs():
    """Every statistics record tensorc keeps while the block runs (``tc.last_stats()`` only
    keeps the last; ``solve`` makes several runs), in order, each once."""
    from tensorc.driver import block_programs
    from tensorc.driver import stats as run_stats

    originals = (run_stats.record, block_programs.record)
    runs: list[dict] = []

    def keep(stats: dict) -> None:
        runs.append(stats)
        originals[0](stats)

    run_stats.record = block_programs.record = keep
    try:
        yield runs
    finally:
        run_stats.record, block_programs.record = originals


def counts_text(runs: list[dict]) -> str:
    """The block counts the block programs chose, e.g. ``NB=8`` (distinct, in order)."""
    seen = []
    for stats in runs:
        counts = stats.get("block_counts")
        if counts:
            text = ",".join(f"{k}={v}" for k, v in counts.items())
            if text not in seen:
                seen.append(text)
    return "; ".join(seen) or "?"


def tensorc_call(tc, kind: str, inputs) -> tuple:
    """``tc.linalg``'s call for ``kind`` on ``inputs``, waited for."""
    if kind == "cholesky":
        result = (tc.linalg.cholesky(inputs[0]),)
    elif kind == "tsqr":
        result = tuple(tc.linalg.qr(inputs[0]))
    elif kind == "lstsq":
        result = tuple(tc.linalg.lstsq(*inputs)[:2])
    else:
        result = (tc.linalg.solve(*inputs),)
    tc.wait(*result)
    return result


class TensorcSystem:
    """tensorc, locally (no session) or on a private Ray cluster (``ray=True``)."""

    def __init__(self, args, ray: bool = False) -> None:
        self.ray, self.nodes = ray, args.nodes
        self.runs: list[dict] = []

    def start(self) -> str:
        import tensorc as tc

        self.tc = tc
        if not self.ray:
            tc.shutdown()  # the local backend
            return "tensorc local backend (no session)"
        started = time.perf_counter()
        session = tc.init(num_nodes=self.nodes)
        return f"{session.cluster.describe()} (tc.init {time.perf_counter() - started:.1f} s)"

    def stop(self) -> None:
        if self.ray:
            self.tc.shutdown()

    def put(self, case: Case, arrays):
        tc = self.tc
        if not self.ray:
            made = tuple(tc.asarray(a) for a in arrays)
        else:
            made = tuple(tc.asarray(a, block_shape=case.block[:a.ndim]) for a in arrays)
        tc.wait(*made)  # every block on its node before the clock starts
        return made

    def call(self, case: Case, inputs):
        with recorded_runs() as runs:
            result = tensorc_call(self.tc, case.kind, inputs)
        self.runs = runs
        return result

    def fetch(self, result) -> tuple:
        return tuple(np.asarray(x) for x in result)

    def moved(self) -> tuple[int | None, dict]:
        info = {"runs": len(self.runs), "block_counts": counts_text(self.runs),
                "tasks": sum(s.get("tasks") or 0 for s in self.runs)}
        if self.runs and not self.ray:  # the local executor's own threads and BLAS pin
            info.update(workers=self.runs[-1].get("workers"),
                        blas_threads=self.runs[-1].get("blas_threads"))
        if not self.ray:
            return None, info
        return sum(s.get("inter_node_bytes") or 0 for s in self.runs), info

    def block_text(self, case: Case, info: dict) -> str:
        counts = info.get("block_counts", "?")
        if not self.ray:
            return counts
        return f"{'x'.join(map(str, case.block))} in; {counts}"


class _LocalInWorker:
    """A Ray actor running ``tensorc-local``'s calls in its worker (``tensorc-in-worker``)."""

    def __init__(self, blas_threads: int) -> None:
        from threadpoolctl import threadpool_limits

        self.pin = threadpool_limits(blas_threads)  # as this benchmark pins its own BLAS
        self.kind, self.inputs, self.result = None, (), ()

    def ready(self) -> bool:
        return True

    def load(self, kind: str, *arrays) -> None:
        import tensorc as tc  # no session in this process: the local backend

        self.kind, self.inputs, self.result = kind, [tc.asarray(a) for a in arrays], ()

    def run(self) -> None:
        import tensorc as tc

        self.result = tensorc_call(tc, self.kind, self.inputs)

    def fetch(self) -> tuple:
        return tuple(np.asarray(x) for x in self.result)


class InWorkerSystem:
    """tensorc's local backend in a Ray worker on the driver's node of an idle private
    cluster (module docstring)."""

    def __init__(self, args) -> None:
        self.nodes, self.blas_threads = args.nodes, args.blas_threads

    def start(self) -> str:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        import tensorc as tc

        self.tc, self.ray = tc, ray
        session = tc.init(num_nodes=self.nodes)
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                              soft=False)
        self.actor = ray.remote(num_cpus=0)(_LocalInWorker).options(
            scheduling_strategy=here).remote(self.blas_threads)
        ray.get(self.actor.ready.remote())
        return f"{session.cluster.describe()}: the local backend in a worker on the driver's node"

    def stop(self) -> None:
        self.tc.shutdown()

    def put(self, case: Case, arrays):
        self.ray.get(self.actor.load.remote(case.kind, *arrays))

    def call(self, case: Case, inputs):
        self.ray.get(self.actor.run.remote())

    def fetch(self, result) -> tuple:
        return self.ray.get(self.actor.fetch.remote())

    def moved(self) -> tuple[int | None, dict]:
        return None, {}

    def block_text(self, case: Case, info: dict) -> str:
        return "-"


class DaskSystem:
    """Dask distributed on a LocalCluster of ``--nodes`` one-thread worker processes."""

    def __init__(self, args) -> None:
        self.nodes = args.nodes

    def start(self) -> str:
        import dask
        import dask.array as da
        from dask.distributed import Client, LocalCluster, wait

        self.da, self.wait = da, wait
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        self.cluster = LocalCluster(n_workers=self.nodes, threads_per_worker=1, processes=True,
                                    dashboard_address=None)
        self.client = Client(self.cluster)
        return (f"dask {dask.__version__}: LocalCluster of {self.nodes} workers x 1 thread")

    def stop(self) -> None:
        self.client.close()
        self.cluster.close()

    def put(self, case: Case, arrays):
        da = self.da
        if case.kind == "tsqr":
            made = (da.from_array(arrays[0], chunks=case.block, name=False),)
        else:
            made = tuple(da.from_array(a, chunks=case.block[:a.ndim], name=False)
                         for a in arrays)
        made = tuple(self.client.persist(list(made)))
        self.wait(list(made))
        self.client.run(_clear_incoming_log)  # count this call's transfers only
        return made

    def call(self, case: Case, inputs):
        da = self.da
        if case.kind == "cholesky":
            lazy = [da.linalg.cholesky(inputs[0], lower=True)]
        elif case.kind == "tsqr":
            lazy = list(da.linalg.qr(inputs[0]))
        elif case.kind == "lstsq":
            lazy = list(da.linalg.lstsq(*inputs)[:2])
        else:
            lazy = [da.linalg.solve(*inputs)]
        result = self.client.persist(lazy)
        self.wait(result)
        return tuple(result)

    def fetch(self, result) -> tuple:
        return tuple(self.client.compute(list(result), sync=True))

    def moved(self) -> tuple[int | None, dict]:
        try:
            logs = self.client.run(_incoming_log_total)
        except Exception as err:  # an older distributed without the log: n/a
            return None, {"bytes_note": f"n/a ({type(err).__name__})"}
        total = sum(v[0] for v in logs.values())
        full = any(v[1] for v in logs.values())
        return total, ({"bytes_note": "lower bound: a worker's log is full"} if full else {})

    def block_text(self, case: Case, info: dict) -> str:
        return "x".join(map(str, case.block))


def _clear_incoming_log(dask_worker) -> None:
    dask_worker.transfer_incoming_log.clear()


def _incoming_log_total(dask_worker) -> tuple[int, bool]:
    log = dask_worker.transfer_incoming_log
    return sum(entry["total"] for entry in log), len(log) == log.maxlen


def make_system(name: str, args):
    if name in ("numpy", "numpy-r"):
        return NumpySystem(args, r_only=name == "numpy-r")
    if name == "tensorc-in-worker":
        return InWorkerSystem(args)
    if name in ("tensorc-local", "tensorc-ray"):
        return TensorcSystem(args, ray=name == "tensorc-ray")
    return DaskSystem(args)


# -- Ray's floor and the machine's bound --------------------------------------------------------


def _load_floor():
    """``benchmarks/ray_floor.py``, out of ``sys.modules`` so that Ray sends its actor's code
    by value."""
    return _load_script("ray_floor.py", "linalg_ray_floor", register=False)


def floor_matches(case: Case, floor, nodes: int) -> bool:
    """Whether ``ray_floor.py`` has this case's skeleton: its 4 x 4 blocks of a square case
    over 4 nodes, its 8 row blocks of a TSQR."""
    if nodes != floor.NODES or case.kind == "lstsq":  # no skeleton of lstsq
        return False
    if case.kind == "tsqr":
        return case.n == case.block[0] * floor.TSQR_BLOCKS
    return case.block == (case.n // floor.BLOCKS,) * 2 and case.n % floor.BLOCKS == 0


def run_floors(cases: list[Case], args) -> dict[Case, dict]:
    """Ray's own floor of each case :func:`floor_matches` (:func:`measure_floors`) on a
    private cluster of ``--nodes`` nodes, started and stopped here; ``{}`` when it fails
    (the verdicts then say MISS, not BEYOND)."""
    floor = _load_floor()
    chosen = [case for case in cases if floor_matches(case, floor, args.nodes)]
    if not chosen:
        return {}
    import tensorc as tc

    print("ray-floor ...", flush=True)
    try:
        tc.init(num_nodes=args.nodes)
        return measure_floors(floor, floor.node_actors(), chosen, args.repeats)
    except Exception:
        traceback.print_exc()
        return {}
    finally:
        tc.shutdown()


def measure_floors(floor, actors, cases: list[Case], repeats: int) -> dict[Case, dict]:
    """``{case: {"seconds": median, "cpu": mean core-seconds a run, "way": its skeleton}}``:
    ``ray_floor.py``'s skeleton of each case (the block moves and stores every plan of it
    makes on this layout, no arithmetic; for a TSQR the one of its two that spends less CPU)
    on ``actors`` (``floor.node_actors()``), ``repeats`` timed runs after a warm-up, which
    neither figure counts."""
    found: dict[Case, dict] = {}
    for case in cases:
        if case.kind == "tsqr":  # either way is a plan's: the bound takes the cheaper CPU
            ways = floor.tsqr_floors(actors, case.n, case.cols, repeats)
        else:  # through Ray, or pulled as tensorc's calls pull input blocks
            ways = floor.cholesky_floors(actors, case.n, repeats, solve=case.kind == "solve")
        way = min(ways, key=lambda w: ways[w].mean_cpu or 0.0)
        runs = ways[way]
        found[case] = {"seconds": runs.median, "way": way, "cpu": runs.mean_cpu}
        print(f"  ray-floor     {case.label:22s} median {found[case]['seconds']:.3f} s "
              f"({way}), CPU " + common.fmt(found[case]["cpu"], "{:.3f}") + " s", flush=True)
    return found


def cpu_bounds(records: list[Record], floors: dict[Case, dict], cores: int
               ) -> dict[Case, dict]:
    """Per case with a floor: the least time a run on this machine's ``cores`` can take
    when it moves and stores the plan's blocks (the floor's cheaper way) and does
    tensorc's arithmetic:
    ``(arithmetic CPU + floor CPU) / cores``. The arithmetic's CPU is the least any of
    tensorc's runs of the case (that ran without error) was seen to spend on it: the local
    backend's mean CPU a call (tensorc-local, tensorc-in-worker; their threads can spend
    more than the kernels need) or tensorc-ray's less the floor's. A cluster run spends at
    least the floor's CPU and its arithmetic's, and takes at least its CPU over the cores.
    The bound is empirical, not a proof: when tensorc-ray's CPU less the floor's is the
    least, it is that run's own CPU over the cores (the time it would take with every core
    busy). Only meaningful where every node shares these cores (the private cluster on one
    machine; ``/proc/stat`` counts the whole machine)."""
    spent: dict[Case, list[float]] = {}
    for found in records:
        if (found.system in ("tensorc-local", "tensorc-in-worker", "tensorc-ray")
                and found.cpu and found.status == "ok"):
            cpu = statistics.fmean(found.cpu)
            if found.system == "tensorc-ray":
                floor_cpu = floors.get(found.case, {}).get("cpu")
                if floor_cpu is None:
                    continue
                cpu -= floor_cpu
            spent.setdefault(found.case, []).append(cpu)
    bounds = {}
    for case, floor in floors.items():
        if floor.get("cpu") is not None and case in spent:
            arithmetic = max(0.0, min(spent[case]))
            bounds[case] = {"arithmetic_cpu": arithmetic, "floor_cpu": floor["cpu"],
                            "floor_seconds": floor["seconds"], "cores": cores,
                            "seconds": (arithmetic + floor["cpu"]) / cores}
    return bounds


# -- timing -----------------------------------------------------------------------------------


@dataclass
class Record:
    system: str
    case: Case
    blas_threads: int
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # the machine's busy core-seconds a call
    first: float | None = None
    bytes: list[int] = field(default_factory=list)
    bytes_note: str | None = None
    block: str = "-"
    info: dict = field(default_factory=dict)
    max_error: float | None = None
    gather: list[float] = field(default_factory=list)
    """Seconds to gather each timed call's result into the driver, after its clock."""
    status: str = "ok"
    error: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    def to_json(self) -> dict[str, Any]:
        return {"system": self.system, "case": self.case.kind, "n": self.case.n,
                "cols": self.case.cols, "label": self.case.label,
                "block": list(self.case.block) if self.system in ("tensorc-ray", "dask")
                else None, "block_used": self.block,
                "seconds": self.seconds, "median": self.median,
                "min": min(self.seconds) if self.seconds else None, "first": self.first,
                "cpu_seconds": self.cpu, "cpu_mean": statistics.fmean(self.cpu)
                if self.cpu else None,
                "bytes": int(statistics.median(self.bytes)) if self.bytes else None,
                "bytes_per_call": self.bytes, "bytes_note": self.bytes_note,
                "blas_threads": self.blas_threads, "max_error": self.max_error,
                "gather_seconds": self.gather,
                "gather_median": statistics.median(self.gather) if self.gather else None,
                "status": self.status, "error": self.error, "tensorc": self.info or None}


def run_case(system, name: str, case: Case, reference: tuple, args) -> Record:
    """One warm-up call checked against numpy, then ``args.repeats`` timed calls, each on a
    fresh input put in place off the clock."""
    found = Record(name, case, args.blas_threads)
    try:
        inputs = system.put(case, make_inputs(case, 0))
        started = time.perf_counter()
        result = system.call(case, inputs)
        found.first = time.perf_counter() - started
        del inputs
        found.max_error = max_error(case, system.fetch(result), reference)
        del result
        if not found.max_error <= TOLERANCE:
            found.status = "WRONG"
        for seed in range(1, args.repeats + 1):
            inputs = system.put(case, make_inputs(case, seed))
            with common.machine_cpu(found.cpu):
                started = time.perf_counter()
                result = system.call(case, inputs)
                found.seconds.append(time.perf_counter() - started)
            moved, info = system.moved()
            found.bytes_note = info.pop("bytes_note", found.bytes_note)
            found.info.update(info)
            if moved is not None:
                found.bytes.append(moved)
            started = time.perf_counter()
            system.fetch(result)
            found.gather.append(time.perf_counter() - started)
            del inputs, result
        found.block = system.block_text(case, found.info)
    except Exception as err:
        traceback.print_exc()
        found.status, found.error = "ERROR", f"{type(err).__name__}: {err}"
    return found


def run_system(name: str, cases: list[Case], references: dict, args) -> list[Record]:
    """Start ``name``'s backend (a cluster for tensorc-ray and dask), run every case (numpy
    also runs ``numpy-r`` for tsqr), stop it."""
    names = [name] + (["numpy-r"] if name == "numpy" and any(
        c.kind == "tsqr" for c in cases) else [])
    system = make_system(name, args)
    print(f"{name} ...", flush=True)
    try:
        print(f"  {system.start()}", flush=True)
    except Exception as err:
        traceback.print_exc()
        return [Record(name, c, args.blas_threads, status="ERROR",
                       error=f"start: {type(err).__name__}: {err}") for c in cases]
    records = []
    try:
        for row in names:
            runner = system if row == name else make_system(row, args)
            for case in cases:
                if row == "numpy-r" and case.kind != "tsqr":
                    continue
                found = run_case(runner, row, case, references[case], args)
                records.append(found)
                print(f"  {row:13s} {case.label:22s} " + (
                    f"median {found.median:.3f} s of {[round(t, 3) for t in found.seconds]}, "
                    f"first {found.first:.3f} s, max err {found.max_error:.1e}"
                    if found.status != "ERROR" else found.error), flush=True)
    finally:
        try:
            system.stop()
        except Exception:  # a cluster that will not stop must not hide the results
            traceback.print_exc()
    return records


# -- report -----------------------------------------------------------------------------------


def fmt_bytes(found: Record) -> str:
    if not found.bytes:
        return (found.bytes_note or "-") if found.system == "dask" else "-"
    text = f"{int(statistics.median(found.bytes)):,}"
    return text + (" *" if found.bytes_note else "")


def fmt_cpu(found: Record) -> str:
    """The machine's busy core-seconds per timed call, their mean (``/proc/stat`` counts
    in ticks of 10 ms: one call's count is a tick either way, their sum over the calls is
    not), and how many cores that kept busy over the mean call."""
    if not found.cpu or not found.seconds:
        return "-"
    cpu = statistics.fmean(found.cpu)
    return f"{cpu:.3f} ({cpu / statistics.fmean(found.seconds):.1f})"


def results_table(records: list[Record]) -> str:
    rows = []
    for found in records:
        check = found.status if found.status == "ok" else f"<<< {found.status}"
        if found.error:
            check += f": {found.error}"
        rows.append([found.case.label, found.system, found.block,
                     common.fmt(found.median, "{:.3f}"),
                     common.fmt(min(found.seconds) if found.seconds else None, "{:.3f}"),
                     common.fmt(found.first, "{:.3f}"),
                     common.fmt(statistics.median(found.gather) if found.gather else None,
                                "{:.3f}"), fmt_cpu(found), fmt_bytes(found),
                     common.fmt(found.max_error, "{:.1e}"), check])
    headers = ["case", "system", "block", "median s", "min s", "first s", "gather s",
               "CPU s (cores)",
               "bytes moved", "max err", "check"]
    return common.format_table(headers, rows)


def ratios(records: list[Record], cases: list[Case]) -> list[dict]:
    """Per case: tensorc-local / LAPACK, tensorc-ray / tensorc-local, tensorc-ray /
    tensorc-in-worker and Dask / tensorc-ray (medians)."""
    by = {(r.case, r.system): r.median for r in records if r.status != "ERROR"}

    def over(a, b):
        return a / b if a and b else None

    out = []
    for case in cases:
        lapack, local = by.get((case, "numpy")), by.get((case, "tensorc-local"))
        ray, dask = by.get((case, "tensorc-ray")), by.get((case, "dask"))
        out.append({"case": case.label, "kind": case.kind, "n": case.n,
                    "local": local, "dask": dask,
                    "local_over_lapack": over(local, lapack),
                    "ray_over_local": over(ray, local),
                    "ray_over_in_worker": over(ray, by.get((case, "tensorc-in-worker"))),
                    "dask_over_ray": over(dask, ray)})
    return out


def ratio_table(rows: list[dict]) -> str:
    columns = ("local_over_lapack", "ray_over_local", "ray_over_in_worker", "dask_over_ray")
    body = [[r["case"], *(common.fmt(r[c], "{:.2f}x") for c in columns)] for r in rows]
    return common.format_table(["case", "tensorc-local / LAPACK", "tensorc-ray / local",
                                "tensorc-ray / in a worker", "Dask / tensorc-ray"], body)


def _verdict(met: bool | None, wanted: float | None, bound: dict | None) -> str:
    """PASS, MISS, ``-`` (not measured), or BEYOND: missed, and the run time the target
    asks for (``wanted`` seconds) is under this machine's CPU bound (:func:`cpu_bounds`)."""
    if met is None:
        return "-"
    if met:
        return "PASS"
    if bound is not None and wanted is not None and wanted < bound["seconds"]:
        return "BEYOND"
    return "MISS"


def _bound_text(wanted: float, bound: dict) -> str:
    return (f"; the {wanted * 1e3:.0f} ms it asks for is under this machine's bound, "
            f"{bound['seconds'] * 1e3:.0f} ms: ({bound['arithmetic_cpu'] * 1e3:.0f} core-ms "
            f"of arithmetic + {bound['floor_cpu'] * 1e3:.0f} of Ray's floor) / "
            f"{bound['cores']} cores")


def targets(rows: list[dict], bounds: dict[str, dict] | None = None
            ) -> list[tuple[str, str]]:
    """Each target's text and verdict (:func:`_verdict`); ``bounds`` by case label."""
    bounds = bounds or {}
    found = []
    chol = [r for r in rows if r["kind"] == "cholesky" and r["n"] == LOCAL_TARGET_N]
    value = chol[0]["local_over_lapack"] if chol else None
    found.append((f"tensorc-local within {LOCAL_TARGET:g}x of LAPACK, Cholesky n="
                  f"{LOCAL_TARGET_N}: " + ("not measured" if value is None else f"{value:.2f}x"),
                  _verdict(None if value is None else value <= LOCAL_TARGET, None, None)))
    for row in (r for r in rows if r["kind"] in TARGET_CASES):
        bound = bounds.get(row["case"])
        for value, wanted, met, text in (
                (row["ray_over_local"],
                 row["local"] * LOCAL_RUN_TARGET if row["local"] else None,
                 lambda v: v <= LOCAL_RUN_TARGET,
                 f"tensorc-ray within {LOCAL_RUN_TARGET:g}x of tensorc-local"),
                (row["dask_over_ray"],
                 row["dask"] / CLUSTER_TARGET if row["dask"] else None,
                 lambda v: v >= CLUSTER_TARGET,
                 f"tensorc-ray >= {CLUSTER_TARGET:g}x faster than Dask on the same blocks")):
            verdict = _verdict(None if value is None else met(value), wanted, bound)
            found.append((f"{text}, {row['case']}: "
                          + ("not measured" if value is None else f"{value:.2f}x")
                          + (_bound_text(wanted, bound) if verdict == "BEYOND" else ""),
                          verdict))
    return found


def bound_table(records: list[Record], bounds: dict[Case, dict]) -> str:
    """Per case with a bound: the floor, the arithmetic's CPU, the bound, and tensorc-ray's
    time and CPU."""
    ray = {r.case: r for r in records if r.system == "tensorc-ray" and r.seconds}
    body = []
    for case, bound in bounds.items():
        run = ray.get(case)
        body.append([case.label, f"{bound['floor_seconds'] * 1e3:.1f}",
                     f"{bound['floor_cpu'] * 1e3:.0f}", f"{bound['arithmetic_cpu'] * 1e3:.0f}",
                     f"{bound['seconds'] * 1e3:.1f}",
                     common.fmt(run.median * 1e3 if run else None, "{:.1f}"),
                     common.fmt(statistics.fmean(run.cpu) * 1e3 if run and run.cpu else None,
                                "{:.0f}")])
    return common.format_table(
        ["case", "Ray floor ms", "floor core-ms", "arithmetic core-ms", "bound ms",
         "tensorc-ray ms", "tensorc-ray core-ms"], body)


def plot(records: list[Record], cases: list[Case], path: str) -> None:
    try:
        import matplotlib
    except ImportError:
        print("plot skipped: matplotlib not installed")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [s for s in ROWS if any(r.system == s and r.median for r in records)]
    by = {(r.case, r.system): r for r in records}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / max(1, len(shown))
    xs = np.arange(len(cases))
    for k, system in enumerate(shown):
        found = [by.get((c, system)) for c in cases]
        left.bar(xs + k * width, [f.median or 0 if f else 0 for f in found], width,
                 label=system)
        right.bar(xs + k * width,
                  [statistics.median(f.bytes) / 2**20 if f and f.bytes else 0 for f in found],
                  width, label=system)
    left.set_yscale("log")
    for axis, title in ((left, "time per call (s, median, log scale)"),
                        (right, "bytes moved between nodes/workers (MiB)")):
        axis.set_xticks(xs + width * (len(shown) - 1) / 2, [c.label for c in cases],
                        rotation=15)
        axis.set_title(title)
    left.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


# -- main -------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    positive = common._positive_int  # noqa: SLF001 - the shared flags' type
    made = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    made.add_argument("--sizes", type=positive, nargs="+", default=[2048, 4096],
                      help="Cholesky orders n")
    made.add_argument("--solve-sizes", type=positive, nargs="+", default=[2048],
                      help="solve orders n")
    made.add_argument("--tsqr-rows", type=positive, default=2**18, help="TSQR rows")
    made.add_argument("--tsqr-cols", type=positive, default=64, help="TSQR columns")
    made.add_argument("--tsqr-blocks", type=positive, default=8, help="TSQR row blocks")
    made.add_argument("--block", type=positive, default=None,
                      help="cluster block size b for cholesky and solve (default n / 4)")
    made.add_argument("--nodes", type=positive, default=4,
                      help="Ray nodes and Dask workers")
    made.add_argument("--repeats", type=positive, default=3, help="timed calls per system")
    made.add_argument("--cases", type=common.name_list(CASES), default=list(CASES),
                      help=f"comma list of {', '.join(CASES)}")
    made.add_argument("--systems", type=common.name_list(SYSTEMS), default=list(SYSTEMS),
                      help=f"comma list of {', '.join(SYSTEMS)}")
    made.add_argument("--blas-threads", type=positive, default=common.cpu_count(),
                      help="BLAS threads of this process, pinned with threadpoolctl")
    made.add_argument("--no-floor", action="store_true",
                      help="skip Ray's floor (benchmarks/ray_floor.py) and the machine's "
                      "bound it gives the cluster targets")
    made.add_argument("--json", metavar="PATH", help="write every record as JSON")
    made.add_argument("--plot", metavar="PATH", help="write a PNG of the times and bytes")
    return made


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    cases = make_cases(args)
    import scipy.linalg  # noqa: F401 - load scipy's BLAS too, so the pin below sees it

    with common.pinned_blas(args.blas_threads) as blas:
        print(f"block linear algebra, float64: {', '.join(c.label for c in cases)}; cluster "
              f"blocks {', '.join(f'{c.label}: ' + 'x'.join(map(str, c.block)) for c in cases)}"
              f"; {args.nodes} nodes; median of {args.repeats} calls on fresh inputs after "
              "one warm-up", flush=True)
        references = {case: numpy_call(case.kind, make_inputs(case, 0)) for case in cases}
        records: list[Record] = []
        floors: dict[Case, dict] = {}
        for name in SYSTEMS:
            if name in args.systems:
                records += run_system(name, cases, references, args)
            if name == "tensorc-ray" and name in args.systems and not args.no_floor:
                floors = run_floors(cases, args)

    order = {s: k for k, s in enumerate(ROWS)}
    records.sort(key=lambda r: (cases.index(r.case), order[r.system]))
    print()
    print(results_table(records))
    print("bytes moved: tensorc-ray, inter_node_bytes of tc.last_stats() (the placer's "
          "count), summed over the call's runs; dask, the workers' transfer_incoming_log"
          "; * marks a lower bound")
    print("CPU s: the machine's busy core-seconds per timed call (every process: the Ray "
          "nodes, their object stores and Dask's workers included), mean; in brackets "
          "the cores that kept busy over the mean call")
    rows = ratios(records, cases)
    print()
    print(ratio_table(rows))
    bounds = cpu_bounds(records, floors, common.cpu_count())
    if bounds:
        print()
        print(bound_table(records, bounds))
        print("bound: the least time a run can take on this machine's cores when it moves "
              "and stores the plan's blocks (Ray's floor, the cheaper way, no arithmetic: "
              "benchmarks/ray_floor.py) and does the arithmetic (the least CPU a tensorc run "
              "of the case spent on it: local, in a worker, or on Ray less the floor): "
              "(arithmetic + floor core-ms) / cores. A target asking for less is BEYOND "
              "the machine.")
    print()
    verdicts = targets(rows, {case.label: bound for case, bound in bounds.items()})
    for text, verdict in verdicts:
        print(f"[{verdict}] {text}")
    bad = [r for r in records if r.status != "ok"]
    for found in bad:
        print(f"[{found.status}] {found.system} {found.case.label}: "
              + (found.error or f"max err {found.max_error:.2e} > {TOLERANCE:g}"))
    if args.json:
        environment = common.environment(blas)
        environment["dask_scheduler"] = (f"distributed LocalCluster, {args.nodes} workers x "
                                         "1 thread")
        common.write_json(args.json, {
            "benchmark": "linalg", "args": vars(args), "environment": environment,
            "records": [r.to_json() for r in records], "ratios": rows,
            "floors": [{"case": case.label, **found} for case, found in floors.items()],
            "bounds": [{"case": case.label, **bound} for case, bound in bounds.items()],
            "targets": [{"target": t, "met": {"PASS": True, "-": None}.get(v, False),
                         "verdict": v} for t, v in verdicts],
            "tolerance": TOLERANCE})
    if args.plot:
        plot(records, cases, args.plot)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
