"""Smoke test of ``benchmarks/sparse.py`` on small operands, local systems only (tensorc's
local backend and scipy): every case's result agrees with its reference, and the check
catches a wrong one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from script_modules import script_module

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "sparse.py"


@pytest.fixture(scope="module")
def bench():
    with script_module(SCRIPT, "benchmark_sparse") as module:
        yield module


SMALL = ["--cases", "spgemm,spmm,pagerank,chain,funksvd", "--n", "600", "--density", "0.02",
         "--graph-nodes", "3000", "--edges", "20000", "--seeds", "8", "--hops", "4",
         "--users", "600", "--items", "400", "--funk-rank", "8", "--steps", "2",
         "--systems", "tensorc,scipy", "--repeats", "1"]


def test_every_case_agrees_with_its_reference(bench, capsys):
    results = bench.main(SMALL)
    assert sorted(results["cases"]) == ["chain", "funksvd", "pagerank", "spgemm-600",
                                        "spmm-600"]
    for case, rows in results["cases"].items():
        assert {r["system"] for r in rows} == {"tensorc", "scipy"}, case
        assert all(r["check"] == "ok" for r in rows), (case, rows)
    assert "== funksvd" in capsys.readouterr().out


def test_the_check_catches_a_wrong_result(bench):
    reference = sp.random_array((50, 40), density=0.2, format="csr", rng=1)
    wrong = reference.copy()
    wrong.data[0] += 1.0
    assert bench.check(reference.copy(), reference) == "ok"
    assert bench.check(wrong, reference) == "WRONG values"
    assert bench.check(reference[:, :-1].tocsr(), reference).startswith("WRONG nnz")
    assert bench.check(np.zeros((50, 40)), reference.toarray()) == "WRONG values"
