"""A ``.tc`` program with sparse inputs on a Ray session: its sparse statements run on the
nodes (one call per node each), results equal to numpy's, and a ``tc.asarray`` input's
pieces stay on the nodes from one run to the next."""

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
