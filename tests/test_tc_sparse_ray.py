"""A ``.tc`` program with sparse inputs on a Ray session: its sparse statements run on the
nodes (one call per node each, or for several independent ones together), results equal
to numpy's, and a ``tc.asarray`` input's pieces stay on the nodes from one run to the
next."""

from __future__ import annotations

import numpy as np

import tensorc as tc

SOURCE = """\
size N, M
input  A : f64[N, M] sparse(M)
input  x : f64[M]
output y : f64[N]
output z : f64[M]
y[i] += A[i, j] * x[j]
z[j] += A[i, j] * y[i]
"""


def test_sparse_statements_of_a_program_run_on_the_nodes(ray_cluster):
    a = tc.sparse.random((400, 300), 0.1, seed=11, format="csr")
    x = np.random.default_rng(12).random(300)
    program = tc.compile(SOURCE)
    out = program.run(A=a, x=x)
    dense = a.toarray()
    assert type(out["y"]) is np.ndarray and type(out["z"]) is np.ndarray
    np.testing.assert_allclose(out["y"], dense @ x, rtol=1e-12)
    np.testing.assert_allclose(out["z"], dense.T @ (dense @ x), rtol=1e-12)
    stats = tc.last_stats()
    assert stats["backend"] == "ray"
    assert [s["sparse_einsum"] for s in stats["statements"]] == ["ab,b->a", "ab,a->b"]
    assert all(s["backend"] == "ray" and s["remote_calls"] >= 1 for s in stats["statements"])


def test_a_kept_input_stays_on_the_nodes_between_runs(ray_cluster):
    a = tc.asarray(tc.sparse.random((4000, 3000), 0.02, seed=13, format="csr"))
    x = np.random.default_rng(14).random(3000)
    program = tc.compile(SOURCE)
    program.run(A=a, x=x)
    out = program.run(A=a, x=x)
    dense = a.todense()
    np.testing.assert_allclose(out["z"], dense.T @ (dense @ x), rtol=1e-10)
    statements = tc.last_stats()["statements"]
    assert all(s["kept_bytes_reused"] > 0 for s in statements), statements


GRADIENTS = """\
size M, N, F
input  E : f64[M, N] sparse(N)
input  U : f64[M, F]
input  V : f64[N, F]
output gU : f64[M, F]
output gV : f64[N, F]
output s : f64[M]
gU[i, f] += E[i, j] * V[j, f]
gV[j, f] += E[i, j] * U[i, f]
s[i] += gU[i, f]
"""


def test_independent_sparse_statements_run_as_one_call_per_node(ray_cluster, stated_machine):
    """The two gradients of a factorisation read only the inputs: their parts on each node
    are one call; the sum after them reads one of them and runs after."""
    e = tc.sparse.random((3000, 2000), 0.05, seed=15, format="csr")
    rng = np.random.default_rng(16)
    u, v = rng.random((3000, 8)), rng.random((2000, 8))
    out = tc.compile(GRADIENTS).run(E=e, U=u, V=v)
    dense = e.toarray()
    np.testing.assert_allclose(out["gU"], dense @ v, rtol=1e-12)
    np.testing.assert_allclose(out["gV"], dense.T @ u, rtol=1e-12)
    np.testing.assert_allclose(out["s"], (dense @ v).sum(axis=1), rtol=1e-12)
    stats = tc.last_stats()
    sparse = [s for s in stats["statements"] if "sparse_einsum" in s]
    assert [s["sparse_einsum"] for s in sparse] == ["ab,bc->ac", "ab,ac->bc"]
    assert all(s["merged_runs"] == 2 and s["remote_calls"] >= 1 for s in sparse)
    used = {node for s in sparse for node, tasks in enumerate(s["tasks_per_node"]) if tasks}
    assert sparse[0]["node_calls"] == len(used) == stats["remote_calls"]  # one call a node
    assert sparse[1]["node_calls"] == 0 and sparse[1]["run_seconds"] == 0.0
    # a budget each statement fits but not both at once: each runs on its own
    peaks = [s["modelled_peak_bytes"] for s in sparse]
    program = tc.compile(GRADIENTS, memory_limit=int(1.1 * max(peaks)))
    out = program.run(E=e, U=u, V=v)
    np.testing.assert_allclose(out["gU"], dense @ v, rtol=1e-12)
    np.testing.assert_allclose(out["gV"], dense.T @ u, rtol=1e-12)
    apart = [s for s in tc.last_stats()["statements"] if "sparse_einsum" in s]
    assert [s["modelled_peak_bytes"] for s in apart] == peaks and sum(peaks) > 1.1 * max(peaks)
    assert all(s["merged_runs"] == 1 for s in apart)


def test_a_statement_reading_the_one_before_it_runs_after_it(ray_cluster):
    a = tc.sparse.random((400, 300), 0.1, seed=11, format="csr")
    out = tc.compile(SOURCE).run(A=a, x=np.ones(300))
    assert all(s["merged_runs"] == 1 for s in tc.last_stats()["statements"])
    y = a.toarray() @ np.ones(300)
    np.testing.assert_allclose(out["y"], y, rtol=1e-12)
    np.testing.assert_allclose(out["z"], a.toarray().T @ y, rtol=1e-12)
