"""Planning a first call on arrays already on the cluster, from their layouts alone.

A first ``tc.einsum`` on arrays a Ray cluster already holds plans twice — computed in the
operands' own layout, and repartitioned to the plan's — and the second prices every
candidate's repartition. For the three mission contractions (N = ``--n``, F = ``--f``) on
``--nodes`` simulated nodes, with every operand in the layout an array made on its own gets
there (``default_blocking`` over the cluster's CPUs, block-cyclic over ``node_grid``), this
times the whole distribution search as the compiler runs it
(:func:`tensorc.planning.plan.plan_distribution`, both attempts; median of ``--repeats``,
each on a fresh problem) and prints the chosen grid and its modelled cost. Nothing runs.

    python benchmarks/placed_planning.py [--n 256] [--f 64] [--nodes 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from common import environment, format_table

from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import parse_einsum
from tensorc.passes.pipeline import run_pipeline
from tensorc.placement.blocks import Blocks, block_bounds, default_blocking
from tensorc.placement.layout import block_cyclic_node, node_grid
from tensorc.planning.plan import plan_distribution
from tensorc.planning.pricing import planning_context

CASES = ("ijk,if,jf->if", "ijk,jf,kf->if", "ijk,jkf->if")


def default_layout(shape: tuple[int, ...], nodes: int) -> Blocks:
    """The layout of an array made on its own on ``nodes`` one-CPU nodes."""
    bounds = block_bounds(shape, default_blocking(shape, None, None, nodes))
    grid = tuple(len(edges) - 1 for edges in bounds)
    over = node_grid(grid, nodes)
    return Blocks.layout(bounds, {coords: block_cyclic_node(coords, over)
                                  for coords in itertools.product(*map(range, grid))})


def shapes_for(subscripts: str, n: int, f: int) -> list[tuple[int, ...]]:
    inputs = subscripts.split("->")[0].split(",")
    return [tuple(n if index in "ijk" else f for index in term) for term in inputs]


def plan_once(subscripts: str, shapes, nodes: int):
    """One search, timed: (seconds, chosen grid, modelled cost)."""
    placed = {k: default_layout(shape, nodes) for k, shape in enumerate(shapes)}
    ctx = planning_context(workers=2, nodes=nodes, placed=placed)
    spec = parse_einsum(subscripts, shapes)
    program = einsum_program(spec, shapes, ("float64",) * len(shapes), "float64")
    final, _ = run_pipeline(program, ctx, keep_text=False)
    started = time.perf_counter()
    _, best = plan_distribution(subscripts, final, ctx)
    return time.perf_counter() - started, best.candidate.describe(), best.cost


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--f", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print({k: v for k, v in environment().items() if k in ("timestamp", "cpu", "cpus")})
    rows = []
    for subscripts in CASES:
        shapes = shapes_for(subscripts, args.n, args.f)
        found = [plan_once(subscripts, shapes, args.nodes) for _ in range(args.repeats)]
        rows.append({"contraction": subscripts,
                     "seconds": statistics.median(t for t, _, _ in found),
                     "chosen": found[0][1], "cost": found[0][2]})
    print(format_table(("contraction", "plan s (median)", "modelled cost s", "chosen"),
                       [(r["contraction"], f"{r['seconds']:.3f}", f"{r['cost']:.4g}",
                         r["chosen"]) for r in rows]))
    return rows


if __name__ == "__main__":
    main()
