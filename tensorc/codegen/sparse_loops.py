"""The sparse kernels' commonest shapes as compiled loops (numba).

Contract:

- :func:`scatter_products` ``(out, rows, values, factors)`` adds, for every non-zero
  ``n``, ``values[n] * f[g[n], :] * ...`` over the one or two ``(g, f)`` pairs of
  ``factors`` (a gathered dense matrix and the non-zeros' rows in it) to
  ``out[rows[n], :]`` (``out`` 2-d, any strides): an MTTKRP in any mode
  (``ijk,jf,kf->if``, ``ijk,if,kf->jf``, ...), or one gathered matrix with the other sparse
  indices summed (``ijk,kf->fj``). One pass over the non-zeros with no temporaries and no
  sort: numpy's path gathers the rows (non-zeros × width each), multiplies them and sorts
  the output positions to sum them by segment.
- :func:`csr_times_dense` ``(matrix, dense, dtype)`` returns ``matrix @ dense`` for a scipy
  CSR block and a 2-d ndarray (C order is used; another order is copied once), one loop
  over the rows, in panels of ``dense``'s rows (:data:`PANEL_BYTES`) when its rows are
  sorted, ``dense`` is larger than :data:`WHOLE_DENSE_BYTES` and the block has at least an
  entry a row per panel on average (a pass over the rows finds work). scipy's own ``csr @ dense``
  holds the GIL and runs its inner loop unvectorised: on a 20,000² CSR at 1 % times a
  20,000 × 64 matrix it took 418 ms here, the compiled loop 264 ms on one thread and 96 ms
  on two (before the panels).
- :func:`sampled_dots` ``(values, rows, cols, left, right)`` returns, for every non-zero
  ``n``, ``values[n] * (left[rows[n], :] · right[cols[n], :])``: the sampled product
  ``ij,if,jf->ij`` (SDDMM, the step of a factorisation fitted to observed entries) with no
  non-zeros × width temporaries; :func:`sampled_rows` is the same over a CSR block's own
  arrays (no coordinates made).
- :func:`merge_sorted` ``(a, b)`` merges two sorted, duplicate-free ``int64`` arrays (the
  row-major positions of two sparse operands' non-zeros) in one pass: their union and where
  each entry of ``a`` and of ``b`` sits in it. numpy has no merge: its ``unique`` hashes
  (3.8 s on 4M positions here) and a sort plus two ``searchsorted`` take several passes.
- :func:`dense_to_csr` ``(dense)`` returns the CSR arrays ``(indptr, indices, data)`` of a
  2-d ndarray's non-zeros, counted then copied in two passes: a block of a sparse result
  that was computed dense is compressed with the GIL released. scipy's ``csr_array(dense)``
  holds the GIL through ``nonzero``, a COO array and its conversion (0.54 s on a 64 ×
  100,000 block of walk counts here, in one thread whatever the pool's size).
- :func:`served` says whether a dtype is computed by them (float32 and float64).

The loops release the GIL, so the task pool's workers run them side by side. Each compiles
on first use in each process (numba, under a second; not cached on disk, so no stale
compiled code outlives a change of this file).
"""

from __future__ import annotations

import numpy as np

SERVED = (np.dtype("float32"), np.dtype("float64"))
PANEL_BYTES = 512 << 10
"""The rows of the dense operand :func:`csr_times_dense` reads in one pass (512 KiB of them,
half a core's L2 here) when it is larger than :data:`WHOLE_DENSE_BYTES`: a CSR block with
sorted rows is swept once per panel of ``dense``'s rows (each row's entries in it, resumed
where the last panel stopped), so the rows it gathers stay in the cache and the translation
buffer. 20,000² at 1 % times 20,000 × 64, in 1,250-row blocks on one thread here (best of
7): 0.36-0.47 s reading ``dense`` whole; panels of 256 KiB 0.18 s, 512 KiB 0.15 s, 1 MiB
0.17 s, 2 MiB 0.21 s."""
WHOLE_DENSE_BYTES = 8 << 20
"""A dense operand up to this size (2,048 pages of 4 KiB, what a core's second-level TLB
maps here) is read whole: its gathered rows stay mapped, and panels would only sweep the
output block once per panel. 10,000 × 64 (5 MB) times two 10,000-row blocks of a 1 % CSR:
0.08-0.09 s whole, 0.13 s in panels; 20,000 × 64 (10 MB) times a 10,000-row CSR block
at 2 %: 0.18-0.23 s whole, 0.11-0.14 s in panels."""
_COMPILED: dict = {}


def served(dtype) -> bool:
    """Whether the loops compute in ``dtype``."""
    return np.dtype(dtype) in SERVED


def _scatter_one(out, rows, values, g0, f0):
    width = out.shape[1]
    for n in range(values.shape[0]):
        o, a, v = rows[n], g0[n], values[n]
        for q in range(width):
            out[o, q] += v * f0[a, q]


def _scatter_two(out, rows, values, g0, f0, g1, f1):
    width = out.shape[1]
    for n in range(values.shape[0]):
        o, a, b, v = rows[n], g0[n], g1[n], values[n]
        for q in range(width):
            out[o, q] += v * f0[a, q] * f1[b, q]


def _rows_times(indptr, indices, data, dense, out):
    width = dense.shape[1]
    for row in range(out.shape[0]):
        for entry in range(indptr[row], indptr[row + 1]):
            column, value = indices[entry], data[entry]
            for q in range(width):
                out[row, q] += value * dense[column, q]


def _rows_times_panels(indptr, indices, data, dense, out, panel):
    width = dense.shape[1]
    cursor = indptr[:-1].copy()
    for low in range(0, dense.shape[0], panel):
        high = low + panel
        for row in range(out.shape[0]):
            entry, end = cursor[row], indptr[row + 1]
            while entry < end and indices[entry] < high:
                column, value = indices[entry], data[entry]
                for q in range(width):
                    out[row, q] += value * dense[column, q]
                entry += 1
            cursor[row] = entry


def _dots(values, rows, cols, left, right, out):
    width = left.shape[1]
    for n in range(values.shape[0]):
        a, b = rows[n], cols[n]
        total = left[a, 0] * right[b, 0] if width else left.dtype.type(0)
        for q in range(1, width):
            total += left[a, q] * right[b, q]
        out[n] = values[n] * total


def _row_dots(indptr, indices, values, left, right, out):
    width = left.shape[1]
    for row in range(indptr.shape[0] - 1):
        for entry in range(indptr[row], indptr[row + 1]):
            column = indices[entry]
            total = left[row, 0] * right[column, 0] if width else left.dtype.type(0)
            for q in range(1, width):
                total += left[row, q] * right[column, q]
            out[entry] = values[entry] * total


def sampled_rows(matrix, left: np.ndarray, right: np.ndarray, dtype) -> np.ndarray:
    """:func:`sampled_dots` over a scipy CSR block's entries, read by its row pointers
    and column indices as they are (no row index per entry, no conversion): each stored
    value times the dot product of ``left``'s row and ``right``'s row at its column, in
    ``dtype`` (the stored values may be bool, a pattern)."""
    dtype = np.dtype(dtype)
    left = np.ascontiguousarray(left, dtype=dtype)
    right = np.ascontiguousarray(right, dtype=dtype)
    out = np.empty(matrix.nnz, dtype)
    _compiled(_row_dots)(matrix.indptr, matrix.indices, matrix.data, left, right, out)
    return out


def sampled_dots(values: np.ndarray, rows: np.ndarray, cols: np.ndarray, left: np.ndarray,
                 right: np.ndarray) -> np.ndarray:
    """Each non-zero's value times the dot product of the rows it samples (module
    docstring), in ``values``' dtype."""
    dtype = values.dtype
    left = np.ascontiguousarray(left, dtype=dtype)
    right = np.ascontiguousarray(right, dtype=dtype)
    out = np.empty_like(values)
    _compiled(_dots)(values, rows, cols, left, right, out)
    return out


def _merge(a, b, union, at_a, at_b):
    i = j = k = 0
    while i < a.shape[0] and j < b.shape[0]:
        if a[i] < b[j]:
            union[k] = a[i]
            at_a[i] = k
            i += 1
        elif b[j] < a[i]:
            union[k] = b[j]
            at_b[j] = k
            j += 1
        else:
            union[k] = a[i]
            at_a[i] = k
            at_b[j] = k
            i += 1
            j += 1
        k += 1
    while i < a.shape[0]:
        union[k] = a[i]
        at_a[i] = k
        i += 1
        k += 1
    while j < b.shape[0]:
        union[k] = b[j]
        at_b[j] = k
        j += 1
        k += 1
    return k


def merge_sorted(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union of two sorted, duplicate-free ``int64`` arrays and the positions of ``a``'s
    and ``b``'s entries in it (module docstring)."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    b = np.ascontiguousarray(b, dtype=np.int64)
    union = np.empty(a.shape[0] + b.shape[0], np.int64)
    at_a, at_b = np.empty(a.shape[0], np.int64), np.empty(b.shape[0], np.int64)
    size = _compiled(_merge)(a, b, union, at_a, at_b)
    return union[:size], at_a, at_b


def _count_rows(dense, indptr):
    for row in range(dense.shape[0]):
        count = 0
        for column in range(dense.shape[1]):
            if dense[row, column] != 0:
                count += 1
        indptr[row + 1] = indptr[row] + count


def _fill_rows(dense, indptr, indices, data):
    for row in range(dense.shape[0]):
        at = indptr[row]
        for column in range(dense.shape[1]):
            value = dense[row, column]
            if value != 0:
                indices[at] = column
                data[at] = value
                at += 1


def dense_to_csr(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR arrays of ``dense`` (2-d): ``indptr``, ``indices`` (int32 where they fit,
    else int64) and ``data`` (``dense``'s dtype), its zeros dropped (module docstring)."""
    dense = np.ascontiguousarray(dense)
    rows, columns = dense.shape
    wide = max(rows, columns, dense.size) >= 2**31 - 1
    indptr = np.zeros(rows + 1, np.int64 if wide else np.int32)
    _compiled(_count_rows)(dense, indptr)
    count = int(indptr[-1])
    indices, data = np.empty(count, indptr.dtype), np.empty(count, dense.dtype)
    _compiled(_fill_rows)(dense, indptr, indices, data)
    return indptr, indices, data


def _compiled(loop):
    """``loop`` compiled (once per process), the GIL released while it runs."""
    found = _COMPILED.get(loop)
    if found is None:
        import numba

        found = _COMPILED[loop] = numba.njit(nogil=True)(loop)
    return found


def scatter_products(out: np.ndarray, rows: np.ndarray, values: np.ndarray,
                     factors: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Add each non-zero's product of gathered rows into ``out`` (module docstring)."""
    if not 1 <= len(factors) <= 2:
        raise ValueError(f"one or two gathered factors, got {len(factors)}")
    arguments = [argument for gathered, matrix in factors for argument in (gathered, matrix)]
    _compiled(_scatter_one if len(factors) == 1 else _scatter_two)(out, rows, values,
                                                                   *arguments)


def compile_loops() -> None:
    """Compile the CSR-times-dense loops for scipy's own index dtype and float64 now (a
    node's calibration calls it, so a first large call does not pay the compilation)."""
    indptr, indices = np.zeros(2, np.int32), np.zeros(1, np.int32)
    data, dense, out = np.ones(1), np.ones((1, 1)), np.zeros((1, 1))
    _compiled(_rows_times)(indptr, indices, data, dense, out)
    _compiled(_rows_times_panels)(indptr, indices, data, dense, out, 1)


def csr_times_dense(matrix, dense: np.ndarray, dtype) -> np.ndarray:
    """``matrix @ dense`` by the compiled row loop (module docstring)."""
    dtype = np.dtype(dtype)
    dense = np.ascontiguousarray(dense, dtype=dtype)
    data = matrix.data if matrix.data.dtype == dtype else matrix.data.astype(dtype)
    out = np.zeros((matrix.shape[0], dense.shape[1]), dtype)
    row_bytes = max(1, dense.shape[1] * dtype.itemsize)
    panel = max(1, PANEL_BYTES // row_bytes)
    panels = -(-dense.shape[0] // panel)
    if (dense.nbytes > WHOLE_DENSE_BYTES and matrix.has_sorted_indices
            and matrix.nnz >= matrix.shape[0] * panels):  # each pass finds entries to do
        _compiled(_rows_times_panels)(matrix.indptr, matrix.indices, data, dense, out, panel)
    else:
        _compiled(_rows_times)(matrix.indptr, matrix.indices, data, dense, out)
    return out
