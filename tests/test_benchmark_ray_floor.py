"""``benchmarks/ray_floor.py`` on the shared 4-node test cluster, at tiny sizes: its square
blocks sit where ``tc.asarray`` puts a matrix's blocks, the Cholesky's floor reads the
lower triangle's blocks only (through Ray, and pulled as tensorc's calls pull them), and
every floor runs and reports its CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from script_modules import script_module

pytestmark = pytest.mark.usefixtures("ray_cluster")

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "ray_floor.py"


@pytest.fixture(scope="module")
def floor():
    with script_module(SCRIPT, "benchmark_ray_floor") as module:
        yield module


def test_square_blocks_sit_where_asarray_puts_them(floor):
    from tensorc.runtime.ray import arrays

    placed = arrays.asarray(np.zeros((64, 64)), block_shape=(16, 16))
    arrays.wait(placed)
    assert floor._square_grid(4) == placed.block_nodes()
    assert sorted(set(placed.block_nodes().values())) == [0, 1, 2, 3]


def test_each_floor_runs_and_the_cholesky_reads_the_lower_triangle(floor, monkeypatch):
    actors = floor.node_actors()
    read = []
    made_on = floor._made_on

    def counting(actors, nodes_of, shape, seed):
        read.append((list(nodes_of), shape))
        return made_on(actors, nodes_of, shape, seed)

    monkeypatch.setattr(floor, "_made_on", counting)
    grid = floor._square_grid(4)
    lower = [grid[(i, j)] for i in range(4) for j in range(4) if i >= j]
    ways = floor.cholesky_floors(actors, 64, repeats=1)
    assert list(ways) == ["through Ray", "direct"]
    for runs in ways.values():
        assert len(runs) == 2 and len(runs.cpu) == 2 and min(runs.cpu) >= 0
    assert read == [(lower, (16, 16))] * 4  # each way: a warm-up and a timed run, 10 blocks
    import ray

    # blocks of 16 x 16 (2 KiB) are smaller than tensorc offers (64 KiB): through Ray
    assert ray.get(actors[0].last_pulled.remote()) == (0, 0)
    floor.cholesky_floors(actors, 512, repeats=1)  # blocks of 128 x 128: 128 KiB, pulled
    assert ray.get(actors[0].last_pulled.remote()) == (7 * 128 * 128 * 8, 0)
    read.clear()
    floor.cholesky_floors(actors, 64, repeats=1, solve=True)
    assert read[0] == (list(grid.values()), (16, 16))  # LU reads all 16
    for runs in floor.tsqr_floors(actors, 256, 8, repeats=1).values():
        assert len(runs) == 2 and all(seconds > 0 for seconds in runs)


def test_linalg_s_floors_run_on_the_cluster_s_actors(floor):
    with script_module(SCRIPT.parent / "linalg.py", "benchmark_linalg_floors",
                       register=True) as bench:
        cases = [bench.Case("cholesky", 64, 64, (16, 16)), bench.Case("solve", 64, 64, (16, 16)),
                 bench.Case("tsqr", 256, 8, (32, 8))]
        found = bench.measure_floors(floor, floor.node_actors(), cases, repeats=1)
    assert list(found) == cases
    assert {found[c]["way"] for c in cases[:2]} <= {"through Ray", "direct"}
    assert found[cases[2]]["way"] in ("gathered", "tree")
    for case in cases:
        assert found[case]["seconds"] > 0 and found[case]["cpu"] >= 0
