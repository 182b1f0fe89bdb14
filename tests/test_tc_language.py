"""The ``.tc`` language: identical IR to einsum, semantics of each form, params, rank 0."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.api import clear_plan_cache
from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import parse_einsum
from tensorc.ir.nodes import CALL_ARITY, CALL_OPS
from tensorc.ir.printer import format_expr, format_program
from tensorc.ir.semantics import CALL_FUNCS
from tensorc.passes.pipeline import run_pipeline
from tensorc.planning.pricing import planning_context

MATMUL = """
size M = 4, N = 5, K = 3
input A : f64[M, K]
input B : f64[K, N]
output C : f64[M, N]
C[i, j] += A[i, k] * B[k, j]
"""


def _statement_ir(program: tc.Program, sizes: dict, index: int = 0):
    return program.unrolled(sizes, {}).statements[index].program


@pytest.mark.parametrize(
    ("subscripts", "source", "sizes"),
    [
        ("ik,kj->ij", MATMUL, {"M": 4, "N": 5, "K": 3}),
        (
            "ijk,if,jf->if",
            "size I = 4, J = 3, K = 2, F = 5\ninput X : f64[I, J, K]\ninput B : f64[I, F]\n"
            "input C : f64[J, F]\noutput A : f64[I, F]\nA[i, f] += X[i, j, k] * B[i, f] * C[j, f]",
            {"I": 4, "J": 3, "K": 2, "F": 5},
        ),
        (
            "ijk,jkf->if",
            "size I = 4, J = 3, K = 2, F = 5\ninput X : f64[I, J, K]\ninput Y : f64[J, K, F]\n"
            "output Z : f64[I, F]\nZ[i, f] += X[i, j, k] * Y[j, k, f]",
            {"I": 4, "J": 3, "K": 2, "F": 5},
        ),
    ],
)
def test_tc_statement_prints_the_same_ir_as_einsum(subscripts, source, sizes):
    program = tc.compile(source)
    ir = _statement_ir(program, sizes)
    shapes = [d.shape for d in ir.inputs]
    spec = parse_einsum(subscripts, shapes)
    expected = einsum_program(spec, shapes, ["float64"] * len(shapes), "float64")
    assert format_program(ir) == format_program(expected)
    assert ir == expected
    after_tc, _ = run_pipeline(ir, planning_context(workers=2))
    after_einsum, _ = run_pipeline(expected, planning_context(workers=2))
    assert format_program(after_tc) == format_program(after_einsum)


def test_all_four_matmul_forms_lower_to_one_ir():
    program = tc.compile("examples/matmul.tc")
    statements = program.unrolled({"M": 6, "N": 5, "K": 4}, {}).statements
    texts = {format_program(s.program) for s in statements}
    assert len(statements) == 4 and len(texts) == 1


def test_every_call_op_has_semantics_arity_and_text():
    assert set(CALL_FUNCS) == set(CALL_OPS) == set(CALL_ARITY)
    from tensorc.ir.nodes import Arg, OpCall

    for op, arity in CALL_ARITY.items():
        args = tuple(Arg(k) for k in range(arity or 2))
        assert format_expr(OpCall(op, args))


def _run(source: str, **inputs):
    return tc.compile(source, workers=2).run(**inputs)


def test_builtins_conditions_and_comparisons():
    x = np.linspace(-2, 2, 7)
    y = np.linspace(1, 3, 7)
    out = _run(
        "size N = 7\ninput x : f64[N]\ninput y : f64[N]\noutput r : f64[N]\noutput m : bool[N]\n"
        "r[n] = x[n] > 0 and not (y[n] > 2.5) ? relu(x[n]) + pow(y[n], 2) : "
        "max(abs(x[n]), tanh(y[n])) - min(exp(x[n]), log(y[n])) + sqrt(y[n]) * sigmoid(x[n])\n"
        "m[n] = x[n] <= 0 or y[n] == 3\n",
        x=x, y=y,
    )
    sig = 1 / (1 + np.exp(-x))
    expected = np.where(
        (x > 0) & ~(y > 2.5),
        np.maximum(x, 0) + y**2,
        np.maximum(np.abs(x), np.tanh(y)) - np.minimum(np.exp(x), np.log(y)) + np.sqrt(y) * sig,
    )
    np.testing.assert_allclose(out["r"], expected, rtol=1e-12)
    np.testing.assert_array_equal(out["m"], (x <= 0) | (y == 3))
    assert out["m"].dtype == np.bool_


def test_op_assign_merges_into_an_earlier_value_and_reads_the_old_one():
    rng = np.random.default_rng(0)
    d = rng.random((5, 5))
    out = _run(
        "size N = 5\ninput D0 : f64[N, N]\noutput D : f64[N, N]\noutput P : f64[N, N]\n"
        "D[i, j] = D0[i, j]\nD[i, j] min= D[i, k] + D[k, j]\n"
        "P[i, j] = D0[i, j] * 2\nP[i, j] *= D0[i, k] * D0[k, j]\n",
        D0=d,
    )
    step = np.min(d[:, :, None] + d[None, :, :], axis=1)
    np.testing.assert_allclose(out["D"], np.minimum(d, step))
    np.testing.assert_allclose(out["P"], 2 * d * np.prod(d[:, :, None] * d[None], axis=1))


def test_params_are_overridable_at_run_time_and_sizes_bind_from_inputs():
    source = "size N\nparam a : f64 = 2.0\ninput x : f64[N]\noutput y : f64[N]\ny[i] = a * x[i]\n"
    program = tc.compile(source)
    x = np.arange(6.0)
    np.testing.assert_allclose(program.run(x=x)["y"], 2 * x)
    np.testing.assert_allclose(program.run(x=x, a=0.5)["y"], 0.5 * x)
    np.testing.assert_allclose(program.run(x=np.arange(3.0), a=3)["y"], 3 * np.arange(3.0))


def test_total_reduction_and_rank0_inputs():
    out = _run(
        "size N = 4\ninput x : f64[N, N]\ninput s : f64\noutput t : f64\noutput u : f64\n"
        "t += x[i, j]\nu = s * max[i, j](x[i, j])\n",
        x=np.arange(16.0).reshape(4, 4), s=np.float64(2.0),
    )
    assert out["t"].shape == () and float(out["t"]) == 120.0
    assert float(out["u"]) == 30.0


def test_repeat_counter_and_ssa_versions():
    program = tc.compile(
        "size N = 3\ninput x : f64[N]\noutput y : f64[N]\n"
        "y[i] = x[i]\nrepeat 3 as t { y[i] = y[i] * 2 + t }\n"
    )
    x = np.ones(3)
    np.testing.assert_allclose(program.run(x=x)["y"], ((x * 2 + 0) * 2 + 1) * 2 + 2)
    labels = [s.label for s in program.unrolled({"N": 3}, {}).statements]
    assert labels == ["y@1", "y@2", "y@3", "y@4"]


def test_comprehension_with_condition_count_and_transpose():
    a = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, 6.0]])
    out = _run(
        "size M = 2, N = 3\ninput A : f64[M, N]\noutput pos : f64[M]\noutput cnt : f64[M]\n"
        "output T : f64[N, M]\n"
        "pos = [ (i, +/a) | ((i, j), a) <- A, a > 0, group by i ]\n"
        "cnt = [ (i, count/a) | ((i, j), a) <- A, group by i ]\n"
        "T = [ ((j, i), a) | ((i, j), a) <- A ]\n",
        A=a,
    )
    np.testing.assert_allclose(out["pos"], np.where(a > 0, a, 0).sum(axis=1))
    np.testing.assert_allclose(out["cnt"], [3.0, 3.0])
    np.testing.assert_allclose(out["T"], a.T)


def test_integer_and_float32_programs_keep_their_dtypes():
    out = _run(
        "size N = 4\ninput a : i32[N]\ninput b : f32[N]\noutput s : i64\noutput f : f32[N]\n"
        "s += a[i] * a[i]\nf[i] = b[i] * 0.5\n",
        a=np.arange(4, dtype=np.int32), b=np.ones(4, dtype=np.float32),
    )
    assert out["s"].dtype == np.int64 and int(out["s"]) == 14
    assert out["f"].dtype == np.float32
    np.testing.assert_allclose(out["f"], 0.5)


def test_block_hints_and_plan_options_reach_the_blocking():
    source = MATMUL.replace("input A : f64[M, K]", "input A : f64[M, K] @grid(2, 1)")
    program = tc.compile(source, workers=2)
    plan = program.plan(program.unrolled({"M": 4, "N": 5, "K": 3}, {}).statements[0])
    assert "i: 4/2 -> 2" in plan.blocking.describe()
    program = tc.compile(source, workers=2, grid={"i": 4, "k": 3})
    plan = program.plan(program.unrolled({"M": 4, "N": 5, "K": 3}, {}).statements[0])
    assert "i: 4/1 -> 4" in plan.blocking.describe() and "k: 3/1 -> 3" in plan.blocking.describe()
    rng = np.random.default_rng(0)
    a, b = rng.random((4, 3)), rng.random((3, 5))
    np.testing.assert_allclose(program.run(A=a, B=b)["C"], a @ b)


def test_explain_defaults_to_plan_and_rejects_unknown_stages():
    program = tc.compile(MATMUL)
    assert program.explain().startswith("1 statement(s)")
    assert "plan for C@1: C[i, j] += A[i, k] * B[k, j]" in program.explain()
    with pytest.raises(tc.TcError, match="unknown stage 'asm'"):
        program.explain("asm")


def test_explain_needs_unbound_sizes():
    program = tc.compile("size N\ninput x : f64[N]\noutput y : f64[N]\ny[i] = x[i] * 2\n")
    with pytest.raises(tc.TcError, match="size N has no value"):
        program.explain("ir")
    assert "sizes i=3" in program.explain("ir", N=3)


def test_einsum_plans_are_unaffected():
    clear_plan_cache()
    assert tc.plan("ik,kj->ij", (4, 3), (3, 5)).explain().startswith("plan for einsum 'ik,kj->ij'")
