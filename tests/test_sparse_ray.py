"""Sparse einsums on the shared 4-node Ray cluster: results against numpy and the local
path, work spread over the nodes by non-zeros, blocks shipped in compact form."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
import sparse

import tensorc as tc
from tensorc.planning import cost
from tensorc.sparse.blocks import cut
from tensorc.sparse.compact import CooPiece, CsrPiece, pack, piece, unpack
from tensorc.sparse.formats import canonical

pytestmark = pytest.mark.usefixtures("ray_cluster", "stated_machine")


def csr(n: int, m: int, density: float, seed: int) -> sp.csr_array:
    return sp.random_array((n, m), density=density, format="csr", random_state=seed)


def spread(stats: dict) -> int:
    """Nodes that ran a part of the call."""
    return sum(1 for count in stats["tasks_per_node"] if count)


def test_spmm_on_ray_matches_numpy_and_spreads_over_nodes():
    a = csr(4000, 3000, 0.02, seed=1)  # 240k non-zeros: one row block of 2^18 per worker
    d = np.random.default_rng(2).random((3000, 16))
    got = tc.einsum("ij,jk->ik", a, d)
    stats = tc.last_stats()
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, a.toarray() @ d, rtol=1e-10)
    assert stats["backend"] == "ray"
    assert spread(stats) >= 2
    assert stats["remote_calls"] == spread(stats)
    assert sum(stats["nonzeros_per_node"]) == a.nnz  # every non-zero read exactly once
    assert max(stats["nonzeros_per_node"]) < a.nnz
    assert stats["duplicated_tasks"] == 0
    # a node gets its rows' indices and values (12 bytes a non-zero) and the dense operand,
    # never the whole matrix more than once
    sparse_bytes = a.data.nbytes + a.indices.nbytes
    assert sum(stats["node_recv_bytes"]) <= sparse_bytes + 2 * a.shape[0] * 8 + (
        spread(stats) * d.nbytes)
    assert stats["shipped_bytes"] == sum(stats["node_recv_bytes"]) + sum(
        stats["node_send_bytes"])


def test_a_slow_network_keeps_an_spmm_on_one_node():
    """The same call as above, priced at a 50 MB/s network: sending the dense operand to a
    second node costs more than the half of the work it saves."""
    cost.use_machine(dataclasses.replace(cost.machine(), network_bytes_per_second=50e6))
    a = csr(4000, 3000, 0.02, seed=1)
    d = np.random.default_rng(2).random((3000, 16))
    np.testing.assert_allclose(tc.einsum("ij,jk->ik", a, d), a @ d, rtol=1e-10)
    assert spread(tc.last_stats()) == 1


def test_spgemm_on_ray_gives_the_local_sparse_result():
    a = csr(3000, 3000, 0.01, seed=3)
    b = csr(3000, 3000, 0.01, seed=4)
    got = tc.einsum("ij,jk->ik", a, b, grid={"i": 4})
    stats = tc.last_stats()
    local = tc.einsum("ij,jk->ik", a, b, grid={"i": 4}, backend="local")
    assert isinstance(got, sp.csr_array)
    assert got.nnz == local.nnz == (a @ b).nnz
    np.testing.assert_allclose(got.toarray(), (a @ b).toarray(), rtol=1e-10)
    assert stats["backend"] == "ray" and spread(stats) == 4
    assert sum(stats["node_send_bytes"]) >= got.nnz * 12  # the result came back sparse


def test_spmv_on_ray_with_csr_matrix_input():
    a = sp.csr_matrix(csr(5000, 800, 0.05, seed=5))
    x = np.random.default_rng(6).random(800)
    got = tc.einsum("ij,j->i", a, x, grid={"i": 8})
    np.testing.assert_allclose(got, a.toarray() @ x, rtol=1e-10)
    assert spread(tc.last_stats()) >= 2


def test_sparse_mttkrp_on_a_pydata_tensor():
    rng = np.random.default_rng(7)
    x = sparse.random((300, 40, 50), density=0.05, random_state=8)
    b, c = rng.random((40, 6)), rng.random((50, 6))
    got = tc.einsum("ijk,jf,kf->if", x, b, c, grid={"i": 6})
    stats = tc.last_stats()
    np.testing.assert_allclose(got, np.einsum("ijk,jf,kf->if", x.todense(), b, c),
                               rtol=1e-10)
    assert spread(stats) >= 2
    assert sum(stats["nonzeros_per_node"]) == x.nnz


def test_pydata_sparse_result_on_ray_and_empty_blocks_get_no_work():
    dense = np.zeros((400, 300))
    dense[:100, :50] = np.random.default_rng(9).random((100, 50))  # rows 100: empty
    x = sparse.COO.from_numpy(dense)
    y = sparse.COO.from_numpy(np.random.default_rng(10).random((300, 20)) * (
        np.random.default_rng(11).random((300, 20)) < 0.2))
    got = tc.einsum("ij,jk->ik", x, y, grid={"i": 4})
    stats = tc.last_stats()
    assert isinstance(got, sparse.COO)
    np.testing.assert_allclose(got.todense(), dense @ y.todense(), rtol=1e-10)
    assert spread(stats) == 1  # three of the four row blocks of x are empty: no task there
    assert stats["tasks"] == 3  # the loads of x's one non-empty block and of y, one product
    assert sum(stats["nonzeros_per_node"]) == x.nnz + y.nnz


def test_an_all_zero_operand_on_ray_gives_an_empty_result():
    a = sp.csr_array((500, 400))
    b = csr(400, 300, 0.05, seed=12)
    got = tc.einsum("ij,jk->ik", a, b)
    assert isinstance(got, sp.csr_array) and got.shape == (500, 300) and got.nnz == 0
    assert tc.last_stats()["remote_calls"] == 0


def test_contraction_to_a_scalar_and_backend_local_on_ray():
    a = csr(2000, 2000, 0.01, seed=13)
    assert np.isclose(tc.einsum("ij,ij->", a, a), (a.multiply(a)).sum())
    got = tc.einsum("ij,jk->ik", a, np.ones((2000, 3)), backend="local")
    assert tc.last_stats()["backend"] == "local"
    np.testing.assert_allclose(got, a @ np.ones((2000, 3)))


def test_compact_pieces_pickle_as_arrays_and_give_the_same_blocks():
    a = csr(600, 500, 0.05, seed=14)
    rows = cut(a, (100, 500))
    part = piece(rows, [(1, 0), (4, 0)])
    assert isinstance(part, CsrPiece) and part.nnz == sum(rows.counts[k] for k in
                                                          [(1, 0), (4, 0)])
    back = pickle.loads(pickle.dumps(part))
    for top in (100, 400):
        want = rows.block((slice(top, top + 100), slice(0, 500))).toarray()
        np.testing.assert_array_equal(back.block((slice(top, top + 100), slice(0, 500)))
                                      .toarray(), want)
    with pytest.raises(KeyError, match="rows 0:100"):
        back.block((slice(0, 100), slice(0, 500)))
    coords = cut(canonical(a), (100, 250))
    keys = sorted(coords.counts)[1:4]
    part = pickle.loads(pickle.dumps(piece(coords, keys)))
    assert isinstance(part, CooPiece) and sorted(part.counts) == keys
    for key in keys:
        slices = tuple(slice(k * s, (k + 1) * s) for k, s in zip(key, (100, 250),
                                                                 strict=True))
        want, have = coords.block(slices), part.block(slices)
        np.testing.assert_array_equal(have.coords, want.coords)
        np.testing.assert_array_equal(have.values, want.values)
    block = csr(30, 20, 0.2, seed=15)
    packed = pack(block)
    assert packed[0] == "csr" and all(isinstance(p, np.ndarray) for p in packed[2:])
    np.testing.assert_array_equal(unpack(packed).toarray(), block.toarray())


def test_a_sparse_tensor_is_stored_on_ray_once_and_read_again_by_later_calls():
    """``tc.asarray`` of a sparse matrix: the first call stores each node's piece in the
    object store, later calls with the same cut send none of it again (Dask's persist)."""
    a = csr(4000, 3000, 0.02, seed=1)
    kept = tc.asarray(a)
    assert isinstance(kept, tc.sparse.SparseTensor)
    sparse_bytes = a.data.nbytes + a.indices.nbytes
    results, stats = [], []
    for seed in range(3):
        d = np.random.default_rng(seed).random((3000, 8))
        results.append((tc.einsum("ij,jk->ik", kept, d), a @ d))
        stats.append(tc.last_stats())
    for got, want in results:
        np.testing.assert_allclose(got, want, rtol=1e-10)
    assert spread(stats[0]) >= 2
    assert stats[0]["kept_bytes_reused"] == 0
    assert sum(stats[0]["node_recv_bytes"]) >= sparse_bytes  # the first call stores it
    for later in stats[1:]:
        assert later["kept_bytes_reused"] >= sparse_bytes  # every piece read again ...
        assert sum(later["node_recv_bytes"]) <= spread(later) * d.nbytes  # ... only d sent


def test_a_raw_scipy_operand_is_sent_by_every_call():
    a = csr(4000, 3000, 0.02, seed=1)
    d = np.random.default_rng(0).random((3000, 8))
    for _ in range(2):
        np.testing.assert_allclose(tc.einsum("ij,jk->ik", a, d), a @ d, rtol=1e-10)
        stats = tc.last_stats()
        assert stats["kept_bytes_reused"] == 0
        assert sum(stats["node_recv_bytes"]) >= a.data.nbytes + a.indices.nbytes


def test_a_large_sum_over_rows_spreads_its_output_blocks_over_the_nodes(monkeypatch):
    from tensorc.sparse import plan as sparse_plan

    monkeypatch.setattr(sparse_plan, "SPREAD_NNZ", 1000)  # as if this tensor were large
    rng = np.random.default_rng(21)
    count = 200_000
    coords = np.stack([rng.integers(0, 400, count),
                       np.minimum((900 * rng.random(count) ** 2).astype(np.int64), 899),
                       rng.integers(0, 300, count)])
    x = tc.sparse.from_coo(coords, rng.random(count), (400, 900, 300))
    a, c = rng.random((400, 8)), rng.random((300, 8))
    got = tc.einsum("ijk,ir,kr->jr", x, a, c)  # summed over i: split along j, the output
    stats = tc.last_stats()
    assert "i: 400/400 -> 1" in stats["blocking"]
    per_node = stats["nonzeros_per_node"]
    assert max(per_node) <= 1.25 * x.nnz / len(per_node), per_node  # power law in j, even
    want = np.einsum("ijk,ir,kr->jr", x.todense(), a, c)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_a_small_sum_over_rows_is_cut_for_the_one_node_that_runs_it():
    rng = np.random.default_rng(22)
    n, count = 4000, 600_000
    m = sp.csr_array((rng.random(count), (rng.integers(0, n, count),
                                          rng.integers(0, n, count))), shape=(n, n))
    kept = tc.asarray(m)
    r = rng.random(n)
    got = tc.einsum("ij,i->j", kept, r)  # a PageRank step: one output block, one node
    stats = tc.last_stats()
    local = tc.plan("ij,i->j", m, r, workers=1).stats["blocking"]
    assert stats["blocking"] == local == f"i: {n}/{n} -> 1, j: {n}/{n} -> 1"
    assert sorted(stats["tasks_per_node"])[:-1] == [0, 0, 0]  # one node, its one core
    np.testing.assert_allclose(got, m.T @ r, rtol=1e-12)


def test_tc_init_probes_the_sparse_kernel_rate_of_a_node():
    """The session's figures (not the stated ones these tests price with) carry the rate the
    compiled CSR-times-dense loop ran at on a node: below the BLAS rate."""
    probed = tc.session.current().machine
    assert probed.source.startswith("probed on")
    assert 0.005 * probed.blas_flops_per_core < probed.sparse_flops_per_core
    assert probed.sparse_flops_per_core < probed.blas_flops_per_core
    assert "sparse GFLOP/s per core" in probed.describe()
