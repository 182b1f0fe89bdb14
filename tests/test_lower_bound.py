"""The communication lower bound against the closed forms docs/performance.md names."""

from __future__ import annotations

import math

import pytest

from tensorc.errors import PlanError
from tensorc.planning.lower_bound import communication_lower_bound as bound

MATMUL = (["ik", "kj"], "ij")


def _matmul(m: int, n: int, k: int, nodes: int) -> int:
    return bound(*MATMUL, {"i": m, "j": n, "k": k}, nodes, 1)


@pytest.mark.parametrize("nodes", [2, 4, 8, 12, 16, 64, 1000])
def test_square_matmul(nodes):
    n = 256
    expected = 3 * (n**3 / nodes) ** (2 / 3) - 3 * n * n / nodes
    assert _matmul(n, n, n, nodes) == pytest.approx(expected, rel=1e-6, abs=1)


def _three_case(d1: int, d2: int, d3: int, nodes: int) -> float:
    """Demmel et al.'s memory-independent bound for dimensions d1 >= d2 >= d3."""
    owned = (d1 * d2 + d1 * d3 + d2 * d3) / nodes
    if nodes <= d1 / d2:
        accessed = d1 * d2 / nodes + d1 * d3 / nodes + d2 * d3
    elif nodes <= d1 * d2 / d3**2:
        accessed = 2 * d3 * math.sqrt(d1 * d2 / nodes) + d1 * d2 / nodes
    else:
        accessed = 3 * (d1 * d2 * d3 / nodes) ** (2 / 3)
    return accessed - owned


@pytest.mark.parametrize("nodes", [2, 8, 16, 64, 1024, 65536])
def test_rectangular_matmul_three_cases(nodes):
    d1, d2, d3 = 4096, 256, 16  # case 1 up to P = 16, case 2 up to 4096, then case 3
    expected = _three_case(d1, d2, d3, nodes)
    for m, n, k in [(d1, d2, d3), (d3, d1, d2), (d2, d3, d1)]:  # any index may be the long one
        assert _matmul(m, n, k, nodes) == pytest.approx(expected, rel=1e-6, abs=1)


@pytest.mark.parametrize("nodes", [4, 16, 64])
def test_mttkrp_large_tensor(nodes):
    n, rank, modes = 256, 100, 3
    tensor = n**modes
    expected = modes * rank * (tensor / nodes) ** (1 / modes) - rank * modes * n / nodes
    sizes = {"i": n, "j": n, "k": n, "f": rank}
    got = bound(["ijk", "jf", "kf"], "if", sizes, nodes, 8)
    assert got == pytest.approx(8 * expected, rel=1e-6, abs=8)


def test_one_node_receives_nothing_and_itemsize_scales():
    sizes = {"i": 64, "j": 64, "k": 64}
    assert bound(*MATMUL, sizes, 1, 8) == 0
    assert bound(*MATMUL, {"i": 0, "j": 4, "k": 4}, 4, 8) == 0
    words = bound(*MATMUL, sizes, 4, 1)
    assert words > 0
    assert bound(*MATMUL, sizes, 4, 8) == pytest.approx(8 * words, abs=8)


def test_monotone_in_the_extents_and_deterministic():
    previous = 0
    for n in (16, 32, 64, 128, 256):
        value = bound(["ijk", "jkf"], "if", {"i": n, "j": n, "k": n, "f": 16}, 16, 8)
        assert value > previous
        previous = value
    sizes = {"i": 300, "j": 70, "k": 5, "f": 11}
    runs = {bound(["ijk", "jkf"], "if", sizes, 12, 4) for _ in range(3)}
    assert len(runs) == 1


def test_extent_one_indices_and_more_nodes_than_work():
    # one iteration on 4 nodes: the box is one element of each of 3 arrays, 3/4 owned
    assert bound(["ij", "j"], "i", {"i": 1, "j": 1}, 4, 8) == 8 * (3 - 3 / 4)
    # an extent-1 index is fixed at b = 1: it changes nothing
    sizes = {"i": 64, "j": 64, "k": 64}
    assert bound(["ikz", "kj"], "ij", {**sizes, "z": 1}, 8, 8) == bound(*MATMUL, sizes, 8, 8)


def test_refusals():
    with pytest.raises(PlanError, match="at least one node"):
        bound(*MATMUL, {"i": 4, "j": 4, "k": 4}, 0, 8)
    with pytest.raises(PlanError, match="no extent for index k"):
        bound(*MATMUL, {"i": 4, "j": 4}, 2, 8)


def test_owned_fractions_give_the_bound_for_an_uneven_layout():
    sizes = {"i": 64, "j": 64, "k": 64}
    even = bound(*MATMUL, sizes, 4, 8)
    assert bound(*MATMUL, sizes, 4, 8, owned=[1 / 4] * 3) == even
    # holding more of an array on the busiest node can only lower the bound
    one_more = bound(*MATMUL, sizes, 4, 8, owned=[1 / 2, 1 / 4, 1 / 4])
    assert one_more == pytest.approx(even - 8 * 64 * 64 / 4, abs=8)
    assert bound(*MATMUL, sizes, 4, 8, owned=[1, 1, 1]) == 0
    # a scalar * scalar -> scalar on 2 nodes: the even share says 3/2 of the 3 scalars are
    # owned; each scalar is one block on one node, so the computing node may own all 3
    assert bound([(), ()], (), {}, 2, 8) == 12
    assert bound([(), ()], (), {}, 2, 8, owned=[1, 1, 1]) == 0
    assert bound(*MATMUL, sizes, 1, 8, owned=[1, 1, 1]) == 0


def test_owned_refusals():
    sizes = {"i": 4, "j": 4, "k": 4}
    with pytest.raises(PlanError, match=r"one fraction in \[1/4, 1\] per array \(3\)"):
        bound(*MATMUL, sizes, 4, 8, owned=[1 / 4, 1 / 4])
    with pytest.raises(PlanError, match="per array"):
        bound(*MATMUL, sizes, 4, 8, owned=[1 / 8, 1 / 4, 1 / 4])  # below the even share
    with pytest.raises(PlanError, match="per array"):
        bound(*MATMUL, sizes, 4, 8, owned=[1.5, 1 / 4, 1 / 4])
