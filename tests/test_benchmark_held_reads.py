"""``benchmarks/held_reads.py`` on the shared 4-node test cluster, at small sizes: every chain
runs every way, its product checked against numpy, and only ``released first`` and
``stored`` leave the result's blocks stored."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from script_modules import script_module

pytestmark = pytest.mark.usefixtures("ray_cluster")

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "held_reads.py"


def test_every_chain_runs_every_way_and_reads_in_place_only_in_place(monkeypatch):
    import tensorc as tc
    from tensorc.runtime.ray import held

    monkeypatch.setattr(held, "HELD_SHARE", held.HELD_SHARE)  # set_way changes it
    with script_module(SCRIPT, "benchmark_held_reads") as bench:
        einsum, released = tc.einsum, []

        def counting(subscripts, result, b):  # what the einsum finds held
            released.append(result.value().held_blocks == 0)
            return einsum(subscripts, result, b)

        monkeypatch.setattr(bench.tc, "einsum", counting)
        args = argparse.Namespace(rows=65536, n=1536)  # sizes run as block programs
        for way in bench.WAYS:
            bench.set_way(way)
            for make, program, subscripts in bench.chains(args, np.random.default_rng(1)).values():
                program_seconds, einsum_seconds, peak = bench.run_chain(way, make, program,
                                                                        subscripts)
                assert program_seconds > 0 and einsum_seconds > 0 and peak >= 0
        assert released == [False, False, True, True, True, True]
