"""Smoke test of ``benchmarks/linalg.py`` on small sizes, local systems only (numpy and
tensorc's local backend; no Ray or Dask cluster): every result agrees with numpy, the
check catches a wrong one, and the JSON holds every record; the floors, the machine's bound
and the verdicts are computed as the script documents (from figures given here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from script_modules import script_module

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "linalg.py"


@pytest.fixture(scope="module")
def bench():
    with script_module(SCRIPT, "benchmark_linalg", register=True) as module:
        yield module


SMALL = ["--sizes", "256", "--solve-sizes", "600", "--tsqr-rows", "4096", "--tsqr-cols",
         "16", "--tsqr-blocks", "4"]


def test_local_results_agree_with_numpy(bench):
    args = bench.parser().parse_args(SMALL)
    cases = bench.make_cases(args)
    assert [c.kind for c in cases] == ["cholesky", "tsqr", "solve", "lstsq"]
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
    assert seen == {(k, s) for k in ("cholesky", "tsqr", "solve", "lstsq")
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


def _record(bench, system, case, seconds, cpu):
    return bench.Record(system, case, 2, seconds=[seconds], cpu=[cpu])


def test_the_bound_adds_the_floor_to_the_least_arithmetic_seen(bench):
    chol = bench.Case("cholesky", 1536, 1536, (384, 384))
    big = bench.Case("cholesky", 4096, 4096, (1024, 1024))
    tsqr = bench.Case("tsqr", 65536, 40, (8192, 40))
    records = [_record(bench, "tensorc-local", chol, 0.030, 0.050),
               _record(bench, "tensorc-in-worker", chol, 0.034, 0.044),
               _record(bench, "tensorc-ray", chol, 0.064, 0.106),
               _record(bench, "tensorc-local", big, 0.304, 0.549),  # its threads spin
               _record(bench, "tensorc-ray", big, 0.277, 0.514),
               _record(bench, "tensorc-local", tsqr, 0.035, 0.054)]
    floors = {chol: {"seconds": 0.031, "cpu": 0.056, "way": "one call"},
              big: {"seconds": 0.083, "cpu": 0.209, "way": "one call"},
              tsqr: {"seconds": 0.019, "cpu": None, "way": "tree"}}  # no CPU count: no bound
    bounds = bench.cpu_bounds(records, floors, cores=2)
    assert list(bounds) == [chol, big]
    assert bounds[chol]["arithmetic_cpu"] == 0.044  # the in-worker run's, the least
    assert bounds[chol]["seconds"] == pytest.approx((0.044 + 0.056) / 2)
    # the cluster run spent less than the local one: 514 - 209 core-ms on its arithmetic
    assert bounds[big]["arithmetic_cpu"] == pytest.approx(0.514 - 0.209)
    assert bounds[big]["seconds"] == pytest.approx(0.514 / 2)  # under the run's 0.277 s
    rows = bench.bound_table(records, bounds).splitlines()
    assert rows[2].split() == ["cholesky", "n=1536", "31.0", "56", "44", "50.0", "64.0", "106"]
    failed = [*records[:2], _record(bench, "tensorc-ray", chol, 0.064, 0.060)]
    failed[-1].status = "ERROR"  # a failed run's CPU says nothing of the arithmetic
    assert bench.cpu_bounds(failed, floors, cores=2)[chol]["arithmetic_cpu"] == 0.044


def test_a_missed_target_under_the_bound_is_beyond_the_machine(bench):
    row = {"case": "cholesky n=4096", "kind": "cholesky", "n": 4096, "local": 0.30,
           "ray": 0.42, "dask": 0.60, "local_over_lapack": 0.4, "ray_over_local": 1.4,
           "ray_over_in_worker": 1.3, "dask_over_ray": 0.60 / 0.42}
    bound = {"seconds": 0.39, "arithmetic_cpu": 0.55, "floor_cpu": 0.23, "cores": 2}
    verdicts = dict((text.split(":")[0], verdict) for text, verdict in bench.targets([row]))
    assert verdicts == {"tensorc-local within 1.3x of LAPACK, Cholesky n=4096": "PASS",
                        "tensorc-ray within 1.5x of tensorc-local, cholesky n=4096": "PASS",
                        "tensorc-ray >= 2x faster than Dask on the same blocks, "
                        "cholesky n=4096": "MISS"}
    found = bench.targets([row], {"cholesky n=4096": bound})
    text, verdict = found[-1]
    assert verdict == "BEYOND"  # Dask / 2 = 300 ms, under the bound's 390 ms
    assert text.endswith("1.43x; the 300 ms it asks for is under this machine's bound, "
                         "390 ms: (550 core-ms of arithmetic + 230 of Ray's floor) / 2 cores")
    slow = dict(row, ray=0.50, ray_over_local=0.50 / 0.30, dask_over_ray=1.2)
    low = dict(bound, seconds=0.25)  # under what both targets ask: missed, not beyond
    assert [v for _, v in bench.targets([slow], {"cholesky n=4096": low})[1:]] == [
        "MISS", "MISS"]
    assert [v for _, v in bench.targets([slow], {"cholesky n=4096": bound})[1:]] == [
        "MISS", "BEYOND"]  # 1.5 x 300 ms = 450 ms is over the bound: a plain miss
    lstsq = dict(row, case="lstsq 65536x40", kind="lstsq")  # reported, not a target's case
    assert [text for text, _ in bench.targets([lstsq])] == [
        "tensorc-local within 1.3x of LAPACK, Cholesky n=4096: not measured"]
    unmeasured = dict(row, ray=None, ray_over_local=None, dask_over_ray=None)
    assert [v for _, v in bench.targets([unmeasured], {"cholesky n=4096": bound})[1:]] == [
        "-", "-"]


def test_the_floor_has_a_skeleton_of_the_benchmarks_own_layouts(bench):
    floor = bench._load_floor()  # noqa: SLF001 - the loader under test
    match = bench.floor_matches
    assert match(bench.Case("cholesky", 1536, 1536, (384, 384)), floor, 4)
    assert match(bench.Case("solve", 4096, 4096, (1024, 1024)), floor, 4)
    assert not match(bench.Case("solve", 4096, 4096, (512, 512)), floor, 4)
    assert not match(bench.Case("cholesky", 1536, 1536, (384, 384)), floor, 3)
    assert match(bench.Case("tsqr", 65536, 40, (8192, 40)), floor, 4)
    assert not match(bench.Case("tsqr", 65536, 40, (16384, 40)), floor, 4)
    assert not match(bench.Case("lstsq", 65536, 40, (8192, 40)), floor, 4)  # no skeleton


def test_a_floor_is_the_median_and_mean_cpu_of_its_timed_runs_and_tsqr_s_cheaper_way(bench):
    runs = bench._load_floor().Runs  # noqa: SLF001 - the loader the script uses

    class Skeletons:
        def cholesky_floors(self, actors, n, repeats, solve=False):
            assert repeats == 3
            return {"through Ray": runs([9.0, 0.02, 0.03, 0.01], [9.0, 0.05, 0.04, 0.03]
                                        if solve else [9.0, 0.02, 0.04, 0.06]),
                    "direct": runs([9.0, 0.01, 0.01, 0.01],  # faster, but more CPU
                                   [9.0, 0.08, 0.08, 0.08])}

        def tsqr_floors(self, actors, rows, cols, repeats):
            return {"gathered": runs([9.0, 0.01, 0.01], [9.0, 0.09, 0.09]),  # faster,
                    "tree": runs([9.0, 0.02, 0.02], [9.0, 0.03, 0.05])}  # less CPU

    cases = [bench.Case("cholesky", 64, 64, (16, 16)), bench.Case("solve", 64, 64, (16, 16)),
             bench.Case("tsqr", 256, 8, (32, 8))]
    found = bench.measure_floors(Skeletons(), None, cases, repeats=3)
    assert found[cases[0]] == {"seconds": 0.02, "way": "through Ray",  # less CPU
                               "cpu": pytest.approx(0.04)}
    assert found[cases[1]]["cpu"] == pytest.approx(0.04)  # the warm-up's 9.0 left out
    assert found[cases[2]] == {"seconds": 0.02, "way": "tree", "cpu": pytest.approx(0.04)}
