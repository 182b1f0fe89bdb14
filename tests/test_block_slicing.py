"""Basic indexing block by block (``runtime/block_slicing.py``) against numpy's indexing,
on ragged blockings and keys of every basic kind; and on the shared Ray cluster, where a
sliced distributed array keeps its blocks on their nodes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.ray.slicing import slice_blocks


def _assembled(data: np.ndarray, bounds, key) -> np.ndarray:
    """The result rebuilt from the result blocks :func:`slice_blocks` describes."""
    out_bounds, mapping = slice_blocks(bounds, key)
    out = np.empty(tuple(edges[-1] for edges in out_bounds), data.dtype)
    for coords, sliced in mapping.items():
        source = tuple(slice(bounds[d][c], bounds[d][c + 1])
                       for d, c in enumerate(sliced.source))
        block = data[source][sliced.key]
        region = tuple(slice(out_bounds[d][c], out_bounds[d][c + 1])
                       for d, c in enumerate(coords))
        if sliced.whole:
            assert block.shape == data[source].shape
        out[region] = block
    return out


@st.composite
def blocked_and_key(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(ndim))
    bounds = []
    for n in shape:
        cuts = sorted(draw(st.sets(st.integers(1, max(n - 1, 1)), max_size=3)) - {n})
        bounds.append((0, *cuts, n))
    key = []
    for n in shape:
        kind = draw(st.sampled_from(["slice", "int", "full"]))
        if kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            step = draw(st.sampled_from([1, 2, 3, -1, -2]))
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            key.append(slice(start, stop, step))
        else:
            key.append(slice(None))
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), None)
    if draw(st.booleans()) and key:
        at = draw(st.integers(0, len(key) - 1))
        if key[at] == slice(None):
            key[at] = Ellipsis
    return shape, tuple(bounds), tuple(key)


@settings(max_examples=300, deadline=None)
@given(blocked_and_key())
def test_blockwise_indexing_equals_numpy(case):
    shape, bounds, key = case
    data = np.arange(int(np.prod(shape))).reshape(shape)
    want = data[key]
    if want.size == 0:
        assert slice_blocks(bounds, key) is None  # empty results take the whole-array path
        return
    np.testing.assert_array_equal(_assembled(data, bounds, key), want)


def test_result_blocks_follow_the_stored_cuts():
    bounds = ((0, 4, 8, 12), (0, 5))
    out_bounds, mapping = slice_blocks(bounds, (slice(2, 11), slice(None)))
    assert out_bounds == ((0, 2, 6, 9), (0, 5))
    assert [mapping[(c, 0)].source for c in range(3)] == [(0, 0), (1, 0), (2, 0)]
    # the middle block is stored block 1 unchanged: it is reused, not copied
    assert [mapping[(c, 0)].whole for c in range(3)] == [False, True, False]
    assert slice_blocks(bounds, (np.array([1, 2]),)) is None  # not a basic index


@pytest.mark.parametrize("key", [
    (slice(1000, 3000),), (slice(None, None, -3), 2), (5, slice(1, 4)), (Ellipsis, None, 0),
])
def test_a_sliced_distributed_array_stays_on_its_nodes(ray_cluster, key):
    import tensorc as tc

    x = tc.random((4096, 6), grid=(4, 2), seed=41)
    nodes = set(x.block_nodes().values())
    picked = x[key]
    np.testing.assert_array_equal(picked.numpy(), x.numpy()[key])
    value = picked.value()
    assert isinstance(value, DistributedArray)  # stays on the nodes: x is not small
    assert set(value.block_nodes().values()) <= nodes
    assert len(set(value.block_nodes().values())) > 1  # not gathered to one node
    stats = [s for s in tc.last_stats()["statements"] if s.get("whole_array") == "getitem"]
    assert stats and stats[0].get("blockwise")


def test_slicing_then_arithmetic_on_ray_matches_numpy(ray_cluster):
    import tensorc as tc

    x = tc.random((8192, 8), grid=(4, 1), seed=42)
    result = tc.sum((x[100:7000] + 1.0) * 2.0, axis=0)
    np.testing.assert_allclose(result.numpy(), ((x.numpy()[100:7000] + 1.0) * 2.0).sum(0),
                               rtol=1e-10)


def test_keys_are_covered_in_every_dimension_order():
    bounds = ((0, 3, 6), (0, 2, 4))
    data = np.arange(24).reshape(6, 4)
    for key in itertools.product([slice(None), slice(1, 5), 3, slice(None, None, -1)],
                                 repeat=2):
        np.testing.assert_array_equal(_assembled(data, bounds, key), data[key])
