"""A ``.tc`` program with sparse inputs on a Ray session: it runs in this process (sparse
einsums are not distributed yet, as for ``tc.einsum(..., backend="local")``), with results
equal to numpy's."""

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


def test_sparse_program_on_a_ray_session_runs_here(ray_cluster):
    a = tc.sparse.random((40, 30), 0.1, seed=11, format="csr")
    x = np.random.default_rng(12).random(30)
    out = tc.compile(SOURCE).run(A=a, x=x)
    dense = a.toarray()
    assert type(out["y"]) is np.ndarray and type(out["z"]) is np.ndarray
    np.testing.assert_allclose(out["y"], dense @ x, rtol=1e-12)
    np.testing.assert_allclose(out["z"], dense.T @ (dense @ x), rtol=1e-12)
    stats = tc.last_stats()
    assert stats["backend"] == "local"
    assert [s["sparse_einsum"] for s in stats["statements"]] == ["ab,b->a", "ab,a->b"]

