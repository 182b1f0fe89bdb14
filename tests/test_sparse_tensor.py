"""``tc.asarray`` of a sparse array: a ``SparseTensor`` that copies what it is given, is a
sparse operand everywhere one is taken, and refuses to densify unasked."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import sparse

import tensorc as tc


def csr(seed: int = 1) -> sp.csr_array:
    return sp.random_array((300, 200), density=0.05, format="csr", random_state=seed)


def test_asarray_of_a_sparse_matrix_is_a_sparse_tensor_with_its_figures():
    a = csr()
    x = tc.asarray(a)
    assert isinstance(x, tc.sparse.SparseTensor)
    assert (x.shape, x.dtype, x.ndim, x.nnz) == ((300, 200), np.dtype("f8"), 2, a.nnz)
    np.testing.assert_array_equal(x.todense(), a.toarray())
    assert type(x.to_sparse()) is type(a)
    assert "SparseTensor(shape=(300, 200)" in repr(x)


def test_it_copies_unless_told_not_to():
    a = csr()
    d = np.random.default_rng(0).random((200, 3))
    want = a @ d
    copied, shared = tc.asarray(a), tc.asarray(a, copy=False)
    a.data[:] = 0.0  # the caller's matrix changes after asarray
    np.testing.assert_allclose(tc.einsum("ij,jk->ik", copied, d), want)
    np.testing.assert_allclose(tc.einsum("ij,jk->ik", shared, d), np.zeros_like(want))


def test_dtype_converts_and_copy_false_refuses_a_conversion():
    a = csr()
    assert tc.asarray(a, dtype="float32").dtype == np.float32
    with pytest.raises(ValueError, match="copy=False but converting float64 to float32"):
        tc.asarray(a, dtype="float32", copy=False)


def test_it_is_a_sparse_operand_with_the_wrapped_arrays_result_type():
    a, b = csr(1), csr(2)
    d = np.random.default_rng(0).random((200, 4))
    x = tc.asarray(a)
    np.testing.assert_allclose(tc.einsum("ij,jk->ik", x, d), a @ d)
    np.testing.assert_allclose(tc.tensordot(x, d, axes=1), a @ d)
    np.testing.assert_allclose(tc.matmul(x, d), a @ d)
    product = tc.einsum("ij,kj->ik", x, tc.asarray(b))
    assert isinstance(product, sp.csr_array)
    np.testing.assert_allclose(product.toarray(), (a @ b.T).toarray())
    coo = sparse.COO.from_scipy_sparse(a)
    got = tc.einsum("ij,jk->ik", tc.asarray(coo), d)
    np.testing.assert_allclose(got, a @ d)


def test_densifying_is_asked_for_by_name_and_a_blocking_is_refused():
    x = tc.asarray(csr())
    with pytest.raises(tc.TypeCheckError, match=r"would densify its 3000 non-zeros; call "
                                                r"\.todense\(\)"):
        np.asarray(x)
    with pytest.raises(tc.PlanError, match="takes no block_shape= or grid="):
        tc.asarray(csr(), grid=(2, 2))


def test_calls_on_one_sparse_tensor_reuse_its_plan_per_shape_of_call():
    a = csr()
    x = tc.asarray(a)
    rng = np.random.default_rng(0)
    for width, cached in [(3, False), (3, True), (5, False), (3, True)]:
        d = rng.random((200, width))
        np.testing.assert_allclose(tc.einsum("ij,jk->ik", x, d, backend="local"), a @ d)
        assert tc.last_stats().get("plan_cached", False) is cached
    tc.einsum("ij,jk->ik", a, d, backend="local")  # a raw matrix may change: planned again
    assert not tc.last_stats().get("plan_cached", False)


def test_a_tc_program_takes_a_sparse_tensor_as_the_array_it_holds():
    a = csr()
    d = np.random.default_rng(0).random((200, 3))
    program = tc.compile("""
size N, M, K
input A : f64[N, M] sparse
input D : f64[M, K]
output C : f64[N, K]
C[i, k] += A[i, j] * D[j, k]
""")
    np.testing.assert_allclose(program.run(A=tc.asarray(a), D=d)["C"], a @ d)


def test_a_tensor_keeps_the_cuts_calls_make_of_it_and_drops_the_oldest(monkeypatch):
    import tensorc.sparse.plan as sparse_plan
    from tensorc.sparse.blocks import cut
    from tensorc.sparse.tensor import CUTS_KEPT

    a = sp.random_array((300, 200), density=0.05, format="csr", random_state=3)
    x = tc.asarray(a)
    made = []
    monkeypatch.setattr(sparse_plan, "cut", lambda value, steps: made.append(
        (value is x.source, steps)) or cut(value, steps))
    left = sp.random_array((5, 300), density=0.2, format="csr", random_state=4)
    for _ in range(3):  # a chain's products: A cut along its columns once, reused
        got = tc.einsum("ij,jk->ik", left, x, backend="local",
                        block_shape=((5, 300), (300, 50)))
        np.testing.assert_allclose(got.toarray(), (left @ a).toarray())
    assert [steps for of_x, steps in made if of_x] == [(300, 50)]
    first = x.cached_cut((300, 50))
    for width in range(1, CUTS_KEPT + 1):
        x.keep_cut((300, width), cut(x.source, (300, width)))
    assert first is not None and x.cached_cut((300, 50)) is None  # the least recently used


def test_a_tensor_keeps_only_the_cut_its_plan_chose():
    rng = np.random.default_rng(5)
    n = 20000
    a = sp.csr_array((rng.random(400_000), (rng.integers(0, n, 400_000),
                                            rng.integers(0, n, 400_000))), shape=(n, n))
    left = sp.random_array((64, n), density=0.05, format="csr", random_state=6)
    tried = tc.plan("ij,jk->ik", left, a).stats["blocking"]  # what a budget refines
    x = tc.asarray(a)
    got = tc.einsum("ij,jk->ik", left, x, backend="local", memory_limit="32MB")
    chosen = tc.last_stats()["blocking"]
    assert chosen != tried, chosen

    def steps(blocking):  # x's (j, k) block sizes from "j: 20000/5000 -> 4, k: ..."
        sizes = dict(part.split(": ") for part in blocking.split(", "))
        return tuple(int(sizes[name].split("/")[1].split(" ")[0]) for name in "jk")

    assert x.cached_cut(steps(chosen)) is not None
    assert x.cached_cut(steps(tried)) is None
    np.testing.assert_allclose(got.toarray(), (left @ a).toarray())
