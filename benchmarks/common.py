"""Shared benchmark harness: cases, systems, timing, checking, tables and JSON.

Contract:

* ``Case`` describes one einsum benchmark: subscripts, named input arrays with their shapes
  (generated in declaration order from ``np.random.default_rng(seed)``, uniform in [0, 1)),
  and which array feeds each operand (an array may feed several, as in ``X^T X``).
  Operands are only materialised by ``Case.make_operands()``.
* ``SYSTEMS`` maps a system name to a *prepare* function
  ``prepare(subscripts, operands) -> run``; ``run()`` takes no arguments and returns the
  einsum result as a numpy array.  Everything done in ``prepare`` (e.g. wrapping the numpy
  inputs as Dask arrays) is outside the timed region; only ``run()`` is timed.
  Systems whose package cannot be imported (``tensorc`` while the compiler is being
  written, or Dask when the extra is not installed) are skipped with a message
  ``"<package> unavailable: <reason>"``.
* ``measure(fn, repeats, warmup)`` times calls with ``time.perf_counter`` and returns the
  wall times in seconds.
* ``run_suite(name, cases, args)`` runs every selected system on the same data in one
  process, one system after the other: one warm-up call whose result is checked, then
  ``args.repeats`` timed calls.  (Not interleaved: a numpy call right after a Dask call
  can be several times slower, see README.md, and the warm-up absorbs that.)  It prints a
  table per case (median and min ms, ratio of the median to numpy.einsum(optimize=True),
  check) and, with ``--json PATH``, writes the results.  A system that raises is reported
  as ``ERROR`` with the message; a result that differs from numpy (np.allclose, rtol 1e-8
  for float64) is marked ``WRONG``.
* BLAS threads are pinned for the whole run with
  ``threadpoolctl.threadpool_limits(limits=args.blas_threads, user_api="blas")``;
  the pin and the resulting thread pools are printed and recorded in the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

#: Blocks per dimension for the equal-block-count systems (``dask-4`` and ``tensorc-4``).
BLOCKS = 4

#: Relative tolerance of the result check, per dtype (atol is np.allclose's default).
RTOL = {np.dtype("float64"): 1e-8, np.dtype("float32"): 1e-4}

BASELINE = "numpy"

Run = Callable[[], Any]
Prepare = Callable[[str, Sequence[np.ndarray]], Run]


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One einsum benchmark case; see the module docstring."""

    name: str
    subscripts: str
    arrays: dict[str, tuple[int, ...]]
    operands: tuple[str, ...]
    params: dict[str, int]
    dtype: str = "float64"
    seed: int = 0

    def make_operands(self) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(self.seed)
        data = {name: rng.random(shape, dtype=self.dtype) for name, shape in self.arrays.items()}
        return tuple(data[name] for name in self.operands)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    def input_bytes(self) -> int:
        """Bytes of the distinct input arrays (an array used twice counts once)."""
        return sum(int(np.prod(s)) for s in self.arrays.values()) * self.itemsize

    def output_shape(self) -> tuple[int, ...]:
        inputs, output = self.subscripts.split("->")
        sizes: dict[str, int] = {}
        for labels, name in zip(inputs.split(","), self.operands, strict=True):
            sizes.update(zip(labels, self.arrays[name], strict=True))
        return tuple(sizes[label] for label in output)

    def output_bytes(self) -> int:
        return int(np.prod(self.output_shape())) * self.itemsize

    def describe(self) -> str:
        shapes = ", ".join(f"{n} {'x'.join(map(str, s))}" for n, s in self.arrays.items())
        return (
            f"{self.subscripts}  [{', '.join(self.operands)}]  {shapes}  {self.dtype}, "
            f"inputs {mib(self.input_bytes()):.1f} MiB, output {mib(self.output_bytes()):.3g} MiB"
        )


def find_case(cases: Sequence[Case], name: str) -> Case:
    for case in cases:
        if case.name == name:
            return case
    raise KeyError(f"no case {name!r}; known: {', '.join(c.name for c in cases)}")


def input_labels(subscripts: str) -> list[str]:
    """Distinct index labels of the inputs, in first-appearance order."""
    lhs = subscripts.split("->")[0]
    return list(dict.fromkeys(c for c in lhs if c.isalpha()))


def even_split(extent: int, blocks: int) -> tuple[int, ...]:
    """Split ``extent`` into ``min(blocks, extent)`` near-equal block sizes."""
    blocks = max(1, min(blocks, extent))
    base, extra = divmod(extent, blocks)
    return tuple(base + (1 if b < extra else 0) for b in range(blocks))


def mib(nbytes: float) -> float:
    return nbytes / 2**20


# --------------------------------------------------------------------------- systems


_IMPORTS: dict[str, Any] = {}


def load_module(name: str) -> Any:
    """Import ``name`` once; re-raise the original import error on every later call."""
    if name not in _IMPORTS:
        try:
            _IMPORTS[name] = importlib.import_module(name)
        except Exception as exc:  # reported by require()
            _IMPORTS[name] = exc
    result = _IMPORTS[name]
    if isinstance(result, Exception):
        raise result
    return result


def _prepare_numpy(subscripts: str, operands: Sequence[np.ndarray]) -> Run:
    return lambda: np.einsum(subscripts, *operands, optimize=True)


def _prepare_opt_einsum(subscripts: str, operands: Sequence[np.ndarray]) -> Run:
    contract = load_module("opt_einsum").contract
    return lambda: contract(subscripts, *operands)


def _dask_prepare(blocks: int | None) -> Prepare:
    def prepare(subscripts: str, operands: Sequence[np.ndarray]) -> Run:
        da = load_module("dask.array")
        arrays = [
            da.from_array(
                op,
                chunks="auto" if blocks is None else tuple(even_split(d, blocks) for d in op.shape),
            )
            for op in operands
        ]
        # optimize=True: Dask at its best (its default runs each block without BLAS)
        return lambda: da.einsum(subscripts, *arrays, optimize=True).compute(scheduler="threads")

    return prepare


def _tensorc_prepare(blocks: int | None) -> Prepare:
    def prepare(subscripts: str, operands: Sequence[np.ndarray]) -> Run:
        einsum = load_module("tensorc").einsum
        options = {}
        if blocks is not None:
            options["grid"] = dict.fromkeys(input_labels(subscripts), blocks)
        return lambda: einsum(subscripts, *operands, **options)

    return prepare


@dataclass(frozen=True)
class System:
    prepare: Prepare
    package: str  # the module that must import for the system to be available
    needs: tuple[str, ...]  # attributes that module must have
    label: str  # how the system calls the package, for tables and JSON


SYSTEMS: dict[str, System] = {
    "tensorc": System(_tensorc_prepare(None), "tensorc", ("einsum",), "tensorc.einsum"),
    "tensorc-4": System(
        _tensorc_prepare(BLOCKS),
        "tensorc",
        ("einsum",),
        f"tensorc.einsum(grid={{label: {BLOCKS}}})",
    ),
    "numpy": System(_prepare_numpy, "numpy", ("einsum",), "numpy.einsum(optimize=True)"),
    "opt_einsum": System(_prepare_opt_einsum, "opt_einsum", ("contract",), "opt_einsum.contract"),
    "dask-auto": System(
        _dask_prepare(None), "dask.array", ("einsum",), "dask chunks='auto', threads scheduler"
    ),
    "dask-4": System(
        _dask_prepare(BLOCKS),
        "dask.array",
        ("einsum",),
        f"dask {BLOCKS} blocks per dim, threads scheduler",
    ),
}


def require(package: str, attrs: Sequence[str] = ()) -> str | None:
    """Why ``package`` (with attributes ``attrs``) cannot be used here, or None if it can."""
    try:
        module = load_module(package)
    except Exception as exc:  # any import failure means "unavailable"
        return f"{type(exc).__name__}: {exc}"
    missing = [attr for attr in attrs if not hasattr(module, attr)]
    if missing:
        return f"module {package!r} has no attribute {', '.join(map(repr, missing))}"
    return None


def unavailable(system: str) -> str | None:
    """Why ``system`` cannot run here, or None if its package imports and has the API."""
    return require(SYSTEMS[system].package, SYSTEMS[system].needs)


def available_systems(requested: Sequence[str]) -> list[str]:
    """Filter ``requested`` to the runnable systems, printing one line per missing package."""
    reported: set[str] = set()
    keep = []
    for name in requested:
        reason = unavailable(name)
        if reason is None:
            keep.append(name)
            continue
        package = SYSTEMS[name].package.split(".")[0]
        if package not in reported:
            reported.add(package)
            skipped = [s for s in requested if SYSTEMS[s].package.split(".")[0] == package]
            print(f"{package} unavailable: {reason} (skipping {', '.join(skipped)})")
    return keep


def check(result: Any, reference: np.ndarray) -> str | None:
    """None if ``result`` matches ``reference``, else a short description of the mismatch."""
    if not isinstance(result, np.ndarray):
        return f"returned {type(result).__module__}.{type(result).__name__}, not numpy.ndarray"
    if result.shape != reference.shape:
        return f"shape {result.shape}, expected {reference.shape}"
    rtol = RTOL.get(reference.dtype, 1e-8)
    if np.allclose(result, reference, rtol=rtol):
        return None
    with np.errstate(all="ignore"):
        rel = np.abs(result - reference) / np.maximum(np.abs(reference), np.finfo(float).tiny)
    worst = float(np.nanmax(rel)) if np.isfinite(result).all() else float("nan")
    dtype = "" if result.dtype == reference.dtype else f", dtype {result.dtype}"
    return f"max rel err {worst:.2e} > rtol {rtol:g}{dtype}"


def error_text(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


# --------------------------------------------------------------------------- timing


def measure(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1) -> list[float]:
    """Call ``fn`` ``warmup`` times untimed, then ``repeats`` times; return seconds per call."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def machine_busy_seconds() -> float | None:
    """The core-seconds every process of this machine has run so far, the kernel's
    included (``/proc/stat``: all time but idle and I/O wait), or ``None`` where there is no
    ``/proc/stat``. The difference across a call is the CPU the call cost the machine, a
    Ray cluster's node processes and object stores counted, plus whatever else ran."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def machine_cpu(into: list[float]) -> Iterator[None]:
    """Append to ``into`` the machine's busy core-seconds during the ``with`` block
    (:func:`machine_busy_seconds`; nothing without ``/proc/stat``)."""
    busy = machine_busy_seconds()
    yield
    if busy is not None:
        into.append(machine_busy_seconds() - busy)


# --------------------------------------------------------------------------- environment


class TreeMemory(threading.Thread):
    """Samples the summed resident memory (RSS) of process ``pid`` (default: this one) and
    all its descendants every ``interval`` seconds, listing the tree again every ``relist``
    seconds (a Ray cluster's nodes and workers are this process's descendants). ``peak``:
    the highest sum of RSS; ``peak_private``: the highest sum of RSS less each process's
    shared resident pages (``memory_info().shared``: file-backed and shared memory, such as
    libraries and Ray's object store), a lower bound where ``peak`` counts a page shared by
    k processes k times. ``rise``: how far ``peak`` went above the sum sampled when the
    sampler started (0 if never). ``check(total, private)`` runs after each sample (a
    watchdog's hook); ``seen`` keeps every process the tree ever listed."""

    def __init__(self, pid: int | None = None, interval: float = 0.02,
                 relist: float = 0.5) -> None:
        import psutil

        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.interval, self.relist = interval, relist
        self.seen: dict = {self.root.pid: self.root}
        self.processes = self.tree()
        self.peak = self.peak_private = 0
        self.at_start = 0
        self._stop_event = threading.Event()

    def start(self) -> None:
        self.at_start = self.sample()[0]
        super().start()

    @property
    def rise(self) -> int:
        """Bytes ``peak`` rose above the sum sampled at :meth:`start`."""
        return max(0, self.peak - self.at_start)

    def tree(self) -> list:
        """The root and its descendants now (added to ``seen``)."""
        import psutil

        try:
            processes = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return []
        for process in processes:
            self.seen.setdefault(process.pid, process)
        return processes

    def sample(self) -> tuple[int, int]:
        """``(summed RSS, summed RSS less shared pages)`` of the tree as last listed."""
        import psutil

        total = private = 0
        for process in self.processes:
            with contextlib.suppress(psutil.Error):
                info = process.memory_info()
                total += info.rss
                private += info.rss - info.shared
        return total, private

    def run(self) -> None:
        listed = float("-inf")  # listed again at the first sample
        while not self._stop_event.wait(self.interval):
            if time.monotonic() - listed > self.relist:
                self.processes, listed = self.tree(), time.monotonic()
            total, private = self.sample()
            self.peak = max(self.peak, total)
            self.peak_private = max(self.peak_private, private)
            self.check(total, private)

    def check(self, total: int, private: int) -> None:
        """Called after each sample; nothing here."""

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _version(distribution: str) -> str | None:
    """Installed version of ``distribution`` (read from metadata, without importing it)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@contextlib.contextmanager
def pinned_blas(threads: int) -> Iterator[dict[str, Any]]:
    """Pin BLAS thread pools to ``threads``; print and yield the setting for the JSON.

    threadpoolctl only sees libraries already loaded: import the systems first.
    """
    with threadpool_limits(limits=threads, user_api="blas"):
        pools = [
            {k: p.get(k) for k in ("internal_api", "version", "threading_layer", "num_threads")}
            for p in threadpool_info()
            if p.get("user_api") == "blas"
        ]
        now = "; ".join(
            f"{p['internal_api']} {p['version']} ({p['threading_layer']}): "
            f"{p['num_threads']} threads"
            for p in pools
        )
        print(
            f"BLAS threads pinned to {threads} with threadpoolctl.threadpool_limits("
            f"limits={threads}, user_api='blas') -> {now or 'no BLAS pool found'}"
        )
        yield {"requested": threads, "pools": pools}


def environment(blas: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": cpu_count(),
        "numpy": np.__version__,
        "opt_einsum": _version("opt_einsum"),
        "dask": _version("dask"),
        "tensorc": _version("tensorc"),
        "blas_threads": blas,
        "dask_scheduler": f"threads ({cpu_count()} workers)",
        "timer": "time.perf_counter",
    }


def write_json(path: str | os.PathLike[str], payload: dict[str, Any]) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {target}")


def finish_verdicts(args, rows: list[dict], verdicts: list[tuple], labels=None) -> int:
    """Print ``(name, what, passed)`` verdicts, write ``--json`` if asked; exit status 0
    when every row's result was right. ``labels`` maps ``passed`` to its printed word."""
    labels = labels or {True: "PASS", False: "FAIL"}
    print()
    for name, what, passed in verdicts:
        print(f"{labels[passed]}  {name}: {what}")
    if args.json:
        write_json(args.json, {"args": vars(args), "rows": rows,
                               "verdicts": [list(v) for v in verdicts]})
    return 0 if all(r["check"] for r in rows) else 1


# --------------------------------------------------------------------------- command line


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def name_list(known: Sequence[str], what: str = "") -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated list of names from ``known`` (repeats dropped,
    order kept); ``what`` names them in the error (``"system(s)"``)."""

    def parse(text: str) -> list[str]:
        names = [s.strip() for s in text.split(",") if s.strip()]
        unknown = [s for s in names if s not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {what + ' ' if what else ''}{', '.join(unknown) or '(none given)'}; "
                f"choose from {', '.join(known)}")
        return list(dict.fromkeys(names))

    return parse


_system_list = name_list(SYSTEMS, "system(s)")


def make_parser(
    description: str,
    sizes: dict[str, tuple[int, str]] | None = None,
    *,
    systems: Sequence[str] | None = tuple(SYSTEMS),
    timing: bool = True,
    blas: bool = True,
    json_help: str = "also write the results as JSON to this file",
) -> argparse.ArgumentParser:
    """The benchmark scripts' shared flags.

    ``sizes`` maps a flag name to (default, meaning); the default is the mission's
    ``--n`` (I = J = K) 256 and ``--f`` 100.  ``systems`` is the default of ``--systems``
    (None: no such flag); ``timing=False`` leaves out ``--repeats``; ``blas=False`` leaves
    out ``--blas-threads``; ``json_help`` describes ``--json``.
    """
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    if sizes is None:
        sizes = {"n": (256, "I = J = K"), "f": (100, "F, the rank")}
    for flag, (default, meaning) in sizes.items():
        parser.add_argument(f"--{flag}", type=_positive_int, default=default, help=meaning)
    if timing:
        parser.add_argument(
            "--repeats", type=_positive_int, default=5, help="timed calls per system"
        )
    parser.add_argument("--json", metavar="PATH", help=json_help)
    if systems is not None:
        parser.add_argument(
            "--systems",
            type=_system_list,
            default=list(systems),
            help=f"comma-separated subset of: {', '.join(SYSTEMS)}",
        )
    if blas:
        parser.add_argument(
            "--blas-threads",
            type=_positive_int,
            default=cpu_count(),
            help="BLAS threads, pinned with threadpoolctl; defaults to the number of cores",
        )
    return parser


# --------------------------------------------------------------------------- suite


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned first column, right-aligned middle columns, free-form last column."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        cells = [str(row[0]).ljust(widths[0])]
        cells += [str(c).rjust(w) for c, w in zip(row[1:-1], widths[1:-1], strict=True)]
        cells.append(str(row[-1]))
        return "  ".join(cells).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _run_case(case: Case, systems: Sequence[str], repeats: int) -> dict[str, Any]:
    print(f"\n== {case.name}: {case.describe()}")
    operands = case.make_operands()
    reference = np.einsum(case.subscripts, *operands, optimize=True)
    results: dict[str, dict[str, Any]] = {}
    for name in systems:  # each system: prepare, one checked warm-up call, timed calls
        entry: dict[str, Any] = {"call": SYSTEMS[name].label, "times_ms": []}
        results[name] = entry
        try:
            run = SYSTEMS[name].prepare(case.subscripts, operands)
            mismatch = check(run(), reference)
            entry.update(status="WRONG" if mismatch else "ok", error=mismatch)
            entry["times_ms"] = [t * 1e3 for t in measure(run, repeats, warmup=0)]
        except Exception as exc:  # reported in the table, the run continues
            entry.update(status="ERROR", error=error_text(exc))
        run = None  # drop the system's state (e.g. Dask graphs) before the next one
    del operands, reference

    for entry in results.values():
        times = entry["times_ms"]
        entry["median_ms"] = statistics.median(times) if times else None
        entry["min_ms"] = min(times) if times else None
    base = results.get(BASELINE, {}).get("median_ms")
    for entry in results.values():
        ok = base and entry["median_ms"] is not None
        entry["ratio_to_numpy"] = entry["median_ms"] / base if ok else None

    rows = []
    for name, entry in results.items():
        status = entry["status"] + (f": {entry['error']}" if entry["error"] else "")
        rows.append(
            [
                name,
                fmt_ms(entry["median_ms"]),
                fmt_ms(entry["min_ms"]),
                fmt(entry["ratio_to_numpy"], "{:.2f}x"),
                status if entry["status"] == "ok" else f"<<< {status}",
            ]
        )
    headers = ["system", "median ms", "min ms", "ratio to numpy", "check"]
    print(format_table(headers, rows))
    return {
        "case": case.name,
        "subscripts": case.subscripts,
        "arrays": {k: list(v) for k, v in case.arrays.items()},
        "operands": list(case.operands),
        "params": case.params,
        "dtype": case.dtype,
        "seed": case.seed,
        "input_bytes": case.input_bytes(),
        "output_bytes": case.output_bytes(),
        "systems": results,
        "ratios": {k: v["ratio_to_numpy"] for k, v in results.items()},
    }


def fmt(value: float | None, spec: str = "{:.3g}") -> str:
    """Format ``value`` with ``spec``; None becomes "-"."""
    return "-" if value is None else spec.format(value)


def fmt_ms(value: float | None) -> str:
    """Milliseconds with two decimals below 10 ms, one decimal above."""
    return fmt(value, "{:.2f}" if value is not None and value < 10 else "{:.1f}")


def run_suite(name: str, cases: Sequence[Case], args: argparse.Namespace) -> dict[str, Any]:
    """Run ``cases`` on the selected systems, print the tables, optionally write JSON."""
    systems = available_systems(args.systems)
    print(
        f"{name}: systems {', '.join(systems) or '(none)'}; each: one checked warm-up call, "
        f"{args.repeats} timed calls; ratio = median / median of numpy.einsum(optimize=True)"
    )
    with pinned_blas(args.blas_threads) as blas:
        results = [_run_case(case, systems, args.repeats) for case in cases]
    payload = {
        "benchmark": name,
        "args": vars(args),
        "systems": {s: SYSTEMS[s].label for s in systems},
        "skipped": {s: unavailable(s) for s in args.systems if s not in systems},
        "environment": environment(blas),
        "cases": results,
    }
    if args.json:
        write_json(args.json, payload)
    return payload


# --------------------------------------------------------------------------- Ray inputs

#: Operands of the mission benchmarks on Ray, by name: X (N×N×N), B and C (N×F), Y (N×N×F).
RAY_BENCHMARKS = {
    "mttkrp ijk,if,jf->if": ("ijk,if,jf->if", ["X", "B", "C"]),
    "mttkrp ijk,jf,kf->if": ("ijk,jf,kf->if", ["X", "B", "C"]),
    "double contraction ijk,jkf->if": ("ijk,jkf->if", ["X", "Y"]),
}


def ray_inputs(names: Sequence[str], n: int, f: int, blocks: int | None) -> list:
    """``tc.random`` operands made on the nodes (seed = position): ``blocks`` per split
    dimension (F is never split), or tensorc's default blocking when ``None``."""
    import tensorc as tc

    shapes = {"X": (n, n, n), "B": (n, f), "C": (n, f), "Y": (n, n, f)}
    if blocks is None:
        return [tc.random(shapes[k], seed=i) for i, k in enumerate(names)]
    grids = {"X": (blocks,) * 3, "B": (blocks, 1), "C": (blocks, 1), "Y": (blocks, blocks, 1)}
    return [tc.random(shapes[k], grid=grids[k], seed=i) for i, k in enumerate(names)]
