"""The block kernels' LAPACK and BLAS paths against scipy and numpy: triangular solves in
every memory order and dtype, and LU without pivoting both where partial pivoting would
swap no row (LAPACK's factors are taken) and where it would (the kernel's own halves)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from tensorc.codegen.block_kernels import _lu, _trsolve, evaluate_block_expr, result_shapes
from tensorc.errors import LinAlgError
from tensorc.ir.block_program import BlockRef, Kernel, Read

RNG = np.random.default_rng(11)


def orders(x: np.ndarray) -> list[np.ndarray]:
    """``x`` C-ordered, Fortran-ordered, and as a strided view."""
    wide = np.zeros((x.shape[0], 2 * x.shape[1]), dtype=x.dtype)
    wide[:, ::2] = x
    return [np.ascontiguousarray(x), np.asfortranarray(x), wide[:, ::2]]


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_triangular_solves_match_scipy_in_every_memory_order(lower, dtype):
    n = 40
    full = RNG.random((n, n)) + n * np.eye(n)
    if np.dtype(dtype).kind == "c":
        full = full + 1j * RNG.random((n, n))
    triangle = (np.tril(full) if lower else np.triu(full)).astype(dtype)
    rhs = (RNG.random((n, 7)) + (1j * RNG.random((n, 7)) if np.dtype(dtype).kind == "c"
                                 else 0)).astype(dtype)
    expected = scipy.linalg.solve_triangular(triangle.astype(np.complex128), rhs, lower=lower)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    for t in orders(triangle):
        for b in [*orders(rhs), rhs[:, :1], rhs[:, 0]]:
            before = b.copy()
            got = _trsolve(lower)(t, b)
            assert got.dtype == dtype and got.shape == b.shape
            np.testing.assert_allclose(got, expected[:, :b.shape[1]] if b.ndim == 2
                                       else expected[:, 0], rtol=tolerance, atol=tolerance)
            np.testing.assert_array_equal(b, before)  # the input block is not written


def test_a_triangular_solve_of_integers_is_in_float64_and_a_zero_diagonal_is_singular():
    got = _trsolve(True)(np.eye(3, dtype=int) * 2, np.ones((3, 2), dtype=int))
    assert got.dtype == np.float64 and np.all(got == 0.5)
    with pytest.raises(LinAlgError, match="^Singular matrix$"):
        _trsolve(False)(np.triu(np.ones((3, 3))) - np.eye(3), np.ones((3, 1)))


def check_lu(a: np.ndarray) -> None:
    lower, upper = _lu(a)
    np.testing.assert_array_equal(np.diag(lower), 1)
    np.testing.assert_array_equal(lower, np.tril(lower))
    np.testing.assert_array_equal(upper, np.triu(upper))
    np.testing.assert_allclose(lower @ upper, a, rtol=1e-12, atol=1e-12 * np.abs(a).max())


def test_lu_where_partial_pivoting_swaps_no_row_takes_lapack_s_factors():
    n = 100
    dominant = RNG.random((n, n)) + n * np.eye(n)
    assert np.array_equal(scipy.linalg.lapack.dgetrf(dominant)[1], np.arange(n))
    check_lu(dominant)


def test_lu_where_partial_pivoting_would_swap_is_still_without_pivoting():
    n = 100
    x = RNG.random((n, n))
    scale = np.diag(np.logspace(0, 2, n))  # rows growing down: getrf would swap them up
    spd = scale @ (x @ x.T + np.eye(n)) @ scale  # SPD: its LU without pivoting exists
    assert not np.array_equal(scipy.linalg.lapack.dgetrf(spd)[1], np.arange(n))
    check_lu(spd)


def test_lu_of_complex_and_half_precision_blocks_on_both_paths():
    n = 64
    scale = np.diag(np.logspace(0, 2, n))
    x = RNG.random((n, n)) + 1j * RNG.random((n, n))
    hermitian = scale @ (x @ x.conj().T + np.eye(n)) @ scale  # getrf would pivot
    dominant = x + 4 * n * np.eye(n)  # getrf would not
    for a in (hermitian, dominant):
        lower, upper = _lu(a)
        assert lower.dtype == np.complex128
        np.testing.assert_allclose(lower @ upper, a, rtol=1e-10, atol=1e-10 * np.abs(a).max())
    for a in (np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([[1.0, 2.0], [3.0, 4.0]])):
        lower, upper = _lu(a.astype(np.float16))  # without a swap, then with one
        assert lower.dtype == upper.dtype == np.float32
        np.testing.assert_allclose(lower @ upper, a, rtol=1e-6)


@pytest.mark.parametrize("a", [np.zeros((3, 3)), np.array([[0.0, 1.0], [1.0, 0.0]]),
                               np.array([[1.0, 2.0], [2.0, 4.0]])])
def test_a_zero_pivot_is_a_singular_matrix(a):
    with pytest.raises(LinAlgError, match=r"^Singular matrix \(a zero pivot in LU without "
                                          r"pivoting\)$"):
        _lu(a)


def test_the_row_reductions_and_maximum_give_numpy_s_values_and_shapes():
    """``rowsum_abs`` and ``rowmax_abs`` make one value a row (a vector), ``maximum`` keeps
    the shape: what ``lu_solve.tc``'s backward error is formed from."""
    x, y = BlockRef("X", ()), BlockRef("Y", ())
    a = RNG.standard_normal((5, 3))
    v, w = RNG.standard_normal(5), RNG.standard_normal(5)
    cases = [(Kernel("rowsum_abs", (Read(x),)), {x: a}, np.abs(a).sum(axis=1)),
             (Kernel("rowmax_abs", (Read(x),)), {x: a}, np.abs(a).max(axis=1)),
             (Kernel("rowmax_abs", (Read(x),)), {x: np.zeros((2, 0))}, np.zeros(2)),
             (Kernel("maximum", (Read(x), Read(y))), {x: v, y: w}, np.maximum(v, w))]
    for expr, blocks, expected in cases:
        (found,) = evaluate_block_expr(expr, blocks)
        np.testing.assert_array_equal(found, expected)
        assert result_shapes(expr, {ref: b.shape for ref, b in blocks.items()}) == (
            expected.shape,)


@pytest.mark.parametrize("condition", [1.0, 1e4, 1e12])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_qr_of_a_tall_block_is_orthogonal_and_exact_on_both_paths(condition, dtype):
    """A tall real block is factored by Cholesky QR twice when its first pass leaves ``Q1``
    near orthogonal, by Householder otherwise; either way ``Q`` is orthogonal and ``Q R``
    is the block to a few units of roundoff, and ``R`` is upper triangular."""
    from tensorc.codegen.block_kernels import _cholesky_qr2, _qr

    m, n = 4096, 24
    u, _ = np.linalg.qr(RNG.standard_normal((m, n)))
    v, _ = np.linalg.qr(RNG.standard_normal((n, n)))
    x = (u @ np.diag(np.logspace(0, -np.log10(condition), n)) @ v).astype(dtype)
    eps = np.finfo(dtype).eps
    reach = condition * np.sqrt(eps)  # about 1 where the second pass stops sufficing
    if reach < 1e-3 or reach > 10:  # clearly on one side
        assert (_cholesky_qr2(x) is not None) == (reach < 1e-3)
    before = x.copy()
    q, r = _qr(x)
    np.testing.assert_array_equal(x, before)  # the block is read, never written
    assert q.dtype == r.dtype == dtype and q.shape == (m, n) and r.shape == (n, n)
    assert np.abs(q.T @ q - np.eye(n)).max() < 20 * eps
    assert np.abs(q @ r - x).max() < 100 * eps * np.abs(x).max()
    np.testing.assert_array_equal(r, np.triu(r))


@pytest.mark.parametrize("condition", [1.0, 1e12])
def test_qr_r_of_a_tall_block_is_cholesky_qr_s_r_or_householder_s(condition):
    """``qr_r`` gives the ``R`` that ``qr`` gives, without its ``Q``: Cholesky QR's (a positive
    diagonal) when its check passes, LAPACK's Householder otherwise; either is numpy's up
    to the signs of its rows."""
    from tensorc.codegen.block_kernels import _cholesky_qr2, _qr

    m, n = 4096, 24
    u, _ = np.linalg.qr(RNG.standard_normal((m, n)))
    v, _ = np.linalg.qr(RNG.standard_normal((n, n)))
    x = u @ np.diag(np.logspace(0, -np.log10(condition), n)) @ v
    block = BlockRef("X", ())
    (r,) = evaluate_block_expr(Kernel("qr_r", (Read(block),)), {block: x})
    np.testing.assert_array_equal(r, _qr(x)[1])
    assert (_cholesky_qr2(x, with_q=False) is not None) == (condition == 1.0)
    want = np.linalg.qr(x, mode="r")
    signs = np.sign(np.diagonal(r)) * np.sign(np.diagonal(want))
    np.testing.assert_allclose(signs[:, None] * r, want, rtol=1e-9, atol=1e-12)


def test_a_one_task_cholesky_is_priced_at_lapack_s_rate_not_the_product_s():
    """The count choice prices the factorisation part of a task (``chol``, ``lu``) at ``edge /
    (edge + FACTOR_HALF_EDGE)`` of the core's rate: a 4096² Cholesky as one task takes at
    least its flops at that rate, so it no longer ties with the blocked plan (a noisy
    calibration chose it on 4 Ray nodes: 2.1 s against 1.15 s)."""
    from tensorc.codegen.block_kernels import factorisation_flops, result_flops
    from tensorc.driver.block_programs import shipped
    from tensorc.planning.block_counts import FACTOR_HALF_EDGE, choose_counts
    from tensorc.planning.cost import machine

    a, low, x = BlockRef("A", ()), BlockRef("L", ()), BlockRef("X", ())
    shapes = {a: (64, 64), low: (64, 64), x: (64, 64)}
    chol = Kernel("chol", (Read(a),))
    update = Kernel("sub", (Read(x), Kernel("matmul", (Read(low), Kernel("T", (Read(low),))))))
    assert factorisation_flops(chol, shapes) == result_flops(chol, shapes) == 64**3 / 3
    assert factorisation_flops(update, shapes) == 0.0 < result_flops(update, shapes)
    lu = Kernel("lu", (Read(a),))
    assert factorisation_flops(lu, shapes) == result_flops(lu, shapes) == 2 * 64**3 / 3
    n = 4096
    choice = choose_counts(shipped("cholesky").program, {"A": (n, n)}, nodes=4, cores=1,
                           fixed={"NB": 1})
    rate = machine().blas_flops_per_core * n / (n + FACTOR_HALF_EDGE)
    separate = machine().hosts(4) is None  # two placements on separate machines
    assert [c.policy for c in choice.candidates] == (["lshs", "owner"] if separate
                                                     else ["lshs"])
    assert all(one.makespan >= n**3 / 3 / rate for one in choice.candidates)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_chol_reads_the_lower_triangle_and_gives_numpys_factor(dtype):
    """A block's ``chol`` is numpy's lower factor to roundoff (LAPACK's ``potrf`` called
    directly for a real block, numpy's for a complex one), C-ordered with a zero upper
    triangle, whatever the block's upper triangle holds; a block that is not positive
    definite raises numpy's message."""
    from tensorc.codegen.block_kernels import cholesky_factor

    n = 96
    r = RNG.standard_normal((n, n)) + (1j * RNG.standard_normal((n, n))
                                       if np.dtype(dtype).kind == "c" else 0)
    a = (r @ r.conj().T + n * np.eye(n)).astype(dtype)
    expected = np.linalg.cholesky(a)
    garbage = a.copy()
    garbage[np.triu_indices(n, 1)] = 7.0
    for block in (a, garbage, np.asfortranarray(garbage)):
        found = cholesky_factor(block)
        assert found.dtype == dtype and found.flags.c_contiguous
        np.testing.assert_array_equal(np.triu(found, 1), 0)
        eps = np.finfo(dtype).eps
        assert np.abs(found - expected).max() < 50 * eps * np.abs(expected).max()
    with pytest.raises(LinAlgError, match="^Matrix is not positive definite$"):
        cholesky_factor(-np.eye(3, dtype=dtype))
    assert cholesky_factor(np.eye(0, dtype=dtype)).shape == (0, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_the_upper_factor_reads_the_upper_triangle_as_numpy_does(dtype):
    """``cholesky_factor(x, upper=True)`` is numpy's ``cholesky(x, upper=True)``: ``U``
    from the upper triangle (garbage below it is never read), C-ordered, zero below its
    diagonal; not positive definite raises numpy's message."""
    from tensorc.codegen.block_kernels import cholesky_factor

    n = 80
    r = RNG.standard_normal((n, n)) + (1j * RNG.standard_normal((n, n))
                                       if np.dtype(dtype).kind == "c" else 0)
    a = (r @ r.conj().T + n * np.eye(n)).astype(dtype)
    garbage = a.copy()
    garbage[np.tril_indices(n, -1)] = 7.0
    expected = np.linalg.cholesky(garbage, upper=True)
    eps = np.finfo(dtype).eps
    for block in (garbage, np.asfortranarray(garbage)):
        found = cholesky_factor(block, upper=True)
        assert found.dtype == dtype and found.flags.c_contiguous
        np.testing.assert_array_equal(np.tril(found, -1), 0)
        assert np.abs(found - expected).max() < 50 * eps * np.abs(expected).max()
    with pytest.raises(LinAlgError, match="^Matrix is not positive definite$"):
        cholesky_factor(-np.eye(3, dtype=dtype), upper=True)


def test_lu_runs_on_one_blas_thread_and_the_others_may_not():
    """Which kernels keep one BLAS thread when their step is alone on a node: LU (many
    small BLAS calls), wherever it sits in an expression; a Cholesky or a product does not."""
    from tensorc.codegen.block_kernels import runs_one_thread
    from tensorc.ir.block_program import BlockRef, Kernel, Read

    a = Read(BlockRef("A", ()))
    assert runs_one_thread(Kernel("lu", (a,)))
    assert runs_one_thread(Kernel("neg", (Kernel("lu", (a,)),)))
    assert not runs_one_thread(Kernel("chol", (a,)))
    assert not runs_one_thread(Kernel("sub", (a, Kernel("matmul", (a, a)))))
    assert not runs_one_thread(a)


def test_an_update_task_is_one_blas_call_with_numpys_value(monkeypatch):
    """``A - L @ T(L)`` and ``B - L @ X`` (a Cholesky's and a solve's trailing update)
    run as one BLAS call on a copy of the updated block, with numpy's value; a small one
    runs as numpy's product and subtraction."""
    from tensorc.codegen import block_kernels

    made = []
    original = block_kernels.product_update
    monkeypatch.setattr(block_kernels, "product_update",
                        lambda *a: made.append(original(*a) is not None) or original(*a))
    a, l_, x = BlockRef("A", ()), BlockRef("L", ()), BlockRef("X", ())
    for n in (1024, 64):
        blocks = {a: RNG.random((n, n)), l_: RNG.random((n, n)), x: RNG.random((n, n))}
        cholesky = Kernel("sub", (Read(a), Kernel("matmul", (Read(l_), Kernel("T", (Read(l_),))))))
        solve = Kernel("add", (Read(a), Kernel("matmul", (Read(l_), Read(x)))))
        (got,) = evaluate_block_expr(cholesky, blocks)
        np.testing.assert_allclose(got, blocks[a] - blocks[l_] @ blocks[l_].T, rtol=1e-12)
        (got,) = evaluate_block_expr(solve, blocks)
        np.testing.assert_allclose(got, blocks[a] + blocks[l_] @ blocks[x], rtol=1e-12)
    assert made == [True, True, False, False]


def test_a_tall_blocks_q_stays_fortran_ordered_and_a_transposed_input_is_copied():
    """A task's result is C-ordered unless its kernel made it Fortran-ordered in memory of
    its own (Cholesky QR's ``Q``): turning it costs a pass over the block. A view of an
    input (``T(A)``) is copied, as every result that is not contiguous."""
    a = BlockRef("A", ())
    blocks = {a: RNG.random((4096, 24))}
    q, r = evaluate_block_expr(Kernel("qr", (Read(a),)), blocks)
    assert q.flags.f_contiguous and r.flags.c_contiguous
    np.testing.assert_allclose(q @ r, blocks[a], atol=1e-12)
    (t,) = evaluate_block_expr(Kernel("T", (Read(a),)), blocks)
    assert t.flags.c_contiguous and t.flags.owndata
    np.testing.assert_array_equal(t, blocks[a].T)
