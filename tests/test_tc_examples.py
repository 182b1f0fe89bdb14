"""Every ``examples/*.tc`` program against numpy, and its ``explain`` stages against golden."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy_reference import power_iteration_case

import tensorc as tc
from tensorc import session
from tensorc.program import STAGES
from tensorc.programs import NAMES as BLOCK_PROGRAMS  # tests/test_block_programs.py runs them

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.tc") if p.stem not in BLOCK_PROGRAMS)


def _compile(name: str, **options) -> tc.Program:
    return tc.compile(EXAMPLES / f"{name}.tc", workers=2, **options)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_every_listed_example_exists():
    assert set(NAMES) >= {
        "matmul", "mttkrp", "contraction", "shortest_path", "logreg", "power_iteration"
    }


def test_matmul_all_four_forms():
    rng = np.random.default_rng(1)
    a, b = rng.random((6, 4)), rng.random((4, 5))
    out = _compile("matmul").run(A=a, B=b)
    assert sorted(out) == ["C1", "C2", "C3", "C4"]
    for value in out.values():
        np.testing.assert_allclose(value, a @ b, rtol=1e-12)


def test_mttkrp_both_forms():
    rng = np.random.default_rng(2)
    x = rng.random((8, 7, 6))
    b, c = rng.random((8, 3)), rng.random((7, 3))
    bk, ck = rng.random((7, 3)), rng.random((6, 3))
    out = _compile("mttkrp").run(X=x, B=b, C=c, Bk=bk, Ck=ck)
    np.testing.assert_allclose(out["A1"], np.einsum("ijk,if,jf->if", x, b, c), rtol=1e-12)
    np.testing.assert_allclose(out["A2"], np.einsum("ijk,jf,kf->if", x, bk, ck), rtol=1e-12)


def test_contraction():
    rng = np.random.default_rng(3)
    x, y = rng.random((6, 5, 4)), rng.random((5, 4, 3))
    out = _compile("contraction").run(X=x, Y=y)
    np.testing.assert_allclose(out["Z"], np.einsum("ijk,jkf->if", x, y), rtol=1e-12)


def _min_plus(d, w):
    return np.min(d[:, :, None] + w[None, :, :], axis=1)


def _graph(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.integers(1, 10, size=(n, n)).astype(float)
    w[rng.random((n, n)) < 0.5] = np.inf
    np.fill_diagonal(w, 0.0)
    return w


@pytest.mark.parametrize("options", [{}, {"grid": {"i": 2, "j": 3, "k": 3}},
                                     {"block_shape": {"k": 1}}], ids=["one-block", "grid", "k1"])
def test_shortest_path_min_plus(options):
    w = _graph(6, 4)
    program = _compile("shortest_path", **options)
    out = program.run(W=w)
    np.testing.assert_array_equal(out["step"], _min_plus(w, w))
    d = w.copy()
    for _ in range(3):
        d = np.minimum(d, _min_plus(d, d))
    np.testing.assert_array_equal(out["D"], d)
    # the reference: Floyd–Warshall (eight edges cover every path on six nodes)
    fw = w.copy()
    for k in range(6):
        fw = np.minimum(fw, fw[:, [k]] + fw[[k], :])
    np.testing.assert_array_equal(out["D"], fw)


def test_shortest_path_blocked_grid_folds_partials_with_min():
    w = _graph(6, 5)
    program = _compile("shortest_path", grid={"k": 3})
    statement = program.unrolled({"N": 6}, {}).statements[0]
    plan = program.plan(statement)
    counts = plan.graph.counts()
    assert counts["reduce"] == 1 and counts["pair"] == 3  # three k-blocks folded by one reduce
    kernels = [plan.graph.kernels[t.kernel] for t in plan.graph.tasks if t.kind == "reduce"]
    assert all(k.ufunc is np.minimum for k in kernels)
    assert "reduce_by_key(min" in program.explain("ir")
    np.testing.assert_array_equal(program.run(W=w)["step"], _min_plus(w, w))


def test_logreg_matches_numpy_gradient_descent():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(32, 4))
    y = (rng.random(32) < 0.5).astype(float)
    program = _compile("logreg")
    for lr, steps in ((0.5, 5), (0.1, 3)):
        w = np.zeros(4)
        for _ in range(steps):
            r = _sigmoid(x @ w) - y
            w = w - lr / 32 * (x.T @ r)
        p = _sigmoid(x @ w)
        loss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
        out = program.run(X=x, y=y, lr=lr, steps=steps)
        np.testing.assert_allclose(out["w"], w, rtol=1e-10)
        np.testing.assert_allclose(out["loss"], loss, rtol=1e-10)
        assert out["loss"].shape == ()


def test_power_iteration_with_a_rank0_norm():
    a, x0, x, nrm = power_iteration_case()
    out = _compile("power_iteration").run(A=a, x0=x0)
    np.testing.assert_allclose(out["x"], x, rtol=1e-12)
    np.testing.assert_allclose(out["nrm"], nrm, rtol=1e-12)
    assert out["nrm"].shape == ()


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("name", NAMES)
def test_explain_matches_golden(name, stage, golden):
    memory = session.current().memory_limit
    session.current().memory_limit = "1GB"  # the default budget depends on the machine
    try:
        golden(f"tc_{name}_{stage}", _compile(name).explain(stage))
    finally:
        session.current().memory_limit = memory


def test_explain_is_deterministic():
    assert _compile("mttkrp").explain("tasks") == _compile("mttkrp").explain("tasks")


def test_als_half_sweeps():
    rng = np.random.default_rng(8)
    r, u = rng.random((512, 512)), rng.random((512, 16))
    out = _compile("als").run(R=r, U=u)
    np.testing.assert_allclose(out["V"], r.T @ u, rtol=1e-12)
    np.testing.assert_allclose(out["W"], r @ (r.T @ u), rtol=1e-12)
