"""The ``tensorc`` command line.

Subcommands:

- ``tensorc demo [--n N] [--f F] [--repeats R]`` — MTTKRP ``ijk,if,jf->if`` end to end on the
  local executor: checks the result against numpy and prints both timings and the plan.
- ``tensorc bench NAME [args...]`` — run ``benchmarks/NAME.py`` from a source checkout.

Exit codes: 0 success, 1 user error (message on stderr), 2 internal error.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tensorc.errors import TensorcError


def _median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def demo(n: int, f: int, repeats: int) -> int:
    import tensorc as tc

    rng = np.random.default_rng(0)
    x = rng.random((n, n, n))
    b = rng.random((n, f))
    c = rng.random((n, f))
    print(f"tensorc demo: MTTKRP ijk,if,jf->if with I=J=K={n}, F={f}, float64, local executor")
    result = tc.einsum("ijk,if,jf->if", x, b, c)
    expected = np.einsum("ijk,if,jf->if", x, b, c, optimize=True)
    ok = np.allclose(result, expected, rtol=1e-10, atol=0)
    error = float(np.max(np.abs(result - expected)) / np.max(np.abs(expected)))
    print(f"result check vs numpy.einsum: {'OK' if ok else 'MISMATCH'} (max rel error {error:.2e})")
    tc_ms = _median_ms(lambda: tc.einsum("ijk,if,jf->if", x, b, c), repeats)
    np_ms = _median_ms(lambda: np.einsum("ijk,if,jf->if", x, b, c, optimize=True), repeats)
    stats = tc.last_stats()
    print(f"tensorc        median {tc_ms:8.2f} ms  ({stats['tasks']} tasks, "
          f"{stats['workers']} worker(s), blocking {stats['blocking']})")
    print(f"numpy.einsum   median {np_ms:8.2f} ms  (optimize=True)")
    print(f"ratio tensorc / numpy: {tc_ms / np_ms:.2f}")
    print()
    explained = tc.plan("ijk,if,jf->if", x, b, c).explain()
    print("== decisions ==" + explained.split("== decisions ==")[1])
    return 0 if ok else 1


def bench(name: str, args: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent / "benchmarks"
    script = root / f"{name}.py"
    if not script.exists():
        available = ", ".join(sorted(p.stem for p in root.glob("*.py") if p.stem != "common"))
        print(f"error: no benchmark {name!r} in {root} (have: {available or 'none'})",
              file=sys.stderr)
        return 1
    return subprocess.call([sys.executable, str(script), *args])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tensorc", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    demo_parser = commands.add_parser("demo", help="MTTKRP end to end against numpy")
    demo_parser.add_argument("--n", type=int, default=256)
    demo_parser.add_argument("--f", type=int, default=100)
    demo_parser.add_argument("--repeats", type=int, default=5)
    bench_parser = commands.add_parser("bench", help="run benchmarks/NAME.py")
    bench_parser.add_argument("name")
    bench_parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    try:
        if options.command == "demo":
            return demo(options.n, options.f, options.repeats)
        return bench(options.name, options.args)
    except TensorcError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - an internal error, reported as such
        print(f"internal error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
