"""``tc.tensordot`` against ``numpy.tensordot``: parametrized cases and a hypothesis property.

Plan option: ``grid=(grid_of_a, grid_of_b)``, a pair of tuples with a block count per dim. The
grids used here give a contracted pair of dims the same count and are capped by the dim size
(dims that do not divide evenly get an uneven last block); results must not change.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy_reference import assert_matches, bound, random_array

import tensorc as tc


def normalize_axes(a_ndim, b_ndim, axes):
    """numpy's reading of ``axes`` as two lists of non-negative axes."""
    if isinstance(axes, (int, np.integer)):
        return list(range(a_ndim - axes, a_ndim)), list(range(axes))
    axes_a, axes_b = axes
    axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
    axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
    return [x % a_ndim for x in axes_a], [x % b_ndim for x in axes_b]


def make_grid(a_shape, b_shape, axes, n):
    """(grid_of_a, grid_of_b): n blocks per dim (capped by its size), same count on a pair."""
    axes_a, axes_b = normalize_axes(len(a_shape), len(b_shape), axes)
    grid_a = [max(1, min(n, size)) for size in a_shape]
    grid_b = [max(1, min(n, size)) for size in b_shape]
    for i, j in zip(axes_a, axes_b, strict=True):
        grid_a[i] = grid_b[j] = min(grid_a[i], grid_b[j])
    return tuple(grid_a), tuple(grid_b)


def assert_tensordot_matches(a, b, axes, **options):
    if axes is None:  # not passed: numpy's (and tensorc's) default, 2
        expected = np.asarray(np.tensordot(a, b))
        actual = tc.tensordot(a, b, **options)
    else:
        expected = np.asarray(np.tensordot(a, b, axes=axes))
        actual = tc.tensordot(a, b, axes=axes, **options)
    abs_a, abs_b = np.abs(a).astype(np.float64), np.abs(b).astype(np.float64)
    scale = bound(np.tensordot(abs_a, abs_b, axes=2 if axes is None else axes))
    assert_matches(actual, expected, scale, (a.dtype, b.dtype))


@pytest.fixture
def rng():
    return np.random.default_rng(7)


# axes=None means "not passed" (numpy's default, 2)
CASES = [
    ("axes0-outer", (2, 3), (4,), 0),
    ("axes0-0d", (), (3, 2), 0),
    ("axes1-matmul", (5, 7), (7, 4), 1),
    ("axes1-3d-2d", (3, 4, 5), (5, 2), 1),
    ("axes1-vector-dot", (7,), (7,), 1),
    ("axes2", (3, 4, 5), (4, 5, 6), 2),
    ("axes-default", (3, 4, 5), (4, 5, 6), None),
    ("axes3-full", (2, 3, 4), (2, 3, 4), 3),
    ("axes-lists-swapped", (3, 4, 5), (4, 3, 2), ([1, 0], [0, 1])),
    ("axes-lists-mission", (5, 4, 3), (4, 3, 6), ([1, 2], [0, 1])),
    ("axes-lists-unordered", (3, 4, 5, 2), (5, 6, 3), ([2, 0], [0, 2])),
    ("axes-lists-empty", (2, 3), (4,), ([], [])),
    ("axes-negative", (3, 4, 5), (5, 2), ([-1], [0])),
    ("axes-negative-both", (2, 3, 4), (4, 3, 5), ([-1, -2], [0, 1])),
    ("axes-negative-b", (2, 3, 4), (5, 4), ([2], [-1])),
    ("axes-tuples", (3, 4, 5), (4, 3, 2), ((1, 0), (0, 1))),
    ("axes-pair-of-ints", (3, 4, 5), (5, 6), (2, 0)),
    ("axes-pair-of-ints-middle", (3, 4, 5), (6, 4), (1, 1)),
    ("axes-pair-of-negative-ints", (3, 4, 5), (6, 5), (-1, -1)),
]
GRIDS = {"noplan": None, "grid2": 2, "grid3": 3}


@pytest.mark.parametrize("grid", list(GRIDS.values()), ids=list(GRIDS))
@pytest.mark.parametrize(
    "a_shape,b_shape,axes", [pytest.param(a, b, ax, id=name) for name, a, b, ax in CASES]
)
def test_tensordot_matches_numpy(rng, a_shape, b_shape, axes, grid):
    a, b = random_array(rng, a_shape), random_array(rng, b_shape)
    options = {}
    if grid is not None:
        options["grid"] = make_grid(a_shape, b_shape, 2 if axes is None else axes, grid)
    assert_tensordot_matches(a, b, axes, **options)


@pytest.mark.parametrize(
    "a_shape,b_shape,axes",
    [
        pytest.param((2, 0), (0, 3), 1, id="contracted-dim-empty"),
        pytest.param((0, 4), (4, 3), 1, id="free-dim-empty"),
        pytest.param((3, 0, 2), (0, 2, 5), 2, id="empty-and-nonempty-contracted"),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.int32], ids=["float64", "int32"])
def test_tensordot_zero_size(rng, a_shape, b_shape, axes, dtype):
    assert_tensordot_matches(
        random_array(rng, a_shape, dtype), random_array(rng, b_shape, dtype), axes
    )


DTYPE_PAIRS = [
    (np.float64, np.float64),
    (np.float32, np.float32),
    (np.float16, np.float16),
    (np.complex64, np.complex64),
    (np.complex128, np.float32),
    (np.int64, np.int64),
    (np.int32, np.int32),
    (np.int8, np.uint8),
    (np.uint16, np.uint16),
    (np.bool_, np.bool_),
    (np.bool_, np.int16),
    (np.int64, np.uint64),
    (np.float32, np.int64),
    (np.float16, np.int8),
]


@pytest.mark.parametrize("grid", [None, 3], ids=["noplan", "grid3"])
@pytest.mark.parametrize(
    "dtype_a,dtype_b",
    DTYPE_PAIRS,
    ids=[f"{np.dtype(x).name}-{np.dtype(y).name}" for x, y in DTYPE_PAIRS],
)
def test_tensordot_dtypes(rng, dtype_a, dtype_b, grid):
    a = random_array(rng, (5, 4, 3), dtype_a)
    b = random_array(rng, (4, 3, 6), dtype_b)
    axes = ([1, 2], [0, 1])
    options = {} if grid is None else {"grid": make_grid(a.shape, b.shape, axes, grid)}
    assert_tensordot_matches(a, b, axes, **options)


@pytest.mark.parametrize("grid", [None, 2], ids=["noplan", "grid2"])
def test_tensordot_noncontiguous_inputs(rng, grid):
    a = np.asfortranarray(random_array(rng, (5, 4, 3)))
    b = random_array(rng, (12, 8, 4))[::-2, ::2, 1:].transpose(1, 2, 0)  # (4, 3, 6)
    axes = ([1, 2], [0, 1])
    options = {} if grid is None else {"grid": make_grid(a.shape, b.shape, axes, grid)}
    assert_tensordot_matches(a, b, axes, **options)


MISMATCHES = [
    ("int-axes-size-mismatch", (2, 3), (4, 5), 1),
    ("int-axes-2-mismatch", (2, 3, 4), (3, 5, 6), 2),
    ("list-axes-size-mismatch", (2, 3), (3, 4), ([0], [0])),
    ("list-axes-length-mismatch", (2, 3), (2, 3), ([0, 1], [0])),
    ("size-1-does-not-broadcast", (2, 1), (3, 3), 1),
    ("negative-axes-mismatch", (2, 3), (4, 5), ([-1], [-1])),
]


@pytest.mark.parametrize("grid", [False, True], ids=["noplan", "grid"])
@pytest.mark.parametrize(
    "a_shape,b_shape,axes", [pytest.param(a, b, ax, id=name) for name, a, b, ax in MISMATCHES]
)
def test_tensordot_mismatch_raises_value_error(a_shape, b_shape, axes, grid):
    a, b = np.ones(a_shape), np.ones(b_shape)
    with pytest.raises(ValueError):  # the premise: numpy refuses too
        np.tensordot(a, b, axes=axes)
    options = {"grid": (tuple(1 for _ in a_shape), tuple(1 for _ in b_shape))} if grid else {}
    with pytest.raises(ValueError) as info:
        tc.tensordot(a, b, axes=axes, **options)
    assert isinstance(info.value, tc.TensorcError)


# --------------------------------------------------------------------------------------------
# property test
# --------------------------------------------------------------------------------------------

PROPERTY_DTYPES = [np.float64, np.float32, np.complex128, np.int64, np.int32]


@st.composite
def tensordot_problems(draw):
    a_ndim = draw(st.integers(0, 3))
    b_ndim = draw(st.integers(0, 3))
    k = draw(st.integers(0, min(a_ndim, b_ndim)))
    form = draw(
        st.sampled_from(["sequences", "int", "pair-of-ints"] if k == 1 else ["sequences", "int"])
    )
    if form == "int":
        axes_a, axes_b = list(range(a_ndim - k, a_ndim)), list(range(k))
    else:
        axes_a = draw(st.permutations(range(a_ndim)))[:k]
        axes_b = draw(st.permutations(range(b_ndim)))[:k]
    contracted = [draw(st.integers(1, 4)) for _ in range(k)]
    a_shape = [draw(st.integers(1, 4)) for _ in range(a_ndim)]
    b_shape = [draw(st.integers(1, 4)) for _ in range(b_ndim)]
    for i, j, size in zip(axes_a, axes_b, contracted, strict=True):
        a_shape[i] = b_shape[j] = size

    if form == "int":
        axes = k
    else:
        # spell some axes negatively
        spelled_a = [x - a_ndim if draw(st.booleans()) else x for x in axes_a]
        spelled_b = [x - b_ndim if draw(st.booleans()) else x for x in axes_b]
        axes = (spelled_a[0], spelled_b[0]) if form == "pair-of-ints" else (spelled_a, spelled_b)

    options = {}
    if draw(st.booleans()):
        grid_a = [draw(st.integers(1, min(3, size))) for size in a_shape]
        grid_b = [draw(st.integers(1, min(3, size))) for size in b_shape]
        for i, j in zip(axes_a, axes_b, strict=True):
            grid_b[j] = grid_a[i]
        options["grid"] = (tuple(grid_a), tuple(grid_b))
    dtypes = (draw(st.sampled_from(PROPERTY_DTYPES)), draw(st.sampled_from(PROPERTY_DTYPES)))
    seed = draw(st.integers(0, 2**32 - 1))
    return tuple(a_shape), tuple(b_shape), axes, options, dtypes, seed


@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(problem=tensordot_problems())
def test_random_tensordot_matches_numpy(problem):
    a_shape, b_shape, axes, options, (dtype_a, dtype_b), seed = problem
    rng = np.random.default_rng(seed)
    a = random_array(rng, a_shape, dtype_a)
    b = random_array(rng, b_shape, dtype_b)
    assert_tensordot_matches(a, b, axes, **options)
