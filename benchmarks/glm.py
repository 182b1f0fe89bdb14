"""Logistic regression by Newton's method: tensorc (local and on a 4-node Ray cluster)
against numpy, Dask-ML on Dask distributed and scikit-learn, on the clock.

The data: ``make_data`` of ``examples/logistic_regression.py``, N = ``--n`` rows (default
200,000), D = ``--d`` features (16), float64, y in {0, 1}; ``--iterations`` Newton steps (10)
from w = 0. Systems (``--systems``, a comma list; default all):

- ``numpy``: ``fit(np, X, y)`` of the example (one process; ridge ``--ridge`` = 1e-6, the
  example's default) — the reference weights;
- ``tensorc-local``: ``fit(tc, tc.asarray(X), tc.asarray(y))`` with no Ray session (one
  planned program per Newton step, ``w.compute()``);
- ``tensorc-ray``: the same on a private Ray cluster of 4 one-CPU nodes
  (``tc.init(num_nodes=4)``), X and y in 4 row blocks (``tc.asarray(X, grid=(4, 1))``,
  block i of X and of y on node i). Bytes: one more fit with the session's ``measure``
  switched on (Ray's object directory, off the timed calls), summed over the iterations;
  the planner's modelled bytes too;
- ``dask-ml``: ``dask_ml.linear_model.LogisticRegression(solver="newton")`` on
  ``LocalCluster(n_workers=4, threads_per_worker=1)``, X and y as dask arrays of the same
  4 row chunks, chunk i of X and of y scattered to worker i (its best placement). Bytes:
  the workers' ``transfer_outgoing_bytes_total`` counters (worker to worker; the client's
  traffic is not counted);
- ``sklearn``: ``sklearn.linear_model.LogisticRegression(solver="newton-cholesky")``, one
  process.

What differs between the systems (printed with the results too):

- dask-glm's ``newton`` (what Dask-ML's ``solver="newton"`` calls) ignores ``penalty`` and
  ``C``: it fits the unregularised model, so its weights are also compared with numpy at
  ridge 0. It takes ``max_iter + 1`` steps when ``tol=0`` (it stops once ``iter_count >
  max_iter``), so it is given ``max_iter = iterations - 1``; it solves each step with
  ``np.linalg.lstsq`` on the client (``np.linalg.solve`` in the example), and is run with
  ``normalize=False`` (its default rescales the columns first: one more pass over X; Newton
  steps are invariant to that rescaling). ``fit_intercept=False`` everywhere.
- scikit-learn's objective ``C * sum(loss) + |w|^2 / 2`` is the example's with
  ``C = 1 / ridge`` (``C = inf`` at ridge 0); ``tol=0`` and ``max_iter = iterations`` make
  it take all the steps; its Newton steps come with a line search (full steps are taken on
  this data).

Timing: every system gets one warm-up call, then ``--repeats`` timed calls (median
reported), each on a fresh input set made and settled before the clock starts (the same
values, new objects: new Ray objects placed and waited for with ``tc.wait``, new Dask keys
scattered and persisted; numpy and scikit-learn get a copy), so no system is handed an
earlier call's copies or results. Only the fit is timed; for tensorc that includes the
final ``w.compute()`` (w stays on the cluster), for Dask-ML the weights come back to the
client as numpy. Each timed tensorc call's per-iteration statistics (``tc.last_stats()``
after each ``w.compute()``: plan and run seconds, tasks, remote calls, statements) are kept.
The machine has 2 cores and is shared: quote ratios from one run.

Target: Dask-ML / tensorc-ray time at least 2 (NumS reports 2x on this workload). tensorc
must agree with numpy to rtol 1e-8 (exit status 1 if not); the peers' differences are
reported, not asserted.

``--lbfgs`` times scikit-learn's own ``LogisticRegression(solver="lbfgs", max_iter=
--lbfgs-iter, tol=0)`` instead (issue 26's target: on a 2M x 32 tc array on 4 Ray nodes,
within 2x of scikit-learn on numpy in one process): X of ``--n`` x ``--d`` normal values, y
from a noisy linear model; scikit-learn on numpy, then on tc arrays (``array_api_dispatch``)
locally and on ``tc.init(num_nodes=4)`` (X and y in 4 row blocks), each tensorc fit
interleaved with a numpy fit (the order alternating; one warm-up each). Prints medians, the
median of the per-pair ratios, the synchronisation points one fit took (the array programs
it evaluated: scikit-learn reads the loss, the gradient and the intercept's gradient back
each iteration) and where their time went (planning, running, the rest of each program:
lowering, statistics), and the coefficients' difference from numpy's.

Usage: ``.venv/bin/python benchmarks/glm.py [--n 200000] [--d 16] [--iterations 10]
[--repeats 3] [--ridge 1e-6] [--systems numpy,tensorc-local,tensorc-ray,dask-ml,sklearn]
[--json PATH|-] [--plot PATH]``; ``.venv/bin/python benchmarks/glm.py --lbfgs --n 2000000
--d 32 [--lbfgs-iter 50] [--repeats 3] [--systems numpy,tensorc-local,tensorc-ray]``.
Dask-ML, scikit-learn, Dask distributed and matplotlib are the ``bench`` extra:
``.venv/bin/pip install -e '.[bench]'``; a missing one is skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import runpy
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

# the benchmarks folder holds distributed.py, named like Dask's ``distributed`` package:
# keep it off the import path, or ``dask.distributed`` would import that script
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
EXAMPLE = HERE.parent / "examples" / "logistic_regression.py"

NODES = 4  # Ray nodes, Dask workers and row blocks
SYSTEMS = ("numpy", "tensorc-local", "tensorc-ray", "dask-ml", "sklearn")
TARGET_RATIO = 2.0
TARGET_LBFGS = 2.0  # --lbfgs: tensorc on Ray at most this times scikit-learn on numpy

NOTES = {
    "numpy": "fit(np, X, y) of examples/logistic_regression.py; the reference",
    "tensorc-local": "fit(tc, tc.asarray(X), tc.asarray(y)), no Ray session",
    "tensorc-ray": f"{NODES} one-CPU Ray nodes, X and y in {NODES} row blocks; bytes "
                   "measured by Ray's object directory (one extra fit)",
    "dask-ml": "solver='newton' (dask-glm): no regularisation (ignores penalty/C), "
               "max_iter=iterations-1 (it takes max_iter+1 steps), tol=0, normalize=False, "
               "lstsq on the client; bytes: worker-to-worker transfers",
    "sklearn": "solver='newton-cholesky', C=1/ridge (the same ridge), tol=0, "
               "max_iter=iterations, with line search",
}


class Skipped(Exception):
    """A system that cannot run here (a peer not installed)."""


def load_example():
    """``fit`` and ``make_data`` of examples/logistic_regression.py, run by path (its folder
    is not put on sys.path; ``run_name`` keeps its ``main`` from running)."""
    namespace = runpy.run_path(str(EXAMPLE), run_name="logistic_regression_example")
    return namespace["fit"], namespace["make_data"]


def row_bounds(n: int, blocks: int) -> list[tuple[int, int]]:
    """The row blocks of tensorc's ``grid=(blocks, 1)``: equal blocks of ceil(n / blocks)."""
    size = -(-n // blocks)
    return [(min(i * size, n), min((i + 1) * size, n)) for i in range(blocks)]


def max_diff(w, reference) -> float:
    return float(np.max(np.abs(np.asarray(w, dtype=np.float64).ravel() - reference)))


def timed_calls(fresh, call, repeats: int, before=None, after=None) -> dict:
    """One warm-up ``call(*fresh())``, then ``repeats`` timed calls on fresh inputs.
    ``before``/``after`` run around each timed call, off the clock."""
    started = time.perf_counter()
    call(*fresh())
    first = time.perf_counter() - started
    times, extras, weights = [], [], None
    for _ in range(repeats):
        inputs = fresh()
        if before:
            before()
        started = time.perf_counter()
        weights = call(*inputs)
        times.append(time.perf_counter() - started)
        if after:
            extras.append(after())
        del inputs
    return {"times": times, "first": first, "weights": weights, "extras": extras}


# -- single-process systems -------------------------------------------------------------------


def run_numpy(args, fit, X, y) -> dict:
    found = timed_calls(lambda: (X.copy(), y.copy()),
                        lambda X_, y_: fit(np, X_, y_, args.iterations, args.ridge),
                        args.repeats)
    return {**found, "bytes": None}


def run_sklearn(args, fit, X, y) -> dict:
    try:
        import sklearn
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression
    except ImportError as err:
        raise Skipped(f"not installed: {err.name or err}") from err

    C = 1.0 / args.ridge if args.ridge > 0 else np.inf
    n_iter = []

    def call(X_, y_):
        model = LogisticRegression(solver="newton-cholesky", C=C, fit_intercept=False,
                                   tol=0.0, max_iter=args.iterations)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # tol=0: never "converged"
            model.fit(X_, y_)
        n_iter.append(int(np.max(model.n_iter_)))
        return model.coef_.ravel()

    found = timed_calls(lambda: (X.copy(), y.copy()), call, args.repeats)
    return {**found, "bytes": None, "version": sklearn.__version__,
            "steps_taken": n_iter[-1], "ridge": args.ridge}


# -- tensorc ----------------------------------------------------------------------------------


@contextlib.contextmanager
def iteration_stats(tc, sink: list):
    """Keep ``tc.last_stats()`` after every ``Array.compute()`` (the example's fit computes
    w once per Newton step): one entry per iteration."""
    original = tc.Array.compute

    def compute(self):
        result = original(self)
        sink.append(dict(tc.last_stats()))
        return result

    tc.Array.compute = compute
    try:
        yield sink
    finally:
        tc.Array.compute = original


PER_ITERATION = ("program_seconds", "plan_seconds", "run_seconds", "tasks", "remote_calls",
                 "statements_run", "inter_node_bytes")


def summarize_iterations(runs: list[list[dict]]) -> dict:
    """Per-call sums of the per-iteration statistics, median over the timed calls, and
    each iteration's figures of the last call."""
    out: dict = {}
    for key in PER_ITERATION:
        sums = [sum(s.get(key) or 0 for s in run) for run in runs if run]
        out[key] = statistics.median(sums) if sums else None
    last = runs[-1] if runs else []
    out["iterations"] = len(last)
    out["last_call"] = [{k: s.get(k) for k in PER_ITERATION} for s in last]
    return out


def statement_texts(w) -> dict[str, str]:
    """``{label: "t0 = permute(x1)"}`` of the program that computed ``w`` (from
    ``w.explain()``), to name the statements of ``tc.last_stats()["statements"]``."""
    try:
        text = w.explain()
    except Exception as err:  # the report goes on without the names
        return {"?": f"explain() failed: {type(err).__name__}: {err}"}
    return {m.group(2): m.group(1).strip()
            for m in re.finditer(r"^== ((t\d+) = .*?)(?=   #|$)", text, re.MULTILINE)}


def by_statement(run: list[dict], texts: dict[str, str]) -> list[dict]:
    """Each statement of one fit: its text and the median over the iterations of its run
    seconds, tasks and remote calls."""
    rows: dict[str, list[dict]] = {}
    for stats in run:
        for statement in stats.get("statements") or []:
            rows.setdefault(statement["label"], []).append(statement)
    out = []
    for label, seen in rows.items():
        row = {"label": label, "text": texts.get(label, label)}
        for key in ("run_seconds", "tasks", "remote_calls"):
            values = [s[key] for s in seen if s.get(key) is not None]
            row[key] = statistics.median(values) if values else None
        out.append(row)
    return out


def measured_bytes(run: list[dict]) -> tuple[int | None, bool]:
    """Bytes Ray moved over one fit, summed over its iterations, and whether a program's
    total had to be rebuilt from its per-node sums (``measured_inter_node_bytes`` is
    None when a statement, e.g. the whole-array solve, reports no measurement)."""
    total, rebuilt = 0, False
    for stats in run:
        if stats.get("measured_inter_node_bytes") is not None:
            total += stats["measured_inter_node_bytes"]
        elif stats.get("measured_node_recv_bytes") is not None:
            total += sum(stats["measured_node_recv_bytes"])
            rebuilt = True
        else:
            return None, rebuilt
    return total, rebuilt


def run_tensorc_local(args, fit, X, y) -> dict:
    import tensorc as tc

    tc.shutdown()  # local executor
    runs: list[list[dict]] = []

    def call(X_, y_):
        runs.append([])
        with iteration_stats(tc, runs[-1]):
            return fit(tc, X_, y_, args.iterations, args.ridge)

    found = timed_calls(lambda: (tc.asarray(X), tc.asarray(y)), call, args.repeats)
    statements = by_statement(runs[-1], statement_texts(found["weights"]))
    found["weights"] = np.asarray(found["weights"])
    return {**found, "bytes": None, "stats": summarize_iterations(runs[1:]),
            "statements": statements}


def run_tensorc_ray(args, fit, X, y) -> dict:
    import tensorc as tc

    started = time.perf_counter()
    session = tc.init(num_nodes=NODES)
    init_seconds = time.perf_counter() - started
    print(f"  tensorc: {session.cluster.describe()} (tc.init {init_seconds:.1f} s)", flush=True)
    runs: list[list[dict]] = []

    def fresh():
        X_ = tc.asarray(X, grid=(NODES, 1))
        y_ = tc.asarray(y, grid=(NODES,))
        tc.wait(X_, y_)  # every block on its node before the clock starts
        return X_, y_

    def call(X_, y_):
        runs.append([])
        with iteration_stats(tc, runs[-1]):
            return fit(tc, X_, y_, args.iterations, args.ridge)

    try:
        found = timed_calls(fresh, call, args.repeats)
        statements = by_statement(runs[-1], statement_texts(found["weights"]))
        found["weights"] = np.asarray(found["weights"])
        # one more fit, off the clock, with Ray's object directory read after every run
        measured: list[dict] = []
        session.measure = True
        try:
            inputs = fresh()
            with iteration_stats(tc, measured):
                fit(tc, *inputs, args.iterations, args.ridge)
        finally:
            session.measure = False
        moved, rebuilt = measured_bytes(measured)
    finally:
        tc.shutdown()
    stats = summarize_iterations(runs[1:])
    return {**found, "bytes": moved, "bytes_rebuilt_from_per_node": rebuilt,
            "modelled_bytes": stats["inter_node_bytes"], "stats": stats,
            "init_seconds": init_seconds, "statements": statements,
            "measured_last_iteration_keys": sorted(measured[-1]) if measured else []}


# -- Dask-ML ----------------------------------------------------------------------------------


def run_dask_ml(args, fit, X, y) -> dict:
    try:
        import dask
        import dask.array as da
        import dask_ml
        from dask.distributed import Client, LocalCluster, wait
        from dask_ml.linear_model import LogisticRegression
    except ImportError as err:
        raise Skipped(f"not installed: {err.name or err}") from err

    cluster = LocalCluster(n_workers=NODES, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    print(f"  dask: LocalCluster of {NODES} workers x 1 thread", flush=True)
    workers = sorted(client.scheduler_info()["workers"])
    bounds = row_bounds(len(y), NODES)

    def fresh():
        xs, ys = [], []
        for worker, (start, stop) in zip(workers, bounds, strict=True):
            fx, fy = client.scatter([X[start:stop], y[start:stop]], workers=[worker],
                                    hash=False)  # new keys: nothing reused across calls
            xs.append(da.from_delayed(fx, shape=(stop - start, X.shape[1]), dtype=X.dtype))
            ys.append(da.from_delayed(fy, shape=(stop - start,), dtype=y.dtype))
        X_, y_ = client.persist([da.concatenate(xs), da.concatenate(ys)])
        wait([X_, y_])
        return X_, y_

    def sent() -> int | None:
        try:
            return sum(client.run(
                lambda dask_worker: dask_worker.transfer_outgoing_bytes_total).values())
        except Exception:  # an older distributed without the counter
            return None

    def call(X_, y_):
        model = LogisticRegression(solver="newton", max_iter=args.iterations - 1, tol=0.0,
                                   fit_intercept=False, solver_kwargs={"normalize": False})
        model.fit(X_, y_)
        return np.asarray(model.coef_)

    counted: list[int | None] = []

    def before():
        counted.append(sent())

    def after():
        now, then = sent(), counted.pop()
        return None if now is None or then is None else now - then

    try:
        found = timed_calls(fresh, call, args.repeats, before, after)
    finally:
        client.close()
        cluster.close()
    moved = found.pop("extras")
    known = [m for m in moved if m is not None]
    return {**found, "bytes": int(statistics.median(known)) if known else None,
            "version": f"dask-ml {dask_ml.__version__}, dask {dask.__version__}"}


RUNNERS = {"numpy": run_numpy, "tensorc-local": run_tensorc_local,
           "tensorc-ray": run_tensorc_ray, "dask-ml": run_dask_ml, "sklearn": run_sklearn}


# -- report -----------------------------------------------------------------------------------


def fmt_bytes(value) -> str:
    return "-" if value is None else f"{int(value):,}"


def print_table(args, results: dict) -> None:
    print()
    print(f"{'system':14s} {'median s':>9s} {'min s':>7s} {'first s':>8s} "
          f"{'ms/iter':>8s} {'bytes moved':>12s} {'|dw| numpy':>11s} {'|dw| own reg':>12s}")
    for system in SYSTEMS:
        found = results.get(system)
        if found is None:
            continue
        if "error" in found:
            print(f"{system:14s} {found['error']}")
            continue
        print(f"{system:14s} {found['median']:9.3f} {min(found['times']):7.3f} "
              f"{found['first']:8.3f} {found['median'] / args.iterations * 1e3:8.1f} "
              f"{fmt_bytes(found.get('bytes')):>12s} {found['diff']:11.2e} "
              f"{found['diff_own']:12.2e}")
    print()
    print("|dw| numpy: max |w - w_numpy| (numpy with ridge "
          f"{args.ridge:g}); |dw| own reg: against numpy at the system's own regularisation "
          "(dask-ml: ridge 0)")
    for system in SYSTEMS:
        if system in results and "error" not in results[system]:
            print(f"  {system}: {NOTES[system]}")


def print_tensorc_detail(system: str, found: dict, iterations: int) -> None:
    stats = found.get("stats")
    if not stats:
        return
    per = {k: (stats[k] / iterations if stats[k] is not None else None) for k in PER_ITERATION}
    line = (f"  {system} per iteration (median call / {iterations}): "
            f"program {per['program_seconds'] * 1e3:.1f} ms = plan "
            f"{per['plan_seconds'] * 1e3:.1f} + run {per['run_seconds'] * 1e3:.1f} ms; "
            f"{per['tasks']:.0f} tasks, {per['statements_run']:.0f} statements")
    if per["remote_calls"]:
        line += f", {per['remote_calls']:.0f} remote calls"
    print(line)
    tasks = [s["tasks"] for s in stats["last_call"]]
    calls = [s["remote_calls"] for s in stats["last_call"]]
    print(f"    tasks by iteration {tasks}" + (f", remote calls {calls}" if any(calls) else ""))
    print("    by statement (median over the iterations of the last timed call):")
    for row in found.get("statements") or []:
        calls = "" if row["remote_calls"] is None else f", {row['remote_calls']:g} calls"
        print(f"      {row['text'][:48]:48s} {row['run_seconds'] * 1e3:7.1f} ms run, "
              f"{row['tasks']:g} tasks{calls}")
    if system == "tensorc-ray":
        note = (" (rebuilt from measured_node_recv_bytes: measured_inter_node_bytes was "
                "None)" if found.get("bytes_rebuilt_from_per_node") else "")
        print(f"    bytes over the fit: measured {fmt_bytes(found['bytes'])}{note}, modelled "
              f"{fmt_bytes(found['modelled_bytes'])}; tc.init took "
              f"{found['init_seconds']:.1f} s")


def verdict(results: dict) -> tuple[float | None, bool | None]:
    ray_found, dask_found = results.get("tensorc-ray"), results.get("dask-ml")
    if not ray_found or not dask_found or "error" in ray_found or "error" in dask_found:
        return None, None
    ratio = dask_found["median"] / ray_found["median"]
    return ratio, ratio >= TARGET_RATIO


def plot(results: dict, path: str) -> None:
    try:
        import matplotlib
    except ImportError:
        print("plot skipped: matplotlib not installed")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [s for s in SYSTEMS if s in results and "error" not in results[s]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    xs = np.arange(len(shown))
    left.bar(xs, [results[s]["median"] for s in shown], color="tab:blue")
    left.set_title("time per fit (s, median)")
    right.bar(xs, [(results[s].get("bytes") or 0) / 2**10 for s in shown], color="tab:orange")
    right.set_title("bytes moved between nodes/workers (KiB)")
    for axis in (left, right):
        axis.set_xticks(xs, shown, rotation=20)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def to_json(args, results: dict, ratio, met) -> dict:
    out = {}
    for system, found in results.items():
        row = {k: v for k, v in found.items() if k not in ("weights", "extras")}
        if "weights" in found:
            row["weights"] = np.asarray(found["weights"]).ravel().tolist()
        if "times" in found:
            row["median_seconds"] = row.pop("median")
            row["times_seconds"] = row.pop("times")
            row["first_seconds"] = row.pop("first")
        row["note"] = NOTES[system]
        out[system] = row
    return {"benchmark": "glm", "args": vars(args),
            "environment": {"python": platform.python_version(),
                            "platform": platform.platform(), "numpy": np.__version__},
            "results": out, "ratio_dask_ml_over_tensorc_ray": ratio,
            "target_ratio": TARGET_RATIO, "target_met": met}


# -- scikit-learn's lbfgs on numpy and on tc arrays --------------------------------------------


LBFGS_SYSTEMS = ("numpy", "tensorc-local", "tensorc-ray")


@contextlib.contextmanager
def program_stats(sink: list):
    """Keep the statistics of every array program evaluated (``tc.last_stats()`` of each):
    one entry per synchronisation point."""
    from tensorc.lazy import evaluate

    original = evaluate.run_stats.record

    def record(stats):
        sink.append(stats)
        original(stats)

    evaluate.run_stats.record = record
    try:
        yield sink
    finally:
        evaluate.run_stats.record = original


def run_lbfgs(args) -> int:
    """``--lbfgs``: scikit-learn's lbfgs on numpy against the same on tc arrays (see the
    module docstring)."""
    os.environ["SCIPY_ARRAY_API"] = "1"  # read when scipy is first imported
    import sklearn
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    import tensorc as tc

    warnings.filterwarnings("ignore")  # tol=0: never "converged"
    chosen = [s.strip() for s in args.systems.split(",") if s.strip() in LBFGS_SYSTEMS]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.n, args.d))
    y = (X @ rng.normal(size=args.d) + rng.normal(size=args.n) > 0).astype(np.float64)
    print(f"scikit-learn LogisticRegression(solver='lbfgs', max_iter={args.lbfgs_iter}, "
          f"tol=0): n={args.n:,} d={args.d} float64 ({X.nbytes / 2**20:.0f} MiB); numpy and "
          f"tensorc interleaved, median of {args.repeats} pairs after one warm-up each",
          flush=True)

    def fit(X_, y_):
        model = LogisticRegression(solver="lbfgs", max_iter=args.lbfgs_iter, tol=0)
        model.fit(X_, y_)
        return np.asarray(model.coef_).ravel(), int(np.max(np.asarray(model.n_iter_)))

    def fit_tc(X_, y_):
        with sklearn.config_context(array_api_dispatch=True):
            return fit(X_, y_)

    results: dict = {}
    with threadpool_limits(args.blas_threads):
        reference, steps = fit(X.copy(), y.copy())
        results["numpy"] = {"steps": steps}
        for system in ("tensorc-local", "tensorc-ray"):
            if system not in chosen:
                continue
            if system == "tensorc-ray":
                tc.init(num_nodes=NODES)

                def fresh():
                    X_ = tc.asarray(X, grid=(NODES, 1))
                    y_ = tc.asarray(y, grid=(NODES,))
                    tc.wait(X_, y_)
                    return X_, y_
            else:
                tc.shutdown()

                def fresh():
                    return tc.asarray(X), tc.asarray(y)
            print(f"{system} ...", flush=True)
            fit_tc(*fresh())  # warm-up (plans, compiled loops)
            numpy_times, tc_times, programs = [], [], []
            coef = None
            for repeat in range(args.repeats):
                order = ["numpy", system] if repeat % 2 == 0 else [system, "numpy"]
                for which in order:
                    inputs = (X.copy(), y.copy()) if which == "numpy" else fresh()
                    sink: list = []
                    with program_stats(sink):
                        started = time.perf_counter()
                        found, steps = (fit if which == "numpy" else fit_tc)(*inputs)
                        seconds = time.perf_counter() - started
                    if which == "numpy":
                        numpy_times.append(seconds)
                    else:
                        tc_times.append(seconds)
                        programs.append(sink)
                        coef = found
                    del inputs
            def median_sum(key, runs=programs):
                return statistics.median(sum(p.get(key) or 0 for p in run) for run in runs)

            results[system] = {
                "numpy_s": statistics.median(numpy_times),
                "tensorc_s": statistics.median(tc_times),
                "ratio": statistics.median(t / n for n, t in zip(numpy_times, tc_times,
                                                                 strict=True)),
                "numpy_times": numpy_times, "tensorc_times": tc_times, "steps": steps,
                "programs": int(statistics.median(len(run) for run in programs)),
                "program_s": median_sum("program_seconds"),
                "plan_s": median_sum("plan_seconds"),
                "run_s": median_sum("run_seconds"),
                "remote_calls": int(median_sum("remote_calls")),
                "diff": max_diff(coef, reference),
                "ok": bool(np.allclose(coef, reference, rtol=1e-5, atol=1e-7)),
            }
            if system == "tensorc-ray":
                tc.shutdown()
    print(f"\n{'system':14s} {'numpy s':>8s} {'tensorc s':>10s} {'ratio':>7s} "
          f"{'programs':>9s} {'in programs s':>14s} {'plan s':>7s} {'run s':>7s} "
          f"{'calls':>6s} {'|dcoef|':>9s}")
    for system in ("tensorc-local", "tensorc-ray"):
        row = results.get(system)
        if row is None:
            continue
        print(f"{system:14s} {row['numpy_s']:8.3f} {row['tensorc_s']:10.3f} "
              f"{row['ratio']:6.2f}x {row['programs']:9d} {row['program_s']:14.3f} "
              f"{row['plan_s']:7.3f} {row['run_s']:7.3f} {row['remote_calls']:6d} "
              f"{row['diff']:9.2e}")
    print(f"\nlbfgs iterations: {results['numpy']['steps']}; programs = synchronisation "
          "points of one fit, with the seconds they took (plan + run + the rest: lowering, "
          "waiting for Ray, statistics) and the Ray calls they submitted; medians over the "
          "timed fits")
    target = results.get("tensorc-ray")
    if target:
        met = target["ratio"] <= TARGET_LBFGS
        print(f"[{'PASS' if met else 'MISS'}] tensorc on {NODES} Ray nodes / scikit-learn on "
              f"numpy = {target['ratio']:.2f}x (target <= {TARGET_LBFGS:g}x)")
    wrong = [s for s, row in results.items() if row.get("ok") is False]
    for system in wrong:
        print(f"[WRONG] {system}: coefficients differ from numpy's beyond rtol 1e-5")
    if args.json:
        document = {"benchmark": "glm-lbfgs", "args": vars(args), "results": results}
        with open(args.json, "w") as handle:
            json.dump(document, handle, indent=2, default=str)
    return 1 if wrong else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200_000, help="rows")
    parser.add_argument("--d", type=int, default=16, help="features")
    parser.add_argument("--iterations", type=int, default=10, help="Newton steps")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per system")
    parser.add_argument("--ridge", type=float, default=1e-6,
                        help="the example's ridge (sklearn: C = 1/ridge)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma list of {', '.join(SYSTEMS)}")
    parser.add_argument("--json", metavar="PATH", help="write results as JSON ('-': stdout)")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG of the times and bytes")
    parser.add_argument("--lbfgs", action="store_true",
                        help="time scikit-learn's lbfgs on numpy and on tc arrays instead")
    parser.add_argument("--lbfgs-iter", type=int, default=50, help="lbfgs max_iter")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="--lbfgs: BLAS threads (numpy's and tensorc's)")
    args = parser.parse_args(argv)
    if args.lbfgs:
        if args.systems == ",".join(SYSTEMS):
            args.systems = ",".join(LBFGS_SYSTEMS)
        return run_lbfgs(args)
    chosen = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown system(s) {unknown}; choose from {', '.join(SYSTEMS)}")
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")

    fit, make_data = load_example()
    X, y = make_data(args.n, args.d, seed=0)
    reference = fit(np, X, y, args.iterations, args.ridge)
    unregularised = fit(np, X, y, args.iterations, 0.0)
    print(f"logistic regression, Newton: n={args.n:,} d={args.d} float64 "
          f"({X.nbytes / 2**20:.1f} MiB), {args.iterations} iterations, ridge {args.ridge:g}, "
          f"{NODES} row blocks; median of {args.repeats} calls on fresh inputs after one "
          "warm-up", flush=True)

    results: dict = {}
    for system in SYSTEMS:
        if system not in chosen:
            continue
        print(f"{system} ...", flush=True)
        try:
            found = RUNNERS[system](args, fit, X, y)
        except Skipped as why:
            print(f"  {system}: skipped ({why})")
            results[system] = {"error": f"skipped: {why}"}
            continue
        except Exception as err:
            traceback.print_exc()
            results[system] = {"error": f"ERROR: {type(err).__name__}: {err}"}
            continue
        found["median"] = statistics.median(found["times"])
        found["diff"] = max_diff(found["weights"], reference)
        own = unregularised if system == "dask-ml" else reference
        found["diff_own"] = max_diff(found["weights"], own)
        if system.startswith("tensorc"):
            found["ok"] = bool(np.allclose(np.asarray(found["weights"]), reference,
                                           rtol=1e-8, atol=1e-10))
        results[system] = found
        print(f"  {system}: median {found['median']:.3f} s over {found['times']}, "
              f"|dw| {found['diff']:.2e}", flush=True)

    print_table(args, results)
    for system in ("tensorc-local", "tensorc-ray"):
        if system in results and "error" not in results[system]:
            print_tensorc_detail(system, results[system], args.iterations)
    ratio, met = verdict(results)
    if ratio is not None:
        print(f"\n[{'PASS' if met else 'MISS'}] Dask-ML / tensorc-ray = {ratio:.2f}x "
              f"(target >= {TARGET_RATIO:g}x, NumS's figure on this workload)")
    wrong = [s for s, f in results.items() if f.get("ok") is False]
    for system in wrong:
        print(f"[WRONG] {system} weights differ from numpy's beyond rtol 1e-8")
    if args.json:
        document = to_json(args, results, ratio, met)
        if args.json == "-":
            print(json.dumps(document, indent=2, default=str))
        else:
            with open(args.json, "w") as handle:
                json.dump(document, handle, indent=2, default=str)
            print(f"JSON written to {args.json}")
    if args.plot:
        plot(results, args.plot)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
