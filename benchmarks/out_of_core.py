"""More data than memory: contractions and a standardization over zarr stores, under a budget.

Each case takes one stored input (zarr v3, float64, uncompressed) and small in-memory
factors (F = 32) and runs on every selected system under one memory budget
(``--memory-limit``, default 2GB):

- ``mttkrp1`` ``ijk,if,jf->if`` and ``mttkrp2`` ``ijk,jf,kf->if``: X is a stored N×N×N
  cube (chunks 128³), B and C are N×F numpy arrays;
- ``double`` ``ijk,jkf->if``: X the stored cube, Y N×N×F (chunks 128×128×F), stored too
  when it is more than a quarter of the budget, else made in memory (the row says which);
- ``xtx`` ``ij,ik->jk`` (X^T X): X a stored tall matrix, rows × 64, chunks of 131072 rows
  (64 MiB; ``--tall-chunk-rows``);
- ``standardize`` ``(X - mean(X, axis=0)) / std(X, axis=0)`` on the tall matrix, the result
  written to a temporary zarr store (removed afterwards).

Sizes: the input is ``size`` GB (10^9 bytes); by default 0.5×, 1× and 1.5× the machine's
total RAM, or ``--sizes 1,2`` (``--quick``: 0.25 GB); N is rounded to whole 128-chunks and
the rows to whole row chunks (zarr stores an edge chunk padded to full size), so the actual
input (printed) is near, not at, the size. Inputs are written once per size to
``--dir`` (default /tmp/tensorc-ooc), chunk by chunk from a numpy Generator seeded with
(array seed, chunk index), and reused while their shape and chunks match. Free disk is
checked before each input is written: a case is skipped (and says so) unless the disk holds
the input plus its largest output plus 10 %.

Systems (each timed run is a fresh subprocess, this script with ``--child``):

- ``tensorc-local``: ``tc.init(backend="local", memory_limit=BUDGET)``, ``tc.from_zarr``,
  ``np.asarray(tc.einsum(...))`` / ``tc.to_zarr(...)``;
- ``tensorc-ray4``: the same after ``tc.init(num_nodes=4, memory_limit=BUDGET)`` (a private
  4-node Ray cluster), ``tc.shutdown()`` at the end;
- ``dask``: ``da.from_zarr``, ``da.einsum(..., optimize=True).compute()`` with the threads
  scheduler (``da.to_zarr`` for standardize);
- ``cubed``: ``cubed.Spec(work_dir=<tmp>, allowed_mem=BUDGET)``, ``cubed.from_zarr`` and
  the array API (mttkrp1 as ``B * (sum(X, axis=2) @ C)``, mttkrp2 as ``sum(tensordot(X, C)
  * B, axis=1)``, double as a two-axis ``tensordot``), cubed's default threads executor;
- ``numpy-loop``: a hand-written loop over slabs of whole chunks (one 128-chunk of i by one
  of j, all of k; one row chunk of the tall matrix), read with zarr, each slab's part
  computed by ``np.einsum(..., optimize=True)`` or a matmul and accumulated (standardize:
  one pass for the column statistics, one to write);
- ``read-limit``: the same reads and nothing else, one reader thread per core: the store's
  read bandwidth through zarr.

Measured per run: the wall time of the call (after imports and opening the inputs;
``tc.init`` is timed apart as ``init_seconds``); the peak resident memory of the child and
all its descendants (Ray's raylets and workers included), sampled by the parent every 20 ms
as the sum of ``memory_info().rss`` ("peak RSS": a page shared by k processes, such as
Ray's object store or a library, counts k times) and as the sum of RSS minus shared pages
("private": a lower bound); the child's own peak (``VmHWM``; its ``ru_maxrss`` is kept in
the JSON, but on Linux it starts at the parent's RSS at fork); and the bytes of the stored
inputs (read GB/s = those bytes / time; standardize reads its input twice in a streaming
system, the figure stays the nominal one). The fraction of the stores' bytes
resident in the page cache when the timed call starts (``fincore``) and the 1-minute load
average before the run are recorded;
``--cold`` evicts the stores' pages first (``posix_fadvise(DONTNEED)``, no root needed);
without it each run reads the stores once, after its set-up and before its timed call, so
every system starts with them in the page cache.
BLAS threads (``--blas-threads``, set by ``OPENBLAS_NUM_THREADS`` etc. in the child's
environment, reported by threadpoolctl after the run): by default one for Dask and
cubed (each runs two worker threads calling BLAS; with a 2-thread OpenBLAS under each,
Dask's X^T X ran ten times slower on this loaded 2-core machine), left alone for tensorc
(which sets its workers' BLAS itself) and the numpy loop; the table shows the BLAS pools'
threads as the run saw them.
Every result is checked against a reference made by the numpy-loop method and cached in
``--dir`` as ``.npy`` (standardize: the column mean and std, and three random 1000-row
slabs of the written store are compared), rtol 1e-8. ``--repeats`` runs per system, each
in a fresh process: the median time and the highest peaks are reported. A run whose
process tree's private memory passes ``--kill-rss`` (default 60 % of RAM; private, since
the RSS sum counts Ray's shared pages once per process), or passes the budget while less
than 5 % of RAM is available, is killed (every process of its tree, by pid) and reported
as KILLED; one that runs past ``--timeout`` as TIMEOUT. Failures are rows, not crashes; the
exit status is 1 if any row is neither ok nor SKIPPED. Each run's stdout and stderr are
kept in ``--dir``/logs.

    .venv/bin/python benchmarks/out_of_core.py [--quick | --sizes 1,2] [--cases mttkrp1,xtx]
        [--systems dask,cubed,numpy-loop,read-limit] [--memory-limit 2GB]
        [--dir /tmp/tensorc-ooc] [--repeats 1] [--tall-chunk-rows 131072] [--cold] [--clean]
        [--kill-rss 0.6] [--timeout 3600] [--json PATH] [--plot PATH]

Needs the ``bench`` extra (Dask, cubed, matplotlib): ``.venv/bin/pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import itertools
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import zarr
from common import (
    TreeMemory,
    cpu_count,
    environment,
    error_text,
    fmt,
    format_table,
    name_list,
    write_json,
)
from threadpoolctl import threadpool_info
from zarr.core.buffer import default_buffer_prototype

# benchmarks/sparse.py is named like pydata's ``sparse``, which Dask imports when present
# (and distributed.py like Dask's ``distributed``): with ``common`` imported, keep this
# folder off the import path
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

GB = 10**9
F = 32
CUBE_CHUNK = 128
TALL_COLS = 64
TALL_CHUNK_ROWS = 131072  # 64 MiB chunks of 64 float64 columns (--tall-chunk-rows)
SEEDS = {"X": 1, "Y": 2, "B": 3, "C": 4}
Y_STORED_ABOVE = 0.25  # Y is stored when it is more than this fraction of the budget
RESULT_TAG = "OOC-RESULT "
SAMPLE_SECONDS = 0.02
TREE_SECONDS = 0.5
"""How often the memory sampler lists the process tree again. Listing it scans every
process on the machine (4 ms of CPU with a 4-node Ray tree of 25 processes); sampling the
listed ones costs 0.5 ms. Listed every sample, the sampler took a third of a core from
the runs it measured, and more from a Ray run's 25 processes than from a local run's one."""
RTOL = 1e-8


@dataclass(frozen=True)
class CaseDef:
    subscripts: str | None  # None: standardize
    input: str  # "cube" (X N×N×N) or "tall" (X rows × 64)


CASES = {
    "mttkrp1": CaseDef("ijk,if,jf->if", "cube"),
    "mttkrp2": CaseDef("ijk,jf,kf->if", "cube"),
    "double": CaseDef("ijk,jkf->if", "cube"),
    "xtx": CaseDef("ij,ik->jk", "tall"),
    "standardize": CaseDef(None, "tall"),  # (X - mean(X, axis=0)) / std(X, axis=0)
}
SYSTEMS = ["tensorc-local", "tensorc-ray4", "dask", "cubed", "numpy-loop", "read-limit"]


# --------------------------------------------------------------------------- inputs


def array_spec(name: str, shape: tuple[int, ...], chunks: tuple[int, ...], root: str | None):
    """A JSON-able description of a generated array; ``root`` None keeps it in memory."""
    tag = "x".join(map(str, shape)) + "-c" + "x".join(map(str, chunks))
    path = None if root is None else str(Path(root) / f"{name}-{tag}.zarr")
    return {"name": name, "shape": list(shape), "chunks": list(chunks), "seed": SEEDS[name],
            "path": path}


def nbytes(spec: dict) -> int:
    return math.prod(spec["shape"]) * 8


def chunk_blocks(spec: dict) -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
    """Every chunk's slices and values, each from ``default_rng([seed, *chunk index])``."""
    shape, chunks = spec["shape"], spec["chunks"]
    counts = [math.ceil(s / c) for s, c in zip(shape, chunks, strict=True)]
    for index in itertools.product(*map(range, counts)):
        slices = tuple(
            slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(index, chunks, shape, strict=True)
        )
        rng = np.random.default_rng([spec["seed"], *index])
        yield slices, rng.random(tuple(s.stop - s.start for s in slices))


def make_in_memory(spec: dict) -> np.ndarray:
    """The array ``spec`` describes, in memory (the same values a stored copy holds)."""
    out = np.empty(spec["shape"])
    for slices, values in chunk_blocks(spec):
        out[slices] = values
    return out


def factor(name: str, n: int) -> np.ndarray:
    """B or C: n × F, uniform in [0, 1)."""
    return np.random.default_rng(SEEDS[name]).random((n, F))


def stored_matches(spec: dict) -> bool:
    """True if a complete store with ``spec``'s shape, chunks, seed and dtype is there."""
    try:
        arr = zarr.open_array(spec["path"], mode="r")
    except Exception:  # missing or unreadable: write it again
        return False
    return (
        list(arr.shape) == spec["shape"]
        and list(arr.chunks) == spec["chunks"]
        and arr.dtype == np.float64
        and arr.attrs.get("complete") is True
        and arr.attrs.get("seed") == spec["seed"]
    )


def write_store(spec: dict) -> None:
    """Write ``spec`` as an uncompressed zarr v3 store, one chunk at a time."""
    start = time.perf_counter()
    print(f"  writing {spec['name']} {tuple(spec['shape'])} ({nbytes(spec) / GB:.2f} GB) to "
          f"{spec['path']} ...", flush=True)
    arr = zarr.create_array(
        store=spec["path"], shape=tuple(spec["shape"]), chunks=tuple(spec["chunks"]),
        dtype="float64", compressors=None, filters=None, fill_value=0.0, overwrite=True,
    )
    for slices, values in chunk_blocks(spec):
        arr[slices] = values
    arr.attrs.update({"complete": True, "seed": spec["seed"]})
    os.sync()  # no run competes with this write's dirty pages going to disk
    seconds = time.perf_counter() - start
    print(f"  written in {seconds:.1f} s ({nbytes(spec) / GB / seconds:.2f} GB/s)", flush=True)


def store_files(path: str) -> list[str]:
    return [str(p) for p in Path(path).rglob("*") if p.is_file()]


def cached_fraction(paths: list[str]) -> float | None:
    """Fraction of the stores' file bytes resident in the page cache (``fincore``), or
    None when it cannot be told."""
    files = [f for p in paths for f in store_files(p)]
    size = sum(os.path.getsize(f) for f in files)
    if shutil.which("fincore") is None or not size:
        return None
    total = 0
    for start in range(0, len(files), 500):
        out = subprocess.run(
            ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES",
             *files[start:start + 500]],
            capture_output=True, text=True,
        )
        if out.returncode != 0:
            return None
        total += sum(int(line) for line in out.stdout.split())
    return total / size


def warm(paths: list[str]) -> None:
    """Read the stores once, so a run finds them in the page cache as every other run does
    (this VM reclaims idle page cache within minutes: without it the first system of a case
    read two thirds of its store from disk and the next found it all cached)."""
    buffer = bytearray(8 << 20)
    for file in (f for p in paths for f in store_files(p)):
        with open(file, "rb", buffering=0) as handle:
            while handle.readinto(buffer):
                pass


def evict(paths: list[str]) -> None:
    """Drop the stores' pages from the page cache (``posix_fadvise(DONTNEED)``)."""
    for file in (f for p in paths for f in store_files(p)):
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- problems


def cube_side(size_gb: float) -> int:
    """N for an N³ float64 cube of about ``size_gb``: a whole number of 128-chunks (zarr
    stores an edge chunk at full size, so partial chunks would be read and stored padded)."""
    return CUBE_CHUNK * max(1, round((size_gb * GB / 8) ** (1 / 3) / CUBE_CHUNK))


def tall_rows(size_gb: float, chunk_rows: int) -> int:
    """Rows of the tall matrix of about ``size_gb``: a whole number of row chunks."""
    return chunk_rows * max(1, round(size_gb * GB / (8 * TALL_COLS) / chunk_rows))


def problem(case: str, size_gb: float, args: argparse.Namespace) -> dict:
    """Everything a child needs to run ``case`` at ``size_gb``: the arrays and the budget."""
    budget = memory_bytes(args.memory_limit)
    prob: dict[str, Any] = {"case": case, "size_gb": size_gb, "budget": args.memory_limit,
                            "budget_bytes": budget, "dir": args.dir, "y": None}
    if CASES[case].input == "cube":
        n = cube_side(size_gb)
        prob["x"] = array_spec("X", (n, n, n), (CUBE_CHUNK,) * 3, args.dir)
        if case == "double":
            y_shape, y_chunks = (n, n, F), (CUBE_CHUNK, CUBE_CHUNK, F)
            stored = math.prod(y_shape) * 8 > Y_STORED_ABOVE * budget
            prob["y"] = array_spec("Y", y_shape, y_chunks, args.dir if stored else None)
    else:
        step = args.tall_chunk_rows
        prob["x"] = array_spec("X", (tall_rows(size_gb, step), TALL_COLS), (step, TALL_COLS),
                               args.dir)
    return prob


def stored_specs(prob: dict) -> list[dict]:
    return [s for s in (prob["x"], prob["y"]) if s is not None and s["path"] is not None]


def input_bytes(prob: dict) -> int:
    return sum(nbytes(s) for s in stored_specs(prob))


def largest_output(prob: dict) -> int:
    """Bytes of the largest array a case writes: standardize's result, or an intermediate
    (cubed stores its intermediates): N×N×F for the cube cases, small for xtx."""
    if prob["case"] == "standardize":
        return nbytes(prob["x"])
    if CASES[prob["case"]].input == "tall":
        return 2**20
    n = prob["x"]["shape"][0]
    return n * n * F * 8


def describe(prob: dict) -> str:
    x = prob["x"]
    text = f"X {'×'.join(map(str, x['shape']))} ({nbytes(x) / GB:.2f} GB, stored)"
    if prob["y"] is not None:
        y = prob["y"]
        where = "stored" if y["path"] else "in memory"
        text += f", Y {'×'.join(map(str, y['shape']))} ({nbytes(y) / GB:.2f} GB, {where})"
    return f"{CASES[prob['case']].subscripts or 'standardize'}: {text}"


def memory_bytes(text: str) -> int:
    """'2GB' -> 2 * 10**9 (decimal KB/MB/GB/TB, binary KiB/MiB/GiB, as Dask and cubed)."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if match is None or match.group(2).upper() not in units:
        raise argparse.ArgumentTypeError(f"expected a size such as '2GB', got {text!r}")
    return int(float(match.group(1)) * units[match.group(2).upper()])


# --------------------------------------------------------------------------- numpy loop


class Slabs:
    """Read-only slabs of a zarr array, each read into one reused buffer per slab shape.

    A fresh buffer per slab (numpy over glibc's 32 MiB mmap threshold) is page-faulted in
    anew on every read, which cost up to half the read rate here. A slab is valid until the
    next read of the same shape."""

    def __init__(self, arr):
        self.arr, self.shape, self.chunks = arr, arr.shape, arr.chunks
        self.buffers: dict[tuple[int, ...], tuple[np.ndarray, Any]] = {}

    @classmethod
    def open(cls, path: str) -> Slabs:
        return cls(zarr.open_array(path, mode="r"))

    def __getitem__(self, selection) -> np.ndarray:
        selection = selection if isinstance(selection, tuple) else (selection,)
        selection += (slice(None),) * (len(self.shape) - len(selection))
        shape = tuple(
            len(range(*s.indices(n))) for s, n in zip(selection, self.shape, strict=True)
        )
        if shape not in self.buffers:
            array = np.empty(shape, self.arr.dtype)
            wrapped = default_buffer_prototype().nd_buffer.from_numpy_array(array)
            self.buffers[shape] = array, wrapped
        array, wrapped = self.buffers[shape]
        self.arr.get_basic_selection(selection, out=wrapped)
        return array


def cube_slabs(n: int) -> Iterator[tuple[slice, slice]]:
    """(i, j) slices of one chunk each, j outer, so each Y slab is read once."""
    for j in range(0, n, CUBE_CHUNK):
        for i in range(0, n, CUBE_CHUNK):
            yield slice(i, min(i + CUBE_CHUNK, n)), slice(j, min(j + CUBE_CHUNK, n))


def row_slabs(x) -> Iterator[slice]:
    """One row chunk of the tall array ``x`` (zarr or :class:`Slabs`) at a time."""
    rows, step = x.shape[0], x.chunks[0]
    for r in range(0, rows, step):
        yield slice(r, min(r + step, rows))


def numpy_cube(case: str, x: Slabs, b, c, y) -> np.ndarray:
    """A cube case by slabs of 128 × 128 × N chunks (``y``: ndarray or :class:`Slabs`),
    each slab's part by matmuls (numpy 2.4's ``einsum(optimize=True)`` is 4-7× slower)."""
    n = x.shape[0]
    out = np.zeros((n, F))
    y_slab, y_at = None, None
    for si, sj in cube_slabs(n):
        xb = x[si, sj, :]
        if case == "mttkrp1":  # B[i] * ((sum_k X[i,j,k]) @ C[j])
            out[si] += b[si] * (xb.sum(axis=2) @ c[sj])
        elif case == "mttkrp2":  # sum_j (X[i,j,:] @ C)[i,j,f] * B[j,f]
            t = (xb.reshape(-1, n) @ c).reshape(xb.shape[0], xb.shape[1], F)
            out[si] += np.einsum("ijf,jf->if", t, b[sj])
        else:  # X[i, (j,k)] @ Y[(j,k), f]
            if y_at != sj.start:
                y_slab, y_at = y[sj], sj.start
            out[si] += xb.reshape(xb.shape[0], -1) @ y_slab.reshape(-1, F)
    return out


def column_stats(x: Slabs) -> tuple[np.ndarray, np.ndarray]:
    """Column mean and (population) std of the tall ``x``, one row chunk at a time
    (Chan et al.'s pairwise update of count, mean and sum of squared deviations)."""
    count, mean, m2 = 0, np.zeros(x.shape[1]), np.zeros(x.shape[1])
    for rows in row_slabs(x):
        block = x[rows]
        k, block_mean = block.shape[0], block.mean(axis=0)
        block -= block_mean  # in place: the slab buffer is read afresh next time
        block_m2 = np.einsum("ij,ij->j", block, block)
        delta, total = block_mean - mean, count + k
        mean = mean + delta * k / total
        m2 = m2 + block_m2 + delta**2 * count * k / total
        count = total
    return mean, np.sqrt(m2 / count)


def numpy_tall(case: str, x: Slabs, out=None) -> np.ndarray | None:
    """xtx, or standardize written into the zarr array ``out``."""
    if case == "xtx":
        gram = np.zeros((x.shape[1], x.shape[1]))
        for rows in row_slabs(x):
            block = x[rows]
            gram += block.T @ block
        return gram
    mean, std = column_stats(x)
    for rows in row_slabs(x):
        block = x[rows]
        block -= mean
        block /= std
        out[rows] = block
    return None


def read_all(prob: dict) -> None:
    """Read every stored chunk once, in the numpy loop's slabs, and discard it: one reader
    thread per core (zarr's reads release the GIL), so it is a ceiling for Dask and cubed,
    which read with as many threads, as well as for the one-reader numpy loop."""
    x = zarr.open_array(prob["x"]["path"], mode="r")
    if CASES[prob["case"]].input == "tall":
        reads = [(prob["x"]["path"], (rows,)) for rows in row_slabs(x)]
    else:
        reads = [(prob["x"]["path"], (si, sj)) for si, sj in cube_slabs(x.shape[0])]
        if prob["y"] is not None and prob["y"]["path"]:
            reads += [(prob["y"]["path"], (sj,)) for si, sj in cube_slabs(x.shape[0])
                      if si.start == 0]
    workers = cpu_count()

    def reader(share: list[tuple[str, tuple]]) -> None:
        arrays: dict[str, Slabs] = {}
        for path, selection in share:
            if path not in arrays:
                arrays[path] = Slabs.open(path)
            arrays[path][selection]

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(reader, [reads[w::workers] for w in range(workers)]))


def open_y(prob: dict):
    """Y as :class:`Slabs` if stored, an ndarray if in memory, None if the case has none."""
    y = prob["y"]
    if y is None:
        return None
    return Slabs.open(y["path"]) if y["path"] else make_in_memory(y)


def create_output(prob: dict, path: str):
    """An empty uncompressed zarr array shaped and chunked like the tall input."""
    x = prob["x"]
    return zarr.create_array(store=path, shape=tuple(x["shape"]), chunks=tuple(x["chunks"]),
                             dtype="float64", compressors=None, filters=None, overwrite=True)


# --------------------------------------------------------------------------- systems (child)


@dataclass
class Prepared:
    """A system ready to run: ``call()`` is timed; ``close()`` runs after it; ``stats()``
    (after the call) is where the system says its call's time went, for the log."""

    call: Callable[[], Any]
    init_seconds: float | None = None
    close: Callable[[], None] = field(default=lambda: None)
    stats: Callable[[], dict] = field(default=dict)


STATS_KEPT = ("plan_seconds", "run_seconds", "call_seconds", "program_seconds", "put_bytes",
              "remote_calls", "statements_run", "node_read_bytes", "node_peak_rss_bytes")
"""The fields of ``tc.last_stats()`` a tensorc run's log keeps."""


def _factors(prob: dict) -> tuple[np.ndarray, np.ndarray]:
    n = prob["x"]["shape"][0]
    return factor("B", n), factor("C", n)


def prepare_tensorc(prob: dict, out_path: str, num_nodes: int | None) -> Prepared:
    """``tc.init`` (timed apart) under the budget, then the case on ``tc.from_zarr``."""
    import tensorc as tc

    start = time.perf_counter()
    if num_nodes is None:
        tc.init(backend="local", memory_limit=prob["budget"])
    else:
        tc.init(num_nodes=num_nodes, memory_limit=prob["budget"])
    init_seconds = time.perf_counter() - start
    try:
        return Prepared(tensorc_call(tc, prob, out_path), init_seconds, tc.shutdown,
                        lambda: {k: v for k, v in tc.last_stats().items() if k in STATS_KEPT})
    except Exception:  # no Ray cluster left behind
        tc.shutdown()
        raise


def tensorc_call(tc, prob: dict, out_path: str) -> Callable[[], Any]:
    x = tc.from_zarr(prob["x"]["path"])
    case = prob["case"]
    if case == "standardize":
        return lambda: tc.to_zarr((x - tc.mean(x, axis=0)) / tc.std(x, axis=0), out_path)
    if case == "xtx":
        return lambda: np.asarray(tc.einsum("ij,ik->jk", x, x))
    if case == "double":
        y = prob["y"]
        others = [tc.from_zarr(y["path"]) if y["path"] else make_in_memory(y)]
    else:
        others = list(_factors(prob))
    return lambda: np.asarray(tc.einsum(CASES[case].subscripts, x, *others))


def prepare_dask(prob: dict, out_path: str) -> Prepared:
    import dask
    import dask.array as da

    dask.config.set(scheduler="threads")
    x = da.from_zarr(prob["x"]["path"])
    case = prob["case"]
    if case == "standardize":
        expr = (x - x.mean(axis=0)) / x.std(axis=0)
        target = create_output(prob, out_path)
        return Prepared(lambda: da.to_zarr(expr, target))
    if case == "xtx":
        expr = da.einsum("ij,ik->jk", x, x, optimize=True)
    elif case == "double":
        y = prob["y"]
        y = da.from_zarr(y["path"]) if y["path"] else da.from_array(
            make_in_memory(y), chunks=tuple(y["chunks"]))
        expr = da.einsum(CASES[case].subscripts, x, y, optimize=True)
    else:
        b, c = (da.from_array(a, chunks=(CUBE_CHUNK, F)) for a in _factors(prob))
        expr = da.einsum(CASES[case].subscripts, x, b, c, optimize=True)
    return Prepared(lambda: expr.compute())


def prepare_cubed(prob: dict, out_path: str) -> Prepared:
    """The case in cubed's array API, intermediates in a work dir removed afterwards."""
    import cubed

    work = tempfile.mkdtemp(prefix="cubed-work-", dir=prob["dir"])

    def close():
        shutil.rmtree(work, ignore_errors=True)

    try:
        spec = cubed.Spec(work_dir=work, allowed_mem=prob["budget"])
        return Prepared(cubed_call(cubed, spec, prob, out_path), close=close)
    except Exception:
        close()
        raise


def cubed_call(cubed, spec, prob: dict, out_path: str) -> Callable[[], Any]:
    xp = cubed.array_api
    x = cubed.from_zarr(prob["x"]["path"], spec=spec)
    case = prob["case"]

    def small(a, chunks):
        return cubed.from_array(a, chunks=chunks, spec=spec)

    if case == "standardize":
        expr = (x - xp.mean(x, axis=0)) / xp.std(x, axis=0)
        target = create_output(prob, out_path)
        return lambda: cubed.to_zarr(expr, target)
    if case == "xtx":
        expr = xp.matmul(xp.matrix_transpose(x), x)
    elif case == "double":
        y = prob["y"]
        y = (cubed.from_zarr(y["path"], spec=spec) if y["path"]
             else small(make_in_memory(y), tuple(y["chunks"])))
        expr = xp.tensordot(x, y, axes=([1, 2], [0, 1]))
    else:
        b, c = (small(a, (CUBE_CHUNK, F)) for a in _factors(prob))
        if case == "mttkrp1":  # the k-sum pushed down by hand: B * ((sum_k X) @ C)
            expr = b * xp.matmul(xp.sum(x, axis=2), c)
        else:  # sum_j (sum_k X[i,j,k] C[k,f]) B[j,f]
            expr = xp.sum(xp.tensordot(x, c, axes=([2], [0])) * xp.expand_dims(b, axis=0),
                          axis=1)
    return lambda: np.asarray(expr.compute())


def prepare_numpy_loop(prob: dict, out_path: str) -> Prepared:
    x = Slabs.open(prob["x"]["path"])
    case = prob["case"]
    if case == "standardize":
        target = create_output(prob, out_path)
        return Prepared(lambda: numpy_tall(case, x, target))
    if case == "xtx":
        return Prepared(lambda: numpy_tall(case, x))
    b, c = _factors(prob) if case != "double" else (None, None)
    y = open_y(prob)
    return Prepared(lambda: numpy_cube(case, x, b, c, y))


PREPARE: dict[str, Callable[[dict, str], Prepared]] = {
    "tensorc-local": lambda prob, out: prepare_tensorc(prob, out, None),
    "tensorc-ray4": lambda prob, out: prepare_tensorc(prob, out, 4),
    "dask": prepare_dask,
    "cubed": prepare_cubed,
    "numpy-loop": prepare_numpy_loop,
    "read-limit": lambda prob, out: Prepared(lambda: read_all(prob)),
}


def blas_threads(system: str, setting: str) -> int | None:
    """BLAS threads to pin a system's process to (None: leave as is). ``auto``: one for
    Dask and cubed, whose two worker threads each call BLAS (a 2-thread OpenBLAS under each
    made Dask's X^T X ten times slower here), untouched for tensorc (it sets its workers'
    BLAS itself) and for the numpy loop (one caller: BLAS's default, all cores)."""
    if setting != "auto":
        return int(setting)
    return 1 if system in ("dask", "cubed") else None


def blas_environment(threads: int | None) -> dict[str, str]:
    """The child's environment: BLAS pinned by variables, so that libraries loaded late
    (threadpoolctl only limits those already loaded) are pinned too."""
    env = dict(os.environ)
    if threads:
        for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
            env[name] = str(threads)
    return env


def child(task: dict) -> dict:
    """One timed run in this (fresh) process; the result goes to ``task['result_path']``.
    BLAS threads come from the environment the parent set (``blas_environment``)."""
    out = timed_run(task)
    out["blas_threads"] = [p["num_threads"] for p in threadpool_info()
                           if p.get("user_api") == "blas"]
    out["ru_maxrss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out["hwm_bytes"] = high_water_mark()
    return out


def timed_run(task: dict) -> dict:
    """Prepare the system (untimed), time its call, save the result."""
    out: dict[str, Any] = {"status": "ok", "error": None, "seconds": None, "init_seconds": None}
    prepared = None
    try:
        prepared = PREPARE[task["system"]](task["problem"], task["out_path"])
        out["init_seconds"] = prepared.init_seconds
        if task["warm"]:
            warm(task["stored_paths"])
        out["cached_fraction"] = cached_fraction(task["stored_paths"])
        start = time.perf_counter()
        result = prepared.call()
        out["seconds"] = time.perf_counter() - start
        out["stats"] = prepared.stats()
        if result is not None and task["problem"]["case"] != "standardize":
            np.save(task["result_path"], np.asarray(result))
    except Exception as exc:  # the row shows it; the log has the traceback
        traceback.print_exc()
        out.update(status="ERROR", error=error_text(exc))
    finally:
        if prepared is not None:
            with contextlib.suppress(Exception):
                prepared.close()
    return out


def high_water_mark() -> int | None:
    """This process's peak RSS since exec (``VmHWM``). ``ru_maxrss`` is not that on Linux:
    a child starts with its parent's RSS at fork, so it is never below the parent's."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


# --------------------------------------------------------------------------- parent


class TreeSampler(TreeMemory):
    """:class:`common.TreeMemory` of a child process every 20 ms, as a watchdog: it kills the
    tree when its private memory passes ``kill_at`` bytes, or passes ``budget`` while the
    machine's available memory is low (other processes may be what uses it)."""

    def __init__(self, pid: int, kill_at: int, budget: int):
        super().__init__(pid, SAMPLE_SECONDS, TREE_SECONDS)
        self.kill_at, self.budget = kill_at, budget
        self.low_memory = 0.05 * psutil.virtual_memory().total
        self.killed: str | None = None

    def check(self, total: int, private: int) -> None:
        if self.killed is None and private > self.kill_at:
            self.kill(f"process tree private memory {private / GB:.1f} GB > --kill-rss "
                      f"{self.kill_at / GB:.1f} GB")
        elif (self.killed is None and private > self.budget
              and psutil.virtual_memory().available < self.low_memory):
            self.kill(f"machine memory low, tree over its budget (private "
                      f"{private / GB:.1f} GB)")

    def kill(self, why: str) -> None:
        self.killed = why
        self.kill_all()

    def kill_all(self) -> int:
        """Kill every process of the tree seen so far that still runs; how many."""
        count = 0
        for p in self.seen.values():
            with contextlib.suppress(psutil.Error):
                if p.is_running():
                    p.kill()
                    count += 1
        return count


def spawn(task: dict, args: argparse.Namespace) -> dict:
    """Run ``task`` in a fresh subprocess while sampling its process tree's memory."""
    logs = Path(args.dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stem = logs / f"{task['problem']['case']}-{task['system']}-{uuid.uuid4().hex[:8]}"
    command = [sys.executable, __file__, "--child", json.dumps(task)]
    with open(f"{stem}.out", "w") as stdout, open(f"{stem}.err", "w") as stderr:
        env = blas_environment(task["blas_threads"])
        proc = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env)
        sampler = TreeSampler(proc.pid, args.kill_rss_bytes, task["problem"]["budget_bytes"])
        sampler.start()
        timed_out = False
        try:
            proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            sampler.kill_all()
            proc.wait()
        sampler.stop()
    time.sleep(0.5)  # give daemons the child stopped time to exit
    leftovers = sampler.kill_all()
    result = None
    for line in Path(f"{stem}.out").read_text().splitlines():
        if line.startswith(RESULT_TAG):
            result = json.loads(line[len(RESULT_TAG):])
    if result is None:
        tail = (Path(f"{stem}.err").read_text().strip().splitlines() or ["no output"])[-1]
        result = {"status": "ERROR", "error": f"subprocess exit {proc.returncode}: {tail}"}
    if sampler.killed:
        result.update(status="KILLED", error=sampler.killed)
    elif timed_out:
        result.update(status="TIMEOUT", error=f"over --timeout {args.timeout} s")
    result["peak_rss_bytes"] = sampler.peak
    result["peak_private_bytes"] = sampler.peak_private
    result["leftover_processes_killed"] = leftovers
    result["log"] = str(stem)
    return result


def reference_path(prob: dict) -> Path:
    x = Path(prob["x"]["path"]).stem
    suffix = "-Ystored" if prob["y"] and prob["y"]["path"] else ""
    return Path(prob["dir"]) / f"ref-{prob['case']}-{x}{suffix}.npy"


def reference(prob: dict) -> np.ndarray:
    """The numpy-loop result (standardize: a 2 × 64 array of mean and std), cached."""
    path = reference_path(prob)
    if path.exists():
        return np.load(path)
    start = time.perf_counter()
    x = Slabs.open(prob["x"]["path"])
    if prob["case"] == "standardize":
        value = np.stack(column_stats(x))
    elif prob["case"] == "xtx":
        value = numpy_tall("xtx", x)
    else:
        b, c = _factors(prob)
        value = numpy_cube(prob["case"], x, b, c, open_y(prob))
    np.save(path, value)
    print(f"  reference {path.name} made in {time.perf_counter() - start:.1f} s", flush=True)
    return value


def check_result(prob: dict, task: dict) -> str | None:
    """None if the run's output matches the reference, else what differs."""
    ref = reference(prob)
    if prob["case"] == "standardize":
        return check_standardized(prob, task["out_path"], ref[0], ref[1])
    path = Path(task["result_path"])
    if not path.exists():
        return "no result written"
    got = np.load(path)
    path.unlink()
    if got.shape != ref.shape:
        return f"shape {got.shape}, expected {ref.shape}"
    if np.allclose(got, ref, rtol=RTOL, atol=0):
        return None
    return f"max rel err {float(np.max(np.abs(got - ref) / np.abs(ref))):.2e} > {RTOL:g}"


def check_standardized(prob: dict, out_path: str, mean: np.ndarray, std: np.ndarray):
    """Compare three random row slabs of the written store with (X - mean) / std."""
    try:
        out = zarr.open_array(out_path, mode="r")
    except Exception as exc:
        return f"no output store: {error_text(exc)}"
    x = zarr.open_array(prob["x"]["path"], mode="r")
    if out.shape != x.shape:
        return f"shape {out.shape}, expected {x.shape}"
    rng = np.random.default_rng(0)
    for start in rng.integers(0, x.shape[0] - 1000, size=3):
        rows = slice(int(start), int(start) + 1000)
        want = (x[rows] - mean) / std
        if not np.allclose(out[rows], want, rtol=RTOL, atol=1e-10):
            err = float(np.max(np.abs(out[rows] - want)))
            return f"rows {rows.start}:{rows.stop} max abs err {err:.2e}"
    return None


def run_system(prob: dict, system: str, args: argparse.Namespace) -> dict:
    """``--repeats`` fresh-process runs of one system on one problem; the row."""
    runs = []
    for _ in range(args.repeats):
        token = uuid.uuid4().hex[:8]
        task = {
            "system": system,
            "problem": prob,
            "result_path": str(Path(args.dir) / f"result-{token}.npy"),
            "out_path": str(Path(args.dir) / f"out-{token}.zarr"),
            "blas_threads": blas_threads(system, args.blas_threads),
        }
        if prob["case"] == "standardize" and not disk_fits(args.dir, largest_output(prob)):
            runs.append({"status": "SKIPPED", "error": "no disk for the output", "seconds": None})
            break
        paths = [s["path"] for s in stored_specs(prob)]
        if args.cold:
            evict(paths)
        task.update(stored_paths=paths, warm=not args.cold)
        load = os.getloadavg()[0]
        run = spawn(task, args)
        run.update(load_before=load)
        if run["status"] == "ok" and system != "read-limit":
            mismatch = check_result(prob, task)
            if mismatch:
                run.update(status="WRONG", error=mismatch)
        shutil.rmtree(task["out_path"], ignore_errors=True)
        Path(task["result_path"]).unlink(missing_ok=True)
        runs.append(run)
        if run["status"] != "ok":
            break
    return summarize(prob, system, runs)


def summarize(prob: dict, system: str, runs: list[dict]) -> dict:
    """The row of one system: median time of the runs, highest peaks; the first failure."""
    bad = next((r for r in runs if r["status"] != "ok"), None)
    times = [r["seconds"] for r in runs if r["status"] == "ok"]
    median = statistics.median(times) if times and not bad else None

    def highest(key: str) -> float | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return max(values) if values else None

    inits = [r["init_seconds"] for r in runs if r.get("init_seconds") is not None]
    return make_row(
        prob, system, bad["status"] if bad else "ok", bad["error"] if bad else None,
        times_s=times,
        median_s=median,
        init_seconds=statistics.median(inits) if inits else None,
        peak_rss_bytes=highest("peak_rss_bytes"),
        peak_private_bytes=highest("peak_private_bytes"),
        child_hwm_bytes=highest("hwm_bytes"),
        ru_maxrss_bytes=highest("ru_maxrss_bytes"),
        read_gbps=input_bytes(prob) / GB / median if median else None,
        cached_fraction=[r.get("cached_fraction") for r in runs],
        load_before=[r.get("load_before") for r in runs],
        leftover_processes_killed=sum(r.get("leftover_processes_killed", 0) for r in runs),
        logs=[r.get("log") for r in runs],
        blas_threads=next((r["blas_threads"] for r in runs if r.get("blas_threads")), None),
    )


def make_row(prob: dict, system: str, status: str, error: str | None, **measured) -> dict:
    """A result row: the problem, the status and what was measured (None when not)."""
    out = {
        "size_gb": prob["size_gb"], "case": prob["case"], "system": system,
        "problem": describe(prob), "status": status, "error": error,
        "budget_bytes": prob["budget_bytes"], "bytes_read": input_bytes(prob),
        "y_stored": None if prob["y"] is None else bool(prob["y"]["path"]),
        "times_s": [], "cached_fraction": [], "load_before": [], "logs": [],
    }
    for key in ("median_s", "init_seconds", "peak_rss_bytes", "peak_private_bytes",
                "child_hwm_bytes", "ru_maxrss_bytes", "read_gbps", "blas_threads"):
        out[key] = None
    out["leftover_processes_killed"] = 0
    out.update(measured)
    return out


def disk_fits(directory: str, needed: int) -> bool:
    return shutil.disk_usage(directory).free >= needed


def prepare_inputs(prob: dict, args: argparse.Namespace) -> str | None:
    """Write the problem's stores unless present; why not, if the disk cannot hold them
    plus the largest output plus 10 %."""
    missing = [s for s in stored_specs(prob) if not stored_matches(s)]
    needed = int(1.1 * (sum(nbytes(s) for s in missing) + largest_output(prob)))
    free = shutil.disk_usage(args.dir).free
    if needed > free:
        return f"needs {needed / GB:.1f} GB of disk, {free / GB:.1f} GB free"
    for spec in missing:
        write_store(spec)
    return None


def run_size(size_gb: float, args: argparse.Namespace) -> list[dict]:
    print(f"\n== size {size_gb:g} GB, budget {args.memory_limit}", flush=True)
    rows = []
    for case in args.cases:
        prob = problem(case, size_gb, args)
        print(f"-- {case}: {describe(prob)}", flush=True)
        why = prepare_inputs(prob, args)
        if why is not None:
            print(f"  skipped: {why}", flush=True)
            rows += [make_row(prob, s, "SKIPPED", why) for s in args.systems]
            continue
        reference(prob)
        for system in args.systems:
            row = run_system(prob, system, args)
            print(f"  {system}: {fmt(row['median_s'], '{:.2f}')} s, peak RSS "
                  f"{fmt(gb(row['peak_rss_bytes']), '{:.2f}')} GB, {row['status']}"
                  f"{': ' + row['error'] if row['error'] else ''}", flush=True)
            rows.append(row)
        if args.clean and not any(CASES[c].input == CASES[case].input
                                  for c in args.cases[args.cases.index(case) + 1:]):
            for spec in stored_specs(prob):
                shutil.rmtree(spec["path"], ignore_errors=True)
    print()
    print(table(rows))
    return rows


def gb(value: float | None) -> float | None:
    return None if value is None else value / GB


def table(rows: list[dict]) -> str:
    """The printed table: medians, peaks (tree RSS, tree private, the child alone), the
    budget, read bandwidth, page-cache residency and load average before the runs."""
    headers = ["case", "system", "time s", "init s", "peak RSS GB", "private GB", "child GB",
               "budget GB", "read GB/s", "cached", "load", "blas", "check"]
    body = []
    for r in rows:
        cached = [c for c in r["cached_fraction"] if c is not None]
        load = [v for v in r["load_before"] if v is not None]
        check = r["status"] + (f": {r['error']}" if r["error"] else "")
        body.append([
            r["case"], r["system"], fmt(r["median_s"], "{:.2f}"),
            fmt(r["init_seconds"], "{:.2f}"), fmt(gb(r["peak_rss_bytes"]), "{:.2f}"),
            fmt(gb(r["peak_private_bytes"]), "{:.2f}"), fmt(gb(r["child_hwm_bytes"]), "{:.2f}"),
            fmt(gb(r["budget_bytes"]), "{:g}"),
            fmt(r["read_gbps"], "{:.2f}"), f"{100 * min(cached):.0f}%" if cached else "-",
            f"{max(load):.1f}" if load else "-",
            ",".join(map(str, r["blas_threads"] or [])) or "-",
            check if r["status"] == "ok" else f"<<< {check}",
        ])
    return format_table(headers, body)


def plot(rows: list[dict], path: str) -> None:
    """Per size: time per case and system (log scale), and peak RSS against the budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["size_gb"] for r in rows})
    cases = list(dict.fromkeys(r["case"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    fig, axes = plt.subplots(len(sizes), 2, figsize=(13, 3.8 * len(sizes)), squeeze=False)
    width = 0.8 / len(systems)
    for (left, right), size in zip(axes, sizes, strict=True):
        at = {(r["case"], r["system"]): r for r in rows if r["size_gb"] == size}
        for s, system in enumerate(systems):
            xs = [c + (s - (len(systems) - 1) / 2) * width for c in range(len(cases))]
            picked = [at.get((case, system), {}) for case in cases]
            times = [r.get("median_s") or 0 for r in picked]
            peaks = [(r.get("peak_rss_bytes") or 0) / GB for r in picked]
            left.bar(xs, times, width, label=system)
            right.bar(xs, peaks, width, label=system)
        budget = rows[0]["budget_bytes"] / GB
        right.axhline(budget, color="black", linestyle="--", linewidth=1, label="budget")
        for ax, title in ((left, "time (s, log)"), (right, "peak RSS of process tree (GB)")):
            ax.set_xticks(range(len(cases)), cases)
            ax.set_title(f"{size:g} GB input: {title}")
        if any(r.get("median_s") for r in at.values()):
            left.set_yscale("log")
    handles, labels = axes[0][1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.tight_layout(rect=(0, 0.06 / len(sizes), 1, 1))
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


# --------------------------------------------------------------------------- command line




def _blas_setting(text: str) -> str:
    if text != "auto" and not (text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"expected 'auto' or a positive integer, got {text!r}")
    return text


def _memory_limit(text: str) -> str:
    memory_bytes(text)  # raises ArgumentTypeError on a bad size
    return text


def _sizes(text: str) -> list[float]:
    sizes = [float(s) for s in text.split(",") if s.strip()]
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive sizes in GB, got {text!r}")
    return sizes


def default_sizes() -> list[float]:
    total = psutil.virtual_memory().total / GB
    return [round(f * total, 1) for f in (0.5, 1.0, 1.5)]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--sizes", type=_sizes, help="input sizes in GB (default: 0.5, 1 and 1.5 "
                   f"times the RAM: {', '.join(map(str, default_sizes()))})")
    p.add_argument("--quick", action="store_true", help="a smoke run: 0.25 GB only")
    p.add_argument("--cases", type=name_list(list(CASES)), default=",".join(CASES),
                   help=f"comma-separated subset of: {', '.join(CASES)}")
    p.add_argument("--systems", type=name_list(SYSTEMS), default=",".join(SYSTEMS),
                   help=f"comma-separated subset of: {', '.join(SYSTEMS)}")
    p.add_argument("--memory-limit", type=_memory_limit, default="2GB",
                   help="the memory budget given to the systems (bytes, or '2GB', '1.5GiB')")
    p.add_argument("--dir", default="/tmp/tensorc-ooc", help="cache of inputs and references")
    p.add_argument("--repeats", type=int, default=1, help="fresh-process runs per system")
    p.add_argument("--blas-threads", type=_blas_setting, default="auto",
                   help="BLAS threads per run (threadpoolctl), or 'auto': 1 for dask and cubed "
                   "(two worker threads each), untouched for tensorc and the numpy loop")
    p.add_argument("--tall-chunk-rows", type=int, default=TALL_CHUNK_ROWS,
                   help=f"rows per chunk of the tall matrix ({TALL_COLS} float64 columns)")
    p.add_argument("--cold", action="store_true",
                   help="evict the inputs from the page cache before every run")
    p.add_argument("--clean", action="store_true",
                   help="delete each size's stores once its cases ran (room for the next)")
    p.add_argument("--kill-rss", type=float, default=0.6,
                   help="kill a run whose process tree's private memory passes this "
                   "fraction of RAM")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    p.add_argument("--json", metavar="PATH", help="write all rows as JSON")
    p.add_argument("--plot", metavar="PATH", help="write a PNG (matplotlib)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p


def versions() -> dict[str, str | None]:
    out = {}
    for name in ("cubed", "zarr", "dask", "psutil", "numpy"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.child:
        print(RESULT_TAG + json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    args.sizes = [0.25] if args.quick else args.sizes or default_sizes()
    args.kill_rss_bytes = int(args.kill_rss * psutil.virtual_memory().total)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    print(f"out_of_core: sizes {args.sizes} GB, budget {args.memory_limit}, RAM "
          f"{psutil.virtual_memory().total / GB:.1f} GB, disk free "
          f"{shutil.disk_usage(args.dir).free / GB:.1f} GB in {args.dir}; one fresh process "
          f"per run, {args.repeats} run(s) per system")
    rows = [row for size in args.sizes for row in run_size(size, args)]
    if args.json:
        write_json(args.json, {"benchmark": "out_of_core", "args": vars(args),
                               "environment": {**environment(), "versions": versions(),
                                               "ram_bytes": psutil.virtual_memory().total},
                               "rows": rows})
    if args.plot:
        plot(rows, args.plot)
    return 0 if all(r["status"] in ("ok", "SKIPPED") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
