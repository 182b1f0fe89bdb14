"""The house rules the layer order does not cover: one execution path reports every run,
decisions travel in the IR, no two public classes (nor public functions of the driver and
runtime) share a name, the project never loads its own modules by name or hides an import
edge in a function, and nothing above the session branches on the engine."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import tensorc as tc
from tensorc.codegen.blocking import Blocking
from tensorc.codegen.lower import lower_to_tasks
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
        lower_to_tasks(program, blocking)
    lower_to_tasks(_final("ij,jk->ik", (3, 4), (4, 5)), blocking)  # decided: lowers


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


ROOT = Path(__file__).resolve().parent.parent
SOURCE_ROOTS = {"tensorc": ROOT / "tensorc", "tensorc.passes": ROOT / "passes",
                "tensorc.runtime": ROOT / "runtime", "tensorc.grammar": ROOT / "grammar"}
"""Each import package and the directory its sources are in (setuptools ``package-dir``)."""


def _sources() -> dict[str, ast.Module]:
    """Every project module by its import name, parsed."""
    found = {}
    for package, directory in SOURCE_ROOTS.items():
        for path in sorted(directory.rglob("*.py")):
            parts = path.relative_to(directory).with_suffix("").parts
            if package == "tensorc" and parts[0] in ("passes", "runtime", "grammar"):
                continue
            name = ".".join((package, *parts)).removesuffix(".__init__")
            found[name] = ast.parse(path.read_text(), filename=str(path))
    return found


DRIVER_AND_RUNTIME = ("tensorc.driver", "tensorc.runtime", "tensorc.api", "tensorc.program",
                      "tensorc.session", "tensorc.storage")


def test_no_two_public_functions_of_the_driver_and_runtime_share_a_name():
    defined: dict[str, list[str]] = {}
    for module, tree in _sources().items():
        if not module.startswith(DRIVER_AND_RUNTIME):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                defined.setdefault(node.name, []).append(module)
    assert "run_on_ray" in defined and "einsum" in defined  # the walk sees both layers
    shared = {name: modules for name, modules in defined.items() if len(modules) > 1}
    assert not shared, shared


def _imported_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return []


def test_the_project_never_loads_its_own_modules_by_name():
    offenders = []
    for module, tree in _sources().items():
        for node in ast.walk(tree):
            if "importlib" in _imported_names(node) or any(
                    name.startswith("importlib") and name != "importlib.resources"
                    for name in _imported_names(node)):
                offenders.append(f"{module}: imports importlib")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                    node.func.id == "__import__"):
                offenders.append(f"{module}: calls __import__")
            if isinstance(node, ast.Attribute) and node.attr == "import_module":
                offenders.append(f"{module}: calls import_module")
    assert not offenders, offenders


def test_function_level_imports_never_hide_an_edge_between_project_modules():
    """A function may import a project module late only to load Ray, z3 or numba late (the
    module it imports imports one of them at its top level)."""
    sources = _sources()
    late = {module for module, tree in sources.items()
            if any(name.split(".")[0] in ("ray", "z3", "numba")
                   for node in tree.body for name in _imported_names(node))}
    assert "tensorc.planning.smt_search" in late
    assert "tensorc.placement.lshs_compiled" in late
    hidden = []
    for module, tree in sources.items():
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                for name in _imported_names(node):
                    if (name == "tensorc" or name.startswith("tensorc.")) and name not in late:
                        hidden.append(f"{module}.{function.name} imports {name}")
    assert not hidden, hidden


ABOVE_THE_SESSION = ("tensorc.api", "tensorc.program", "tensorc.lazy", "tensorc.driver",
                     "tensorc.storage")


def test_nothing_above_the_session_branches_on_the_engine():
    """The engine is chosen once (``tensorc.session``): above it, no comparison with a
    backend name."""
    branches = []
    for module, tree in _sources().items():
        if not module.startswith(ABOVE_THE_SESSION):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(
                    isinstance(side, ast.Constant) and side.value in ("ray", "local")
                    for side in (node.left, *node.comparators)):
                branches.append(f"{module}:{node.lineno}")
    assert not branches, branches
