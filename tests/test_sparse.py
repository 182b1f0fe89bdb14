"""Sparse operands in ``tc.einsum``: differential tests against dense numpy (and the
libraries' own products), the result-type rule, tasks only where non-empty blocks meet,
``tc.sparse`` constructors and ``.tns`` files, and the errors bad input gets."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import sparse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorc as tc
from tensorc import session
from tensorc.sparse.formats import is_sparse
from tensorc.sparse.rules import BLOCK_NNZ

# (subscripts, which operands are sparse) — every kernel: scipy products in each layout,
# the fused gather-scatter (MTTKRP, SDDMM, scaling, reductions), pydata's einsum, pairwise
# chains, diagonals, ellipses and scalars
PATTERNS = [
    ("ij,jk->ik", (True, False)), ("ij,jk->ik", (False, True)), ("ij,jk->ik", (True, True)),
    ("ji,jk->ki", (True, True)), ("ij,j->i", (True, False)), ("j,jk->k", (False, True)),
    ("ijk,jf,kf->if", (True, False, False)), ("ijk,ja,kb->iab", (True, False, False)),
    ("ij,ik,jk->ij", (True, False, False)), ("ij,ij->ij", (True, False)),
    ("ij,ij->ij", (True, True)), ("ij,ij->", (True, True)), ("ij->i", (True,)),
    ("ij->ji", (True,)), ("ii->i", (True,)), ("ij,jk,kl->il", (True, True, True)),
    ("ij,jk,kl->il", (True, True, False)), ("bij,bjk->bik", (True, True)),
    ("...j,j->...", (True, False)), (",ij->ij", (False, True)), ("ij,kl->ijkl", (True, True)),
]
DTYPES = [np.float64, np.float32, np.complex128, np.int64]


def dense(x) -> np.ndarray:
    if sp.issparse(x):
        return x.toarray()
    if isinstance(x, sparse.SparseArray):
        return x.todense()
    return np.asarray(x)


def _shapes(subscripts: str, rng) -> tuple[list[tuple[int, ...]], dict]:
    terms = subscripts.split("->")[0].split(",")
    extent = {c: int(rng.integers(0, 7)) if rng.random() < 0.1 else int(rng.integers(1, 9))
              for c in set("".join(terms)) if c.isalpha()}
    batch = [int(rng.integers(1, 4)) for _ in range(2)]
    shapes = []
    for term in terms:
        shape = [extent[c] for c in term.replace("...", "")]
        shapes.append(tuple(batch + shape) if "..." in term else tuple(shape))
    return shapes, extent


def _sparse_operand(rng, shape, dtype, kind: str, density: float):
    """A random sparse operand of ``kind`` with duplicates or explicit zeros sometimes."""
    size = int(np.prod(shape))
    count = int(round(density * size))
    flat = rng.choice(size, size=count, replace=False) if size else np.zeros(0, int)
    coords = np.stack(np.unravel_index(flat, shape)) if shape else np.zeros((0, count), int)
    values = rng.integers(-4, 5, count).astype(dtype) if np.dtype(dtype).kind in "iu" else (
        rng.standard_normal(count).astype(dtype))
    if count and rng.random() < 0.3:  # explicit zeros and repeated coordinates
        values[: max(1, count // 4)] = 0
        coords = np.concatenate([coords, coords[:, : count // 2]], axis=1)
        values = np.concatenate([values, values[: count // 2]])
    if kind in ("csr", "coo_array") and len(shape) == 2:
        coo = sp.coo_array((values, tuple(coords)), shape=shape)  # duplicates kept
        return coo.tocsr() if kind == "csr" else coo
    if kind == "gcxs":
        return sparse.GCXS.from_coo(sparse.COO(coords, values, shape=shape))
    return sparse.COO(coords, values, shape=shape, has_duplicates=True)


@st.composite
def sparse_problems(draw):
    subscripts, flags = draw(st.sampled_from(PATTERNS))
    seed = draw(st.integers(0, 2**32 - 1))
    density = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0, None]))
    dtype = draw(st.sampled_from(DTYPES))
    blocking = draw(st.sampled_from([None, "grid", "grid"]))
    rng = np.random.default_rng(seed)
    shapes, extent = _shapes(subscripts, rng)
    operands = []
    for shape, is_sp in zip(shapes, flags, strict=True):
        if not is_sp:
            operands.append(rng.integers(-3, 4, shape).astype(dtype) if not shape or rng.random()
                            < 0.5 else rng.standard_normal(shape).astype(dtype))
            if not shape:
                operands[-1] = 2.5 if rng.random() < 0.5 else operands[-1]
            continue
        kind = str(rng.choice(["csr", "coo", "gcxs", "coo_array"]))
        operands.append(_sparse_operand(rng, shape, dtype, kind,
                                        float(rng.random()) if density is None else density))
    grid = {c: int(rng.integers(1, 4)) for c in extent} if blocking else None
    return subscripts, operands, grid


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sparse_problems())
def test_sparse_einsum_matches_numpy(problem):
    subscripts, operands, grid = problem
    expected = np.einsum(subscripts, *(dense(op) for op in operands))
    options = {} if grid is None else {"grid": grid}
    result = tc.einsum(subscripts, *operands, **options)
    got = dense(result)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    if is_sparse(result):  # canonical: no stored zeros
        data = result.data if not sp.issparse(result) else result.tocoo().data
        assert np.all(data != 0)


def _matrix(rows: int, columns: int, density: float, seed: int):
    return tc.sparse.random((rows, columns), density, seed=seed, format="csr")


def test_result_types_follow_the_rule():
    a, b = _matrix(8, 6, 0.3, 1), _matrix(6, 5, 0.3, 2)
    d = np.ones((6, 5))
    assert isinstance(tc.einsum("ij,jk->ik", a, d), np.ndarray)      # S @ D: dense
    assert isinstance(tc.einsum("ij,jk->ik", a, b), sp.csr_array)    # S @ S: sparse
    assert isinstance(tc.einsum("ij,ij->ij", a, np.ones((8, 6))), sp.csr_array)  # zeros kept
    assert isinstance(tc.einsum("ij,j->ij", a, np.ones(6)), sp.csr_array)
    assert isinstance(tc.einsum("ij->", a), np.floating)             # 0-d: numpy scalar
    assert isinstance(tc.einsum("ij->i", a), sp.coo_array)           # scipy, not 2-d
    m = sp.csr_matrix(a)
    assert isinstance(tc.einsum("ij,jk->ik", m, sp.csr_matrix(b)), sp.csr_matrix)
    x = sparse.COO.from_scipy_sparse(a)
    assert isinstance(tc.einsum("ij,jk->ik", x, b), sparse.COO)      # any pydata: pydata
    g = sparse.GCXS.from_coo(x)
    assert isinstance(tc.einsum("ij,jk->ik", g, sparse.GCXS.from_scipy_sparse(b)),
                      sparse.GCXS)
    mttkrp = tc.einsum("ijk,jf,kf->if", tc.sparse.random((5, 4, 3), 0.3), np.ones((4, 2)),
                       np.ones((3, 2)))
    assert isinstance(mttkrp, np.ndarray)


def test_tensordot_and_matmul_take_sparse_operands():
    a, b = _matrix(8, 6, 0.3, 1), _matrix(6, 5, 0.3, 2)
    d = np.arange(30.0).reshape(6, 5)
    np.testing.assert_allclose(tc.tensordot(a, d, axes=1), a @ d)
    assert isinstance(tc.tensordot(a, b, axes=1), sp.csr_array)
    np.testing.assert_allclose(tc.matmul(a, d), a @ d)
    np.testing.assert_allclose(tc.matmul(d.T, a.T), d.T @ a.T.toarray())
    np.testing.assert_allclose(tc.matmul(a, np.ones(6)), a @ np.ones(6))
    np.testing.assert_allclose(tc.matmul(a, b).toarray(), (a @ b).toarray())


def test_out_and_dtype_for_a_dense_result():
    a = _matrix(8, 6, 0.3, 1)
    d = np.ones((6, 5))
    out = np.empty((8, 5), np.float32)
    assert tc.einsum("ij,jk->ik", a, d, out=out, casting="same_kind") is out
    np.testing.assert_allclose(out, a @ d, rtol=1e-6)
    assert tc.einsum("ij,jk->ik", a, d, dtype=np.complex128).dtype == np.complex128
    with pytest.raises(tc.PlanError, match="sparse result"):
        tc.einsum("ij,ij->ij", a, np.ones((8, 6)), out=np.empty((8, 6)))


def _occupied(matrix, step: int) -> set[tuple[int, int]]:
    coo = matrix.tocoo()
    return set(zip((coo.row // step).tolist(), (coo.col // step).tolist(), strict=True))


def test_tasks_only_where_non_empty_blocks_meet():
    # a hand-made case: A has blocks (0,0) and (1,1), B only (0,1): one product meets
    a = np.zeros((4, 4))
    a[0, 1], a[3, 2] = 1.0, 2.0
    b = np.zeros((4, 4))
    b[1, 3] = 3.0
    result = tc.einsum("ij,jk->ik", sp.csr_array(a), sp.csr_array(b), grid={"i": 2, "j": 2,
                                                                          "k": 2})
    np.testing.assert_allclose(result.toarray(), a @ b)
    stats = tc.last_stats()
    assert (stats["pair_tasks"], stats["load_tasks"], stats["reduce_tasks"]) == (1, 2, 0)
    # a 1 % matrix in 20 x 20 blocks: tasks only for the (i, j, k) where A(i,j), B(j,k) meet
    n, step = 400, 20
    x, y = _matrix(n, n, 0.003, 3), _matrix(n, n, 0.003, 4)
    blocks = n // step
    tc.einsum("ij,jk->ik", x, y, grid={"i": blocks, "j": blocks, "k": blocks})
    left, right = _occupied(x, step), _occupied(y, step)
    meeting = sum(1 for (i, j) in left for (j2, _) in right if j == j2)
    stats = tc.last_stats()
    assert stats["pair_tasks"] == meeting < blocks**3
    assert stats["operands"][0]["nonempty_blocks"] == len(left) < blocks**2
    # an empty operand: no compute task at all, the result is zeros
    empty = sp.csr_array((50, 40))
    np.testing.assert_array_equal(tc.einsum("ij,jk->ik", empty, np.ones((40, 3))),
                                  np.zeros((50, 3)))
    assert tc.last_stats()["pair_tasks"] == 0


def test_empty_rows_and_blocks_in_a_dense_result():
    a = _matrix(300, 200, 0.05, 5).tolil()
    a[50:250] = 0  # empty rows and whole empty row blocks
    a = a.tocsr()
    d = np.random.default_rng(0).random((200, 7))
    result = tc.einsum("ij,jk->ik", a, d, grid={"i": 6})
    np.testing.assert_allclose(result, a @ d)
    assert tc.last_stats()["operands"][0]["nonempty_blocks"] == 2


def test_duplicates_are_summed_and_explicit_zeros_ignored():
    coo = sp.coo_array(([1.0, 2.0, 0.0, 5.0], ([0, 0, 1, 2], [1, 1, 0, 2])), shape=(3, 3))
    assert not coo.has_canonical_format
    np.testing.assert_allclose(tc.einsum("ij,jk->ik", coo, np.eye(3)), coo.toarray())
    result = tc.einsum("ij->ij", sparse.COO([[0, 0, 1], [1, 1, 0]], [1.0, 2.0, 0.0],
                                             shape=(3, 3), has_duplicates=True))
    assert result.nnz == 1 and result.todense()[0, 1] == 3.0


def test_a_csr_with_unsorted_repeated_columns_cut_by_columns_is_read_as_written():
    """Rows whose columns are out of order, repeated and explicitly zero, cut into column
    blocks: summed as scipy sums them, and the caller's matrix left as it was."""
    data = np.array([3.0, 1.0, 2.0, 0.0, 4.0, 5.0, 6.0])
    indices = np.array([5, 0, 5, 2, 3, 1, 0])
    indptr = np.array([0, 4, 4, 7])
    a = sp.csr_array((data, indices, indptr), shape=(3, 6))
    assert not a.has_canonical_format
    x = np.arange(12.0).reshape(6, 2)
    got = tc.einsum("ij,jk->ik", a, x, grid={"i": 1, "j": 3, "k": 1}, backend="local")
    np.testing.assert_allclose(got, a.toarray() @ x)
    np.testing.assert_array_equal(a.indices, indices)  # not sorted in place
    assert a.nnz == 7


def test_a_csr_times_a_vector_over_its_rows_is_split_by_rows():
    """``ij,i->j``: the CSR's row blocks are slices of it and their partial vectors are
    small, so the rows are split (summed after), not the columns (a conversion to
    coordinates)."""
    a = sp.random_array((4000, 3000), density=0.02, format="csr", random_state=5)
    x = np.random.default_rng(6).random(4000)
    got = tc.einsum("ij,i->j", a, x, backend="local")
    np.testing.assert_allclose(got, a.T @ x)
    assert tc.last_stats()["blocking"].startswith("i: 4000/")
    assert tc.last_stats()["blocking"].endswith("j: 3000/3000 -> 1")


def test_an_mttkrp_of_a_later_mode_splits_the_tensor_along_its_sorted_first_dimension():
    """``ijk,ir,kr->jr`` on coordinates in row-major order: blocks along ``i`` are already
    contiguous (no sort, no copy) and the partial ``jr`` results are small, so ``i`` is
    split and they are summed, not ``j`` (a sort of the whole tensor by ``j``)."""
    rng = np.random.default_rng(8)
    shape = (300, 200, 250)
    flat = rng.choice(np.prod(shape), size=100_000, replace=False)
    x = sparse.COO(np.stack(np.unravel_index(flat, shape)), rng.random(100_000), shape=shape)
    a, c = rng.random((300, 4)), rng.random((250, 4))
    got = tc.einsum("ijk,ir,kr->jr", x, a, c, backend="local")
    np.testing.assert_allclose(got, np.einsum("ijk,ir,kr->jr", x.todense(), a, c))
    assert tc.last_stats()["blocking"].startswith("i: 300/")
    assert "j: 200/200 -> 1" in tc.last_stats()["blocking"]


@pytest.mark.parametrize("subscripts", ["ijk,jf,kf->if", "ijk,if,kf->jf", "ijk,if,jf->fk",
                                        "ijk,kf->fj", "ijk,if->fj"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_compiled_scatter_loop_equals_numpy_in_every_mode(subscripts, dtype,
                                                              monkeypatch):
    """MTTKRP in each mode, and one gathered matrix with a sum over the other sparse
    indices, the result in either order: the compiled loop's shape (one sparse and one
    free index out), and the loop is what computed it."""
    calls = _counted(monkeypatch, "scatter_products")
    rng = np.random.default_rng(9)
    inputs, _ = subscripts.split("->")
    shape = (40, 30, 20)[: len(inputs.split(",")[0])]
    flat = rng.choice(np.prod(shape), size=600, replace=False)
    x = sparse.COO(np.stack(np.unravel_index(flat, shape)),
                   rng.random(600).astype(dtype), shape=shape)
    sizes = dict(zip("ijk", shape, strict=False)) | {"f": 5}
    dense = [rng.random(tuple(sizes[n] for n in key)).astype(dtype)
             for key in inputs.split(",")[1:]]
    got = tc.einsum(subscripts, x, *dense, backend="local")
    expected = np.einsum(subscripts, x.todense(), *dense)
    np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == "float32" else 1e-12)
    assert got.dtype == np.dtype(dtype)
    plan = tc.plan(subscripts, x, *dense)
    assert "tensorc gather-scatter (compiled loop)" in plan.explain()
    assert calls, "the compiled scatter loop did not run"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("subscripts", ["ij,jk->ik", "ij,jk->ki"])
def test_a_csr_times_a_dense_matrix_runs_the_compiled_row_loop(subscripts, dtype,
                                                               monkeypatch):
    calls = _counted(monkeypatch, "csr_times_dense")
    a = sp.random_array((300, 200), density=0.05, format="csr", random_state=4,
                        dtype=np.dtype(dtype))
    d = np.random.default_rng(5).random((200, 7)).astype(dtype)
    got = tc.einsum(subscripts, a, d, backend="local")
    np.testing.assert_allclose(got, np.einsum(subscripts, a.toarray(), d),
                               rtol=1e-5 if dtype == "float32" else 1e-12)
    assert got.dtype == np.dtype(dtype)
    assert "a CSR block times a dense matrix as a compiled row loop" in tc.plan(
        subscripts, a, d).explain()
    assert calls, "the compiled row loop did not run"


def _counted(monkeypatch, name: str) -> list:
    """Calls of :mod:`tensorc.codegen.sparse_loops`' ``name`` from now on (each still runs)."""
    from tensorc.codegen import sparse_loops

    calls, loop = [], getattr(sparse_loops, name)

    def counting(*args, **kwargs):
        calls.append(name)
        return loop(*args, **kwargs)

    monkeypatch.setattr(sparse_loops, name, counting)
    return calls


def test_explain_and_stats_show_non_zeros_per_block_and_density():
    a, b = _matrix(400, 300, 0.02, 1), _matrix(300, 200, 0.02, 2)
    plan = tc.plan("ij,jk->ik", a, b, grid={"i": 4, "j": 2})
    text = plan.explain()
    assert "non-zeros per non-empty block min/mean/max" in text
    assert "estimated density" in text and "SpGEMM" in text
    est = plan.stats["estimated_output_density"]
    actual = (a @ b).nnz / (400 * 200)
    assert abs(est - actual) < 0.1 * actual + 0.01
    tc.einsum("ijk,jf,kf->if", tc.sparse.random((50, 40, 30), 0.01), np.ones((40, 4)),
              np.ones((30, 4)))
    stats = tc.last_stats()
    assert stats["sparse"] and stats["steps"][0]["kernel"].startswith("tensorc gather")
    assert stats["modelled_peak_bytes"] > 0 and stats["operands"][0]["block_nnz_max"] > 0


def test_blocking_by_non_zeros_and_the_memory_model():
    x = tc.sparse.random((2000, 300, 300), 4 * BLOCK_NNZ / (2000 * 300 * 300), seed=2)
    plan = tc.plan("ijk,jf,kf->if", x, np.ones((300, 4)), np.ones((300, 4)), workers=2)
    info = plan.stats["operands"][0]
    assert info["grid"][0] >= 4 and info["grid"][1:] == (1, 1)   # split by non-zeros
    assert info["block_nnz_max"] <= 1.2 * BLOCK_NNZ
    assert plan.stats["reduce_tasks"] == 0                           # i is an output index
    with pytest.raises(tc.MemoryLimitError, match="sparse einsum"):
        tc.einsum("ijk,jf,kf->if", x, np.ones((300, 4)), np.ones((300, 4)),
                  memory_limit=10_000)


def test_sparse_operands_are_never_densified(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a sparse operand was densified")

    a, b = _matrix(60, 50, 0.1, 1), _matrix(50, 40, 0.1, 2)
    x = tc.sparse.random((20, 15, 10), 0.1, seed=3)
    monkeypatch.setattr(sparse.COO, "todense", refuse)
    monkeypatch.setattr(sp.csr_array, "toarray", refuse)
    tc.einsum("ij,jk->ik", a, np.ones((50, 3)), grid={"i": 3, "j": 2})
    tc.einsum("ij,jk->ik", a, b, grid={"i": 2, "j": 2, "k": 2})
    tc.einsum("ijk,jf,kf->if", x, np.ones((15, 2)), np.ones((10, 2)), grid={"j": 2})
    tc.einsum("ijk,ijk->ik", x, x)


def test_random_is_reproducible():
    a = tc.sparse.random((100, 80), 0.05, seed=7)
    b = tc.sparse.random((100, 80), 0.05, seed=7)
    assert a.nnz == 400 and np.array_equal(a.coords, b.coords) and np.array_equal(a.data,
                                                                                   b.data)
    assert not np.array_equal(tc.sparse.random((100, 80), 0.05, seed=8).coords, a.coords)
    blocked = tc.sparse.random((100, 80), 0.05, seed=7, grid=(4, 2))
    assert blocked.nnz == 400 and blocked.shape == (100, 80)
    again = tc.sparse.random((100, 80), 0.05, seed=7, grid=(4, 2))
    assert np.array_equal(blocked.todense(), again.todense())
    assert tc.sparse.random((10, 10), 1.0).nnz == 100 and tc.sparse.random((10, 10), 0).nnz == 0
    assert isinstance(tc.sparse.random((5, 5), 0.2, format="csr"), sp.csr_array)
    with pytest.raises(tc.ShapeError, match="density"):
        tc.sparse.random((5, 5), 1.5)


def test_from_coo_sums_duplicates_and_refuses_bad_coordinates():
    x = tc.sparse.from_coo([[0, 0, 2], [1, 1, 3]], [1.0, 2.0, 4.0], (3, 4))
    assert x.nnz == 2 and x.todense()[0, 1] == 3.0 and x.todense()[2, 3] == 4.0
    np.testing.assert_array_equal(tc.sparse.from_coo(np.array([[0, 4]]), [1, 1]).todense(),
                                  [1, 0, 0, 0, 1])
    with pytest.raises(tc.ShapeError, match=r"coordinate 5 of dimension 1 \(entry 1\) is out "
                                            r"of bounds for shape \(3, 4\)"):
        tc.sparse.from_coo([[0, 1], [1, 5]], [1.0, 2.0], (3, 4))
    with pytest.raises(tc.ShapeError, match="coordinate -1 of dimension 0"):
        tc.sparse.from_coo([[-1], [0]], [1.0], (3, 4))
    with pytest.raises(tc.TypeCheckError, match="mixed index dtypes: int32 .dimension 0., "
                                                "uint64 .dimension 1."):
        tc.sparse.from_coo([np.array([0], np.int32), np.array([1], np.uint64)], [1.0], (3, 4))
    with pytest.raises(tc.TypeCheckError, match="coordinates are integers"):
        tc.sparse.from_coo([[0.5], [1.0]], [1.0], (3, 4))
    with pytest.raises(tc.ShapeError, match="2 coordinates but 3 values"):
        tc.sparse.from_coo([[0, 1], [1, 2]], [1.0, 2.0, 3.0], (3, 4))


def test_tns_round_trip_and_errors(tmp_path):
    x = tc.sparse.random((7, 6, 5), 0.2, seed=1)
    path = tmp_path / "x.tns"
    tc.sparse.save_tns(path, x)
    back = tc.sparse.load_tns(path, shape=(7, 6, 5))
    assert np.array_equal(back.coords, x.coords) and np.array_equal(back.data, x.data)
    text = "# a comment\n1 1 1 1.5\n\n2 3 1 2.0\n1 1 1 0.5\n"
    (tmp_path / "ok.tns").write_text(text)
    y = tc.sparse.load_tns(tmp_path / "ok.tns")
    assert y.shape == (2, 3, 1) and y.todense()[0, 0, 0] == 2.0 and y.todense()[1, 2, 0] == 2.0

    def refused(content: str, match: str):
        bad = tmp_path / "bad.tns"
        bad.write_text(content)
        with pytest.raises(tc.StorageError, match=match):
            tc.sparse.load_tns(bad)

    refused("1 1 1 1.0\n2 2 1.0\n", r"bad.tns:2:8: 3 fields, expected 4 \(3 coordinates and "
                                    r"a value, as on line 1\)")
    refused("1 1 1.0\n2 2 abc\n", r"bad.tns:2:5: value 'abc' is not a number")
    refused("1 1 1.0\n2 x 3.0\n", r"bad.tns:2:3: coordinate 'x' is not a number")
    refused("1 1 1.0\n2 1.5 3.0\n", r"bad.tns:2:3: coordinate '1.5' is not an integer")
    refused("1 1 1.0\n0 2 3.0\n", r"bad.tns:2:1: coordinate '0' is below 1")
    with pytest.raises(tc.StorageError, match="out of bounds"):
        tc.sparse.load_tns(tmp_path / "ok.tns", shape=(2, 2, 1))


def test_unsupported_mixes_get_clear_errors(monkeypatch):
    a = _matrix(6, 5, 0.3, 1)
    with pytest.raises(tc.UnsupportedError, match="cannot join a lazy tc.Array program"):
        tc.einsum("ij,jk->ik", a, tc.ones((5, 3)) * 2)
    filled = sparse.COO([[0], [1]], [1.0], shape=(6, 5), fill_value=1.0)
    with pytest.raises(tc.UnsupportedError, match="fill value"):
        tc.einsum("ij,jk->ik", filled, np.ones((5, 3)))

    class RemoteExecutor:  # what a Ray session's executor answers
        in_process = False

    monkeypatch.setattr(session.current(), "executor", RemoteExecutor())
    with pytest.raises(tc.UnsupportedError, match="local executor"):
        tc.plan("ij,jk->ik", a, np.ones((5, 3)), nodes=4)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_a_sampled_product_runs_the_compiled_loop_where_it_serves(dtype):
    rng = np.random.default_rng(12)
    r = sp.random_array((300, 200), density=0.05, format="csr", rng=rng,
                        data_sampler=lambda size: rng.integers(1, 5, size)).astype(dtype)
    assert np.count_nonzero(r.data) == r.nnz
    u = rng.integers(-3, 4, (300, 8)).astype(dtype)
    v = rng.integers(-3, 4, (200, 8)).astype(dtype)
    got = tc.einsum("ij,if,jf->ij", r, u, v)
    kernel = tc.last_stats()["steps"][0]["kernel"]
    compiled = np.dtype(dtype) != np.int64
    assert ("sampled product (compiled loop)" in kernel) == compiled, kernel
    want = r.toarray() * (u @ v.T)
    np.testing.assert_allclose(got.toarray(), want, rtol=1e-5)
    assert got.nnz == np.count_nonzero(want)  # a product of 0 is not kept


def test_a_sampled_product_reads_a_csr_pattern_in_place_and_never_changes_it():
    rng = np.random.default_rng(20)
    r = sp.random_array((300, 200), density=0.05, format="csr", random_state=20)
    pattern = tc.asarray(r) != 0  # a bool pattern, as a factorisation samples it
    indices, indptr = pattern.wrapped.indices.copy(), pattern.wrapped.indptr.copy()
    u, v = rng.random((300, 8)), rng.random((8, 200))
    u[3] = 0  # row 3's products are all zero: dropped
    for _ in range(2):
        got = tc.einsum("ij,if,fj->ij", pattern, u, v, backend="local")
        assert "sampled product (compiled loop)" in tc.last_stats()["steps"][0]["kernel"]
        want = (r != 0).toarray() * (u @ v)
        np.testing.assert_allclose(got.toarray(), want, rtol=1e-12)
        assert got.nnz == np.count_nonzero(want) and got.dtype == np.float64
        got.indices[:] = 0  # the result's arrays are its own
        np.testing.assert_array_equal(pattern.wrapped.indices, indices)
        np.testing.assert_array_equal(pattern.wrapped.indptr, indptr)


def test_a_block_fuller_than_its_compressed_form_multiplies_as_a_dense_one(monkeypatch):
    rng = np.random.default_rng(13)
    full = sp.random_array((40, 300), density=0.9, format="csr", rng=rng)
    thin = sp.random_array((300, 200), density=0.02, format="csr", rng=rng)
    want = (full @ thin).toarray()
    made_dense = []
    real = sp.csr_array.toarray

    def recorded(self, *args, **kwargs):
        made_dense.append(self.nnz / (self.shape[0] * self.shape[1]))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(sp.csr_array, "toarray", recorded)
    got = tc.einsum("ij,jk->ik", full, thin)
    assert made_dense and min(made_dense) > 0.6  # only the full operand's blocks
    assert isinstance(got, sp.csr_array) and got.nnz == np.count_nonzero(want)
    np.testing.assert_allclose(real(got), want)


def test_a_repeated_call_plans_with_the_density_its_last_run_observed():
    n = 2000  # a column times a row: the independence model says n non-zeros, there are n²
    column = sp.csr_array((np.ones(n), (np.arange(n), np.zeros(n, int))), shape=(n, n))
    row = sp.csr_array((np.ones(n), (np.zeros(n, int), np.arange(n))), shape=(n, n))
    tc.einsum("ij,jk->ik", column, row)
    first = tc.last_stats()
    assert first["density_correction"] is None and first["estimated_output_nnz"] < 3 * n
    assert "corrected from the last run" in tc.plan("ij,jk->ik", column, row).explain()
    result = tc.einsum("ij,jk->ik", column, row)
    again = tc.last_stats()
    assert again["estimated_output_nnz"] == result.nnz == n * n
    assert again["last_run_output_nnz"] == n * n
    assert again["model_output_nnz"] == first["estimated_output_nnz"]
    # the budget the first plan thought it kept is now known to be too small: refused
    with pytest.raises(tc.MemoryLimitError, match="its result alone holds 48"):
        tc.einsum("ij,jk->ik", column, row, memory_limit="20MB")


def test_a_correction_never_lowers_an_estimate_below_the_model():
    s = sp.random_array((1000, 1000), density=0.5, format="csr", rng=np.random.default_rng(0))
    with pytest.raises(tc.MemoryLimitError, match="its result alone holds"):
        tc.einsum("ij,ij->ij", s, np.ones((1000, 1000)), memory_limit="2MB")
    assert tc.einsum("ij,ij->ij", s, np.zeros((1000, 1000))).nnz == 0  # same signature
    with pytest.raises(tc.MemoryLimitError, match="its result alone holds"):
        tc.einsum("ij,ij->ij", s, np.ones((1000, 1000)), memory_limit="2MB")


def test_a_full_block_times_an_infinite_entry_gives_scipys_answer():
    rng = np.random.default_rng(14)
    full = sp.random_array((40, 300), density=0.9, format="csr", rng=rng).toarray()
    full[:, 5] = 0.0
    full[0, 5] = 1.0
    thin = sp.random_array((300, 200), density=0.02, format="lil", rng=rng)
    thin[5, 7] = np.inf
    full, thin = sp.csr_array(full), sp.csr_array(thin)
    want = full @ thin
    got = tc.einsum("ij,jk->ik", full, thin)
    np.testing.assert_array_equal(got.toarray(), want.toarray())  # no nan where 0 × inf


def test_a_skewed_operand_is_cut_finer_until_no_block_holds_more_than_a_workers_share():
    rng = np.random.default_rng(15)
    n, count = 8000, 400_000
    rows = np.minimum((n * rng.random(count) ** 2).astype(np.int64), n - 1)  # power law
    x = tc.sparse.from_coo(np.stack([rows, rng.integers(0, 300, count)]), rng.random(count),
                           (n, 300))
    b = rng.random((300, 4))
    got = tc.einsum("ij,jf->if", x, b, workers=4)
    stats = tc.last_stats()
    (operand,) = [info for info in stats["operands"] if info["sparse"]]
    assert operand["block_nnz_max"] <= 1.25 * x.nnz / 4, stats["blocking"]
    assert "i: 8000/" in stats["blocking"] and "-> 4," not in stats["blocking"]
    np.testing.assert_allclose(got, x.todense() @ b, rtol=1e-10)
    uniform = tc.sparse.from_coo(np.stack([rng.integers(0, n, count),
                                           rng.integers(0, 300, count)]),
                                 rng.random(count), (n, 300))
    tc.einsum("ij,jf->if", uniform, b, workers=4)
    assert "i: 8000/2000 -> 4" in tc.last_stats()["blocking"]  # even blocks stay as they were


def test_a_matrix_product_kernel_names_its_library():
    from tensorc.codegen.sparse_kernels import SparseMatmul

    kernel = SparseMatmul((False, False, False), [True, True], True, np.float64)
    assert repr(kernel) == "SparseMatmul(scipy.sparse CSR @ CSR (SpGEMM))"


@pytest.mark.parametrize("case", ["sorted", "unsorted", "too sparse"])
def test_a_csr_times_a_dense_operand_in_panels_of_its_rows_is_scipy_s(monkeypatch, case):
    """Rows with sorted columns are swept panel by panel of the dense operand's rows (here
    panels of 7 rows, with empty rows and a last short panel); unsorted rows, or fewer
    entries than rows times panels, in one pass."""
    from tensorc.codegen import sparse_loops

    monkeypatch.setattr(sparse_loops, "PANEL_BYTES", 7 * 3 * 8)
    monkeypatch.setattr(sparse_loops, "WHOLE_DENSE_BYTES", 20 * 3 * 8)
    panels = _counted(monkeypatch, "_rows_times_panels")
    whole = _counted(monkeypatch, "_rows_times")
    monkeypatch.setattr(sparse_loops, "_compiled", lambda loop: loop)  # the Python loops
    a = _matrix(30, 50, 0.02 if case == "too sparse" else 0.2, 31).tocsr()
    a.data[a.indptr[4]:a.indptr[5]] = 0  # an empty row
    a.eliminate_zeros()
    if case == "unsorted":  # each row's entries reversed: unsorted, as SpGEMM leaves them
        for row in range(30):
            s, e = a.indptr[row], a.indptr[row + 1]
            a.indices[s:e], a.data[s:e] = a.indices[s:e][::-1].copy(), a.data[s:e][::-1].copy()
        a.has_sorted_indices = False
    d = np.random.default_rng(32).random((50, 3))
    np.testing.assert_allclose(sparse_loops.csr_times_dense(a, d, np.float64),
                               a.toarray() @ d, rtol=1e-12)
    assert (len(panels), len(whole)) == ((1, 0) if case == "sorted" else (0, 1))


def test_the_compiled_panel_loop_with_64_bit_indices_and_float32_is_scipy_s(monkeypatch):
    from tensorc.codegen import sparse_loops

    monkeypatch.setattr(sparse_loops, "PANEL_BYTES", 5 * 4 * 4)
    monkeypatch.setattr(sparse_loops, "WHOLE_DENSE_BYTES", 0)
    a = _matrix(40, 60, 0.3, 33).tocsr()
    a = sp.csr_array((a.data.astype(np.float32), a.indices.astype(np.int64),
                      a.indptr.astype(np.int64)), shape=a.shape)
    a.has_sorted_indices = True
    d = np.random.default_rng(34).random((60, 4)).astype(np.float32)[:, ::-1]  # strided
    np.testing.assert_allclose(sparse_loops.csr_times_dense(a, d, np.float32),
                               a.toarray() @ d, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_dense_block_is_compressed_to_the_csr_scipy_makes(dtype):
    from tensorc.codegen.sparse_loops import dense_to_csr

    rng = np.random.default_rng(16)
    dense = rng.random((7, 50)).astype(dtype)
    dense[dense < 0.6] = 0
    dense[3] = 0  # an empty row
    indptr, indices, data = dense_to_csr(np.asfortranarray(dense))
    want = sp.csr_array(dense)
    np.testing.assert_array_equal(indptr, want.indptr)
    np.testing.assert_array_equal(indices, want.indices)
    np.testing.assert_array_equal(data, want.data)
    assert data.dtype == np.dtype(dtype) and indices.dtype == np.int32


def test_a_dense_times_sparse_product_gives_a_canonical_sparse_result():
    rng = np.random.default_rng(17)
    walks = sp.random_array((6, 400), density=0.9, format="csr", random_state=17)
    graph = sp.random_array((400, 400), density=0.02, format="csr", random_state=18)
    graph.data[:] = rng.integers(-2, 3, graph.nnz)  # cancelling products make zeros
    got = tc.einsum("ij,jk->ik", walks, graph, backend="local")
    want = (walks @ graph).toarray()
    assert isinstance(got, sp.csr_array) and got.has_canonical_format
    np.testing.assert_array_equal(got.toarray(), want)
    assert got.nnz == np.count_nonzero(want)


def test_a_csr_matrix_cut_by_columns_stays_csr_and_its_pieces_read_the_same_blocks():
    import pickle

    from tensorc.codegen.sparse_kernels import coo_of
    from tensorc.sparse.blocks import CsrGridBlocks, cut
    from tensorc.sparse.compact import piece

    a = sp.random_array((50, 40), density=0.2, format="csr", random_state=19)
    a.data[a.indptr[7]:a.indptr[8]] = 0  # a row of stored zeros
    grid = cut(a, (20, 15))
    assert isinstance(grid, CsrGridBlocks) and grid.grid == (3, 3)
    dense = a.toarray()
    slices_of = {key: tuple(slice(c * s, min((c + 1) * s, n))
                            for c, s, n in zip(key, (20, 15), a.shape, strict=True))
                 for key in grid.ranges}
    for key, slices in slices_of.items():
        block = grid.block(slices)
        assert block.format == "csr" and grid.counts[key] == block.nnz
        np.testing.assert_array_equal(block.toarray(), dense[slices])
    wanted = sorted(grid.ranges)[::2]
    sent = pickle.loads(pickle.dumps(piece(grid, wanted)))
    for key in wanted:
        got = coo_of(sent.block(slices_of[key]))
        local = np.zeros(tuple(s.stop - s.start for s in slices_of[key]))
        np.add.at(local, tuple(got.coords), got.values)
        np.testing.assert_array_equal(local, dense[slices_of[key]])


def test_a_result_merged_from_block_columns_says_truly_whether_its_rows_are_sorted():
    a = sp.random_array((60, 300), density=0.1, format="csr", random_state=23)
    b = sp.random_array((300, 200), density=0.1, format="csr", random_state=24)
    got = tc.einsum("ij,jk->ik", a, b, backend="local", block_shape=((20, 300), (300, 50)))
    rows_sorted = all(np.all(np.diff(got.indices[s:e]) > 0)
                      for s, e in zip(got.indptr[:-1], got.indptr[1:], strict=True))
    assert not got.has_sorted_indices or rows_sorted  # scipy's SpGEMM leaves rows unsorted
    got.sum_duplicates()
    np.testing.assert_allclose(got.toarray(), (a @ b).toarray(), rtol=1e-12)
    assert got.has_canonical_format and all(
        np.all(np.diff(got.indices[s:e]) > 0)
        for s, e in zip(got.indptr[:-1], got.indptr[1:], strict=True))


def test_an_element_wise_product_of_large_sparse_operands_is_still_split():
    a = sp.random_array((3000, 3000), density=0.03, format="csr", random_state=25)
    b = sp.random_array((3000, 3000), density=0.03, format="csr", random_state=26)
    plan = tc.plan("ij,ij->ij", a, b, workers=2)
    assert plan.stats["tasks"] > 3, plan.stats["blocking"]  # one block is 3 tasks
    got = tc.einsum("ij,ij->ij", a, b, workers=2)
    np.testing.assert_array_equal(got.toarray(), (a.multiply(b)).toarray())


def test_a_tall_very_sparse_csr_cut_by_columns_is_cut_as_coordinates():
    from tensorc.sparse.blocks import CsrGridBlocks, SparseBlocks, cut

    rng = np.random.default_rng(27)  # 2,000 entries (scipy's sampler takes 40 s at this shape)
    tall = sp.csr_array((rng.random(2000), (rng.integers(0, 200_000, 2000),
                                            rng.integers(0, 1000, 2000))), shape=(200_000, 1000))
    assert isinstance(cut(tall, (50_000, 10)), SparseBlocks)  # 100 row-pointer arrays
    square = sp.random_array((1000, 1000), density=0.05, format="csr", random_state=27)
    assert isinstance(cut(square, (500, 100)), CsrGridBlocks)  # 10 short ones


def test_a_piece_of_an_unsorted_csr_cut_by_columns_is_canonical():
    from tensorc.sparse.blocks import cut
    from tensorc.sparse.compact import piece

    a = sp.random_array((40, 40), density=0.3, format="csr", random_state=28)
    shuffled = a.copy()
    for row in range(40):  # each row's entries reversed: unsorted, as SpGEMM leaves them
        s, e = shuffled.indptr[row], shuffled.indptr[row + 1]
        shuffled.indices[s:e] = shuffled.indices[s:e][::-1].copy()
        shuffled.data[s:e] = shuffled.data[s:e][::-1].copy()
    shuffled.has_sorted_indices = False
    grid = cut(shuffled, (20, 20))
    sent = piece(grid, list(grid.ranges))
    for key in grid.ranges:
        slices = tuple(slice(c * 20, c * 20 + 20) for c in key)
        block = sent.block(slices)
        linear = block.coords[0] * 20 + block.coords[1]
        assert np.all(np.diff(linear) > 0)  # row-major, each entry once
        np.testing.assert_array_equal(
            sp.coo_array((block.values, tuple(block.coords)), shape=(20, 20)).toarray(),
            a.toarray()[slices])


def test_a_sparse_call_spreads_over_as_many_nodes_as_its_dense_operands_are_worth():
    from types import SimpleNamespace

    from tensorc.planning.cost import Machine, use_machine
    from tensorc.sparse.distributed import nodes_worth_using

    rate = 1e9  # sparse flops a second
    use_machine(Machine(network_bytes_per_second=100e6, sparse_flops_per_core=rate,
                        cores_per_node=1))
    try:

        def graph(seconds: float):
            return SimpleNamespace(tasks=[SimpleNamespace(flops=int(seconds * rate))])

        dense = [np.zeros(100_000 // 8)]  # 100 kB: 1 ms a copy
        assert nodes_worth_using(graph(1.0), [], 4) == 4  # nothing dense to send
        assert nodes_worth_using(graph(0.0005), dense, 4) == 1  # copies cost more than work
        # 16 ms of work: 1 node 17 ms, 2 nodes 10 ms, 4 nodes 8 ms, 8 nodes 10 ms
        assert nodes_worth_using(graph(0.016), dense, 8) == 4
        assert nodes_worth_using(graph(0.016), dense, 3) == 3  # at most the nodes there are
    finally:
        use_machine(None)


def test_a_csr_result_merged_from_block_columns_is_held_twice_by_the_model():
    """Row blocks of a CSR result are each dropped once copied into it; block columns are
    merged row by row, all held until the result is whole: the model counts it twice (a
    40,000² product at 1 %, 98 % full, was killed past 23 GB under a 21 GB budget)."""
    a, b = _matrix(600, 400, 0.2, 41).tocsr(), _matrix(400, 500, 0.2, 42).tocsr()
    rows = tc.plan("ij,jk->ik", a, b, grid={"i": 4}, memory_limit="1GB").stats
    columns = tc.plan("ij,jk->ik", a, b, grid={"k": 4}, memory_limit="1GB").stats
    result = rows["estimated_output_nnz"] * 12  # float64 values and int32 columns
    assert rows["modelled_peak_bytes"] < 2 * result <= columns["modelled_peak_bytes"]
    assert columns["estimated_output_nnz"] == pytest.approx(rows["estimated_output_nnz"])


def test_a_csr_result_a_column_cut_would_merge_over_the_budget_is_cut_into_rows(monkeypatch):
    """A product that fills its result, split by the default along the right operand's
    columns: under 95 MB the merged block columns (97 MB modelled) do not fit, so the plan
    cuts rows (dropped as copied); without that alternative the call is refused."""
    from tensorc.sparse import plan as sparse_plan

    a = sp.random_array((2000, 2000), density=0.01, format="csr", random_state=1)
    b = sp.random_array((2000, 2000), density=0.3, format="csr", random_state=2)
    assert "k: 2000/2000" not in tc.plan("ij,jk->ik", a, b).stats["blocking"]  # columns cut
    stats = tc.plan("ij,jk->ik", a, b, memory_limit="95MB").stats
    assert "k: 2000/2000 -> 1" in stats["blocking"] and "i: 2000/2000" not in stats["blocking"]
    assert stats["modelled_peak_bytes"] <= 95e6
    got = tc.einsum("ij,jk->ik", a, b, memory_limit="95MB", backend="local")
    np.testing.assert_allclose(got.toarray(), (a @ b).toarray(), rtol=1e-12)
    monkeypatch.setattr(sparse_plan, "ROW_TRIES", 0)
    with pytest.raises(tc.MemoryLimitError, match="one worker needs"):
        tc.plan("ij,jk->ik", a, b, memory_limit="95MB")
