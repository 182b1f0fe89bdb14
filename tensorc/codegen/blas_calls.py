"""BLAS routines called with the GIL released, so block tasks on threads run side by side.

Contract: :func:`trsm(alpha, a, b, side, lower, trans_a, diag) <trsm>` returns
``alpha op(a)^-1 b`` (``side=0``) or ``alpha b op(a)^-1`` (``side=1``) for a triangular ``a``
(``lower``; ``op`` as ``trans_a`` says: 0 none, 1 the transpose, 2 the conjugate transpose; a
unit diagonal assumed when ``diag``), and :func:`trmm` with the same arguments returns the
products ``alpha op(a) b`` and ``alpha b op(a)``, each
as a Fortran-ordered array, for float32, float64, complex64 and complex128 operands
(other float widths go to SciPy's wrapper, which casts them, as before): the same result and
arguments as SciPy's ``scipy.linalg.blas.?trsm`` and ``?trmm``.
:func:`product_update(c, x, y, sign) <product_update>` returns ``c + sign * (x @ y)`` as a
new C-ordered array by one ``?gemm`` (or ``?syrk`` for ``x @ x.T``) on a copy of ``c``, or
``None`` where numpy's own product and sum are as fast (small or one-column blocks) or the
operands do not suit BLAS: a block program's trailing update without the product's own
block and the pass that subtracts it. ``b`` is copied, never
written, unless ``overwrite_b`` is given and ``b`` is already a writeable, aligned,
Fortran-ordered array of the result's type that BLAS is called on directly: then the result
is written over ``b`` and ``b`` returned (a tall block's QR solves and multiplies its one
working copy so, :mod:`tensorc.codegen.block_kernels`). Either way the result is what is
returned: a caller asking to overwrite reads the return value, not ``b``.

Why: SciPy's BLAS wrappers hold the GIL for the whole call (measured here: two 1024² ``dtrsm``
on two threads took 1.84x one, two ``np.matmul`` 1.27x), so the triangular solves of a
block program's tasks ran one at a time on the local thread pool and in a threaded node
call. This calls the very same BLAS routine, which SciPy exports to Cython as a function
pointer (``scipy.linalg.cython_blas``), through :mod:`ctypes`, which releases the GIL for
the call (two at once: 1.30x one). Where that export cannot be read, it falls back to the
SciPy wrapper. Shapes are checked before the pointer is called: BLAS would read past a
wrong one.

A solve whose triangle has more than :data:`TRSM_LEAF` rows is solved in halves
(:func:`_solve_halves`, as recursive LAPACK codes do): half its flops become one ``?gemm``
per level, which runs at about twice ``?trsm``'s rate per flop here. One thread, medians of
15 (``dtrsm`` alone against in halves): 1024² 25.3 against 18.9 ms, 384² 2.46 against 1.46
ms, 2048² 136 against 110 ms; a 40-column triangle is solved as it was.
"""

from __future__ import annotations

import ctypes

import numpy as np
import scipy.linalg.blas

_CODES = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
          np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}
_ROUTINES: dict[tuple[str, int], object] = {}


def _exported(name: str, arguments: int = 11):
    """SciPy's Cython export of BLAS routine ``name`` as a ctypes function taking its
    ``arguments`` by address (Fortran's convention), or ``None`` when it cannot be read."""
    if (name, arguments) in _ROUTINES:
        return _ROUTINES[name, arguments]
    found = None
    try:
        from scipy.linalg import cython_blas

        capsule = cython_blas.__pyx_capi__[name]
        get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
            ("PyCapsule_GetName", ctypes.pythonapi))
        get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", ctypes.pythonapi))
        address = get_pointer(capsule, get_name(capsule))
        if address:
            found = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * arguments)(address)
    except (ImportError, AttributeError, KeyError, ValueError):  # pragma: no cover
        found = None
    _ROUTINES[name, arguments] = found
    return found


def trsm(alpha, a: np.ndarray, b: np.ndarray, side: int = 0, lower: int = 0,
         trans_a: int = 0, diag: int = 0, overwrite_b: bool = False) -> np.ndarray:
    """The triangular solve of the module docstring."""
    return _triangular("trsm", alpha, a, b, side, lower, trans_a, diag, overwrite_b)


def trmm(alpha, a: np.ndarray, b: np.ndarray, side: int = 0, lower: int = 0,
         trans_a: int = 0, diag: int = 0, overwrite_b: bool = False) -> np.ndarray:
    """The triangular product of the module docstring."""
    return _triangular("trmm", alpha, a, b, side, lower, trans_a, diag, overwrite_b)


def _triangular(name: str, alpha, a: np.ndarray, b: np.ndarray, side: int, lower: int,
                trans_a: int, diag: int, overwrite_b: bool) -> np.ndarray:
    """BLAS ``?trsm`` or ``?trmm`` (``name``): both take the same arguments."""
    kind = np.result_type(a.dtype, b.dtype)
    if kind.kind not in "fc" or a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"{name} takes 2-D float or complex arrays, not {a.dtype}{a.shape} "
                         f"and {b.dtype}{b.shape}")
    if trans_a not in (0, 1, 2):
        raise ValueError(f"{name}: trans_a is 0, 1 or 2, not {trans_a!r}")
    rows, cols = b.shape
    edge = cols if side else rows
    if a.shape != (edge, edge):
        raise ValueError(f"{name}: a {a.shape[0]} x {a.shape[1]} triangle cannot "
                         f"{'solve' if name == 'trsm' else 'multiply'} a {rows} x {cols} "
                         f"{'right-hand side' if name == 'trsm' else 'block'} on the "
                         f"{'right' if side else 'left'}")
    if max(rows, cols) >= 2**31:
        raise ValueError(f"{name}: {rows} x {cols} is beyond BLAS's 32-bit sizes")
    routine = _exported(_CODES[kind] + name) if kind in _CODES else None
    if routine is None:  # float16, long double (SciPy casts them), or no Cython export
        wrapped = scipy.linalg.blas.get_blas_funcs(name, (a, b))
        return wrapped(alpha, a, b, side=side, lower=lower, trans_a=trans_a, diag=diag)
    a = np.require(a, kind, ("F", "A"))
    in_place = (overwrite_b and b.dtype == kind and b.flags.f_contiguous
                and b.flags.writeable and b.flags.aligned)
    out = b if in_place else np.array(b, dtype=kind, order="F", copy=True)
    if not rows or not cols:
        return out
    if name == "trsm" and edge > TRSM_LEAF and alpha != 0:  # alpha 0 reads no triangle
        gemm = _exported(_CODES[kind] + "gemm", 13)
        if gemm is not None:
            lower_now = bool(lower) != bool(trans_a)  # op(a)'s triangle
            _solve_halves(routine, gemm, side, lower, lower_now, trans_a, diag, a, out,
                          np.array(alpha, dtype=kind))
            return out
    _call(routine, side, lower, trans_a, diag, a, out, np.array(alpha, dtype=kind))
    return out


TRSM_LEAF = 64
"""A triangular solve whose triangle has more rows than this is solved in halves
(:func:`_solve_halves`)."""


def _ld(x: np.ndarray) -> int:
    """The leading dimension of a Fortran-ordered array or column-major view."""
    return max(1, x.strides[1] // x.itemsize if x.shape[1] > 1 else x.shape[0])


def _count(value: int):
    return ctypes.byref(ctypes.c_int(value))


def _pointer(x: np.ndarray):
    return ctypes.c_void_p(x.ctypes.data)


def _call(routine, side: int, lower: int, trans_a: int, diag: int, a: np.ndarray,
          out: np.ndarray, scale: np.ndarray) -> None:
    """``routine`` (``?trsm`` or ``?trmm``) on column-major ``a`` and ``out``, in place."""
    rows, cols = out.shape
    flag = ctypes.c_char_p
    routine(flag(b"R" if side else b"L"), flag(b"L" if lower else b"U"),
            flag(b"NTC"[trans_a:trans_a + 1]), flag(b"U" if diag else b"N"),
            _count(rows), _count(cols), _pointer(scale), _pointer(a), _count(_ld(a)),
            _pointer(out), _count(_ld(out)))


def _solve_halves(trsm, gemm, side: int, lower: int, lower_now: bool, trans_a: int,
                  diag: int, a: np.ndarray, out: np.ndarray, scale: np.ndarray) -> None:
    """``out := scale op(a)^-1 out`` (``side=0``) or ``scale out op(a)^-1``, in place, by
    halves of the triangle: solve one half, take its part out of the other half's
    right-hand side with one matrix product, solve the other half (recursively, down to
    :data:`TRSM_LEAF` rows). Half the work becomes a GEMM, which BLAS runs at about twice
    a ``trsm``'s rate per flop on blocks of a few hundred rows here (OpenBLAS: a 1024²
    ``dtrsm`` takes as long as a 1024² ``dgemm``, with half the flops)."""
    edge = a.shape[0]
    if edge <= TRSM_LEAF:
        _call(trsm, side, lower, trans_a, diag, a, out, scale)
        return
    h = edge // 2
    # op(a)'s block off the diagonal, as a block of a and the op that gives it
    if lower_now:  # op(a)[h:, :h]
        off = a[h:, :h] if not trans_a else a[:h, h:]
    else:  # op(a)[:h, h:]
        off = a[:h, h:] if not trans_a else a[h:, :h]
    triangles = (a[:h, :h], a[h:, h:])
    # op(a) X = B: X cut in rows; X op(a) = B: X cut in columns
    parts = (out[:h, :], out[h:, :]) if side == 0 else (out[:, :h], out[:, h:])
    # which half is solved first: the one whose rows of X need nothing from the other
    early = 0 if (side == 0) == lower_now else 1
    late = 1 - early
    _solve_halves(trsm, gemm, side, lower, lower_now, trans_a, diag, triangles[early],
                  parts[early], scale)
    # the late part's right-hand side: scale * B_late - (its product with the solved part)
    one, minus = np.array(1, dtype=scale.dtype), np.array(-1, dtype=scale.dtype)
    if side == 0:  # X_late = scale B_late - op(off) X_early
        _gemm(gemm, trans_a, 0, minus, off, parts[early], scale, parts[late])
    else:  # X_late = scale B_late - X_early op(off)
        _gemm(gemm, 0, trans_a, minus, parts[early], off, scale, parts[late])
    _solve_halves(trsm, gemm, side, lower, lower_now, trans_a, diag, triangles[late],
                  parts[late], one)


def _gemm(gemm, trans_x: int, trans_y: int, alpha: np.ndarray, x: np.ndarray,
          y: np.ndarray, beta: np.ndarray, c: np.ndarray) -> None:
    """``c := alpha op(x) op(y) + beta c`` by BLAS ``?gemm`` on column-major views."""
    rows, cols = c.shape
    inner = x.shape[0] if trans_x else x.shape[1]
    flag = ctypes.c_char_p
    gemm(flag(b"NTC"[trans_x:trans_x + 1]), flag(b"NTC"[trans_y:trans_y + 1]),
         _count(rows), _count(cols), _count(inner), _pointer(alpha), _pointer(x),
         _count(_ld(x)), _pointer(y), _count(_ld(y)), _pointer(beta), _pointer(c),
         _count(_ld(c)))


UPDATE_MIN = 256
"""The shortest edge of an update made here. Smaller ones go to numpy, whose matrix-vector
product beats ``?gemm`` on one column (1024 x 1024 by 1: 0.24 against 0.53 ms) and whose
call costs less on small blocks (128²: 0.10 against 0.15 ms; 256²: 0.74 against 0.63)."""

SYRK_MIN = 768
"""The smallest ``x @ x.T`` update made here (by ``?syrk``); below it numpy's own (its
``?syrk`` into a new block, then the subtraction) is as fast or within the noise: two
threads each updating, per pair of updates, 1.59 against 1.67 ms at 384 rows, 3.19 against
3.00 at 512, 7.43 against 6.92 at 768, 16.5 against 15.0 at 1024 (``?gemm`` on the whole
block: 1.72, 3.38, 9.64, 22.3)."""

MIRROR_BLOCK = 128
"""The square pieces :func:`_other_triangle` completes a symmetric update in: each stays
in the cache while it is read across and written down."""


def product_update(c: np.ndarray, x: np.ndarray, y: np.ndarray, sign: int = -1
                   ) -> np.ndarray | None:
    """``c + sign * (x @ y)`` (``sign`` -1 or 1) as a new C-ordered array, by one BLAS call
    on a copy of ``c``: ``?gemm`` with ``beta = 1``, or ``?syrk`` when ``y`` is ``x``'s
    transpose (the same memory: a Cholesky or Gram update ``A - L L^T``), which writes the
    lower triangle, the upper one then completed from it. Where numpy forms the product in
    a block of its own and then subtracts (and, for ``x @ x.T``, copies the triangle
    element by element), this reads and writes ``c``'s copy once. ``None`` when the operands are not
    2-D blocks of one BLAS type whose shapes conform (``c`` exactly ``x @ y``'s shape), an
    edge is under :data:`UPDATE_MIN` (or ``y is x.T`` under :data:`SYRK_MIN`), or BLAS's
    export cannot be read: the caller computes it its own way. Two threads each updating,
    per pair of updates: 1024² by ``x @ y.T`` 22.7 against 24.1 ms, 512² 3.66 against
    4.11; ``x @ x.T`` 15.0 against 16.5 ms at 1024², 3.00 against 3.19 at 512²."""
    if c.ndim != 2 or x.ndim != 2 or y.ndim != 2 or not c.size:
        return None
    kind = c.dtype
    if kind not in _CODES or x.dtype != kind or y.dtype != kind or sign not in (-1, 1):
        return None
    if not (x.flags.aligned and y.flags.aligned):  # BLAS reads them as they lie
        return None
    (m, k), (k2, n) = x.shape, y.shape
    if k2 != k or c.shape != (m, n) or min(m, n, k) < UPDATE_MIN or max(m, n, k) >= 2**31:
        return None
    symmetric = (m == n and x.ctypes.data == y.ctypes.data
                 and y.strides == x.strides[::-1])
    if symmetric and m < SYRK_MIN:
        return None
    routine = _exported(_CODES[kind] + ("syrk" if symmetric else "gemm"),
                        10 if symmetric else 13)
    if routine is None:  # pragma: no cover - SciPy without its Cython export
        return None
    out = np.array(c, order="C", copy=True)
    # out is C-ordered m x n: as BLAS's column-major, out^T (n x m); out^T += sign y^T x^T
    x_t, trans_x = _column_major_transpose(x)  # x^T as BLAS reads it, or x with "T"
    alpha, beta = np.array(sign, dtype=kind), np.array(1, dtype=kind)
    flag = ctypes.c_char_p
    if symmetric:  # out^T += sign (x^T)^T (x^T) = sign x x^T: the column-major upper half
        routine(flag(b"U"), flag(b"N" if trans_x else b"T"), _count(m), _count(k),
                _pointer(alpha), _pointer(x_t), _count(_ld(x_t)), _pointer(beta),
                _pointer(out.T), _count(m))
        _other_triangle(out, c)
        return out
    y_t, trans_y = _column_major_transpose(y)
    _gemm(routine, trans_y, trans_x, alpha, y_t, x_t, beta, out.T)
    return out


def _column_major_transpose(x: np.ndarray) -> tuple[np.ndarray, int]:
    """``(a, t)`` with ``op_t(a) = x^T`` for BLAS: a C-ordered ``x`` is read as it lies
    (its memory is ``x^T`` column-major, ``t = 0``), a Fortran-ordered one as ``x`` itself
    transposed by BLAS (``t = 1``); any other is copied C-ordered first."""
    if x.flags.c_contiguous:
        return x.T, 0
    if x.flags.f_contiguous:
        return x, 1
    return np.ascontiguousarray(x).T, 0


def _other_triangle(out: np.ndarray, c: np.ndarray) -> None:
    """Complete ``out = c + D`` for a symmetric ``D`` of which ``?syrk`` wrote only the lower
    triangle of the C-ordered square ``out`` (the upper of its column-major transpose), in
    cached square pieces: the upper triangle still holds ``c``'s and gains ``D``'s upper
    half, the transpose of the lower's ``out - c``. The lower triangle, what a Cholesky
    reads, is BLAS's own sum, whatever ``c``'s upper triangle holds (NaN, say); ``c`` need
    not be symmetric."""
    n = out.shape[0]
    step = MIRROR_BLOCK
    for i in range(0, n, step):
        top = slice(i, min(i + step, n))
        corner = out[top, top]
        corner += np.triu((corner - c[top, top]).T, 1)  # its lower part gains 0
        for j in range(i + step, n, step):
            side = slice(j, min(j + step, n))
            out[top, side] += (out[side, top] - c[side, top]).T
