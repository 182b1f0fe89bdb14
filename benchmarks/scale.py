"""A simulated scale study: plans for 4 to 4,096 nodes, strong and weak scaling.

For each case (MTTKRP in both forms, the double contraction, a square matmul, a Newton
logistic-regression step and the Cholesky block program) and node count ``P`` (``--nodes``,
default 4, 16, 64, 256, 1024, 4096), plans from shapes alone at the model's default machine
(stated in the output: network into each node, seconds per block task, BLAS rate and cores
per node), and records per node count:

- the planning time;
- the modelled time of the plan;
- the busiest node's received bytes against the communication lower bound;
- the memory per node.

**Einsums** (the four contractions) are planned with the default planner (``smt``:
candidates priced in closed form, pruned by their floors, the chosen plan proved optimal
under the model when the search completes). Planning time is the search; lowering the
chosen plan to tasks is timed apart and only done up to ``--lower-limit`` tasks, where the
closed-form figures are checked against the LSHS simulation of the lowered graph. Modelled
time is network, copies, compute and submission in seconds: the model's cost without its
charges for bytes over the memory or communication budget, which are recorded as
``modelled_cost``. Memory per node is the most any node holds (the closed form's bound on
the peak).

**The Newton step** (``examples/logistic_regression.py``: ``p = sigmoid(X @ w)``, gradient
``X^T (p - y)``, Hessian ``X^T diag(p(1-p)) X``, ``w -= solve(H, g)``) is its three
contractions ``ij,j->i``, ``ij,i->j`` and ``ij,i,ik->jk`` (X of ``rows x --glm-d``), each
planned alone like the einsums (element-wise work is fused into them and not priced), and a
step row: plan time, modelled time and tasks summed, plus the ``d x d`` solve as one
whole-array task on one node (a task's overhead, LU's flops on one core, the Hessian and
gradient over the network); busiest bytes the statements' busiest summed (an upper bound on
the step's busiest node), bound the largest statement's bound (a lower bound on it), so no
ratio is given; memory the largest statement's. tensorc runs the step as one program whose
layouts flow between statements and whose calls are merged per node (docs/performance.md,
*Array programs*); the study prices the statements as planned alone.

**The Cholesky block program** (``tensorc/programs/cholesky.tc``) gets its block count from
:func:`~tensorc.planning.block_counts.choose_counts`, as ``tc.linalg.cholesky`` does:
every power-of-two ``NB`` with blocks of at least 256 rows and at most
:func:`~tensorc.planning.block_counts.task_limit` ``(P)`` tasks (3,000, or 8 a node beyond
375 nodes: ``NB = 32`` from 748 nodes on) is list-scheduled on ``P`` simulated nodes of the
machine's cores twice, placed by LSHS and by owner-computes (the default machine's nodes
are separate machines), the input's blocks block-cyclic over the nodes (where an array
made on its own lies, the count choice's default), and the smallest makespan wins. Plan
time is that choice; modelled time the chosen candidate's simulated makespan; memory the
most bytes of block versions any node holds at once (each freed after its last reader, as
the run frees it); the bound is
:func:`~tensorc.planning.lower_bound.cholesky_lower_bound`, which assumes every node owns
an even share of ``A`` and ``L``. Beyond 64 nodes the placer weighs a task on a few nodes,
not all ``P`` (:mod:`tensorc.placement.block_placement`), so the choice is simulated on all
``P`` nodes.

Strong scaling keeps the problem fixed (``N = --strong-n`` for the tensor cases,
``--strong-matmul`` for matmul, ``F = --f``, ``--strong-glm-rows`` rows,
``--strong-cholesky``); weak scaling grows it with ``P`` so that the work per node stays
that of 4 nodes (``N ∝ P^(1/3)`` from ``--weak-n``, ``--weak-matmul`` and
``--weak-cholesky``, rounded to a multiple of 16; the Newton step's rows ``∝ P`` from
``--weak-glm-rows``).

With ``--real`` (default) it then starts a private 4-node Ray cluster (``tc.init(num_nodes=4,
measure=True)``, which also calibrates the model to it) and runs each case for real at a
small size (``--real-n``, ``--real-matmul``, ``--real-cholesky``, ``--real-glm-rows``): the
modelled time (at the calibrated figures, without the model's charges; for Cholesky the
chosen count's simulated makespan, for the Newton step the study's model of it) and bytes
next to the measured wall time of the call and of the graph's run, and the bytes Ray moved
(medians of ``--repeats`` calls). Block programs on Ray report the placer's bytes, not
Ray's: Cholesky has no measured bytes.

``--search-nodes 1536,3000,4093,4095`` first prints the search alone (no lowering) for the
three tensor contractions at ``--search-n``³ (8192) on those node counts — counts that are
not powers of two, a prime included — with ``--no-study --no-real`` that table alone.

``--plot PATH`` draws the four figures against ``P`` (log scales; strong scaling solid, weak
dashed; the Newton step and Cholesky rows, not the step's statements); ``--json PATH``
writes every row.

    python benchmarks/scale.py [--nodes 4,16,64,256,1024,4096] [--lower-limit 50000]
                               [--no-real] [--plot scale.png] [--json scale.json]
"""

from __future__ import annotations

import argparse
import runpy
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import environment, error_text, format_table, write_json
from planner_targets import problem_for

import tensorc as tc
from tensorc.driver.block_programs import shipped, stored_layouts
from tensorc.planning import cost, symbolic_cost
from tensorc.planning.block_counts import choose_counts
from tensorc.planning.distribution import lowered_plan
from tensorc.planning.lower_bound import cholesky_lower_bound
from tensorc.planning.planners import agreement, search

CASES = {
    "mttkrp ijk,if,jf->if": "ijk,if,jf->if",
    "mttkrp ijk,jf,kf->if": "ijk,jf,kf->if",
    "double ijk,jkf->if": "ijk,jkf->if",
    "matmul ik,kj->ij": "ik,kj->ij",
}
GLM_STATEMENTS = {  # the Newton step's contractions (examples/logistic_regression.py)
    "glm X@w ij,j->i": "ij,j->i",
    "glm gradient ij,i->j": "ij,i->j",
    "glm Hessian ij,i,ik->jk": "ij,i,ik->jk",
}
GLM_STEP = "glm Newton step"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "logistic_regression.py"
CHOLESKY = "cholesky block program"
PLOTTED = (*CASES, GLM_STEP, CHOLESKY)


def shapes_for(subscripts: str, n: int, f: int) -> list[tuple[int, ...]]:
    if subscripts == "ik,kj->ij":
        return [(n, n), (n, n)]
    if subscripts == "ijk,jkf->if":
        return [(n, n, n), (n, n, f)]
    return [(n, n, n), (n, f), (n, f)]


def weak_n(base: int, nodes: int) -> int:
    """The extent that keeps the work per node of 4 nodes (``N³`` grows with ``P``)."""
    return max(16, int(round(base * (nodes / 4) ** (1 / 3) / 16)) * 16)


def einsum_row(row: dict[str, Any], subscripts: str, shapes, nodes: int,
               lower_limit: int) -> dict[str, Any]:
    """Plan one einsum from shapes with the default planner; ``row`` gets its figures."""
    try:
        plan = search(problem_for(subscripts, shapes, nodes), "smt", lower=False)
        problem = plan.problem  # its copy when a few nodes stay idle
        figures = plan.priced.figures
        row.update(
            plan_seconds=plan.seconds, optimal=plan.optimal,
            evaluated=plan.evaluated, grid=plan.candidate.describe(),
            modelled_cost=plan.cost,
            modelled_seconds=(sum(
                symbolic_cost.seconds(problem, figures)[part]
                for part in cost.TIME_PARTS) if figures is not None else None),
            tasks=int(figures.tasks.sum()) if figures is not None else None,
            busiest_bytes=(int(figures.total_received.max())
                           if figures is not None else None),
            lower_bound_bytes=plan.lower_bound_bytes, ratio=plan.ratio,
            memory_per_node=(int(figures.memory.max())
                             if figures is not None else None),
            notes=plan.notes,
        )
        if row["tasks"] is not None and row["tasks"] <= lower_limit:
            started = time.perf_counter()
            modelled = lowered_plan(problem, plan.priced)
            row["lower_seconds"] = time.perf_counter() - started
            words = agreement(plan.priced, modelled)[0]
            row["agrees"] = "equal the simulation's" in words
            row["simulated_peak_bytes"] = modelled.report.max_node_memory_bytes
    except Exception as exc:  # recorded, the study goes on
        row["error"] = error_text(exc)
    return row


def solve_figures(d: int) -> tuple[float, int]:
    """The Newton step's ``d x d`` solve, a whole-array task on one node: its modelled
    seconds (one task's overhead, LU's ``2/3 d^3 + 2 d^2`` flops on one core, the Hessian
    and gradient arriving over the network) and the bytes it receives."""
    figures = cost.machine()
    received = 8 * (d * d + d)
    return (figures.task_seconds + (2 / 3 * d**3 + 2 * d * d) / figures.blas_flops_per_core
            + received / figures.network_bytes_per_second), received


def glm_rows(mode: str, nodes: int, rows_: int, d: int, lower_limit: int) -> list[dict]:
    """The Newton step's three contractions, each planned alone like the einsum cases, and
    the step: their sums plus the solve on one node (module docstring)."""
    found = []
    for name, subscripts in GLM_STATEMENTS.items():
        shapes = [(rows_, d) if len(t) == 2 else (rows_,) if t == "i" else (d,)
                  for t in subscripts.split("->")[0].split(",")]
        row = {"mode": mode, "case": name, "nodes": nodes, "n": rows_, "f": d}
        found.append(einsum_row(row, subscripts, shapes, nodes, lower_limit))
    step: dict[str, Any] = {"mode": mode, "case": GLM_STEP, "nodes": nodes, "n": rows_,
                            "f": d}
    failed = [r["error"] for r in found if "error" in r]
    if failed or any(r.get("modelled_seconds") is None for r in found):
        step["error"] = failed[0] if failed else "a statement was not priced in closed form"
        return [*found, step]
    solve_seconds, solve_bytes = solve_figures(d)
    step.update(
        plan_seconds=sum(r["plan_seconds"] for r in found),
        optimal=all(r["optimal"] for r in found),
        modelled_seconds=sum(r["modelled_seconds"] for r in found) + solve_seconds,
        solve_seconds=solve_seconds,
        tasks=sum(r["tasks"] for r in found) + 1,
        # an upper bound on the step's busiest node: each statement's busiest, summed
        busiest_bytes=sum(r["busiest_bytes"] for r in found) + solve_bytes,
        # a lower bound on it: the node busiest in a statement receives at least its bound
        lower_bound_bytes=max(r["lower_bound_bytes"] or 0 for r in found),
        ratio=None,
        memory_per_node=max(r["memory_per_node"] for r in found),
    )
    return [*found, step]


def cholesky_row(mode: str, nodes: int, n: int) -> dict[str, Any]:
    """The shipped Cholesky block program's counts chosen for ``nodes`` simulated nodes
    (:func:`~tensorc.planning.block_counts.choose_counts`, the input block-cyclic), the
    chosen candidate's simulated figures and the Cholesky lower bound."""
    row: dict[str, Any] = {"mode": mode, "case": CHOLESKY, "nodes": nodes, "n": n, "f": None}
    try:
        program = shipped("cholesky").program
        shapes = {"A": (n, n)}
        started = time.perf_counter()
        choice = choose_counts(program, shapes, nodes=nodes,
                               cores=cost.machine().cores_per_node)
        chosen = choice.chosen()
        bound = cholesky_lower_bound(n, nodes, 8)
        row.update(
            plan_seconds=time.perf_counter() - started,
            optimal=None, grid=choice.headline(),
            counts=dict(choice.counts), policy=choice.policy,
            candidates=[{"counts": c.counts, "policy": c.policy, "makespan": c.makespan,
                         "tasks": c.tasks} for c in choice.candidates],
            modelled_seconds=chosen.makespan, tasks=chosen.tasks,
            moved_bytes=chosen.moved_bytes, busiest_bytes=chosen.busiest_in_bytes,
            lower_bound_bytes=bound,
            ratio=(chosen.busiest_in_bytes / bound if bound and chosen.busiest_in_bytes
                   is not None else None),
            memory_per_node=chosen.peak_node_bytes,
        )
    except Exception as exc:  # recorded, the study goes on
        row["error"] = error_text(exc)
    return row


def progress(row: dict[str, Any]) -> None:
    if "error" in row:
        shown = row["error"]
    else:
        ratio = f"{row['ratio']:.3f}" if row.get("ratio") else "n/a"
        shown = (f"plan {row['plan_seconds']:.2f} s, optimal {row['optimal']}, "
                 f"modelled {row['modelled_seconds']:.3g} s, ratio {ratio}, "
                 f"{row['tasks']} tasks")
    print(f"  {row['mode']:6} {row['case']:22} P={row['nodes']:5} N={row['n']:6}: {shown}",
          flush=True)


def search_only(args) -> list[dict[str, Any]]:
    """The search alone (no lowering) for the tensor contractions on ``--search-nodes``:
    node counts that are not powers of two, primes included."""
    rows = []
    for name, subscripts in CASES.items():
        if subscripts == "ik,kj->ij":
            continue
        for nodes in args.search_nodes:
            problem = problem_for(subscripts, shapes_for(subscripts, args.search_n, args.f),
                                  nodes)
            plan = search(problem, "smt", lower=False)
            rows.append({"case": name, "nodes": nodes, "plan_seconds": plan.seconds,
                         "ratio": plan.ratio, "optimal": plan.optimal,
                         "grid": plan.candidate.describe(), "notes": plan.notes})
            print(f"  P={nodes} {name}: {plan.seconds:.2f} s, {plan.ratio:.3f}", flush=True)
    return rows


def study(args) -> list[dict[str, Any]]:
    rows = []
    for mode in ("strong", "weak"):
        for name, subscripts in CASES.items():
            matmul = subscripts == "ik,kj->ij"
            for nodes in args.nodes:
                if mode == "strong":
                    n = args.strong_matmul if matmul else args.strong_n
                else:
                    n = weak_n(args.weak_matmul if matmul else args.weak_n, nodes)
                row: dict[str, Any] = {"mode": mode, "case": name, "nodes": nodes, "n": n,
                                       "f": None if matmul else args.f}
                rows.append(einsum_row(row, subscripts, shapes_for(subscripts, n, args.f),
                                       nodes, args.lower_limit))
                progress(row)
        for nodes in args.nodes:
            rows_ = (args.strong_glm_rows if mode == "strong"
                     else args.weak_glm_rows * nodes // 4)
            for row in glm_rows(mode, nodes, rows_, args.glm_d, args.lower_limit):
                rows.append(row)
                progress(row)
        for nodes in args.nodes:
            n = args.strong_cholesky if mode == "strong" else weak_n(args.weak_cholesky, nodes)
            rows.append(cholesky_row(mode, nodes, n))
            progress(rows[-1])
    return rows


def real(args) -> list[dict[str, Any]]:
    """Each case on a private 4-node Ray cluster: modelled against measured."""
    session = tc.init(num_nodes=4, measure=True)
    print(f"{session.cluster.describe()}; calibrated model: {cost.machine().describe()}",
          flush=True)
    rows = []
    rng = np.random.default_rng(0)
    try:
        for name, subscripts in CASES.items():
            n = args.real_matmul if subscripts == "ik,kj->ij" else args.real_n
            operands = [rng.random(s) for s in shapes_for(subscripts, n, args.real_f)]
            expected = np.einsum(subscripts, *operands, optimize=True)
            result = tc.einsum(subscripts, *operands)
            plan = tc.plan(subscripts, *operands, nodes=4)
            priced = plan.distribution.priced
            modelled = (sum(symbolic_cost.seconds(plan.problem, priced.figures)[part]
                            for part in cost.TIME_PARTS)
                        if priced is not None and priced.figures is not None else None)
            times, runs, stats = [], [], {}
            for _ in range(args.repeats):
                started = time.perf_counter()
                tc.einsum(subscripts, *operands)
                times.append(time.perf_counter() - started)
                stats = tc.last_stats()
                runs.append(stats["run_seconds"])
            rows.append({
                "case": name, "n": n, "check": bool(np.allclose(result, expected)),
                "grid": stats["grid"], "tasks": stats["tasks"],
                "modelled_seconds": modelled, "modelled_cost": stats["cost"],
                "measured_call_seconds": statistics.median(times),
                "measured_run_seconds": statistics.median(runs),
                "modelled_bytes": stats["inter_node_bytes"],
                "measured_bytes": stats["measured_inter_node_bytes"],
                "modelled_busiest_bytes": stats["max_node_recv_bytes"],
                "measured_busiest_bytes": stats["measured_max_node_recv_bytes"],
                "lower_bound_bytes": stats["lower_bound_bytes"],
            })
        rows.append(real_cholesky(args, rng))
        rows.append(real_newton_step(args, rng))
    finally:
        tc.shutdown()
    return rows


def real_cholesky(args, rng) -> dict[str, Any]:
    """``tc.linalg.cholesky`` of an ``--real-cholesky`` matrix placed on the cluster: the
    chosen candidate's simulated makespan (``choose_counts`` at the calibrated figures, as
    the run chose) against the measured call and run; block programs on Ray report the
    placer's bytes, not Ray's, so there are no measured bytes."""
    n = args.real_cholesky
    m = rng.random((n, n))
    a = m @ m.T + n * np.eye(n)
    expected = np.linalg.cholesky(a)
    placed = tc.asarray(a)
    tc.wait(placed)
    result = np.asarray(tc.linalg.cholesky(placed))
    stats = tc.last_stats()
    program = shipped("cholesky").program
    grid = getattr(placed.value(), "grid", None)
    choice = choose_counts(program, {"A": (n, n)}, nodes=4,
                           cores=cost.machine().cores_per_node, fixed=stats["block_counts"],
                           preferred={"NB": grid[0]} if grid else None,
                           stored=stored_layouts({"A": placed.value()}))
    chosen = choice.chosen()
    times, runs = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        tc.linalg.cholesky(placed)
        times.append(time.perf_counter() - started)
        runs.append(tc.last_stats()["run_seconds"])
    return {
        "case": CHOLESKY, "n": n, "check": bool(np.allclose(result, expected)),
        "grid": ", ".join(f"{k}={v}" for k, v in stats["block_counts"].items()),
        "tasks": stats["tasks"], "modelled_seconds": chosen.makespan,
        "measured_call_seconds": statistics.median(times),
        "measured_run_seconds": statistics.median(runs),
        "modelled_bytes": chosen.moved_bytes, "measured_bytes": None,
        "run_placer_bytes": stats["inter_node_bytes"],
        "modelled_busiest_bytes": chosen.busiest_in_bytes, "measured_busiest_bytes": None,
        "lower_bound_bytes": cholesky_lower_bound(n, 4, 8),
    }


def real_newton_step(args, rng) -> dict[str, Any]:
    """One Newton step of ``examples/logistic_regression.py`` (``fit(tc, X, y, 1)``) with X
    and y in 4 row blocks, one a node: the study's model of the step (its contractions
    planned alone, the solve on one node, at the calibrated figures) against the measured
    call and run, and the bytes Ray moved against the program's modelled bytes."""
    fit = runpy.run_path(str(EXAMPLE), run_name="logistic_regression_example")["fit"]
    rows_, d = args.real_glm_rows, args.glm_d
    x = rng.normal(size=(rows_, d))
    y = (rng.random(rows_) < 1 / (1 + np.exp(-x @ rng.normal(size=d)))).astype(np.float64)
    expected = fit(np, x, y, iterations=1)
    placed_x, placed_y = tc.asarray(x, grid=(4, 1)), tc.asarray(y, grid=(4,))
    tc.wait(placed_x, placed_y)
    result = np.asarray(fit(tc, placed_x, placed_y, iterations=1))
    modelled = glm_rows("real", 4, rows_, d, lower_limit=0)[-1]
    times, runs, stats = [], [], {}
    for _ in range(args.repeats):
        started = time.perf_counter()
        fit(tc, placed_x, placed_y, iterations=1)
        times.append(time.perf_counter() - started)
        stats = tc.last_stats()
        runs.append(stats["run_seconds"])
    return {
        "case": GLM_STEP, "n": rows_, "check": bool(np.allclose(result, expected)),
        "grid": "4 row blocks", "tasks": stats.get("tasks"),
        "modelled_seconds": modelled.get("modelled_seconds"),
        "measured_call_seconds": statistics.median(times),
        "measured_run_seconds": statistics.median(runs),
        "modelled_bytes": stats.get("inter_node_bytes"),
        "measured_bytes": stats.get("measured_inter_node_bytes"),
        "modelled_busiest_bytes": stats.get("max_node_recv_bytes"),
        "measured_busiest_bytes": stats.get("measured_max_node_recv_bytes"),
        "study_busiest_bytes": modelled.get("busiest_bytes"),
        "lower_bound_bytes": stats.get("lower_bound_bytes"),
    }


def study_table(rows: list[dict[str, Any]]) -> str:
    return format_table(
        ["mode", "case", "P", "N", "plan s", "optimal", "modelled s", "busiest B", "bound B",
         "ratio", "memory/node B", "tasks", "lowered s", "agrees"],
        [[r["mode"], r["case"], str(r["nodes"]), str(r["n"]),
          f"{r.get('plan_seconds', float('nan')):.2f}", str(r.get("optimal")),
          f"{r.get('modelled_seconds') or float('nan'):.3g}",
          f"{r.get('busiest_bytes') or 0:,}", f"{r.get('lower_bound_bytes') or 0:,}",
          f"{r['ratio']:.3f}" if r.get("ratio") else "n/a",
          f"{r.get('memory_per_node') or 0:,}", str(r.get("tasks")),
          f"{r['lower_seconds']:.1f}" if "lower_seconds" in r else "-",
          str(r.get("agrees", "-"))] for r in rows],
    )


def plot(rows: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("plan_seconds", "plan time (s)"), ("modelled_seconds", "modelled time (s)"),
              ("ratio", "busiest node's bytes / lower bound"),
              ("memory_per_node", "memory per node (bytes)")]
    figure, axes = plt.subplots(2, 2, figsize=(12, 9))
    for axis, (key, label) in zip(axes.flat, panels, strict=True):
        for index, name in enumerate(PLOTTED):
            for mode, style in (("strong", "-"), ("weak", "--")):
                points = [(r["nodes"], r[key]) for r in rows
                          if r["case"] == name and r["mode"] == mode and r.get(key)]
                if points:
                    axis.plot(*zip(*points, strict=True), style, marker="o",
                              color=f"C{index}", label=f"{name} ({mode})")
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")  # the ratios span 1.0 (einsums) to ~200 (Cholesky)
        if key == "ratio":
            axis.axhline(1.1, color="grey", linewidth=0.8, linestyle=":")
        axis.set_xlabel("simulated nodes P")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    figure.suptitle(f"tensorc plans for 4 to {max(r['nodes'] for r in rows)} simulated nodes "
                    f"({cost.machine().describe()})", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    print(f"wrote {path}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=lambda t: [int(x) for x in t.split(",")],
                        default=[4, 16, 64, 256, 1024, 4096])
    parser.add_argument("--strong-n", type=int, default=1024)
    parser.add_argument("--strong-matmul", type=int, default=16384)
    parser.add_argument("--weak-n", type=int, default=512)
    parser.add_argument("--weak-matmul", type=int, default=8192)
    parser.add_argument("--f", type=int, default=256)
    parser.add_argument("--glm-d", type=int, default=64, help="features of the Newton step")
    parser.add_argument("--strong-glm-rows", type=int, default=1 << 24)
    parser.add_argument("--weak-glm-rows", type=int, default=1 << 18,
                        help="rows of X at 4 nodes under weak scaling (grows as P)")
    parser.add_argument("--strong-cholesky", type=int, default=16384)
    parser.add_argument("--weak-cholesky", type=int, default=8192,
                        help="n at 4 nodes under weak scaling (grows as P^(1/3))")
    parser.add_argument("--lower-limit", type=int, default=50_000,
                        help="lower and simulate the chosen plan up to this many tasks")
    parser.add_argument("--study", action=argparse.BooleanOptionalAction, default=True,
                        help="the simulated study (--no-study: only the real 4-node runs)")
    parser.add_argument("--real", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--real-n", type=int, default=128)
    parser.add_argument("--real-f", type=int, default=32)
    parser.add_argument("--real-matmul", type=int, default=1024)
    parser.add_argument("--real-cholesky", type=int, default=2048)
    parser.add_argument("--real-glm-rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--search-nodes", type=lambda t: [int(x) for x in t.split(",")],
                        default=[],
                        help="node counts for a search-only table of the three tensor "
                             "contractions at --search-n³, F = --f (e.g. 1536,3000,4093,4095)")
    parser.add_argument("--search-n", type=int, default=8192)
    parser.add_argument("--plot")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    machine = cost.machine().describe()
    print(f"simulated study at the model's {machine}", flush=True)
    payload: dict[str, Any] = {"benchmark": "scale", "args": vars(args),
                               "environment": environment(), "machine": machine,
                               "study": [], "real": []}
    if args.search_nodes:
        payload["search"] = search_only(args)
        print()
        print(format_table(
            ["P", "case", "search s", "busiest / bound", "optimal", "grid"],
            [[str(r["nodes"]), r["case"], f"{r['plan_seconds']:.2f}", f"{r['ratio']:.3f}",
              str(r["optimal"]), r["grid"]] for r in payload["search"]]))
    payload["study"] = study(args) if args.study else []
    if payload["study"]:
        print()
        print(study_table(payload["study"]))
    if args.plot and payload["study"]:
        plot(payload["study"], args.plot)
    if args.real:
        payload["real"] = real(args)
        print()
        print(format_table(
            ["case (4 Ray nodes)", "N", "grid", "tasks", "modelled s", "measured call s",
             "measured run s", "modelled B", "measured B", "busiest mod B", "busiest meas B",
             "check"],
            [[r["case"], str(r["n"]), r["grid"], str(r["tasks"]),
              f"{r['modelled_seconds']:.4f}" if r["modelled_seconds"] is not None else "n/a",
              f"{r['measured_call_seconds']:.4f}",
              f"{r['measured_run_seconds']:.4f}", f"{r['modelled_bytes'] or 0:,}",
              f"{r['measured_bytes']:,}" if r["measured_bytes"] is not None else "n/a",
              f"{r['modelled_busiest_bytes'] or 0:,}",
              f"{r['measured_busiest_bytes']:,}"
              if r["measured_busiest_bytes"] is not None else "n/a",
              "OK" if r["check"] else "WRONG"] for r in payload["real"]],
        ))
    if args.json:
        write_json(args.json, payload)
    return payload


if __name__ == "__main__":
    main()
