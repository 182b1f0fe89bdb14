"""BLAS routines called with the GIL released, so block tasks on threads run side by side.

Contract: :func:`trsm(alpha, a, b, side, lower, trans_a, diag) <trsm>` returns
``alpha op(a)^-1 b`` (``side=0``) or ``alpha b op(a)^-1`` (``side=1``) for a triangular ``a``
(``lower``; ``op`` as ``trans_a`` says: 0 none, 1 the transpose, 2 the conjugate transpose; a
unit diagonal assumed when ``diag``), and :func:`trmm` with the same arguments returns the
products ``alpha op(a) b`` and ``alpha b op(a)``, each
as a Fortran-ordered array, for float32, float64, complex64 and complex128 operands
(other float widths go to SciPy's wrapper, which casts them, as before): the same result and
arguments as SciPy's ``scipy.linalg.blas.?trsm`` and ``?trmm``. ``b`` is copied, never
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
"""

from __future__ import annotations

import ctypes

import numpy as np
import scipy.linalg.blas

_CODES = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
          np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}
_ROUTINES: dict[str, object] = {}


def _exported(name: str):
    """SciPy's Cython export of BLAS routine ``name`` as a ctypes function taking every
    argument by address (Fortran's convention), or ``None`` when it cannot be read."""
    if name in _ROUTINES:
        return _ROUTINES[name]
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
            found = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 11)(address)
    except (ImportError, AttributeError, KeyError, ValueError):  # pragma: no cover
        found = None
    _ROUTINES[name] = found
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
    scale = np.array(alpha, dtype=kind)

    flag = ctypes.c_char_p

    def count(value: int):
        return ctypes.byref(ctypes.c_int(value))

    if rows and cols:
        routine(flag(b"R" if side else b"L"), flag(b"L" if lower else b"U"),
                flag(b"NTC"[trans_a:trans_a + 1]), flag(b"U" if diag else b"N"),
                count(rows), count(cols), scale.ctypes.data_as(ctypes.c_void_p),
                a.ctypes.data_as(ctypes.c_void_p), count(max(1, edge)),
                out.ctypes.data_as(ctypes.c_void_p), count(max(1, rows)))
    return out
