"""The house rules the layer order does not cover: one execution path reports every run,
decisions travel in the IR, and no two public classes share a name."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import tensorc as tc
from tensorc.codegen.blocking import Blocking
from tensorc.codegen.lower import lower
from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import parse_einsum
from tensorc.ir.nodes import Join, post_order
from tensorc.ir.printer import format_program
from tensorc.passes.pipeline import run_pipeline
from tensorc.planning.pricing import planning_context

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _public_classes() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    names = []
    for package in ("tensorc", "tensorc.passes", "tensorc.runtime"):  # mapped directories
        root = importlib.import_module(package)
        names += [info.name for info in pkgutil.walk_packages(root.__path__, f"{package}.")]
    for module_name in sorted(set(names)):
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__ and (
                    not name.startswith("_")):
                found.setdefault(name, []).append(module.__name__)
    return found


def test_no_two_public_classes_share_a_name():
    found = _public_classes()
    assert "Blocks" in found and "Plan" in found  # the walk sees the whole package
    shared = {name: modules for name, modules in found.items() if len(modules) > 1}
    assert not shared, shared


def test_a_local_program_run_reports_its_whole_run():
    rng = np.random.default_rng(3)
    r, u = rng.random((512, 512)), rng.random((512, 16))
    out = tc.compile(EXAMPLES / "als.tc").run(R=r, U=u)
    np.testing.assert_allclose(out["W"], r @ (r.T @ u), rtol=1e-12)
    stats = tc.last_stats()
    assert stats["backend"] == "local"
    labels = [s["label"] for s in stats["statements"]]
    assert labels == ["V@1", "W@1"]
    assert stats["tasks"] == sum(s["tasks"] for s in stats["statements"]) > 0
    assert stats["run_seconds"] == pytest.approx(sum(s["run_seconds"]
                                                     for s in stats["statements"]))
    assert stats["program_seconds"] >= stats["run_seconds"]


def _final(subscripts: str, *shapes, optimize="auto"):
    spec = parse_einsum(subscripts, shapes)
    program = einsum_program(spec, shapes, ("float64",) * len(shapes), "float64")
    return run_pipeline(program, planning_context(optimize=optimize))[0]


@pytest.mark.parametrize(("optimize", "expected"), [
    ("auto", "path [(1,2), (0,1)]"),
    (False, "path [one einsum loop]"),
])
def test_the_contraction_path_is_in_the_printed_ir(optimize, expected):
    final = _final("ijk,jf,kf->if", (6, 5, 4), (5, 3), (4, 3), optimize=optimize)
    joins = [n for n in post_order(final.output) if isinstance(n, Join)]
    assert joins and all(j.path is not None for j in joins)
    assert expected in format_program(final)


def test_codegen_refuses_a_product_join_without_a_path():
    spec = parse_einsum("ij,jk->ik", ((3, 4), (4, 5)))
    program = einsum_program(spec, ((3, 4), (4, 5)), ("float64",) * 2, "float64")
    blocking = Blocking(tuple(sorted(program.size_of.items())),
                        tuple((i, n) for i, n in sorted(program.size_of.items())))
    with pytest.raises(tc.PlanError, match="has no contraction path"):
        lower(program, blocking)
    lower(_final("ij,jk->ik", (3, 4), (4, 5)), blocking)  # decided: lowers


def test_every_explain_stage_shows_the_n_node_plan():
    program = tc.compile(EXAMPLES / "als.tc", nodes=4)
    local = tc.compile(EXAMPLES / "als.tc")
    plans = program.plan_layouts(program.unrolled({"M": 512, "N": 512, "F": 16}, {}), 4).plans
    tasks = program.explain("tasks")
    for label, plan in plans.items():
        assert plan.graph.format(limit=400) in tasks, label
    assert tasks != local.explain("tasks")
    schedule = program.explain("schedule")
    assert schedule.startswith("LSHS on 4 nodes") and "local executor" not in schedule
    assert plans["W@1"].distribution.modelled.schedule.format(limit=400) in schedule
    dot = program.explain("dot")
    assert all(f"@node {n}" in dot for n in range(4))
    assert "@node" not in local.explain("dot")
