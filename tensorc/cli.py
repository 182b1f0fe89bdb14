"""The ``tensorc`` command line.

Subcommands:

- ``tensorc demo [--n N] [--f F] [--repeats R] [--nodes P] [--blocks B] [--local]`` — MTTKRP
  ``ijk,if,jf->if`` on a private P-node Ray cluster under LSHS and round-robin, checked
  against numpy, with per-node modelled and measured loads (``--local``: the in-process
  executor against numpy).
- ``tensorc bench NAME [args...]`` — run ``benchmarks/NAME.py`` from a source checkout.

Exit codes: 0 success, 1 user error (message on stderr), 2 internal error.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from tensorc.errors import TensorcError


def demo(options: argparse.Namespace) -> int:
    from tensorc.demo import local_demo, ray_demo

    if options.local:
        return local_demo(options.n, options.f, options.repeats)
    return ray_demo(options.n, options.f, options.repeats, options.nodes, options.blocks)


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
    demo_parser = commands.add_parser(
        "demo", help="MTTKRP on a local 4-node Ray cluster, LSHS vs round-robin, vs numpy"
    )
    demo_parser.add_argument("--n", type=int, default=256)
    demo_parser.add_argument("--f", type=int, default=100)
    demo_parser.add_argument("--repeats", type=int, default=3)
    demo_parser.add_argument("--nodes", type=int, default=4)
    demo_parser.add_argument("--blocks", type=int, default=4, help="blocks per dimension of X")
    demo_parser.add_argument("--local", action="store_true", help="in-process executor, no Ray")
    bench_parser = commands.add_parser("bench", help="run benchmarks/NAME.py")
    bench_parser.add_argument("name")
    bench_parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    try:
        if options.command == "demo":
            return demo(options)
        return bench(options.name, options.args)
    except TensorcError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - an internal error, reported as such
        print(f"internal error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
