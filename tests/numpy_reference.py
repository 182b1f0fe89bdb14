"""Shared helpers of the numpy-differential tests: operands, extents, and the comparison.

``assert_matches`` is the one definition of "equals numpy": same dtype, same shape, and the
same values — exactly for bool and integer results, within a tolerance for floating and
complex ones (rtol of the least precise inexact dtype involved; atol that rtol times a bound
on the summed terms, ``scale``, so cancellation does not fail a correct answer).
"""

from __future__ import annotations

import numpy as np

RTOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


def random_array(rng, shape, dtype=np.float64):
    """Small values that keep every dtype (incl. float16) well away from overflow."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind == "u":
        return rng.integers(0, 4, size=shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-3, 4, size=shape).astype(dtype)
    values = np.asarray(rng.standard_normal(shape))
    if dtype.kind == "c":
        values = values + 1j * np.asarray(rng.standard_normal(shape))
    return values.astype(dtype)


def label_extents(subscripts, shapes):
    """{label: extent} from the input side of ``subscripts`` for operand ``shapes``
    (size-1 broadcasting aware: the largest size wins, a zero size wins over everything)."""
    terms = subscripts.replace(" ", "").split("->")[0].split(",")
    extents = {}
    for term, shape in zip(terms, shapes, strict=True):
        if "..." in term:
            head, tail = term.split("...")
            pairs = list(zip(head, shape[: len(head)], strict=True))
            pairs += list(zip(tail, shape[len(shape) - len(tail) :], strict=True))
        else:
            pairs = list(zip(term, shape, strict=True))
        for label, size in pairs:
            previous = extents.get(label)
            if previous is None:
                extents[label] = size
            elif previous == 0 or size == 0:
                extents[label] = 0
            else:
                extents[label] = max(previous, size)
    return extents


def tolerance(*dtypes):
    """rtol of the least precise floating/complex dtype among ``dtypes``.

    Input precision counts too: e.g. numpy's own optimized path reduces a complex64 operand
    in complex64 before promoting to complex128, so the result is only good to ~1e-7.
    """
    inexact = [np.dtype(d) for d in dtypes if np.dtype(d).kind in "fc"]
    return max(RTOL[np.finfo(d).dtype] for d in inexact)


def bound(values):
    """The largest entry of ``values`` (0 when empty): the ``scale`` of :func:`assert_matches`,
    given the same contraction computed over the operands' absolute values."""
    values = np.asarray(values)
    return float(values.max()) if values.size else 0.0


def assert_matches(actual, expected, scale=1.0, input_dtypes=(), err_msg=""):
    """``actual`` equals numpy's ``expected`` in dtype, shape and values (see module doc)."""
    assert isinstance(actual, (np.ndarray, np.generic)), f"got a {type(actual).__name__}"
    expected = np.asarray(expected)
    got = np.asarray(actual)
    assert got.dtype == expected.dtype, (err_msg, got.dtype, expected.dtype)
    assert got.shape == expected.shape, (err_msg, got.shape, expected.shape)
    if expected.dtype.kind in "fc":
        rtol = tolerance(expected.dtype, *input_dtypes)
        np.testing.assert_allclose(
            got, expected, rtol=rtol, atol=rtol * max(scale, 1e-30), err_msg=err_msg
        )
    else:
        np.testing.assert_array_equal(got, expected, err_msg=err_msg)


def power_iteration_case(seed: int = 7, n: int = 8, steps: int = 4):
    """Inputs of ``examples/power_iteration.tc`` and numpy's answer: ``(A, x0, x, nrm)``."""
    rng = np.random.default_rng(seed)
    a = rng.random((n, n))
    a = a + a.T
    x0 = rng.random(n)
    x, nrm = x0, None
    for _ in range(steps):
        y = a @ x
        nrm = y @ y
        x = y / np.sqrt(nrm)
    return a, x0, x, nrm
