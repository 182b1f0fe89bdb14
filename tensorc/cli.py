"""The ``tensorc`` command line.

Subcommands:

- ``tensorc demo [--n N] [--f F] [--repeats R] [--nodes P] [--blocks B] [--local]`` — MTTKRP
  ``ijk,if,jf->if`` on a private P-node Ray cluster under LSHS and round-robin, checked
  against numpy, with per-node modelled and measured loads (``--local``: the in-process
  executor against numpy).
- ``tensorc bench NAME [args...]`` — run ``benchmarks/NAME.py`` from a source checkout.
- ``tensorc run FILE.tc [--input NAME=file.npy|store.zarr ...] [--set NAME=VALUE ...]
  [--random] [--output out.npz|out.zarr]`` — run a ``.tc`` program; inputs are read block
  by block; ``--random`` fills missing inputs with seeded random data of their declared
  shapes; prints every output and saves them with ``--output`` (``.npz``), or streams them
  block by block into a zarr group (``.zarr``: one array per output, never held whole).
- ``tensorc explain FILE.tc --emit ast|ir|plan|tasks|schedule|dot [--set NAME=VALUE ...]
  (a block program: ``--emit program|plan|dag --set N=4096``)
  [--nodes P] [--planner NAME]`` (``--nodes`` plans the whole program for P nodes).
- ``tensorc check FILE.tc`` — parse and check; prints every diagnostic.

Exit codes: 0 success, 1 user error (message on stderr), 2 internal error.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import tensorc as tc
from tensorc.demo import local_demo, ray_demo
from tensorc.driver.block_programs import BlockProgram
from tensorc.errors import TcError, TensorcError


def demo(options: argparse.Namespace) -> int:
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


def _assignments(items: list[str], what: str) -> dict[str, str]:
    result = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"{what} takes NAME=VALUE, got {item!r}")
        result[name] = value
    return result


class UsageError(Exception):
    """A command line that cannot be carried out (exit code 1)."""


def _scalar(text: str):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            continue
    if text in ("true", "false"):
        return text == "true"
    raise UsageError(f"--set values are numbers or true/false, got {text!r}")


def _load_inputs(items: list[str]) -> dict:
    """``--input NAME=PATH``: a ``.npy`` file or a zarr store, read block by block by the
    tasks that need it (never loaded whole)."""
    arrays = {}
    for name, path in _assignments(items, "--input").items():
        try:
            if os.path.isdir(path):
                arrays[name] = tc.from_zarr(path)
            else:
                arrays[name] = tc.load(path)
        except tc.StorageError as err:
            raise UsageError(f"cannot load --input {name}={path}: {err}") from err
    return arrays


def run_tc(options) -> int:
    program = tc.compile(options.file)
    values: dict = {k: _scalar(v) for k, v in _assignments(options.set, "--set").items()}
    values.update(_load_inputs(options.input))
    if options.random:
        block = isinstance(program, BlockProgram)
        sizes = values if block else program.bind(values, need_inputs=False)[1]
        rng = np.random.default_rng(options.seed)
        for name in program.input_names:
            if name not in values:
                tensors = program.program.tensors if block else program.checked.tensors
                dtype = tensors[name].dtype
                shape = program.declared_shape(name, sizes)
                values[name] = _random(rng, shape, dtype)
    if isinstance(program, BlockProgram):
        values = {k: v for k, v in values.items() if k in program.input_names
                  or k in program.program.blocks}
    if options.output and _is_zarr_path(options.output) and not isinstance(program, BlockProgram):
        written = program.run_to_zarr(options.output, **values)  # streamed, never whole
        for name in program.output_names:
            print(f"{name} : written to {written}/{name}")
        return 0
    outputs = program.run(**values)
    for name, value in outputs.items():
        print(f"{name} : {value.dtype}{list(value.shape)}")
        print(np.array2string(np.asarray(value), precision=6, threshold=200))
    if options.output:
        np.savez(options.output, **{k: np.asarray(v) for k, v in outputs.items()})
    return 0


def _is_zarr_path(path: str) -> bool:
    return path.rstrip("/").endswith(".zarr")


def _random(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in ("i32", "i64"):
        return rng.integers(0, 10, size=shape).astype("int32" if dtype == "i32" else "int64")
    return rng.random(shape).astype("float32" if dtype == "f32" else "float64")


def explain_tc(options) -> int:
    program = tc.compile(options.file, nodes=options.nodes, planner=options.planner)
    values = {k: _scalar(v) for k, v in _assignments(options.set, "--set").items()}
    print(program.explain(options.emit, **values))
    return 0


def check_tc(options) -> int:
    program = tc.compile(options.file)
    print(f"{options.file}: ok ({len(program.input_names)} input(s), "
          f"{len(program.output_names)} output(s))")
    return 0


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
    run_parser = commands.add_parser("run", help="run a .tc program")
    run_parser.add_argument("file")
    run_parser.add_argument("--input", action="append", default=[],
                            metavar="NAME=FILE.npy|STORE.zarr")
    run_parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                            help="a param or size value")
    run_parser.add_argument("--random", action="store_true",
                            help="random data for every input not given")
    run_parser.add_argument("--seed", type=int, default=0)
    run_parser.add_argument("--output", help="save the outputs to this .npz file, or stream "
                            "them block by block into this .zarr group")
    explain_parser = commands.add_parser("explain", help="print a compilation stage")
    explain_parser.add_argument("file")
    explain_parser.add_argument("--emit", default="plan",
                                choices=("ast", "ir", "plan", "tasks", "schedule", "dot",
                                         "program", "dag"))
    explain_parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    explain_parser.add_argument("--nodes", type=int, default=None,
                                help="plan the whole program for this many nodes")
    explain_parser.add_argument("--planner", default="auto",
                                choices=("auto", "heuristic", "greedy", "smt", "exhaustive"))
    check_parser = commands.add_parser("check", help="parse and check a .tc program")
    check_parser.add_argument("file")
    options = parser.parse_args(argv)
    commands_by_name = {"run": run_tc, "explain": explain_tc, "check": check_tc}
    try:
        if options.command in commands_by_name:
            return commands_by_name[options.command](options)
        if options.command == "demo":
            return demo(options)
        return bench(options.name, options.args)
    except TcError as err:
        print(err, file=sys.stderr)
        return 1
    except (TensorcError, UsageError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - an internal error, reported as such
        print(f"internal error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
