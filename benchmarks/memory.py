"""Peak-memory benchmark for the mission cases (both MTTKRPs and the double contraction).

For every case and every selected system (default: tensorc, with numpy as a reference) a
fresh subprocess (this script with ``--child CASE --system NAME``) builds the operands,
prepares the system, starts ``tracemalloc`` (numpy reports its array buffers to it) and
calls the system twice: the first call (which includes any planning or compilation) and a
repeat call, each with its own traced peak.  Allocations outside tracemalloc's view
(BLAS work buffers, Ray's object store) are not counted.

    peak  = inputs + max(traced peak of either call)
    ratio = peak / (inputs + output)        target <= 1.5 (docs/performance.md)

The inputs are counted once even though they were allocated before tracing started; the
output is inside the traced peak.  Each result is also checked against numpy.

    python benchmarks/memory.py [--n 256] [--f 100] [--systems tensorc,numpy]
                                [--blas-threads 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tracemalloc
from typing import Any

import double_contraction
import mttkrp
import numpy as np
from common import (
    SYSTEMS,
    Case,
    available_systems,
    check,
    environment,
    error_text,
    find_case,
    fmt,
    format_table,
    make_parser,
    mib,
    pinned_blas,
    unavailable,
    write_json,
)

TARGET = 1.5
RESULT_TAG = "MEMORY-RESULT "


def mission_cases(n: int, f: int) -> list[Case]:
    return mttkrp.cases(n, f) + double_contraction.cases(n, f)


def _traced_peak(run: Any) -> tuple[int, Any]:
    """Traced peak bytes (since tracing started) during ``run()``, and its result."""
    tracemalloc.reset_peak()
    result = run()
    return tracemalloc.get_traced_memory()[1], result


def child(case: Case, system: str) -> dict[str, Any]:
    """Measure one (case, system) in this process; called in a fresh subprocess."""
    operands = case.make_operands()
    out: dict[str, Any] = {"status": "ok", "error": None}
    try:
        run = SYSTEMS[system].prepare(case.subscripts, operands)
        tracemalloc.start()
        first, result = _traced_peak(run)
        del result
        repeat, result = _traced_peak(run)
        tracemalloc.stop()
    except Exception as exc:  # reported as ERROR by the parent
        tracemalloc.stop()
        return {"status": "ERROR", "error": error_text(exc)}
    mismatch = check(result, np.einsum(case.subscripts, *operands, optimize=True))
    if mismatch:
        out.update(status="WRONG", error=mismatch)
    inputs, output = case.input_bytes(), case.output_bytes()
    out.update(
        first_call_traced_bytes=first,
        repeat_call_traced_bytes=repeat,
        peak_bytes=inputs + max(first, repeat),
        ratio=(inputs + max(first, repeat)) / (inputs + output),
        ru_maxrss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    )
    return out


def _spawn(case: Case, system: str, args: argparse.Namespace) -> dict[str, Any]:
    flags = {"--child": case.name, "--system": system, "--n": args.n, "--f": args.f}
    flags["--blas-threads"] = args.blas_threads
    command = [sys.executable, __file__, *(str(x) for item in flags.items() for x in item)]
    proc = subprocess.run(command, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG) :])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"status": "ERROR", "error": f"subprocess exit {proc.returncode}: {tail}"}


def main(argv: list[str] | None = None) -> dict:
    parser = make_parser(__doc__.splitlines()[0], systems=("tensorc", "numpy"), timing=False)
    parser.add_argument("--child", metavar="CASE", help=argparse.SUPPRESS)
    parser.add_argument("--system", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = mission_cases(args.n, args.f)

    if args.child:
        unavailable(args.system)  # import the system's package before pinning its BLAS
        with pinned_blas(args.blas_threads):
            result = child(find_case(cases, args.child), args.system)
        print(RESULT_TAG + json.dumps(result), flush=True)
        return result

    systems = available_systems(args.systems)
    print(
        f"memory: systems {', '.join(systems) or '(none)'}; one fresh subprocess per case "
        f"and system; ratio = (inputs + traced peak) / (inputs + output), target <= {TARGET}"
    )
    with pinned_blas(args.blas_threads) as blas:
        pass  # children pin the same way; this records the setting
    rows, results = [], []
    for case in cases:
        print(f"\n== {case.name}: {case.describe()}", flush=True)
        for system in systems:
            r = {"case": case.name, "system": system, **_spawn(case, system, args)}
            results.append(r)
            ratio = r.get("ratio")
            verdict = r["status"]
            if verdict == "ok" and ratio > TARGET:
                verdict = f"OVER {TARGET}"
            if r["error"]:
                verdict += f": {r['error']}"
            rows.append(
                [
                    case.name,
                    system,
                    fmt(mib(case.input_bytes()), "{:.1f}"),
                    fmt(mib(case.output_bytes()), "{:.3g}"),
                    fmt(_mib(r.get("first_call_traced_bytes")), "{:.1f}"),
                    fmt(_mib(r.get("repeat_call_traced_bytes")), "{:.1f}"),
                    fmt(_mib(r.get("peak_bytes")), "{:.1f}"),
                    fmt(ratio, "{:.2f}"),
                    verdict if verdict == "ok" else f"<<< {verdict}",
                ]
            )
            print(f"  {system}: ratio {fmt(ratio, '{:.2f}')} {verdict}", flush=True)
    headers = [
        "case",
        "system",
        "inputs MiB",
        "output MiB",
        "traced 1st MiB",
        "traced repeat MiB",
        "peak MiB",
        "ratio",
        f"<= {TARGET}",
    ]
    print()
    print(format_table(headers, rows))
    payload = {
        "benchmark": "memory",
        "args": vars(args),
        "target_ratio": TARGET,
        "skipped": {s: unavailable(s) for s in args.systems if s not in systems},
        "environment": environment(blas),
        "results": results,
    }
    if args.json:
        write_json(args.json, payload)
    return payload


def _mib(nbytes: int | None) -> float | None:
    return None if nbytes is None else mib(nbytes)


if __name__ == "__main__":
    main()
