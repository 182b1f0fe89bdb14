"""Whole-program planning time: ``.tc`` programs of about 20 statements planned for P nodes.

Plans (shapes only, no data, no Ray) with ``Program.plan_layouts`` — every statement's
distribution searched with layouts flowing from the statements before it — for three
generated programs:

- ``distinct``: 20 matrix products that read one matrix X alternately along its columns and
  its rows, each with its own right-hand side of a different width (20 different plans);
- ``chain``: 20 statements each reading the previous result and X (alternately along
  columns and rows) and a small projection of a different width (20 different plans, and
  every layout flows into the next statement);
- ``als``: ALS half-sweeps unrolled (``repeat 10``: 21 statements, but the sweeps repeat
  the same statements, so only a handful of distinct plans).

Each call compiles the program afresh (no plan survives between calls). One warm-up call,
then the median of ``--repeats``. Target (issue 5): a 20-statement program plans in under
10 s with the default planner (``auto``: z3 seeded by greedy); ``--planners`` adds others
for comparison.

    python benchmarks/program_planning.py [--n 512] [--nodes 4] [--repeats 3]
                                          [--planners auto,heuristic] [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from common import environment, error_text, fmt, format_table, make_parser, measure, write_json

MAX_SECONDS = 10.0
STATEMENTS = 20


def distinct_program(n: int, count: int = STATEMENTS) -> str:
    lines = [f"size N = {n}", "input X : f64[N, N]"]
    for k in range(1, count + 1):
        lines += [f"size G{k} = {4 * k}", f"input B{k} : f64[N, G{k}]",
                  f"output A{k} : f64[N, G{k}]"]
    for k in range(1, count + 1):
        if k % 2:
            lines.append(f"A{k}[j, g] += X[i, j] * B{k}[i, g]")
        else:
            lines.append(f"A{k}[i, g] += X[i, j] * B{k}[j, g]")
    return "\n".join(lines) + "\n"


def chain_program(n: int, count: int = STATEMENTS) -> str:
    width = [8 + 2 * k for k in range(count + 1)]
    lines = [f"size N = {n}", "input X : f64[N, N]", f"input A0 : f64[N, {width[0]}]"]
    for k in range(1, count + 1):
        lines += [f"input P{k} : f64[{width[k - 1]}, {width[k]}]",
                  f"output A{k} : f64[N, {width[k]}]"]
    for k in range(1, count + 1):
        if k % 2:
            lines.append(f"A{k}[j, h] += X[i, j] * A{k - 1}[i, g] * P{k}[g, h]")
        else:
            lines.append(f"A{k}[i, h] += X[i, j] * A{k - 1}[j, g] * P{k}[g, h]")
    return "\n".join(lines) + "\n"


def als_program(n: int, sweeps: int = STATEMENTS // 2) -> str:
    return f"""size M = {n}, N = {n}, F = 16
input  R  : f64[M, N]
input  U0 : f64[M, F]
output U  : f64[M, F]
tensor V  : f64[N, F]

U[i, f] = U0[i, f]
repeat {sweeps} {{
  V[j, f] += R[i, j] * U[i, f]
  U[i, f] = 0.0
  U[i, f] += R[i, j] * V[j, f]
}}
"""


PROGRAMS = {"distinct": distinct_program, "chain": chain_program, "als": als_program}


def plan_once(source: str, nodes: int, planner: str) -> dict[str, Any]:
    import tensorc as tc

    program = tc.compile(source, nodes=nodes, planner=planner)
    _, sizes, params = program.bind({}, need_inputs=False)
    unrolled = program.unrolled(sizes, params)
    planned = program.plan_layouts(unrolled, nodes)
    return {
        "statements": sum(s.program is not None for s in unrolled.statements),
        "distinct_plans": len(program.runner.plans),
        "decisions": list(planned.decisions),
        "modelled_ms": planned.cost * 1e3,
        "planners": sorted({p.stats["planner"] for p in planned.plans.values()}),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = make_parser(
        __doc__.splitlines()[0],
        {"n": (512, "matrix size N (shapes only)"), "nodes": (4, "nodes to plan for")},
        systems=None,
        blas=False,
    )
    parser.set_defaults(repeats=3)
    parser.add_argument("--planners", default="auto,heuristic",
                        type=lambda text: [p for p in text.split(",") if p],
                        help="comma-separated planners to time")
    args = parser.parse_args(argv)
    payload: dict[str, Any] = {
        "benchmark": "program_planning",
        "args": vars(args),
        "targets": {"max_seconds": MAX_SECONDS, "statements": STATEMENTS},
        "environment": environment(),
        "status": "ok",
        "error": None,
        "runs": [],
    }
    try:
        _run(args, payload)
    except Exception as exc:  # reported, not raised
        payload.update(status="ERROR", error=error_text(exc))
        print(f"<<< ERROR: {payload['error']}")
    if args.json:
        write_json(args.json, payload)
    return payload


def _run(args: argparse.Namespace, payload: dict[str, Any]) -> None:
    rows = []
    for name, make in PROGRAMS.items():
        source = make(args.n)
        for planner in args.planners:
            found: list[dict[str, Any]] = []

            def call(source=source, planner=planner, found=found) -> None:
                found[:] = [plan_once(source, args.nodes, planner)]

            times = measure(call, repeats=args.repeats, warmup=1)
            info = found[0]
            median = statistics.median(times)
            run = {"program": name, "planner": planner, "times_s": times,
                   "median_s": median, "min_s": min(times), **info}
            payload["runs"].append(run)
            ok = median < MAX_SECONDS
            rows.append([
                f"{name} ({planner})",
                str(info["statements"]),
                str(info["distinct_plans"]),
                fmt(median, "{:.2f}"),
                fmt(min(times), "{:.2f}"),
                fmt(median / max(info["statements"], 1) * 1e3, "{:.0f}"),
                fmt(info["modelled_ms"], "{:.2f}"),
                str(len(info["decisions"])),
                "ok" if ok else "<<< MISSES TARGET",
            ])
            print(f"  {name} ({planner}): {info['statements']} statements, median "
                  f"{median:.2f} s", flush=True)
    headers = ["program (planner)", "statements", "plans", "median s", "min s",
               "ms/statement", "modelled ms", "decisions", f"< {MAX_SECONDS:.0f} s"]
    print()
    print(format_table(headers, rows))


if __name__ == "__main__":
    main()
