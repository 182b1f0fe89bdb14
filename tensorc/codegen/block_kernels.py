"""Block kernels: what one task of a block program computes, and the shapes it produces.

Contract: :func:`evaluate_block_expr(expr, blocks)` computes a block expression
(:mod:`tensorc.ir.block_program`) given the value of every block it reads (``blocks`` maps
each :class:`~tensorc.ir.block_program.BlockRef` to an ndarray) and returns a tuple with one
ndarray per result (C-ordered, or Fortran-ordered where the kernel made it so:
a tall block's ``Q``). :func:`result_shapes(expr, shapes)` gives the result shapes from the
read shapes without touching data, and raises :class:`~tensorc.errors.ShapeError` for
blocks that do not fit (the planner and the schedulers use it for byte counts).

The table is closed: every kernel is a fixed numpy / scipy (LAPACK, BLAS) call, never user
code. Triangular solves use BLAS ``trsm`` (:func:`triangular_solve`, each operand read in
its own memory order; called with the GIL released, :mod:`tensorc.codegen.blas_calls`, so
tasks on threads solve side by side), Cholesky ``potrf``, QR ``geqrf`` (a tall real block:
Cholesky QR twice, checked, :func:`_cholesky_qr2`); LU without pivoting takes
LAPACK's ``getrf`` factors when partial pivoting swapped no row (then they are the same
factors) and factors by recursive halves otherwise. A transposed operand is passed as a
view, so ``T(lsolve(L, T(B)))`` (B L^-T) and ``X @ T(Y)`` copy nothing before BLAS; an update
``C - X @ Y`` (or ``+``) is one BLAS call on a copy of ``C``
(:func:`~tensorc.codegen.blas_calls.product_update`).
Numerical failures raise :class:`~tensorc.errors.LinAlgError` with numpy's wording
("Matrix is not positive definite", "Singular matrix"). :func:`cholesky_factor` (the ``chol``
kernel, and ``tc.linalg.cholesky``'s one LAPACK call on a small matrix) and
:func:`runs_one_thread` (which kernels keep one BLAS thread) are used outside this module.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg
import scipy.linalg.lapack
from threadpoolctl import threadpool_limits

from tensorc.codegen.blas_calls import product_update, trmm, trsm
from tensorc.errors import LinAlgError, ShapeError
from tensorc.ir.block_program import BlockExpr, BlockRef, Kernel, Read, Scalar


def _matrix(name: str, x: np.ndarray) -> np.ndarray:
    if x.ndim != 2:
        raise ShapeError(f"kernel '{name}' needs a matrix block, got shape {x.shape}")
    return x


def _square(name: str, x: np.ndarray) -> np.ndarray:
    if x.ndim != 2 or x.shape[0] != x.shape[1]:
        raise LinAlgError(f"kernel '{name}': last 2 dimensions of the array must be square "
                          f"(got a block of shape {x.shape})")
    return x


def cholesky_factor(x, upper: bool = False):
    """The lower Cholesky factor ``L`` of a block, reading its lower triangle only; with
    ``upper``, numpy's ``upper=True``: ``U = L^T``, reading the upper triangle only. A
    C-ordered result with zeros in the other triangle. A real block goes to LAPACK's
    ``potrf`` directly, on ``x^T`` (Fortran-ordered for a C-ordered block, so copied once as
    it lies): its upper factor is ``L^T`` from ``x``'s lower triangle, its lower factor ``U^T``
    from ``x``'s upper one, and either transposed is C-ordered. About twice as fast as
    ``np.linalg.cholesky`` here (one thread, alternated: 0.7-0.8 against 1.3-1.4 ms at 384²,
    10.7-11.1 against 20.6-21.3 ms at 1024²)."""
    x = _square("chol", x)
    if x.dtype.char in "fd" and x.size:  # LAPACK's real types
        potrf = scipy.linalg.lapack.get_lapack_funcs("potrf", (x,))
        factor, info = potrf(x.T, lower=int(upper), clean=1)
        if info > 0:
            raise LinAlgError("Matrix is not positive definite")
        if info == 0:
            return factor.T
    try:
        return np.linalg.cholesky(x, upper=upper)
    except np.linalg.LinAlgError:
        raise LinAlgError("Matrix is not positive definite") from None


def _trsolve(lower: bool):
    name = "lsolve" if lower else "usolve"

    def solve(t, b):
        t = _square(name, t)
        if b.shape[0] != t.shape[0]:
            raise ShapeError(f"kernel '{name}': a {t.shape[0]} x {t.shape[1]} triangle cannot "
                             f"solve {b.shape[0]} rows")
        if not np.all(np.diagonal(t)):
            raise LinAlgError("Singular matrix")
        return triangular_solve(t, b, lower)

    return solve


def triangular_solve(t: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """``t^-1 b`` for a triangle ``t`` with a non-zero diagonal, by BLAS ``trsm``, reading
    both in their own memory order: ``b`` is copied once, as it is laid out (the result),
    and never transposed; a C-ordered ``b`` is solved as ``X^T t^T = b^T`` (``b^T`` is
    Fortran-ordered); a Fortran-ordered ``t`` is passed as it is, any other as its
    transpose with BLAS told to transpose it back (free for a C-ordered ``t``; a strided
    one is copied)."""
    if b.ndim == 1:
        return triangular_solve(t, b[:, None], lower)[:, 0]
    if t.dtype.kind not in "fc" or b.dtype.kind not in "fc":
        kind = np.result_type(t.dtype, b.dtype, np.float64)
        t, b = t.astype(kind, copy=False), b.astype(kind, copy=False)
    if t.flags.f_contiguous:
        a, flipped = t, False
    else:
        a, flipped = t.T, True  # t^T, Fortran-ordered: its triangle is the other one
    low = int(lower != flipped)
    if b.flags.c_contiguous and not b.flags.f_contiguous:  # X^T op(a) = b^T, op(a) = t^T
        return trsm(1.0, a, b.T, side=1, lower=low, trans_a=int(not flipped)).T
    return trsm(1.0, a, b, side=0, lower=low, trans_a=int(flipped))  # op(a) X = b


LU_LEAF = 32


def _lu_in_place(x: np.ndarray) -> None:
    """Overwrite ``x`` with its LU factors without pivoting (unit L below the diagonal, U on
    and above it): recursive halves, so almost all the work is two triangular solves and one
    matrix product (BLAS-3); a zero pivot raises."""
    n = x.shape[0]
    if n <= LU_LEAF:
        for k in range(n):
            if x[k, k] == 0:
                raise LinAlgError("Singular matrix (a zero pivot in LU without pivoting)")
            x[k + 1:, k] /= x[k, k]
            x[k + 1:, k + 1:] -= np.outer(x[k + 1:, k], x[k, k + 1:])
        return
    h = n // 2
    top, right, left, rest = x[:h, :h], x[:h, h:], x[h:, :h], x[h:, h:]
    _lu_in_place(top)
    right[...] = trsm(1.0, top, right, side=0, lower=1, diag=1)  # L11^-1 A12
    left[...] = trsm(1.0, top, left, side=1, lower=0)  # A21 U11^-1
    rest -= left @ right
    _lu_in_place(rest)


def _lu(x):
    kind = np.result_type(x.dtype, np.float32) if x.dtype.kind in "fc" else np.float64
    x = _square("lu", x).astype(kind, copy=False)  # LAPACK's types: float16 in float32
    getrf = scipy.linalg.lapack.get_lapack_funcs("getrf", (x,))
    factors, pivots, info = getrf(x)
    if info >= 0 and np.array_equal(pivots, np.arange(len(pivots))):
        x = factors  # partial pivoting swapped no row: this is the LU without pivoting
        if info > 0:
            raise LinAlgError("Singular matrix (a zero pivot in LU without pivoting)")
    else:  # it would pivot (this try costs a getrf more): factor without it, by halves
        x = np.array(x, order="C", copy=True)
        with threadpool_limits(1, "blas"):  # many small BLAS calls: waking BLAS threads
            _lu_in_place(x)  # for each costs ten times the call (1024²: 0.59 s vs 0.055 s)
    lower = np.tril(x, -1)
    lower[np.diag_indices(x.shape[0])] = 1
    return lower, np.triu(x)


TALL = 4
"""A real block at least this many times taller than wide is factored by Cholesky QR, twice."""


def _qr(x):
    """The reduced QR factorisation of a block: by :func:`_cholesky_qr2` for a tall real one
    whose condition allows it, else LAPACK's Householder (``geqrf``, ``orgqr``)."""
    x = _matrix("qr", x)
    if _tall_real(x):
        found = _cholesky_qr2(x)
        if found is not None:
            return found
    return tuple(np.linalg.qr(x))


def _qr_r(x):
    """``R`` of the reduced QR factorisation of a block, the same way as :func:`_qr` without
    forming ``Q``'s last product (LAPACK's ``geqrf`` alone otherwise)."""
    x = _matrix("qr_r", x)
    if _tall_real(x):
        found = _cholesky_qr2(x, with_q=False)
        if found is not None:
            return found[1]
    return np.linalg.qr(x, mode="r")


def _tall_real(x: np.ndarray) -> bool:
    """Whether Cholesky QR may factor ``x``: LAPACK's real types, at least :data:`TALL`
    times taller than wide."""
    m, n = x.shape
    return x.dtype.char in "fd" and n > 0 and m >= TALL * n


def _cholesky_qr2(x: np.ndarray, with_q: bool = True
                  ) -> tuple[np.ndarray | None, np.ndarray] | None:
    """``Q, R`` of a tall block by Cholesky QR twice (``Q`` is ``None`` unless ``with_q``:
    the second pass needs ``Q1``, not ``Q``): ``R1 = chol(X^T X)``, ``Q1 = X R1^-1``,
    then the same on ``Q1`` (``R = R2 R1``): matrix products and triangular solves (BLAS-3)
    instead of Householder's column-by-column sweeps, 2-4x faster on tall blocks. ``Q1 R1 =
    X`` to working precision whatever the condition; the second pass makes ``Q`` orthogonal
    to working precision when ``Q1`` is already near it, which is checked: ``None`` (use
    Householder) when ``n max|Q1^T Q1 - I| > 1/2`` (``Q1``'s condition above about 1.7:
    ``X``'s about ``u^-1/2 / 2``) or a Cholesky factor does not exist.

    The second pass multiplies by ``R2^-1`` rather than solving: the check bounds ``R2``'s
    condition by about 1.7, so its inverse is as accurate as the solve. The first pass
    solves, because ``R1`` carries ``X``'s condition. Both work on one Fortran-ordered copy
    of ``X``, written in place (``trsm``, then ``trmm``), which becomes ``Q``: one block of
    memory instead of three, and BLAS's right-hand solve on a block as it lies instead of
    the left-hand solve of ``X^T``, which runs a 40-wide triangle slowly. One thread,
    alternated in one process against solving ``X^T`` and multiplying by the inverse into a
    new block (medians of 55): 8192 x 40 3.0 against 4.3 ms, 32768 x 40 11.4 against 13.8
    ms; where freed memory is kept, as in a node worker, 2.4 against 3.3 ms and 8.3 against
    12.3 ms."""
    first = _gram_factor(x.T @ x)
    if first is None:
        return None
    q = _fortran_copy(x)
    q = trsm(1.0, first, q, side=1, lower=0, overwrite_b=True)  # Q1 = X R1^-1
    gram = q.T @ q
    n = gram.shape[0]
    if not n * np.abs(gram - np.eye(n, dtype=gram.dtype)).max() <= 0.5:
        return None
    second = _gram_factor(gram)
    if second is None:
        return None
    if not with_q:
        return None, second @ first
    inverse = triangular_solve(second, np.eye(n, dtype=second.dtype), lower=False)
    q = trmm(1.0, inverse, q, side=1, lower=0, overwrite_b=True)  # Q = Q1 R2^-1
    return q, second @ first


FORTRAN_COPY_ROWS = 2048
"""Rows copied at a time into a Fortran-ordered copy of a C-ordered block: a slab's rows and
columns stay in the cache (a 32768 x 40 block, one thread: 3.5-4.3 ms in one pass, 1.0 ms
in slabs)."""


def _fortran_copy(x: np.ndarray) -> np.ndarray:
    """A Fortran-ordered copy of a 2-D block, copied in slabs of rows."""
    out = np.empty(x.shape, dtype=x.dtype, order="F")
    for start in range(0, x.shape[0], FORTRAN_COPY_ROWS):
        out[start:start + FORTRAN_COPY_ROWS] = x[start:start + FORTRAN_COPY_ROWS]
    return out


def _gram_factor(gram: np.ndarray) -> np.ndarray | None:
    """The upper Cholesky factor of a Gram matrix, or ``None`` when it has none."""
    try:
        upper = np.linalg.cholesky(gram).T
    except np.linalg.LinAlgError:
        return None
    return upper if np.all(np.isfinite(upper)) else None


def _inv(x):
    try:
        return np.linalg.inv(_square("inv", x))
    except np.linalg.LinAlgError:
        raise LinAlgError("Singular matrix") from None


def _stack(x, y):
    if x.shape[1:] != y.shape[1:]:
        raise ShapeError(f"kernel 'stack': blocks of shapes {x.shape} and {y.shape} do not "
                         "stack (their columns differ)")
    return np.concatenate([x, y], axis=0)


def _unstack(z, x):
    return z[: x.shape[0]], z[x.shape[0]:]


def _matmul(x, y):
    if x.shape[-1] != y.shape[0]:
        raise ShapeError(f"kernel 'matmul': shapes {x.shape} and {y.shape} are not aligned")
    return x @ y


def _eye(x):
    return np.eye(*_matrix("eye", x).shape, dtype=x.dtype)


_ONE = {
    "neg": np.negative,
    "T": lambda x: _matrix("T", x).T,
    "chol": cholesky_factor,
    "qr_r": _qr_r,
    "inv": _inv,
    "zeros": np.zeros_like,
    "eye": _eye,
    "tril": np.tril,
    "triu": np.triu,
    "rowsum_abs": lambda x: np.abs(_matrix("rowsum_abs", x)).sum(axis=1),
    "rowmax_abs": lambda x: np.abs(_matrix("rowmax_abs", x)).max(axis=1, initial=0.0),
}
_TWO = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "matmul": _matmul,
    "lsolve": _trsolve(True),
    "usolve": _trsolve(False),
    "stack": _stack,
    "maximum": np.maximum,
}
_MULTI = {
    "qr": _qr,
    "lu": _lu,
    "unstack": _unstack,
}


_UPDATES = {"sub": -1, "add": 1}
"""``C - X @ Y`` and ``C + X @ Y``: the product's sign, computed by
:func:`~tensorc.codegen.blas_calls.product_update` (a Cholesky, LU or solve's trailing
update, one BLAS call on a copy of ``C``) where the blocks allow."""


def _is_product(expr: BlockExpr) -> bool:
    return isinstance(expr, Kernel) and expr.name == "matmul"


def _value(expr: BlockExpr, blocks: dict[BlockRef, np.ndarray]):
    if isinstance(expr, Read):
        return blocks[expr.ref]
    if isinstance(expr, Scalar):
        return expr.value
    name = expr.name
    if name in _UPDATES and _is_product(expr.args[1]):  # C -/+ X @ Y: one BLAS call
        c = _value(expr.args[0], blocks)
        x, y = (_value(a, blocks) for a in expr.args[1].args)
        if isinstance(c, np.ndarray) and isinstance(x, np.ndarray) and isinstance(
                y, np.ndarray):
            found = product_update(c, x, y, _UPDATES[name])
            if found is not None:
                return found
        return _TWO[name](c, _matmul(x, y))
    args = [_value(a, blocks) for a in expr.args]
    if name in _ONE:
        return _ONE[name](*args)
    if name in _TWO:
        return _TWO[name](*args)
    return _MULTI[name](*args)


def evaluate_block_expr(expr: BlockExpr,
                        blocks: dict[BlockRef, np.ndarray]) -> tuple[np.ndarray, ...]:
    """The results of one task: a tuple of contiguous blocks (one per result), each
    C-ordered or, when the kernel made it so in memory of its own (a tall block's ``Q``,
    which its Cholesky QR writes in place as BLAS lays it out), Fortran-ordered: a reader's
    BLAS call takes either as it lies, where turning an 8192 x 40 ``Q`` to C order costs
    0.3-0.6 ms of the 2.5 its factorisation takes."""
    value = _value(expr, blocks)
    results = value if isinstance(expr, Kernel) and expr.name in _MULTI else (value,)
    return tuple(r if type(r) is np.ndarray and r.ndim == 2 and r.flags.f_contiguous
                 and r.flags.owndata else np.ascontiguousarray(r) for r in results)


def _shape_of(expr: BlockExpr, shapes: dict[BlockRef, tuple[int, ...]]):
    if isinstance(expr, Read):
        return shapes[expr.ref]
    if isinstance(expr, Scalar):
        return ()
    args = [_shape_of(a, shapes) for a in expr.args]
    name = expr.name
    if name in ("add", "sub", "mul", "div", "maximum"):
        if all(a == args[0] for a in args[1:]):  # the common case, without numpy's call
            return tuple(args[0])
        try:
            return tuple(np.broadcast_shapes(*args))
        except ValueError:
            raise ShapeError(f"kernel '{name}': blocks of shapes {args[0]} and {args[1]} do "
                             "not match") from None
    if name == "matmul" or name in ("lsolve", "usolve"):
        left, right = args
        if name == "matmul" and left[-1] != right[0]:
            raise ShapeError(f"kernel 'matmul': shapes {left} and {right} are not aligned")
        if name != "matmul" and left[0] != right[0]:
            raise ShapeError(f"kernel '{name}': a {left[0]} x {left[-1]} triangle cannot "
                             f"solve {right[0]} rows")
        return (left[0], right[-1]) if name == "matmul" else right
    if name == "T":
        return args[0][::-1]
    if name == "qr_r":
        m, n = args[0]
        return (min(m, n), n)
    if name == "qr":
        m, n = args[0]
        k = min(m, n)
        return ((m, k), (k, n))
    if name == "lu":
        return (args[0], args[0])
    if name == "stack":
        return (args[0][0] + args[1][0], *args[0][1:])
    if name == "unstack":
        z, x = args
        return ((x[0], *z[1:]), (z[0] - x[0], *z[1:]))
    if name in ("rowsum_abs", "rowmax_abs"):
        return (args[0][0],)
    return args[0]  # neg, chol, inv, zeros, eye, tril, triu keep the shape


def result_shapes(expr: BlockExpr, shapes: dict[BlockRef, tuple[int, ...]]):
    """The shape of each result of ``expr`` (a tuple of shapes, one per result)."""
    shape = _shape_of(expr, shapes)
    if isinstance(expr, Kernel) and expr.name in _MULTI:
        return tuple(shape)
    return (shape,)


def _flops_of(expr: BlockExpr, shapes, kernels=None) -> float:
    """Flops of ``expr``'s kernels (only those named in ``kernels``, when given)."""
    if not isinstance(expr, Kernel):
        return 0.0
    inner = sum(_flops_of(a, shapes, kernels) for a in expr.args)
    if kernels is not None and expr.name not in kernels:
        return inner
    return inner + _own_flops(expr, shapes)


def _own_flops(expr: Kernel, shapes) -> float:
    """Flops of ``expr``'s own kernel, its arguments already computed."""
    args = [_shape_of(a, shapes) for a in expr.args]
    name = expr.name
    if name == "matmul":
        (m, k), n = args[0], args[1][-1]
        return 2.0 * m * k * n
    if name in ("lsolve", "usolve"):
        return float(args[0][0]) ** 2 * (args[1][-1] if len(args[1]) > 1 else 1)
    if name == "chol":
        return args[0][0] ** 3 / 3.0
    if name in ("qr", "qr_r"):
        m, n = args[0]
        return 2.0 * m * n * n * (2 if name == "qr" else 1)
    if name in ("lu", "inv"):
        return args[0][0] ** 3 * (2 / 3 if name == "lu" else 2.0)
    read_whole = name in ("unstack", "rowsum_abs", "rowmax_abs")  # work over the argument
    return float(math.prod(args[0] if read_whole else _shape_of(expr, shapes)))


def result_flops(expr: BlockExpr, shapes: dict[BlockRef, tuple[int, ...]]) -> float:
    """Floating-point operations of one task (the cost model's compute estimate)."""
    return _flops_of(expr, shapes)


ONE_THREAD_KERNELS = ("lu",)
"""Kernels that run on one BLAS thread even when their step runs alone on a node
(:mod:`tensorc.runtime.ray.step_threads`): LU without pivoting by recursive halves makes
many small BLAS calls, each of which waits for every thread (a 1024² block that pivots:
0.047-0.058 s on one thread, 0.098-0.164 s on two)."""


def runs_one_thread(expr: BlockExpr) -> bool:
    """Whether ``expr`` runs one of :data:`ONE_THREAD_KERNELS`."""
    if not isinstance(expr, Kernel):
        return False
    return expr.name in ONE_THREAD_KERNELS or any(runs_one_thread(a) for a in expr.args)


FACTORISATIONS = ("chol", "lu", "inv")
"""Kernels priced as LAPACK factorisations of a square block: slower per flop than BLAS-3
products on blocks of a size a block program uses (on one core here, a 384² Cholesky runs at
0.17 of the matrix product's rate and a 4096² one at 0.47; LU at 0.2 and 0.6, the inverse
at 0.4 and 0.6)."""


def factorisation_flops(expr: BlockExpr, shapes: dict[BlockRef, tuple[int, ...]]) -> float:
    """The part of :func:`result_flops` that :data:`FACTORISATIONS` do."""
    return _flops_of(expr, shapes, FACTORISATIONS)
