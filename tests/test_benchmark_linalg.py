"""Smoke test of ``benchmarks/linalg.py`` on small sizes, local systems only (numpy and
tensorc's local backend; no Ray or Dask cluster): every result agrees with numpy, the
check catches a wrong one, and the JSON holds every record."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "linalg.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("benchmark_linalg", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["benchmark_linalg"] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("benchmark_linalg", None)


SMALL = ["--sizes", "256", "--solve-sizes", "600", "--tsqr-rows", "4096", "--tsqr-cols",
         "16", "--tsqr-blocks", "4"]


def test_local_results_agree_with_numpy(bench):
    args = bench.parser().parse_args(SMALL)
    cases = bench.make_cases(args)
    assert [c.kind for c in cases] == ["cholesky", "tsqr", "solve"]
    system = bench.make_system("tensorc-local", args)
    system.start()
    for case in cases:
        reference = bench.numpy_call(case.kind, bench.make_inputs(case, 0))
        result = system.fetch(system.call(case, system.put(case, bench.make_inputs(case, 0))))
        assert bench.max_error(case, result, reference) <= bench.TOLERANCE, case.label
        if case.kind == "tsqr":  # numpy's mode="r" against the reduced R
            r_only = bench.numpy_call("tsqr", bench.make_inputs(case, 0), r_only=True)
            assert bench.max_error(case, r_only, reference) <= bench.TOLERANCE


def test_wrong_result_is_caught(bench):
    case = bench.Case("cholesky", 64, 64, (16, 16))
    reference = bench.numpy_call("cholesky", bench.make_inputs(case, 0))
    assert bench.max_error(case, reference, reference) == 0.0
    wrong = reference[0].copy()
    wrong[5, 3] += 1e-3 * np.abs(wrong).max()
    assert bench.max_error(case, (wrong,), reference) > bench.TOLERANCE


def test_main_local_systems(bench, tmp_path, capsys):
    out = tmp_path / "linalg.json"
    status = bench.main([*SMALL, "--repeats", "1", "--systems", "numpy,tensorc-local",
                         "--json", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "tensorc-local / LAPACK" in printed and "BLAS threads pinned" in printed
    assert "CPU s (cores)" in printed
    document = json.loads(out.read_text())
    records = document["records"]
    seen = {(r["case"], r["system"]) for r in records}
    assert seen == {(k, s) for k in ("cholesky", "tsqr", "solve")
                    for s in ("numpy", "tensorc-local")} | {("tsqr", "numpy-r")}
    for record in records:
        assert record["status"] == "ok", record
        assert record["max_error"] <= 1e-8
        assert len(record["seconds"]) == 1 and record["median"] > 0
        assert len(record["cpu_seconds"]) == 1
        assert record["cpu_mean"] == record["cpu_seconds"][0] >= 0
    assert all(r["local_over_lapack"] is not None for r in document["ratios"])
    assert "tensorc-ray / local" in printed  # a column, empty without a Ray system
    assert all(r["ray_over_local"] is None for r in document["ratios"])


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads /proc/stat")
def test_machine_cpu_counts_a_busy_process(bench):
    """Half a second of this process spinning shows as at least about half a core-second
    of the machine's (the kernel counts in 10 ms ticks), and at most every core's half
    second: seconds, not ticks. Other processes may add to it (tests run in parallel)."""
    import time

    read = bench.common.machine_busy_seconds
    before = read()
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:
        pass
    spun = read() - before
    assert 0.4 <= spun <= 0.5 * (os.cpu_count() or 1) + 0.1
