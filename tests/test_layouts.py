"""Layouts on the shared 4-node Ray cluster: arrays made inside a program are laid out for
the statement reading them; arrays made on their own share a node block by block."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.lazy import evaluate
from tensorc.placement.blocks import Blocks
from tensorc.placement.layout import NodeMap, node_grid
from tensorc.placement.recipes import random_piece
from tensorc.planning.program_layouts import input_layout

pytestmark = pytest.mark.usefixtures("ray_cluster")

N, F = 32, 8


def test_the_default_node_grid_splits_inner_dimensions_first() -> None:
    assert node_grid((4, 4, 4), 4) == (1, 2, 2)
    assert node_grid((4, 4, 1), 4) == (2, 2, 1)
    assert node_grid((4, 1), 4) == (4, 1)
    assert node_grid((2, 6), 6) == (2, 3)  # most blocks per part first, then less split


def test_a_random_region_has_its_chunks_values_whatever_the_cut() -> None:
    chunks = ((0, 3, 6), (0, 4, 5))
    whole = random_piece(7, "<f8", chunks, (slice(0, 6), slice(0, 5)))
    np.testing.assert_array_equal(random_piece(7, "<f8", chunks, (slice(2, 5), slice(1, 5))),
                                  whole[2:5, 1:5])
    first = np.random.default_rng([7, 0, 0]).random((3, 4))
    np.testing.assert_array_equal(whole[:3, :4], first)


def test_arrays_made_in_a_program_are_made_where_its_plan_reads_them() -> None:
    X = tc.random((N, N, N), grid=(4, 4, 4), seed=1)
    Y = tc.random((N, N, F), grid=(4, 4, 1), seed=2)
    assert not X.evaluated  # not made yet
    A = tc.einsum("ijk,jkf->if", X, Y)  # runs now: one program makes X and Y, then A
    assert A.evaluated and X.evaluated and Y.evaluated
    expected = np.einsum("ijk,jkf->if", tc.random((N, N, N), grid=(4, 4, 4), seed=1).numpy(),
                         tc.random((N, N, F), grid=(4, 4, 1), seed=2).numpy())
    np.testing.assert_allclose(A.numpy(), expected, rtol=1e-10)
    lowered, _, stats = evaluate.last_program(A._expr)  # noqa: SLF001 - the test reads it
    statement = lowered.unrolled.statements[0]
    plan = evaluate.RUNNER.plan_layouts(lowered.unrolled, 4).plans[statement.label]
    for position, made in enumerate((X, Y)):
        wanted = input_layout(plan, position, made.shape)
        assert made.value().blocks.bounds == wanted.bounds
        assert made.value().block_nodes() == dict(sorted(wanted.nodes.items()))
    assert stats["statements"][0]["measured_inter_node_bytes"] <= 4 * N * F * 8  # partials
    text = A.explain()
    assert "input x0: float64[32, 32, 32] (laid out for statement t0 (t0 = contract(x0, x1)))" \
        in text
    assert X.explain().endswith("laid out for statement t0 (t0 = contract(x0, x1))")


def test_an_array_not_made_yet_is_made_in_its_default_layout_when_used_as_it_is() -> None:
    Z = tc.zeros((N, N), grid=(4, 4))
    assert "not made yet" in tc.sum(Z).explain()
    assert Z.value().grid == (4, 4)
    assert "made on its own: its blocking (4, 4), block-cyclic over node grid (2, 2)" \
        in Z.explain()
    np.testing.assert_array_equal(Z.numpy(), np.zeros((N, N)))


def test_arrays_made_on_their_own_with_one_shape_and_blocking_share_nodes() -> None:
    shape, grid = (N, N, N), (4, 2, 4)
    made = [tc.random(shape, grid=grid, seed=3).compute(), tc.ones(shape, grid=grid).compute(),
            tc.asarray(np.arange(N ** 3, dtype=float).reshape(shape), grid=grid).compute()]
    nodes = [a.value().block_nodes() for a in made]
    assert nodes[0] == nodes[1] == nodes[2]
    assert len(set(nodes[0].values())) == 4


def test_made_values_do_not_depend_on_the_layout() -> None:
    a = tc.random((N, N), grid=(4, 4), seed=5)
    b = tc.random((N, N), grid=(4, 4), seed=5)
    np.testing.assert_array_equal(tc.matmul(a, a.T).numpy(), (lambda m: m @ m.T)(b.numpy()))


def test_first_node_is_the_node_of_the_block_holding_the_first_element():
    rng = np.random.default_rng(5)
    bounds = ((0, 3, 4, 9), (0, 5, 6))
    nodes = {(a, b): int(rng.integers(4)) for a in range(3) for b in range(2)}
    stored = Blocks.layout(bounds, nodes)
    for _ in range(200):
        starts = [int(rng.integers(0, 9)), int(rng.integers(0, 6))]
        slices = tuple(slice(a, int(rng.integers(a, n + 1)))
                       for a, n in zip(starts, (9, 6), strict=True))
        assert stored.first_node(slices) == nodes[stored.pieces(slices)[0][0]]


def test_a_node_map_reads_as_the_mapping_it_stands_for():
    mapped = NodeMap(6)
    mapped.fill(np.array([1, 4]), np.array([3, 0]))
    mapped[5] = 2
    assert dict(mapped) == {1: 3, 4: 0, 5: 2} == mapped
    assert len(mapped) == 3 and 4 in mapped and 0 not in mapped and 9 not in mapped
    assert mapped.get(0) is None and mapped[1] == 3 and type(mapped[1]) is int
    with pytest.raises(KeyError):
        mapped[2]
    assert mapped.array.tolist() == [-1, 3, -1, -1, 0, 2]


def test_a_node_map_answers_other_keys_as_a_dict_would():
    mapped = NodeMap(3)
    mapped[1] = 0
    assert mapped.get("x", 7) == 7 and mapped.get(1.0, 7) == 7 and mapped.get(True) is None
    assert "x" not in mapped and mapped.as_dict() == {1: 0}


def _spd(n: int, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed).random((n, n))
    return r @ r.T + n * np.eye(n)


def test_a_factorisation_reads_an_array_not_made_yet_as_the_drivers_data() -> None:
    from tensorc.runtime.ray.arrays import DistributedArray

    n = 1056  # above the size one LAPACK call takes: the block program
    a = _spd(n, 11)
    x = tc.asarray(a, block_shape=(264, 264))
    lower = tc.linalg.cholesky(x)
    read = tc.last_stats()
    assert read["backend"] == "ray" and isinstance(lower.value(), DistributedArray)
    np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)
    assert not x.evaluated and "not made yet" in x.explain()  # its blocks went in as data
    assert lower.explain().endswith("; A read from the driver's data (each block it read sent "
                                    "from the driver's node)")
    assert "computed by block program cholesky.tc (NB=" in lower.explain()
    made = tc.asarray(a, block_shape=(264, 264))
    tc.wait(made)  # spread over the nodes first: the program reads blocks back from them
    tc.linalg.cholesky(made)
    assert read["inter_node_bytes"] < tc.last_stats()["inter_node_bytes"]
    np.testing.assert_array_equal(x.numpy(), a)  # read as it is, it is made then
    assert x.evaluated and len(set(x.value().block_nodes().values())) == 4


def test_an_array_too_large_for_the_drivers_node_is_made_first(monkeypatch) -> None:
    from tensorc.lazy import not_made

    monkeypatch.setattr(not_made, "DRIVER_STORE_SHARE", 0.0)
    a = _spd(1056, 12)
    x = tc.asarray(a, block_shape=(264, 264))
    lower = tc.linalg.cholesky(x)
    assert x.evaluated and len(set(x.value().block_nodes().values())) == 4
    np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)


def test_solve_and_qr_read_arrays_not_made_yet_as_the_drivers_data() -> None:
    rng = np.random.default_rng(13)
    n = 1056
    a = rng.random((n, n)) + n * np.eye(n)
    b = rng.random((n, 3))
    x, y = tc.asarray(a, block_shape=(264, 264)), tc.asarray(b, block_shape=(264, 3))
    solution = tc.linalg.solve(x, y)
    np.testing.assert_allclose(solution.numpy(), np.linalg.solve(a, b), rtol=1e-10)
    assert not x.evaluated and not y.evaluated
    tall = rng.random((8192, 160))
    z = tc.asarray(tall, block_shape=(2048, 160))
    q, r = tc.linalg.qr(z)
    assert tc.last_stats()["backend"] == "ray" and not z.evaluated
    signs = np.sign(np.diag(r.numpy()))
    want_q, want_r = np.linalg.qr(tall)
    want = np.sign(np.diag(want_r))
    np.testing.assert_allclose(q.numpy() * signs, want_q * want, atol=1e-10)
    np.testing.assert_allclose(r.numpy() * signs[:, None], want_r * want[:, None], rtol=1e-10,
                               atol=1e-10)


def test_blocks_sent_from_the_driver_are_read_again_until_the_array_is_made() -> None:
    from tensorc.lazy.array_object import expr_of
    from tensorc.lazy.not_made import creation_of

    a = _spd(1056, 14)
    x = tc.asarray(a, block_shape=(264, 264))
    recipe = creation_of(expr_of(x))
    first = tc.linalg.cholesky(x)
    sent = dict(recipe.sent)
    assert sent  # the blocks the program read, by its bounds and their coordinates
    second = tc.linalg.inv(x)  # cut the same way: the same blocks, not sent again
    np.testing.assert_allclose(second.numpy() @ a, np.eye(1056), atol=1e-9)
    assert all(recipe.sent[key] is ref for key, ref in sent.items())
    np.testing.assert_allclose(first.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)
    recipe.sent_on = object()  # as if sent to an earlier session's cluster: not read again
    tc.linalg.cholesky(x)
    assert recipe.sent and not any(recipe.sent[key] is ref for key, ref in sent.items())
    tc.wait(x)  # made now: its blocks live on the nodes, the driver's copies go
    assert x.evaluated and not recipe.sent


def test_a_vector_of_driver_data_joined_to_a_made_matrix_is_sent_once() -> None:
    """``lstsq`` of a matrix on the nodes and a right-hand side not made yet joins the two:
    the vector's blocks, cut at the matrix's rows, are sent from the driver's node the first
    time and read again the second."""
    from tensorc.lazy.array_object import expr_of
    from tensorc.lazy.not_made import creation_of

    rng = np.random.default_rng(3)
    a, b = rng.random((65_536, 16)), rng.random(65_536)
    matrix = tc.asarray(a, block_shape=(8192, 16))
    tc.wait(matrix)
    vector = tc.asarray(b)
    recipe = creation_of(expr_of(vector))
    first = tc.linalg.lstsq(matrix, vector)[0].numpy()
    sent = dict(recipe.sent)
    assert len(sent) == 8  # one block a row block of the matrix
    second = tc.linalg.lstsq(matrix, vector)[0].numpy()
    assert recipe.sent == sent and all(recipe.sent[k] is v for k, v in sent.items())
    want = np.linalg.lstsq(a, b, rcond=None)[0]
    np.testing.assert_allclose(first, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(second, first)


def test_a_call_s_driver_data_fits_the_driver_s_node_together(monkeypatch) -> None:
    from tensorc.lazy import not_made
    from tensorc.lazy.array_object import expr_of
    from tensorc.runtime.ray.cluster import connected

    cluster = connected()
    share = cluster.store_bytes / cluster.nodes
    a, b = np.ones((256, 256)), np.ones((256, 256))  # 512 KiB each
    monkeypatch.setattr(not_made, "DRIVER_STORE_SHARE", 1.5 * a.nbytes / share)
    x, y = tc.asarray(a, block_shape=(128, 128)), tc.asarray(b, block_shape=(128, 128))
    found = not_made.driver_data(expr_of(x), expr_of(y))
    assert found[0] is not None and found[1] is None  # one fits, not both
    assert found[0].grid == (2, 2)  # its own blocking, a preference
    assert not_made.driver_data(expr_of(x), also=a.nbytes) == [None]  # beside an eye
