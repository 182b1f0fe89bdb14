"""Run the mission benchmarks and print one combined summary.

Runs, each in a fresh Python process with its output streamed: ``mttkrp.py``,
``double_contraction.py``, ``memory.py`` and ``planning.py``.  Each script writes JSON
(to ``--json DIR``/<script>.json, or a temporary directory), from which the summary is
built: the median time and ratio to numpy of every system on every case, and the
docs/performance.md targets that the run can check (tensorc within 1.1x of numpy; tensorc-4
at least 10x faster than dask-4; memory ratio <= 1.5; planning under 2 s for ~100,000
tasks and >= 50,000 tasks/s).  ``--n``, ``--f``, ``--repeats``, ``--blas-threads`` and
``--systems`` are forwarded to the scripts that take them (``--systems`` not to
planning; ``--n`` not to planning, which plans shapes only).

    python benchmarks/run_all.py [--n 256] [--f 100] [--repeats 5] [--systems ...]
                                 [--blas-threads 2] [--json DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import BASELINE, fmt, fmt_ms, format_table, make_parser

HERE = Path(__file__).resolve().parent
SUITES = ("mttkrp", "double_contraction")
SCRIPTS = (*SUITES, "memory", "planning")
TENSORC_VS_NUMPY = 1.1
DASK4_VS_TENSORC4 = 10.0


def _flags(script: str, args: argparse.Namespace) -> list[str]:
    """The command-line flags forwarded to ``script``."""
    flags: list[str] = []
    if script != "planning":
        flags += ["--n", str(args.n), "--f", str(args.f)]
        flags += ["--blas-threads", str(args.blas_threads)]
        if args.systems is not None:  # else each script's default (memory: tensorc, numpy)
            flags += ["--systems", ",".join(args.systems)]
    if script != "memory":
        flags += ["--repeats", str(args.repeats)]
    return flags


def run_script(script: str, flags: list[str], json_path: Path) -> dict[str, Any] | None:
    command = [sys.executable, str(HERE / f"{script}.py"), *flags, "--json", str(json_path)]
    print(f"\n##### {' '.join(command[1:])}", flush=True)
    code = subprocess.run(command).returncode
    if code != 0 or not json_path.exists():
        print(f"<<< {script}.py FAILED (exit code {code})", flush=True)
        return None
    return json.loads(json_path.read_text())


def summary_tables(results: dict[str, dict[str, Any] | None]) -> str:
    timing, targets = [], []
    for script in SUITES:
        payload = results.get(script)
        if payload is None:
            timing.append([script, "-", "-", "-", "-", "FAILED"])
            continue
        for case in payload["cases"]:
            for system, entry in case["systems"].items():
                note = entry["status"] + (f": {entry['error']}" if entry["error"] else "")
                timing.append(
                    [
                        case["case"],
                        system,
                        fmt_ms(entry["median_ms"]),
                        fmt_ms(entry["min_ms"]),
                        fmt(entry["ratio_to_numpy"], "{:.2f}x"),
                        note if entry["status"] == "ok" else f"<<< {note}",
                    ]
                )
            targets += _timing_targets(case)
    targets += _memory_targets(results.get("memory"))
    targets += _planning_targets(results.get("planning"))
    return "\n\n".join(
        [
            format_table(["case", "system", "median ms", "min ms", "vs numpy", "check"], timing),
            format_table(["target (docs/performance.md)", "measured", "verdict"], targets),
        ]
    )


def _verdict(value: float | None, ok: bool, missing: str, spec: str = "{:.2f}") -> list[str]:
    if value is None:
        return ["-", f"n/a ({missing})"]
    return [spec.format(value), "PASS" if ok else "<<< FAIL"]


def _median(case: dict[str, Any], system: str) -> tuple[float | None, str]:
    """The system's median ms on ``case`` if its result was ok, else None and why not."""
    entry = case["systems"].get(system)
    if entry is None:
        return None, f"{system} not run"
    if entry["status"] != "ok":
        return None, f"{system} {entry['status']}"
    return entry["median_ms"], ""


def _ratio_target(
    case: dict[str, Any], num: str, den: str, bound: float, at_most: bool
) -> list[str]:
    (a, why_a), (b, why_b) = _median(case, num), _median(case, den)
    ratio = a / b if a is not None and b else None
    ok = ratio is not None and (ratio <= bound if at_most else ratio >= bound)
    label = f"{case['case']}: {num} / {den} {'<=' if at_most else '>='} {bound:g}"
    return [label, *_verdict(ratio, ok, why_a or why_b)]


def _timing_targets(case: dict[str, Any]) -> list[list[str]]:
    return [
        _ratio_target(case, "tensorc", BASELINE, TENSORC_VS_NUMPY, at_most=True),
        _ratio_target(case, "dask-4", "tensorc-4", DASK4_VS_TENSORC4, at_most=False),
    ]


def _memory_targets(payload: dict[str, Any] | None) -> list[list[str]]:
    if payload is None:
        return [["memory", "-", "FAILED"]]
    rows = []
    for r in payload["results"]:
        if r["system"] != "tensorc":
            continue
        ratio = r.get("ratio")
        ok = r["status"] == "ok" and ratio is not None and ratio <= payload["target_ratio"]
        rows.append(
            [
                f"{r['case']}: tensorc peak / (in + out) <= {payload['target_ratio']}",
                *_verdict(ratio, ok, r["status"]),
            ]
        )
    return rows or [["memory: tensorc", "-", "n/a (tensorc not run)"]]


def _planning_targets(payload: dict[str, Any] | None) -> list[list[str]]:
    if payload is None:
        return [["planning", "-", "FAILED"]]
    if payload["status"] != "ok":
        return [["planning", "-", f"n/a ({payload['status']}: {payload['error']})"]]
    run, limits = payload["result"], payload["targets"]
    return [
        [
            f"planning {run['tasks']:,} tasks: seconds < {limits['max_seconds']:g}",
            *_verdict(run["median_s"], run["median_s"] < limits["max_seconds"], "", "{:.3f}"),
        ],
        [
            f"planning: tasks/s >= {limits['min_tasks_per_second']:,}",
            *_verdict(
                run["tasks_per_second"],
                run["tasks_per_second"] >= limits["min_tasks_per_second"],
                "",
                "{:,.0f}",
            ),
        ],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__.splitlines()[0], json_help="write one JSON per script here")
    parser.set_defaults(systems=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        out_dir = Path(args.json or scratch)
        results = {
            script: run_script(script, _flags(script, args), out_dir / f"{script}.json")
            for script in SCRIPTS
        }
    print("\n##### summary\n")
    print(summary_tables(results))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
