"""``tc.linalg`` by block programs, locally: results against numpy, errors like numpy's."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.lazy.linalg import WHOLE_EDGE

RNG = np.random.default_rng(11)
BIG = WHOLE_EDGE + 88  # past the one-task limit: solve and inv run the block programs


def spd(n: int) -> np.ndarray:
    x = RNG.random((n, n))
    return x @ x.T + n * np.eye(n)


@pytest.mark.parametrize("n", [5, 300, BIG])
def test_cholesky(n):
    a = spd(n)
    lower = tc.linalg.cholesky(tc.asarray(a))
    assert isinstance(lower, tc.Array)
    np.testing.assert_allclose(np.asarray(lower), np.linalg.cholesky(a), rtol=1e-9, atol=1e-9)
    upper = tc.linalg.cholesky(a, upper=True)
    np.testing.assert_allclose(np.asarray(upper), np.linalg.cholesky(a).T, rtol=1e-9,
                               atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_small_cholesky_reads_the_triangle_numpy_reads(dtype):
    """One LAPACK ``potrf`` call below the block program's size: numpy's factor in the
    operand's dtype, from the lower triangle (the upper one with ``upper=True``)."""
    n = 200
    garbage = spd(n).astype(dtype)
    garbage[np.triu_indices(n, 1)] = 7.0
    eps = np.finfo(dtype).eps
    for upper in (False, True):
        found = np.asarray(tc.linalg.cholesky(tc.asarray(garbage), upper=upper))
        expected = np.linalg.cholesky(garbage, upper=upper)
        assert found.dtype == dtype and found.flags.c_contiguous
        assert np.abs(found - expected).max() < 50 * eps * np.abs(expected).max()
    with pytest.raises(tc.LinAlgError, match="^Matrix is not positive definite$"):
        tc.linalg.cholesky(tc.asarray(-np.eye(4, dtype=dtype)), upper=True)


def test_cholesky_of_a_lazy_array_evaluates_it_first():
    a = spd(50)
    lazy = tc.asarray(a) * 2.0
    np.testing.assert_allclose(np.asarray(tc.linalg.cholesky(lazy)),
                               np.linalg.cholesky(2 * a), rtol=1e-10)


@pytest.mark.parametrize("shape", [(7, 7), (4000, 12), (20000, 40)])
def test_qr(shape):
    a = RNG.random(shape)
    q, r = tc.linalg.qr(a)
    q, r = np.asarray(q), np.asarray(r)
    np.testing.assert_allclose(q @ r, a, atol=1e-11)
    np.testing.assert_allclose(q.T @ q, np.eye(shape[1]), atol=1e-11)
    np.testing.assert_array_equal(np.tril(r, -1), 0)
    result = tc.linalg.qr(a)
    assert result.Q is result[0] and result.R is result[1]
    r_only = np.asarray(tc.linalg.qr(a, mode="r"))  # numpy's mode: R alone
    want = np.linalg.qr(a, mode="r")
    signs = np.sign(np.diagonal(r_only)) * np.sign(np.diagonal(want))
    np.testing.assert_allclose(signs[:, None] * r_only, want, rtol=1e-9, atol=1e-11)


def test_qr_mode_r_of_a_tall_matrix_is_tsqr_without_q():
    a = RNG.random((40_000, 30))  # past WHOLE_BYTES
    r = np.asarray(tc.linalg.qr(a, mode="r"))
    stats = tc.last_stats()
    assert stats["tasks"] == 2 * stats["block_counts"]["MB"]  # leaves, tree and R: no Q
    want = np.linalg.qr(a, mode="r")
    signs = np.sign(np.diagonal(r)) * np.sign(np.diagonal(want))
    np.testing.assert_allclose(signs[:, None] * r, want, rtol=1e-9, atol=1e-11)
    for odd in (RNG.random((3, 5)), np.stack([RNG.random((6, 4))] * 2)):  # one task each
        np.testing.assert_allclose(np.asarray(tc.linalg.qr(odd, mode="r")),
                                   np.linalg.qr(odd, mode="r"), rtol=1e-12)
    with pytest.raises(ValueError, match="qr: mode must be 'reduced', 'complete' or 'r', "
                                         "got 'raw'"):
        tc.linalg.qr(a, mode="raw")


def test_stacks_wide_and_empty_matrices_run_as_one_task():
    stack = np.stack([spd(4), spd(4)])
    np.testing.assert_allclose(np.asarray(tc.linalg.cholesky(stack)),
                               np.linalg.cholesky(stack), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(tc.linalg.cholesky(stack, upper=True)),
                               np.linalg.cholesky(stack, upper=True), rtol=1e-12)
    wide = RNG.random((3, 5))
    q, r = tc.linalg.qr(wide)
    assert (q.shape, r.shape) == ((3, 3), (3, 5))
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), wide, atol=1e-12)
    tall = RNG.random((6, 4))
    q, r = tc.linalg.qr(tall, mode="complete")
    assert (q.shape, r.shape) == ((6, 6), (6, 4))
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), tall, atol=1e-12)
    np.testing.assert_allclose(np.asarray(q).T @ np.asarray(q), np.eye(6), atol=1e-12)
    assert tc.linalg.cholesky(np.ones((0, 0))).shape == (0, 0)


def test_float32_in_float32_out():
    a = spd(40).astype(np.float32)
    lower = tc.linalg.cholesky(a)
    assert lower.dtype == np.float32
    np.testing.assert_allclose(np.asarray(lower), np.linalg.cholesky(a), rtol=1e-4)
    tall = RNG.random((300, 5)).astype(np.float32)
    q, r = tc.linalg.qr(tall)
    assert q.dtype == r.dtype == np.float32
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), tall, atol=1e-5)


@pytest.mark.parametrize("rhs", [(BIG,), (BIG, 3)])
def test_solve_by_blocks(rhs):
    a = RNG.random((BIG, BIG)) + np.eye(BIG)
    b = RNG.random(rhs)
    x = tc.linalg.solve(tc.asarray(a), b)
    assert x.shape == rhs
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), rtol=1e-7, atol=1e-9)


def test_solve_needs_no_pivot_to_be_right():
    """A permutation has zero pivots: LU without pivoting cannot factor it, QR can."""
    perm = np.eye(BIG)[RNG.permutation(BIG)]
    b = RNG.random(BIG)
    np.testing.assert_allclose(np.asarray(tc.linalg.solve(perm, b)), perm.T @ b, atol=1e-12)


def test_inv_by_blocks():
    a = RNG.random((BIG, BIG)) + BIG * np.eye(BIG)
    np.testing.assert_allclose(np.asarray(tc.linalg.inv(a)), np.linalg.inv(a), rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize("shape", [(3000, 20), (40, 40), (30, 700)])
def test_lstsq_matches_numpy(shape):
    a = RNG.random(shape)
    b = RNG.random(shape[0])
    x, residuals, rank, s = tc.linalg.lstsq(a, b)
    ex, eres, erank, es = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(np.asarray(x), ex, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(np.asarray(residuals), eres, rtol=1e-7)
    assert rank == erank
    np.testing.assert_allclose(s, es, rtol=1e-9)


@pytest.mark.parametrize(("shape", "columns"), [((500, 6), 3), ((3000, 4), 6)])
def test_lstsq_with_several_right_hand_sides(shape, columns):
    """Up to as many as ``a``'s columns (``R`` of ``[a | b]``) and more (by ``Q``)."""
    a, b = RNG.random(shape), RNG.random((shape[0], columns))
    x, residuals, _, _ = tc.linalg.lstsq(a, b)
    ex, eres, _, _ = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(np.asarray(x), ex, rtol=1e-8)
    np.testing.assert_allclose(np.asarray(residuals), eres, rtol=1e-8)


@pytest.mark.parametrize("columns", [None, 3])
def test_lstsq_of_a_tall_matrix_is_tsqr_of_a_beside_b_without_q(columns):
    """Up to as many right-hand sides as columns, a tall least-squares problem is the ``R``
    factor of ``[a | b]`` (TSQR without ``Q``: its ``2 MB`` tasks and nothing after them);
    ``x``, the residuals, the rank and the singular values are numpy's."""
    a = RNG.random((40_000, 30))  # past WHOLE_BYTES: the block program
    b = RNG.random(40_000) if columns is None else RNG.random((40_000, columns))
    x, residuals, rank, s = tc.linalg.lstsq(a, b)
    stats = tc.last_stats()
    assert stats["tasks"] == 2 * stats["block_counts"]["MB"]  # leaves, tree and R: no Q
    ex, eres, erank, es = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(np.asarray(x), ex, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(residuals), eres, rtol=1e-9)
    assert rank == erank and np.asarray(x).shape == ex.shape
    np.testing.assert_allclose(s, es, rtol=1e-9)


def test_lstsq_of_a_nearly_consistent_system():
    """``b`` all but in ``a``'s range leaves ``[a | b]`` ill-conditioned (its leaves take
    Householder's QR): ``x`` is numpy's and the tiny residual too, to roundoff of ``b``."""
    from tensorc.codegen.block_kernels import _cholesky_qr2

    a = RNG.random((40_000, 30))
    want = RNG.random(30)
    b = a @ want + 1e-9 * RNG.standard_normal(40_000)
    leaf = np.column_stack([a, b])[:20_000]  # a row block, as a TSQR leaf reads it
    assert _cholesky_qr2(leaf, with_q=False) is None  # its check fails: Householder
    x, residuals, _, _ = tc.linalg.lstsq(a, b)
    ex, eres, _, _ = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(np.asarray(x), ex, rtol=1e-7)
    np.testing.assert_allclose(np.asarray(residuals), eres, rtol=1e-3)


@pytest.mark.parametrize(("call", "error", "text"), [
    (lambda: tc.linalg.cholesky(np.ones((3, 4))), np.linalg.LinAlgError,
     "cholesky: last 2 dimensions of the array must be square, got shape (3, 4)"),
    (lambda: tc.linalg.cholesky(-spd(6)), np.linalg.LinAlgError,
     "Matrix is not positive definite"),
    (lambda: tc.linalg.cholesky(np.eye(3, dtype=int)), np.linalg.LinAlgError,
     "cholesky: needs a floating-point matrix, got int64"),
    (lambda: tc.linalg.solve(np.zeros((BIG, BIG)), np.ones(BIG)).compute(),
     np.linalg.LinAlgError,
     "Singular matrix"),
    (lambda: tc.linalg.solve(np.eye(BIG), np.ones(BIG + 1)), ValueError,
     f"solve: a is ({BIG}, {BIG}) but b is ({BIG + 1},)"),
    (lambda: tc.linalg.qr(np.ones(3)), np.linalg.LinAlgError,
     "qr: needs a matrix, got shape (3,)"),
    (lambda: tc.linalg.lstsq(np.ones((5, 2)), np.ones(4)), ValueError,
     "lstsq: a is (5, 2) but b is (4,): the rows differ"),
    (lambda: tc.linalg.lstsq(np.ones((6, 2)), np.ones(6)), np.linalg.LinAlgError,
     "lstsq: the matrix has rank 1 < 2"),
])
def test_bad_input_gets_numpy_like_errors(call, error, text):
    with pytest.raises(error) as err:
        call()
    assert text in str(err.value)
    assert isinstance(err.value, tc.TensorcError)


def test_solve_runs_lu_by_several_blocks_and_needs_no_fallback(monkeypatch):
    from tensorc.lazy import linalg as module

    ran = []
    original = module._block_program

    def spy(name, dtype=None, **inputs):
        out = original(name, dtype=dtype, **inputs)
        ran.append((name, tc.last_stats()["block_counts"]))
        return out

    def no_qr(*args, **kwargs):
        raise AssertionError("the QR fallback ran for a well-conditioned system")

    monkeypatch.setattr(module, "_block_program", spy)
    monkeypatch.setattr(module, "qr", no_qr)
    n = 1100
    a = RNG.random((n, n)) + n * np.eye(n)
    b = RNG.random(n)
    x = tc.linalg.solve(a, b)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), rtol=1e-9)
    assert [name for name, _ in ran] == ["lu_solve"]
    assert ran[0][1]["NB"] > 1  # cut into blocks, not one task

    f32 = tc.linalg.solve(a.astype(np.float32), b.astype(np.float32))
    assert f32.dtype == np.float32 and [name for name, _ in ran] == ["lu_solve"]  # lazy
    assert f32.compute().value().dtype == np.float32
    assert [name for name, _ in ran] == ["lu_solve", "lu_solve"]


def test_complex_and_empty_inputs_match_numpy():
    c = RNG.random((40, 40)) + 1j * RNG.random((40, 40))
    hermitian = c @ c.conj().T + 40 * np.eye(40)
    np.testing.assert_allclose(np.asarray(tc.linalg.cholesky(hermitian)),
                               np.linalg.cholesky(hermitian), rtol=1e-10)
    big = RNG.random((BIG, BIG)) + 1j * RNG.random((BIG, BIG)) + BIG * np.eye(BIG)
    rhs = RNG.random(BIG)
    np.testing.assert_allclose(np.asarray(tc.linalg.solve(big, rhs)),
                               np.linalg.solve(big, rhs), rtol=1e-9)
    assert np.asarray(tc.linalg.solve(np.eye(BIG), np.ones((BIG, 0)))).shape == (BIG, 0)
    assert float(tc.linalg.vector_norm(np.array([0.0, 2.0, -3.0, 0.0]), ord=0)) == 2.0
    with pytest.raises(np.linalg.LinAlgError, match="lstsq: complex matrices"):
        tc.linalg.lstsq(c, np.ones(40))


def test_solve_falls_back_to_qr_when_lu_without_pivoting_loses_the_answer(monkeypatch):
    """A tiny (but invertible) leading block makes LU without pivoting grow by 1e12: the
    backward error the program forms is far over the tolerance, so TSQR solves instead."""
    from tensorc.lazy import linalg as module

    fell_back = []
    original = module.qr

    def spy(*args, **kwargs):
        fell_back.append(True)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "qr", spy)
    n = 1100
    a = RNG.random((n, n)) + np.eye(n)
    a[: n // 2, : n // 2] *= 1e-12
    b = RNG.random(n)
    x = np.asarray(tc.linalg.solve(a, b))
    assert fell_back == [True]
    residual = np.abs(b - a @ x).max() / (np.abs(a).sum(axis=1).max() * np.abs(x).max())
    assert residual < 1e-13


def test_a_matrix_singular_to_working_precision_raises_numpy_s_error_on_the_qr_path():
    """A zero row makes LU without pivoting meet a zero pivot; the QR fallback's ``R`` then
    has roundoff, not an exact zero, on its diagonal: that is still "Singular matrix", as
    numpy says, not a solution of size 1e15."""
    n = 1100
    a = RNG.standard_normal((n, n))
    a[10] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        tc.linalg.solve(a, RNG.standard_normal(n)).compute()
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        np.linalg.solve(a, np.ones(n))
