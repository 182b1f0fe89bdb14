"""When a distributed plan ends its reduction as a reduce-scatter, and along which index.

Contract: :func:`scatter_for(problem, candidate) <scatter_for>` returns the
:class:`~tensorc.codegen.reduce_scatter.Scatter` the candidate's last stage is lowered with,
or None for the plain fold (every output block's partials folded on the block's grid node).
It is a rule of the candidate alone, so the lowering, the simulation and the closed form
(:mod:`tensorc.planning.symbolic_cost`) agree on it. The rule:

- the statement's last stage sums indices the grid splits over nodes (a group of
  ``g = ∏ p_s > 1`` nodes makes the partials of each output block), and every index the
  grid splits is one of that stage's, every count a multiple of its grid size, no operand
  computed in a layout of its own (so every partial sits on its grid node);
- the grid cell of an output block holds fewer output blocks than the group has nodes
  (``∏ c_o / p_o < g``): a plain fold would leave some of the group's nodes without a fold
  while others receive ``g - 1`` blocks each;
- the output indices are long enough for ``g`` pieces: the rounds cut the index whose
  shortest block (the last, smaller one included) is longest while its pieces stay at least
  an element long, then the next (:func:`~tensorc.codegen.reduce_scatter.cut_plan`). Pieces
  are cut at ``⌊j L / q⌋``, so where the pieces do not divide a block they differ by an
  element along the index; the rounds are :func:`group_radices`.

Otherwise the plain fold is at least as even, and needs fewer tasks.
"""

from __future__ import annotations

import functools
import math

from tensorc.codegen.reduce_scatter import Scatter, cut_plan
from tensorc.ir.keys import key_of, unique
from tensorc.ir.stages import stage_parts, stage_roots
from tensorc.placement.layout import prime_factors


@functools.lru_cache(maxsize=1024)
def group_radices(group: int) -> tuple[int, ...]:
    """The rounds of a reduce-scatter over ``group`` nodes: its prime factors, pairs of 2
    merged into a 4, largest first. A round of ``q`` is ``q + 1`` tasks a node and one hop
    between nodes, so a round of 4 does two halvings' work in 5 tasks instead of 6 and one
    hop instead of two (4,096 nodes: 6 rounds, not 12); the bytes are the same."""
    primes = prime_factors(group)
    twos = primes.count(2)
    return tuple(sorted([q for q in primes if q != 2] + [4] * (twos // 2) + [2] * (twos % 2),
                        reverse=True))


def last_stage(problem) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The statement's last stage as the lowering iterates it: its indices (in the
    lowering's order) and its output indices; None when the output is not a stage."""
    return problem.memo("last stage", lambda: _last_stage(problem.program))


def _last_stage(program):
    roots = stage_roots(program.output)
    if not roots or roots[-1] is not program.output:
        return None
    inputs, _, output, _ = stage_parts(program.output)
    dims = unique([n for node in inputs for n in key_of(node)])
    return tuple(dims), tuple(output)


def scatter_for(problem, candidate) -> Scatter | None:
    """The reduce-scatter ``candidate``'s last stage ends with, or None (module contract)."""
    stage = last_stage(problem)
    if stage is None:
        return None
    dims, output = stage
    grid = dict(candidate.grid)
    counts = dict(candidate.counts)
    if problem.placed and set(problem.placed) - set(problem.repartition):
        return None
    if any(counts[i] % grid[i] for i in grid):
        return None
    if any(p > 1 and i not in dims for i, p in grid.items()):
        return None
    axes = tuple((i, grid[i]) for i in dims if i not in output and grid[i] > 1)
    group = math.prod(p for _, p in axes)
    if group < 2 or math.prod(counts[o] // grid[o] for o in output) >= group:
        return None
    rounds = group_radices(group)
    cuts = cut_plan(rounds, output_lengths(problem.sizes, counts, output,
                                           problem.placed_blocks))
    return None if cuts is None else Scatter(cuts, axes, rounds)


def output_lengths(sizes, counts, output, fixed=None) -> tuple[tuple[str, int], ...]:
    """Each output index's shortest block (the last, smaller one included; ``fixed``: the
    block sizes of indices blocked in advance, as the lowering cuts them), longest first
    (output order on a tie): the order a reduce-scatter cuts them in."""
    lengths = []
    for index in output:
        step = (fixed or {}).get(index) or math.ceil(sizes[index] / counts[index])
        lengths.append((index, min(step, sizes[index] - (counts[index] - 1) * step)))
    return tuple(sorted(lengths, key=lambda pair: -pair[1]))

