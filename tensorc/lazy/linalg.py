"""``tc.linalg``: the standard's linear-algebra extension on lazy arrays.

Contractions (``matmul``, ``tensordot``, ``vecdot``, ``outer``, ``vector_norm``) join the
lazy program like any other operation. The factorisations run the block programs tensorc
ships (:mod:`tensorc.programs`, the same files as ``examples/*.tc``), locally or on Ray with
every task placed by the scheduler; ``cholesky``, ``qr`` and ``lstsq`` evaluate their
operands first and return evaluated arrays, ``solve`` and ``inv`` return lazy arrays whose
evaluation runs them (a ``deferred`` node, :mod:`tensorc.lazy.graph`):

- ``cholesky`` — ``cholesky.tc`` (right-looking blocked Cholesky) above :data:`WHOLE_BYTES`;
- ``qr`` — ``tsqr_q.tc`` (TSQR with the tree's Q) for ``m >= n`` and ``mode="reduced"``, above
  :data:`WHOLE_BYTES`; with numpy's ``mode="r"``, ``R`` alone by ``tsqr.tc`` (no ``Q``);
  smaller ones are one LAPACK call, evaluated at once all the same;
- ``solve`` and ``inv`` of matrices wider than :data:`WHOLE_EDGE` — ``lu_solve.tc`` (blocked
  LU without pivoting, then forward and back substitution, one DAG); the backward error
  ``max|b - A x| / (max row sum |A| max|x| + max|b|)`` is formed by the same program, row
  block by row block where ``x`` is made (only one value a row comes back), and when it
  exceeds :data:`BACKWARD_EPSILONS` times the dtype's eps times ``n`` (LU without pivoting
  met a small pivot) the system is solved again by TSQR (``A = Q R``, ``x = R^-1 Q^T b``),
  which needs no pivoting to be stable; an ``R`` with a diagonal entry within ``n`` units
  of roundoff of zero (relative to its largest) raises numpy's "Singular matrix";
- ``lstsq`` — for ``A`` at least ``n + k`` rows tall with ``k <= n`` right-hand sides, the ``R``
  factor of ``[A | B]`` by TSQR without ``Q`` (``tsqr.tc``): its first ``n`` rows are ``R``
  and ``Q^T B``, so ``x = R^-1 Q^T B``, and its last ``k`` rows hold what of ``B`` no
  column of ``A`` reaches, whose squares are the residuals; ``Q`` is never formed, and on
  Ray ``A`` and ``B`` are read where their blocks are
  (:meth:`~tensorc.runtime.executor.Executor.join_columns`; in this process, and for the
  driver's data, they are copied side by side first). Otherwise TSQR of ``A`` (or of
  ``A^T`` for the minimum-norm solution when ``m < n``) and a triangular solve. The singular
  values are those of the small ``R`` factor.

On Ray, an operand of ``cholesky``, ``qr`` (and so ``lstsq``'s), ``solve`` or ``inv`` that
is an array not made yet from the driver's data (``tc.asarray`` of a numpy array, not
waited for; together at most :data:`~tensorc.lazy.not_made.DRIVER_STORE_SHARE` of the
driver's node's share of the object store) goes into the block program as that data, which
still runs on the cluster: it cuts the data by its own blocking and sends each block it
reads from the driver's node, where its placer knows it is, once for the array's life,
rather than the array being spread over the nodes in the default layout and read back (the
layout its reader wants; the array itself stays not made).

Complex matrices, stacks of matrices, wide or ``mode="complete"`` QR and empty operands run
as one task on the whole operand (numpy's routines); ``lstsq`` takes real matrices only.

``cross``, ``eigh``, ``eigvalsh``, ``matrix_norm``, ``matrix_power``, ``matrix_rank``,
``pinv``, ``slogdet``, ``svd`` and ``svdvals`` are lazy and run as one task on the whole
operand (numpy's routines).

Up to :data:`WHOLE_EDGE` rows, ``solve``, ``inv`` and ``det`` run as one task on
the whole matrix (a Newton step's Hessian; batched matrices too). Numerical failures raise
:class:`~tensorc.errors.LinAlgError` (numpy's ``LinAlgError`` too) with numpy's words.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np
import scipy.linalg

from tensorc import session
from tensorc.codegen.block_kernels import cholesky_factor
from tensorc.driver.block_programs import shipped
from tensorc.errors import AxisError, LinAlgError, ShapeError
from tensorc.lazy import statistical
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.graph import ArrayNode, NodeKind, broadcast_shapes, deferred, leaf, mapped
from tensorc.lazy.linear import contract, matmul, matrix_transpose, tensordot, vecdot
from tensorc.lazy.manipulation import concat, reshape
from tensorc.lazy.not_made import driver_data
from tensorc.placement.recipes import DriverData

__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "lstsq",
           "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer",
           "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
           "vector_norm"]

WHOLE_EDGE = 512
WHOLE_BYTES = 8 * 1024 * 1024
"""A ``cholesky`` or ``qr`` operand at most this large runs as one LAPACK call (the block
program's DAG costs more than it saves below it: a 300 x 300 Cholesky takes 1.0 ms in
LAPACK and 2.9 ms as blocks, a 50 x 20 QR 0.1 ms against about 2 ms)."""
BACKWARD_EPSILONS = 64  # times the dtype's eps and n: the backward error LU must reach


def _block_program(name: str, dtype=None, **inputs) -> dict[str, Array]:
    """Run the shipped block program ``name``; outputs as evaluated arrays (in ``dtype``)."""
    values = {k: wrap(expr_of(v)).value() for k, v in inputs.items()}
    return shipped(name, lambda value: wrap(leaf(value))).run(dtype=dtype, **values)


def _read_as_data(*nodes: ArrayNode, also: int = 0) -> list[ArrayNode]:
    """``nodes``, each array not made yet from the driver's own data that fits
    (:func:`~tensorc.lazy.not_made.driver_data`, beside ``also`` bytes the program sends
    from the driver besides) replaced by a leaf of that data: the block program reading it
    on Ray cuts it by its own blocking and sends each block it reads from the driver's
    node, instead of reading back blocks spread over the nodes in the default layout."""
    return [node if data is None else leaf(data)
            for node, data in zip(nodes, driver_data(*nodes, also=also), strict=True)]


def _floating(a: ArrayNode, name: str) -> None:
    if a.dtype.kind not in "fc":
        raise LinAlgError(f"{name}: needs a floating-point matrix, got {a.dtype}")


def _matrix(a: ArrayNode, name: str) -> None:
    if a.ndim != 2:
        raise LinAlgError(f"{name}: needs a 2-d matrix, got shape {a.shape} (stacks of "
                          "matrices are not supported by the block programs)")
    _floating(a, name)


def _nbytes(a: ArrayNode) -> int:
    return int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize


def _lapack_now(routine, a: ArrayNode, **options) -> tuple[Array, ...]:
    """``routine`` (numpy's, or a kernel that gives numpy's result) on the value of ``a``,
    now, in this process: for operands of at most :data:`WHOLE_BYTES` (a distributed value
    is gathered, which costs less than a block program's DAG at that size). Results are
    kept where the session keeps values; numpy's ``LinAlgError`` is raised as tensorc's,
    with numpy's words."""
    value = np.asarray(wrap(a).value())
    try:
        found = routine(value, **options)
    except np.linalg.LinAlgError as err:
        raise LinAlgError(str(err)) from err
    found = found if isinstance(found, tuple) else (found,)
    return tuple(_kept(part, a.dtype) for part in found)


def _kept(value: np.ndarray, dtype) -> Array:
    """A result computed here, in ``dtype``, as an evaluated array kept where the session
    keeps values."""
    return wrap(leaf(session.current().executor.place(np.asarray(value, dtype=dtype))))


def _whole(op: tuple, a: ArrayNode, shape, dtype=None) -> Array:
    return wrap(ArrayNode(NodeKind.WHOLE, op, (a,), None, tuple(shape), dtype or a.dtype))


def cholesky(x, /, *, upper: bool = False) -> Array:
    """The lower (or, with ``upper=True``, upper) Cholesky factor of a symmetric positive
    definite matrix; one triangle is read: the lower, or with ``upper=True`` the upper for a
    matrix of at most :data:`WHOLE_BYTES` (numpy's choice) and the lower for the block
    program (the two agree on a symmetric matrix). A stack of matrices, or an empty one,
    runs as one task."""
    a = expr_of(x)
    _square(a, "cholesky")
    if a.ndim > 2 or a.shape[-1] == 0 or a.dtype.kind == "c":
        return _whole(("cholesky", bool(upper)), a, a.shape)
    (a,) = _read_as_data(a)
    if _nbytes(a) <= WHOLE_BYTES:  # one LAPACK call, evaluated now as the blocked path is
        # numpy's factor by LAPACK's potrf called directly (codegen.block_kernels): 1.2
        # against 3.6 ms at n = 512, 5.9 against 16.3 ms at 1024 on this machine's 2 cores
        (factor,) = _lapack_now(cholesky_factor, a, upper=bool(upper))
        return factor
    factor = _block_program("cholesky", dtype=a.dtype, A=wrap(a))["L"]
    return matrix_transpose(factor) if upper else factor


class QRResult(tuple):
    """``(Q, R)``, also as ``.Q`` and ``.R``."""

    Q = property(lambda self: self[0])
    R = property(lambda self: self[1])


def qr(x, /, *, mode: str = "reduced") -> QRResult | Array:
    """``Q, R`` with ``x = Q @ R``, or ``R`` alone with ``mode="r"`` (numpy's mode): TSQR for
    a matrix with at least as many rows as columns (without ``Q`` for ``"r"``); a wide
    matrix, ``mode="complete"`` or a stack runs as one task."""
    a = expr_of(x)
    if a.ndim < 2:
        raise LinAlgError(f"qr: needs a matrix, got shape {a.shape}")
    _floating(a, "qr")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    *batch, m, n = a.shape
    whole = a.ndim > 2 or m < n or 0 in a.shape or a.dtype.kind == "c"
    if mode == "r":
        return _r_factor(a, whole)
    if whole or mode == "complete":
        k = m if mode == "complete" else min(m, n)
        return QRResult((_whole(("qr", mode, 0), a, (*batch, m, k)),
                         _whole(("qr", mode, 1), a, (*batch, k, n))))
    (a,) = _read_as_data(a)
    if _nbytes(a) <= WHOLE_BYTES:  # one LAPACK call, evaluated now as TSQR's result is
        return QRResult(_lapack_now(np.linalg.qr, a))
    out = _block_program("tsqr_q", dtype=a.dtype, A=wrap(a))
    return QRResult((out["Q"], out["R"]))


def _r_factor(a: ArrayNode, whole: bool) -> Array:
    """``qr(a, mode="r")``: one task on the whole operand (``whole``), one LAPACK call up to
    :data:`WHOLE_BYTES`, else TSQR without ``Q`` (``tsqr.tc``)."""
    *batch, m, n = a.shape
    if whole:
        return _whole(("qr_r",), a, (*batch, min(m, n), n))
    (a,) = _read_as_data(a)
    if _nbytes(a) <= WHOLE_BYTES:
        return _lapack_now(np.linalg.qr, a, mode="r")[0]
    return _block_program("tsqr", dtype=a.dtype, A=wrap(a))["R"]


def _as_matrix(b: ArrayNode) -> tuple[Array, bool]:
    if b.ndim == 1:
        return wrap(b)[:, None], True
    return wrap(b), False


def _triangular(name: str, t: Array, b: Array) -> Array:
    key = "L" if name == "lower_solve" else "U"
    return _block_program(name, dtype=b.dtype, **{key: t, "B": b})["X"]


def _solve_blocks(a: ArrayNode, b: ArrayNode) -> Array:
    rhs, vector = _as_matrix(b)
    x = _lu_solution(a, rhs)
    if x is None:  # LU without pivoting failed: QR needs no pivoting
        q, r = qr(wrap(a))
        _check_regular(r)
        x = _triangular("upper_solve", r, matmul(matrix_transpose(q), rhs))
    return x[:, 0] if vector else x


def _check_regular(r: Array) -> None:
    """Raise numpy's "Singular matrix" when the triangle ``R`` of ``A = Q R`` has a diagonal
    entry within ``n`` units of roundoff of zero, relative to its largest: ``A`` is singular
    to working precision (a zero row, say, leaves roundoff on the diagonal rather than an
    exact zero, and the solve would return numbers of 1e15)."""
    size = np.abs(np.asarray(diagonal(r)))
    if size.size and not size.min() > size.max() * size.size * np.finfo(size.dtype).eps:
        raise LinAlgError("Singular matrix")


def _lu_solution(a: ArrayNode, rhs: Array) -> Array | None:
    """``lu_solve.tc``'s solution if its backward error passes, else ``None``."""
    dtype = np.result_type(a.dtype, rhs.dtype)
    try:
        found = _block_program("lu_solve", dtype=dtype, A=wrap(a), B=rhs)
    except LinAlgError:  # a zero pivot
        return None
    tolerance = BACKWARD_EPSILONS * np.finfo(dtype).eps * a.shape[0]
    return found["X"] if _backward_error(found) <= tolerance else None


def _backward_error(found: dict[str, Array]) -> float:
    """``max|B - A X| / (max row sum |A| * max|X| + max|B|)`` from the per-row parts
    ``lu_solve.tc`` returns beside ``X`` (``S``, ``RM``, ``XM``, ``BM``: vectors of one value
    a row, so gathering them moves a few bytes a row)."""
    top, rows, size, scale = (float(np.max(np.asarray(found[name])))
                              for name in ("RM", "S", "XM", "BM"))
    if not np.isfinite(top):
        return float("inf")
    denominator = rows * size + scale
    return top / denominator if denominator else top


def lstsq(a, b, /, rcond=None):
    """``(x, residuals, rank, s)`` like numpy's, by TSQR of ``[a | b]`` (module docstring), of
    ``a``, or of ``a.T`` for the minimum-norm solution when it is wide. The rank is counted
    with numpy's default cut-off (``rcond`` is accepted and not used); a rank-deficient
    matrix raises, because QR without pivoting cannot choose which columns to drop. Real
    matrices only."""
    del rcond
    m_expr, b_expr = expr_of(a), expr_of(b)
    _matrix(m_expr, "lstsq")
    if m_expr.dtype.kind == "c" or b_expr.dtype.kind == "c":
        raise LinAlgError("lstsq: complex matrices are not supported by the block programs")
    m, n = m_expr.shape
    if b_expr.shape[0] != m:
        raise ShapeError(f"lstsq: a is {m_expr.shape} but b is {b_expr.shape}: the rows differ")
    k = 1 if b_expr.ndim == 1 else b_expr.shape[1]
    if 0 < k <= n and m >= n + k:
        return _lstsq_augmented(m_expr, b_expr, vector=b_expr.ndim == 1)
    rhs, vector = _as_matrix(b_expr)
    tall = m >= n
    q, r = qr(wrap(m_expr) if tall else matrix_transpose(wrap(m_expr)))
    s, rank = _rank(np.asarray(r), m, n)
    if tall:
        x = _triangular("upper_solve", r, matmul(matrix_transpose(q), rhs))
        if m > n:
            residual = rhs - matmul(wrap(m_expr), x)
            residuals = statistical.sum(residual * residual, axis=0)
        else:
            residuals = wrap(leaf(np.empty((0,), dtype=m_expr.dtype)))
    else:
        x = matmul(q, _triangular("lower_solve", matrix_transpose(r), rhs))
        residuals = wrap(leaf(np.empty((0,), dtype=m_expr.dtype)))
    if vector:
        x = x[:, 0]
        residuals = residuals if residuals.shape == (0,) else residuals[0:1]
    return x, residuals, rank, s


def _rank(r: np.ndarray, m: int, n: int) -> tuple[np.ndarray, int]:
    """The singular values of the ``R`` factor (``a``'s) and the rank they give with numpy's
    default cut-off; a rank below ``min(m, n)`` raises."""
    s = np.linalg.svd(r, compute_uv=False)
    tol = s.max(initial=0.0) * max(m, n) * np.finfo(s.dtype).eps
    rank = int((s > tol).sum())
    if rank < min(m, n):
        raise LinAlgError(f"lstsq: the matrix has rank {rank} < {min(m, n)}; QR without "
                          "pivoting solves full-rank problems only")
    return s, rank


def _lstsq_augmented(a: ArrayNode, b: ArrayNode, vector: bool):
    """``lstsq`` of a matrix at least ``n + k`` rows tall with at most ``n`` right-hand
    sides, from the ``R`` factor of ``[a | b]`` alone (module docstring)."""
    m, n = a.shape
    kind = np.result_type(a.dtype, b.dtype)
    augmented = _augmented_r(a, b, kind)
    r, z, p = augmented[:n, :n], augmented[:n, n:], augmented[n:, n:]
    s, rank = _rank(r, m, n)
    x = scipy.linalg.solve_triangular(r, z)
    residuals = (p * p).sum(axis=0)  # m > n here: numpy gives them
    return _kept(x[:, 0] if vector else x, kind), _kept(residuals, kind), rank, s


def _augmented_r(a: ArrayNode, b: ArrayNode, kind: np.dtype) -> np.ndarray:
    """``R`` of the reduced QR of ``[a | b]`` as a driver array: TSQR without ``Q``
    (``tsqr.tc``) on the two side by side, joined where they are when the executor can
    (:meth:`~tensorc.runtime.executor.Executor.join_columns`: on Ray, each row block read
    from the blocks of ``a`` and ``b`` on their nodes), else concatenated; one LAPACK call
    up to :data:`WHOLE_BYTES`; in ``kind``."""
    a, b = _read_as_data(a, b)
    values = [wrap(a).value(), wrap(b).value()]
    if _nbytes(a) + _nbytes(b) <= WHOLE_BYTES:  # gathered: less than a DAG costs
        values = [np.asarray(v) for v in values]
    if all(isinstance(v, np.ndarray) for v in values):  # this process's, or the driver's
        joined = np.concatenate([values[0], values[1].reshape(len(values[1]), -1)], axis=1)
        if joined.nbytes <= WHOLE_BYTES:
            return np.linalg.qr(joined, mode="r")
        if any(isinstance(v, DriverData) for v in values):  # still run on the cluster
            grid = getattr(values[0], "grid", None)
            joined = DriverData.view_of(joined, None if grid is None else (grid[0], 1))
    else:
        joined = session.current().executor.join_columns(values)
        if joined is None:  # other row blocks or dtypes: concatenated on the nodes
            columns = wrap(b) if b.ndim == 2 else reshape(wrap(b), (b.shape[0], 1))
            joined = concat([wrap(a), columns], axis=1).value()
    program = shipped("tsqr", lambda value: wrap(leaf(value)))
    return np.asarray(program.run(dtype=kind, A=joined)["R"])


def _square(a: ArrayNode, name: str) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise LinAlgError(f"{name}: last 2 dimensions of the array must be square, got shape "
                          f"{a.shape}")
    _floating(a, name)


def solve(x1, x2, /) -> Array:
    """``x`` with ``x1 @ x = x2``: one task on the whole system up to ``WHOLE_EDGE`` rows,
    the block programs beyond (module docstring)."""
    a, b = expr_of(x1), expr_of(x2)
    _square(a, "solve")
    if b.ndim == 1:
        if b.shape[0] != a.shape[-1]:
            raise ShapeError(f"solve: a is {a.shape} but b is {b.shape}")
        shape = (*a.shape[:-2], a.shape[-1])
    else:
        if b.shape[-2] != a.shape[-1]:
            raise ShapeError(f"solve: a is {a.shape} but b is {b.shape}")
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        shape = (*batch, *b.shape[-2:])
    dtype = np.result_type(a.dtype, b.dtype)
    if (a.ndim == 2 and b.ndim <= 2 and a.shape[0] > WHOLE_EDGE and 0 not in b.shape
            and dtype.kind == "f"):
        return wrap(deferred(_solved, tuple(_read_as_data(a, b)), shape, dtype,
                             "linalg.solve (block programs)"))
    return wrap(ArrayNode(NodeKind.WHOLE, ("solve",), (a, b), None, shape, dtype))


def _solved(a, b):
    """The value of ``solve(a, b)`` by the block programs (a ``deferred`` node's callable:
    ``a`` and ``b`` are evaluated values)."""
    return _solve_blocks(leaf(a), leaf(b)).value()


def _inverted(a):
    """The value of ``inv(a)`` by the block programs (a ``deferred`` node's callable)."""
    return _solved(a, np.eye(a.shape[0], dtype=a.dtype))


def inv(x, /) -> Array:
    """The inverse of a square matrix: one task up to ``WHOLE_EDGE`` rows, else
    ``solve(x, eye)`` by the block programs."""
    a = expr_of(x)
    _square(a, "inv")
    if a.ndim == 2 and a.shape[0] > WHOLE_EDGE and a.dtype.kind == "f":
        return wrap(deferred(_inverted, tuple(_read_as_data(a, also=_nbytes(a))), a.shape,
                             a.dtype, "linalg.inv (block programs)"))  # also: its eye
    return wrap(ArrayNode(NodeKind.WHOLE, ("inv",), (a,), None, a.shape, a.dtype))


def det(x, /) -> Array:
    a = expr_of(x)
    _square(a, "det")
    return wrap(ArrayNode(NodeKind.WHOLE, ("det",), (a,), None, a.shape[:-2], a.dtype))


def diagonal(x, /, *, offset=0) -> Array:
    a = expr_of(x)
    shape = np.diagonal(np.empty(a.shape, np.bool_), offset, axis1=-2, axis2=-1).shape
    return wrap(ArrayNode(NodeKind.WHOLE, ("diagonal", int(offset)), (a,), None, shape, a.dtype))


def trace(x, /, *, offset=0, dtype=None) -> Array:
    a = expr_of(x)
    out = np.dtype(dtype) if dtype is not None else np.trace(np.ones((1, 1), a.dtype)).dtype
    op = ("trace", int(offset), None if dtype is None else out.str)
    return wrap(ArrayNode(NodeKind.WHOLE, op, (a,), None, a.shape[:-2], out))


def outer(x1, x2, /) -> Array:
    a, b = expr_of(x1), expr_of(x2)
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"outer takes 1-d arrays, got {a.shape} and {b.shape}")
    return contract([a, b], [("i",), ("j",)], ("i", "j"))


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2) -> Array:  # noqa: A002
    a = wrap(mapped("abs", expr_of(x)))
    if ord == 2:
        squares = statistical.sum(wrap(mapped("square", a._expr)), axis=axis,  # noqa: SLF001
                                  keepdims=keepdims)
        return wrap(mapped("sqrt", squares._expr))  # noqa: SLF001
    if ord == 1:
        return statistical.sum(a, axis=axis, keepdims=keepdims)
    if ord == float("inf"):
        return statistical.max(a, axis=axis, keepdims=keepdims)
    if ord == -float("inf"):
        return statistical.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:  # the standard: the number of non-zero elements
        return statistical.sum(a != 0, axis=axis, keepdims=keepdims, dtype=a.dtype)
    powered = statistical.sum(wrap(mapped("pow", a._expr, float(ord))), axis=axis,  # noqa: SLF001
                              keepdims=keepdims)
    return wrap(mapped("pow", powered._expr, 1.0 / ord))  # noqa: SLF001



# -- the rest of the standard's extension: one task on the whole operand (numpy's routines;
# a function with several results runs one task per result) -----------------------------


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


class SVDResult(NamedTuple):
    U: Array  # noqa: N815 - the standard's name
    S: Array  # noqa: N815 - the standard's name
    Vh: Array  # noqa: N815 - the standard's name


def _real(dtype: np.dtype) -> np.dtype:
    """The real type of ``dtype``'s values (a complex type's parts)."""
    return np.empty(0, dtype).real.dtype


def _stack(a: ArrayNode, name: str) -> None:
    if a.ndim < 2:
        raise LinAlgError(f"{name}: needs a matrix or a stack of matrices, got shape "
                          f"{a.shape}")
    _floating(a, name)


def cross(x1, x2, /, *, axis=-1) -> Array:
    """The cross product of the 3-element vectors along ``axis`` (the other axes
    broadcast)."""
    a, b = expr_of(x1), expr_of(x2)
    axis = operator.index(axis)
    same_rank = a.ndim == b.ndim and 0 <= axis < a.ndim
    if not (-min(a.ndim, b.ndim) <= axis < 0 or same_rank):
        raise AxisError(f"cross: axis {axis} is out of bounds for shapes {a.shape} and "
                        f"{b.shape}")
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ShapeError(f"cross: axis {axis} must have size 3 in both operands, got shapes "
                         f"{a.shape} and {b.shape}")
    shape = broadcast_shapes(a.shape, b.shape)
    dtype = np.result_type(a.dtype, b.dtype)
    return wrap(ArrayNode(NodeKind.WHOLE, ("cross", axis), (a, b), None, shape, dtype))


def eigh(x, /) -> EighResult:
    """Eigenvalues (ascending, real) and eigenvectors of symmetric (Hermitian) matrices."""
    a = expr_of(x)
    _square(a, "eigh")
    values = _whole(("eigh", 0), a, a.shape[:-1], _real(a.dtype))
    return EighResult(values, _whole(("eigh", 1), a, a.shape))


def eigvalsh(x, /) -> Array:
    a = expr_of(x)
    _square(a, "eigvalsh")
    return _whole(("eigvalsh",), a, a.shape[:-1], _real(a.dtype))


MATRIX_NORMS = (1, -1, 2, -2, float("inf"), -float("inf"), "fro", "nuc")


def matrix_norm(x, /, *, keepdims=False, ord="fro") -> Array:  # noqa: A002
    a = expr_of(x)
    _stack(a, "matrix_norm")
    if ord not in MATRIX_NORMS:
        raise ValueError(f"matrix_norm: ord must be one of {MATRIX_NORMS}, got {ord!r}")
    shape = (*a.shape[:-2], 1, 1) if keepdims else a.shape[:-2]
    op = ("matrix_norm", bool(keepdims), ord if isinstance(ord, str) else float(ord))
    return _whole(op, a, shape, _real(a.dtype))


def matrix_power(x, n, /) -> Array:
    """``x`` multiplied by itself ``n`` times (the identity for 0, powers of the inverse for
    negative ``n``)."""
    a = expr_of(x)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise LinAlgError(f"matrix_power: last 2 dimensions of the array must be square, got "
                          f"shape {a.shape}")
    n = operator.index(n)
    if n < 0:
        _floating(a, "matrix_power with a negative exponent")
    return _whole(("matrix_power", n), a, a.shape)


def _tolerance(a: ArrayNode, rtol) -> tuple[ArrayNode, ...]:
    """``a`` and, when given, the relative tolerance ``rtol`` as a second operand."""
    if rtol is None:
        return (a,)
    tolerance = expr_of(rtol) if isinstance(rtol, Array) else leaf(
        np.asarray(rtol, dtype=_real(a.dtype)))
    return (a, tolerance)


def matrix_rank(x, /, *, rtol=None) -> Array:
    """The number of singular values above ``rtol`` times the largest (default: the largest
    dimension times the dtype's eps)."""
    a = expr_of(x)
    _stack(a, "matrix_rank")
    return wrap(ArrayNode(NodeKind.WHOLE, ("matrix_rank",), _tolerance(a, rtol), None,
                          a.shape[:-2], np.dtype("int64")))


def pinv(x, /, *, rtol=None) -> Array:
    """The Moore-Penrose pseudo-inverse (singular values at most ``rtol`` times the largest
    are dropped; the default as :func:`matrix_rank`)."""
    a = expr_of(x)
    _stack(a, "pinv")
    shape = (*a.shape[:-2], a.shape[-1], a.shape[-2])
    return wrap(ArrayNode(NodeKind.WHOLE, ("pinv",), _tolerance(a, rtol), None, shape, a.dtype))


def slogdet(x, /) -> SlogdetResult:
    """The sign (a unit complex number for complex matrices) and the log of the absolute
    value of the determinant."""
    a = expr_of(x)
    _square(a, "slogdet")
    return SlogdetResult(_whole(("slogdet", 0), a, a.shape[:-2]),
                         _whole(("slogdet", 1), a, a.shape[:-2], _real(a.dtype)))


def svd(x, /, *, full_matrices=True) -> SVDResult:
    """``U, S, Vh`` with ``x = U @ diag(S) @ Vh`` (singular values descending)."""
    a = expr_of(x)
    _stack(a, "svd")
    *batch, m, n = a.shape
    k = min(m, n)
    full = bool(full_matrices)
    return SVDResult(_whole(("svd", full, 0), a, (*batch, m, m if full else k)),
                     _whole(("svd", full, 1), a, (*batch, k), _real(a.dtype)),
                     _whole(("svd", full, 2), a, (*batch, n if full else k, n)))


def svdvals(x, /) -> Array:
    a = expr_of(x)
    _stack(a, "svdvals")
    return _whole(("svdvals",), a, (*a.shape[:-2], min(a.shape[-2:])), _real(a.dtype))
