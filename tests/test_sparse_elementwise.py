"""Element-wise functions of sparse arrays: sparse where the function keeps zeros, a dense
``tc.Array`` where it does not, refused where densifying breaks the memory budget; every
result against numpy on the dense arrays."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import sparse
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorc as tc
from tensorc.errors import MemoryLimitError
from tensorc.session import current


def matrix(seed: int, shape=(40, 30), density=0.1, dtype=np.float64) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    integral = np.dtype(dtype).kind in "iu"

    def values(size):
        return rng.integers(-9, 10, size) if integral else rng.random(size) - 0.25

    a = sp.random_array(shape, density=density, format="coo", rng=rng, data_sampler=values)
    return a.astype(dtype).tocsr()


def dense_of(value) -> np.ndarray:
    if isinstance(value, tc.sparse.SparseTensor):
        return value.todense()
    if isinstance(value, tc.Array):
        return np.asarray(value)
    return value.toarray() if hasattr(value, "toarray") else value.todense()


SPARSE_KEEPING = [  # (description, function of x and y, where y is sparse too)
    ("x * 2", lambda x, y: x * 2),
    ("2 * x", lambda x, y: 2 * x),
    ("x / 4", lambda x, y: x / 4),
    ("-x", lambda x, y: -x),
    ("abs(-x)", lambda x, y: abs(-x)),
    ("x ** 2", lambda x, y: x**2),
    ("x > 0.5", lambda x, y: x > 0.5),
    ("x != 0", lambda x, y: x != 0),
    ("x * y", lambda x, y: x * y),
    ("x + y", lambda x, y: x + y),
    ("x - y", lambda x, y: x - y),
    ("maximum", lambda x, y: tc.maximum(x, y)),
    ("np.sin", lambda x, y: np.sin(x)),
    ("tc.sqrt", lambda x, y: tc.sqrt(x)),
    ("np.multiply", lambda x, y: np.multiply(x, y)),
]


@pytest.mark.parametrize(("what", "fn"), SPARSE_KEEPING, ids=[c[0] for c in SPARSE_KEEPING])
def test_a_function_that_keeps_zeros_keeps_a_tensor_sparse(what, fn):
    a, b = matrix(1), matrix(2)
    with np.errstate(all="ignore"):  # sqrt of a negative value: nan, as numpy warns
        got = fn(tc.asarray(a), tc.asarray(b))
        want = np.asarray(fn(a.toarray(), b.toarray()))  # tc.sqrt of an ndarray is lazy
    assert isinstance(got, tc.sparse.SparseTensor), what
    np.testing.assert_allclose(got.todense(), want)
    assert got.dtype == want.dtype
    assert got.nnz == np.count_nonzero(want)  # zeros made at non-zeros are not kept


DENSIFYING = [
    ("x + 1", lambda x, y: x + 1),
    ("1 - x", lambda x, y: 1 - x),
    ("exp", lambda x, y: tc.exp(x)),
    ("x < 0.5", lambda x, y: x < 0.5),
    ("x == 0", lambda x, y: x == 0),
    ("x / y", lambda x, y: x / y),
    ("sigmoid", lambda x, y: tc.sigmoid(x)),
    ("x ** 0", lambda x, y: x**0),
]


@pytest.mark.parametrize(("what", "fn"), DENSIFYING, ids=[c[0] for c in DENSIFYING])
def test_a_function_that_makes_zeros_nonzero_gives_a_dense_array(what, fn):
    a, b = matrix(1), matrix(2)
    with np.errstate(all="ignore"):
        got = fn(tc.asarray(a), tc.asarray(b))
    assert isinstance(got, tc.Array), what
    with np.errstate(all="ignore"):
        want = (1 / (1 + np.exp(-a.toarray()))) if what == "sigmoid" else fn(
            a.toarray(), b.toarray())
        np.testing.assert_allclose(np.asarray(got), want)


def test_times_a_dense_array_stays_sparse_and_broadcasts_it():
    a = matrix(3)
    x = tc.asarray(a)
    column_scale = np.arange(1.0, 31.0)
    row_scale = np.arange(1.0, 41.0)[:, None]
    for got, want in [(x * column_scale, a.toarray() * column_scale),
                      (row_scale * x, row_scale * a.toarray()),
                      (x * tc.asarray(np.full((40, 30), 3.0)), a.toarray() * 3.0)]:
        assert isinstance(got, tc.sparse.SparseTensor)
        np.testing.assert_allclose(got.todense(), want)


def test_times_a_dense_array_with_inf_is_dense_as_numpy_is():
    a = matrix(4)
    scale = np.ones(30)
    scale[3] = np.inf
    got = tc.asarray(a) * scale
    assert isinstance(got, tc.Array)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.asarray(got), a.toarray() * scale)


def test_raw_scipy_and_pydata_operands_give_their_own_types():
    a = matrix(5)
    doubled = tc.multiply(a, 2.0)
    assert isinstance(doubled, sp.csr_array)
    np.testing.assert_array_equal(doubled.toarray(), 2.0 * a.toarray())
    negated = tc.negative(sp.csr_matrix(a))
    assert isinstance(negated, sp.csr_matrix)
    np.testing.assert_array_equal(negated.toarray(), -a.toarray())
    c = sparse.random((8, 9, 10), density=0.1, random_state=2)
    got = tc.multiply(c, c)
    assert isinstance(got, sparse.COO)
    np.testing.assert_allclose(got.todense(), c.todense() ** 2)
    g = sparse.GCXS.from_coo(c)
    sine = tc.sin(g)
    assert isinstance(sine, sparse.GCXS)
    np.testing.assert_allclose(sine.todense(), np.sin(c.todense()))


def test_duplicates_are_summed_before_a_function_that_is_not_linear():
    a = sp.coo_array((np.array([1.0, 2.0, 5.0]), (np.array([0, 0, 1]), np.array([1, 1, 0]))),
                     shape=(2, 2))
    got = tc.asarray(a) ** 2
    np.testing.assert_array_equal(got.todense(), np.array([[0.0, 9.0], [25.0, 0.0]]))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), density=st.sampled_from([0.0, 0.01, 0.3, 1.0]),
       dtype=st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.complex128]),
       op=st.sampled_from(["multiply", "add", "subtract", "maximum", "greater", "pow"]),
       scalar=st.sampled_from([None, 0, 2, -1.5]))
def test_matches_numpy_on_random_operands(seed, density, dtype, op, scalar):
    a = matrix(seed, density=density, dtype=dtype)
    if scalar is None:
        other, other_dense = matrix(seed + 1, density=density, dtype=dtype), None
        other_dense = other.toarray()
        other = tc.asarray(other)
    else:
        other = other_dense = scalar
    if op == "pow" and (scalar is None or dtype in (np.int32, np.int64)):
        return  # integer powers of negative or zero exponents are numpy errors, not sparse ones
    if op in ("maximum", "greater") and dtype == np.complex128:
        return  # numpy orders no complex numbers here either
    with np.errstate(all="ignore"):
        want = getattr(np, op)(a.toarray(), other_dense)
        got = dense_of(getattr(tc, op)(tc.asarray(a), other))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.dtype == want.dtype


def test_integer_operands_hold_values():  # the differential test compares real numbers
    a = matrix(3, density=0.3, dtype=np.int64)
    assert np.count_nonzero(a.toarray()) > 0.8 * a.nnz


def test_densifying_over_the_budget_is_refused_with_the_sizes():
    session = current()
    before = session.memory_limit
    session.memory_limit = "100kB"
    try:
        x = tc.asarray(matrix(6, shape=(200, 100)))
        with pytest.raises(MemoryLimitError) as err:
            x + 1
        assert str(err.value) == (
            "tc.add would densify a sparse (200, 100) float64 array (2,000 non-zeros) into "
            "160 kB, over the memory budget of 100 kB (the session's memory_limit (tc.init)); "
            "functions that keep zeros (x * 2, x * y, x > 0, sin(x)) stay sparse")
        assert isinstance(x * 2, tc.sparse.SparseTensor)  # within budget: sparse is fine
    finally:
        session.memory_limit = before


def test_operands_that_do_not_broadcast_are_named():
    with pytest.raises(tc.errors.TensorcError, match=r"tc.multiply: operands of shapes "
                       r"\(40, 30\), \(7,\) do not broadcast"):
        tc.asarray(matrix(7)) * np.ones(7)


def test_a_result_is_a_sparse_operand_of_einsum():
    a = matrix(8)
    v = np.arange(30.0)
    np.testing.assert_allclose(tc.einsum("ij,j->i", tc.asarray(a) * 2, v), 2 * (a @ v))


def test_the_budget_counts_every_operand_densified():
    session = current()
    before = session.memory_limit
    session.memory_limit = "250kB"  # each operand's dense form fits, both do not
    try:
        x, y = tc.asarray(matrix(8, shape=(200, 100))), tc.asarray(matrix(9, shape=(200, 100)))
        with pytest.raises(MemoryLimitError, match=r"160 kB \(and 320 kB with the other"):
            x / y
    finally:
        session.memory_limit = before


def test_a_list_operand_broadcasts_as_numpy_does():
    a = sp.csr_array(np.array([[1.0, 0.0]]))
    got = tc.multiply(a, [[1.0, 2.0], [3.0, 4.0]])  # a sparse operand broadcast: dense
    assert isinstance(got, tc.Array)
    np.testing.assert_array_equal(np.asarray(got), a.toarray() * np.array([[1, 2], [3, 4]]))


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_sum_of_a_sparse_array_matches_numpy_without_densifying(axis, dtype, monkeypatch):
    a = matrix(10, density=0.2, dtype=dtype)
    want = a.toarray().sum(axis=axis)
    monkeypatch.setattr(sp.csr_array, "toarray", None)  # any densifying would fail
    got = tc.sum(tc.asarray(a), axis=axis)
    assert isinstance(got, tc.Array)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    assert np.asarray(got).dtype == want.dtype


def test_sum_of_a_pydata_array_keeps_dims_and_names_a_bad_axis():
    c = sparse.random((6, 7, 8), density=0.2, random_state=2)
    got = tc.sum(c, axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(np.asarray(got), c.todense().sum(axis=(0, 2), keepdims=True))
    with pytest.raises(tc.errors.AxisError, match="axis 3 is out of bounds"):
        tc.sum(c, axis=3)
    with pytest.raises(tc.errors.AxisError, match="repeated"):
        tc.sum(c, axis=(0, -3))
