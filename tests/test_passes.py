"""Every pass keeps the interpreted value; pushdown and path choices fire where they must."""

from __future__ import annotations

import numpy as np
import pytest

from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import parse_einsum
from tensorc.ir.interpret import interpret
from tensorc.ir.nodes import (
    Arg,
    Const,
    Function,
    InputDecl,
    Join,
    Map,
    OpCall,
    ReduceByKey,
    Scan,
    post_order,
)
from tensorc.ir.verify import verify
from tensorc.passes.canonicalize import Canonicalize
from tensorc.passes.contraction_path import ContractionPathPass
from tensorc.passes.fuse_maps import FuseMaps
from tensorc.passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from tensorc.passes.reduce_pushdown import ReducePushdown
from tensorc.planning.paths import check_path, choose_path, small_first_path
from tensorc.planning.pricing import planning_context

EXPRESSIONS = [
    ("ijk,if,jf->if", [(4, 5, 6), (4, 3), (5, 3)]),
    ("ijk,jf,kf->if", [(4, 5, 6), (5, 3), (6, 3)]),
    ("ijk,jkf->if", [(4, 5, 6), (5, 6, 3)]),
    ("ab,bc,cd,de->ae", [(3, 4), (4, 5), (5, 2), (2, 3)]),
    ("ii->i", [(4, 4)]),
    ("ij,ij->ij", [(3, 1), (3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ijk->", [(2, 3, 4)]),
    (",ij->ji", [(), (2, 3)]),
]


def _program(subscripts, shapes):
    spec = parse_einsum(subscripts, shapes)
    return einsum_program(spec, shapes, ["float64"] * len(shapes), "float64")


def _arrays(shapes):
    rng = np.random.default_rng(7)
    return {f"in{k}": rng.random(shape) for k, shape in enumerate(shapes)}


@pytest.mark.parametrize("one_pass", DEFAULT_PIPELINE, ids=lambda p: p.name)
@pytest.mark.parametrize("subscripts,shapes", EXPRESSIONS, ids=[e[0] for e in EXPRESSIONS])
def test_each_pass_preserves_the_interpreted_value(one_pass, subscripts, shapes):
    program = _program(subscripts, shapes)
    arrays = _arrays(shapes)
    before = interpret(program, arrays)
    # run the pipeline up to this pass, so every pass sees the form it normally sees
    ctx = planning_context(workers=2, grid={n: 2 for n, s in program.sizes if s > 1})
    for step in DEFAULT_PIPELINE:
        after_program = verify(step.run(program, ctx))
        if step is one_pass:
            break
        program = after_program
    np.testing.assert_allclose(interpret(after_program, arrays), before, rtol=1e-12)
    expected = np.einsum(subscripts, *arrays.values())
    np.testing.assert_allclose(before, expected, rtol=1e-12)


def test_pushdown_sums_k_inside_x_for_mttkrp():
    program = _program("ijk,if,jf->if", [(4, 5, 6), (4, 3), (5, 3)])
    ctx = planning_context()
    pushed = ReducePushdown().run(Canonicalize().run(program, ctx), ctx)
    reduces = [n for n in post_order(pushed.output) if isinstance(n, ReduceByKey)]
    inner = [n for n in reduces if isinstance(n.x, Scan)]
    assert len(inner) == 1
    assert inner[0].x == Scan("in0", ("i", "j", "k"))
    assert inner[0].key == ("i", "j")


def test_pushdown_leaves_shared_indices_alone():
    program = _program("ijk,jkf->if", [(4, 5, 6), (5, 6, 3)])
    pushed = ReducePushdown().run(program, planning_context())
    assert pushed == program


def test_fused_join_is_kept_when_the_cost_model_prefers_it():
    program = _program("ij,if,jf->if", [(64, 64), (64, 8), (64, 8)])
    ctx = planning_context(workers=2)
    result = ContractionPathPass().run(program, ctx)
    joins = [n for n in post_order(result.output) if isinstance(n, Join)]
    assert [len(j.inputs) for j in joins] == [3]
    assert "fused join" in ctx.notes[-1]


def test_pairwise_stages_win_for_a_long_chain_over_many_blocks():
    shapes = [(64, 64)] * 4
    program = _program("ab,bc,cd,de->ae", shapes)
    ctx = planning_context(workers=2, grid={n: 4 for n in "abcde"})
    result = ContractionPathPass().run(program, ctx)
    joins = [n for n in post_order(result.output) if isinstance(n, Join)]
    assert sorted(len(j.inputs) for j in joins) == [2, 2, 2]
    assert "pairwise stages" in ctx.notes[-1]


def test_fuse_maps_collapses_a_map_of_a_map():
    scan = Scan("A", ("i",))
    inner = Map(OpCall("mul", (Arg(0), Const(2.0))), scan, ("i",))
    outer = Map(OpCall("add", (Arg(0), Const(1.0))), inner, ("i",))
    program = verify(Function((InputDecl("A", (3,), "float64"),), (("i", 3),), outer, "float64"))
    fused = verify(FuseMaps().run(program, planning_context()))
    assert fused.output == Map(
        OpCall("add", (OpCall("mul", (Arg(0), Const(2.0))), Const(1.0))), scan, ("i",)
    )
    a = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(interpret(fused, {"A": a}), interpret(program, {"A": a}))


def test_small_first_path_is_the_khatri_rao_form():
    sizes = {"i": 256, "j": 256, "k": 256, "f": 100}
    keys = [("i", "j", "k"), ("j", "f"), ("k", "f")]
    assert small_first_path(keys, sizes) == [(1, 2), (0, 1)]


def test_choose_path_honours_numpy_optimize_values():
    sizes = {"a": 3, "b": 4, "c": 5, "d": 2}
    keys = [("a", "b"), ("b", "c"), ("c", "d")]
    assert choose_path(keys, ("a", "d"), sizes, 8, False) is None
    assert choose_path(keys, ("a", "d"), sizes, 8, ["einsum_path", (1, 2), (0, 1)]) == [
        (1, 2),
        (0, 1),
    ]
    assert len(choose_path(keys, ("a", "d"), sizes, 8, "optimal")) == 2
    assert len(choose_path(keys, ("a", "d"), sizes, 8, True)) == 2


def test_check_path_refuses_a_path_that_leaves_operands():
    from tensorc.errors import PlanError

    with pytest.raises(PlanError, match="leaves 2 operands uncontracted"):
        check_path([(0, 1)], 3)
    with pytest.raises(PlanError, match="names positions outside 0..1"):
        check_path([(0, 1), (0, 5)], 3)


def test_pipeline_records_ir_after_every_pass():
    program = _program("ijk,if,jf->if", [(4, 5, 6), (4, 3), (5, 3)])
    _, stages = run_pipeline(program, planning_context())
    assert [name for name, _ in stages] == [
        "input",
        "canonicalize",
        "reduce-pushdown",
        "contraction-path",
        "fuse-maps",
    ]
