"""Sparse declarations in ``.tc`` programs: results against numpy, the result types, every
error with its exact text and location, and the printed syntax tree and IR against golden."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import sparse as pydata

import tensorc as tc

SPMV = """\
# y = A x and the sparse element-wise square of A
size N, M
input  A  : f64[N, M] sparse(M)
input  x  : f64[M]
output y  : f64[N]
output A2 : f64[N, M]
y[i] += A[i, j] * x[j]
A2[i, j] = 2 * A[i, j] * A[i, j]
"""


def _error(source: str, **inputs) -> tc.TcError:
    with pytest.raises(tc.TcError) as info:
        if inputs:
            tc.compile(source, workers=2).run(**inputs)
        else:
            tc.compile(source)
    return info.value


def _matrix(shape=(30, 20), density=0.2, seed=1):
    return tc.sparse.random(shape, density, seed=seed, format="csr")


@pytest.mark.parametrize("kind", ["csr", "csc", "coo_array", "pydata_coo", "pydata_gcxs"])
def test_spmv_and_element_wise_square_against_numpy(kind):
    a = _matrix()
    dense = a.toarray()
    given = {"csr": a, "csc": sp.csc_array(a), "coo_array": sp.coo_array(a),
             "pydata_coo": pydata.COO.from_scipy_sparse(a),
             "pydata_gcxs": pydata.GCXS.from_scipy_sparse(a)}[kind]
    x = np.random.default_rng(2).random(20)
    out = tc.compile(SPMV, workers=2).run(A=given, x=x)
    assert type(out["y"]) is np.ndarray  # a sparse matrix times a vector: dense
    np.testing.assert_allclose(out["y"], dense @ x, rtol=1e-12)
    assert tc.sparse.is_sparse(out["A2"])  # its zeros survive: sparse, as for tc.einsum
    if kind in ("csr", "csc", "coo_array"):
        assert isinstance(out["A2"], sp.csr_array)
    else:
        assert isinstance(out["A2"], pydata.SparseArray)
    np.testing.assert_allclose(out["A2"].todense(), 2 * dense * dense, rtol=1e-12)
    statements = tc.last_stats()["statements"]
    assert [s["sparse_einsum"] for s in statements] == ["ab,b->a", "ab,ab,->ab"]


def test_spgemm_and_a_dense_statement_after_it():
    source = """\
size N
input  A : f64[N, N] sparse
input  B : f64[N, N] sparse(N)
input  v : f64[N]
output C : f64[N, N]
output r : f64[N]
tensor w : f64[N]
C[i, j] += A[i, k] * B[k, j]
w[i] += C[i, j] * v[j]
r[i] = exp(w[i]) - 1
"""
    a, b = _matrix((25, 25), 0.1, 3), _matrix((25, 25), 0.1, 4)
    v = np.random.default_rng(5).random(25)
    out = tc.compile(source, workers=2).run(A=a, B=b, v=v)
    assert isinstance(out["C"], sp.csr_array)
    np.testing.assert_allclose(out["C"].toarray(), a.toarray() @ b.toarray(), rtol=1e-12)
    np.testing.assert_allclose(out["r"], np.exp(a.toarray() @ b.toarray() @ v) - 1,
                               rtol=1e-12)


def test_mttkrp_on_a_pydata_tensor():
    source = """\
size I, J, K, F
input  X : f64[I, J, K] sparse
input  B : f64[J, F]
input  C : f64[K, F]
output M : f64[I, F]
M[i, f] += X[i, j, k] * B[j, f] * C[k, f]
"""
    x = pydata.random((12, 10, 8), density=0.1, random_state=6)
    rng = np.random.default_rng(7)
    b, c = rng.random((10, 4)), rng.random((8, 4))
    out = tc.compile(source, workers=2).run(X=x, B=b, C=c)
    np.testing.assert_allclose(out["M"], np.einsum("ijk,jf,kf->if", x.todense(), b, c),
                               rtol=1e-12)


def test_power_iteration_with_a_sparse_matrix_in_repeat():
    source = """\
size N
input  A   : f64[N, N] sparse(N)
input  x0  : f64[N]
output x   : f64[N]
output nrm : f64
tensor y   : f64[N]
x[i] = x0[i]
repeat 3 {
  y[i] += A[i, j] * x[j]
  nrm  += y[i] * y[i]
  x[i]  = y[i] / sqrt(nrm)
}
"""
    a = _matrix((20, 20), 0.2, 8)
    x = np.random.default_rng(9).random(20)
    out = tc.compile(source, workers=2).run(A=a, x0=x)
    for _ in range(3):
        y = a.toarray() @ x
        nrm = y @ y
        x = y / np.sqrt(nrm)
    np.testing.assert_allclose(out["x"], x, rtol=1e-12)
    np.testing.assert_allclose(out["nrm"], nrm, rtol=1e-12)


def test_an_f32_input_is_cast_and_the_target_dtype_kept():
    source = "size N\ninput A : f64[N, N] sparse\noutput B : f32[N, N]\nB[i, j] = A[j, i]\n"
    a = _matrix((6, 6), 0.3, 10).astype(np.float32)
    out = tc.compile(source).run(A=a)
    assert out["B"].dtype == np.float32
    np.testing.assert_array_equal(out["B"].toarray(), a.toarray().T)


def test_ast_and_ir_match_golden(golden):
    program = tc.compile(SPMV)
    golden("tc_sparse_spmv_ast", program.explain("ast"))
    golden("tc_sparse_spmv_ir", program.explain("ir", N=30, M=20))


def test_plan_names_each_sparse_einsum():
    text = tc.compile(SPMV).explain("plan", N=30, M=20)
    assert "sparse inputs: A; the program runs in this process" in text
    assert ("== y@1 (line 7): y[i] += A[i, j] * x[j]\n  sparse einsum 'ab,b->a' (result "
            "dense): planned by its operands' non-zeros when it runs") in text


# -- errors ------------------------------------------------------------------------------

def test_a_dense_array_for_a_sparse_input_names_the_declaration(tmp_path):
    path = tmp_path / "spmv.tc"
    path.write_text(SPMV)
    with pytest.raises(tc.TcError) as info:
        tc.compile(path).run(A=_matrix().toarray(), x=np.ones(20))
    assert str(info.value) == (
        "error[E-input]: input 'A' is declared sparse ('input  A  : f64[N, M] sparse(M)') but "
        "a dense numpy.ndarray was passed\n"
        f" --> {path}:3:1\n"
        "  |\n"
        "3 | input  A  : f64[N, M] sparse(M)\n"
        "  | ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ pass a scipy.sparse or pydata sparse array "
        "(scipy.sparse.csr_array(a), sparse.COO.from_numpy(a), tc.sparse.from_coo); tensorc "
        "never sparsifies a dense array"
    )
    assert info.value.codes == ["E-input"]


def test_a_sparse_array_for_a_dense_input_is_refused():
    source = "size N\ninput A : f64[N, N]\noutput B : f64[N, N]\nB[i, j] = A[i, j]\n"
    err = _error(source, A=_matrix((4, 4)), N=4)
    assert err.codes == ["E-input"]
    assert str(err).startswith(
        "error[E-input]: input 'A' is a sparse scipy.csr_array but is declared dense\n"
        " --> <source>:2:1\n")
    assert "declare it sparse ('input A : ... sparse')" in str(err)


def test_coordinates_out_of_bounds():
    a = _matrix((5, 4), 0.5)
    a.indices[1] = 9
    err = _error(SPMV, A=a, x=np.ones(4))
    assert err.codes == ["E-input"]
    assert ("error[E-input]: sparse input 'A': CSR column index 9 (stored entry 1) is out of "
            "bounds for shape (5, 4)\n --> <source>:3:1\n") in str(err)
    coo = sp.coo_array(_matrix((5, 4), 0.5))
    coo.coords = (coo.coords[0], coo.coords[1] - 1)  # a column -1
    err = _error(SPMV, A=coo, x=np.ones(4))
    assert "is out of bounds for shape (5, 4)" in str(err) and "coordinate -1 of dimension 1" \
        in str(err)


def test_mixed_index_dtypes():
    coo = sp.coo_array(_matrix((5, 4), 0.5))
    coo.coords = (coo.coords[0].astype(np.int32), coo.coords[1].astype(np.int64))
    err = _error(SPMV, A=coo, x=np.ones(4))
    assert err.codes == ["E-input"]
    assert ("sparse input 'A': coordinates have mixed index dtypes: int32 (dimension 0), "
            "int64 (dimension 1)") in str(err)


DECLARATION_ERRORS = {
    "unknown dimension": (
        "size N, M\ninput A : f64[N, M] sparse(Mx)\noutput B : f64[N, M]\nB[i, j] = A[i, j]\n",
        "error[E-undefined]: unknown dimension 'Mx' in sparse(...) of 'A'\n"
        " --> <source>:2:28\n  |\n2 | input A : f64[N, M] sparse(Mx)\n"
        "  |                            ^^ did you mean 'M'?"),
    "a size of another tensor": (
        "size N, M, K\ninput A : f64[N, M] sparse(K)\noutput B : f64[N, M]\n"
        "B[i, j] = A[i, j]\n",
        "error[E-undefined]: size 'K' is not a dimension of 'A'\n"
        " --> <source>:2:28\n  |\n2 | input A : f64[N, M] sparse(K)\n"
        "  |                            ^ the sizes of its shape: N, M"),
    "sparse output": (
        "size N\ninput A : f64[N] sparse\noutput B : f64[N] sparse\nB[i] = A[i]\n",
        "error[E-unsupported]: 'B' is declared sparse, but only inputs may be (output 'B')\n"
        " --> <source>:3:19\n  |\n3 | output B : f64[N] sparse\n"
        "  |                   ^^^^^^ a statement's result is sparse or dense by the sparse "
        "einsum rule (README, Sparse tensors); drop 'sparse'"),
    "rank 0": (
        "input s : f64 sparse\noutput t : f64\nt = s\n",
        "error[E-type]: 's' has rank 0 and cannot be sparse\n"
        " --> <source>:1:15\n  |\n1 | input s : f64 sparse\n  |               ^^^^^^ drop "
        "'sparse'"),
    "empty list": (
        "size N\ninput A : f64[N] sparse()\noutput B : f64[N]\nB[i] = A[i]\n",
        "error[E-type]: sparse() of 'A' names no dimension\n"
        " --> <source>:2:18\n  |\n2 | input A : f64[N] sparse()\n  |                  ^^^^^^^^ "
        "write 'sparse' to compress every dimension, or sparse(M) to name them"),
    "listed twice": (
        "size N\ninput A : f64[N, N] sparse(N, N)\noutput B : f64[N, N]\nB[i, j] = A[i, j]\n",
        "error[E-type]: dimension 'N' is listed twice in sparse(...) of 'A'\n"
        " --> <source>:2:31\n  |\n2 | input A : f64[N, N] sparse(N, N)\n"
        "  |                               ^"),
    "not a product": (
        "size N\ninput A : f64[N, N] sparse\noutput B : f64[N, N]\nB[i, j] = exp(A[i, j])\n",
        "error[E-unsupported]: this statement reads the sparse A, but only a product of "
        "tensors runs on sparse operands\n --> <source>:4:1\n  |\n4 | B[i, j] = exp(A[i, j])\n"
        "  | ^^^^^^^^^^^^^^^^^^^^^^ sum it with '+=' or sum[...](...), or multiply "
        "element-wise with '='; compute anything else from that product in a statement of "
        "its own"),
}


@pytest.mark.parametrize("case", sorted(DECLARATION_ERRORS))
def test_declaration_errors(case):
    source, expected = DECLARATION_ERRORS[case]
    assert str(_error(source)) == expected


def test_a_sparse_intermediate_read_by_min_is_refused_at_compile_time():
    source = """\
size N
input  A : f64[N, N] sparse
output D : f64[N, N]
tensor T : f64[N, N]
T[i, j] = A[i, j] * A[i, j]
D[i, j] min= T[i, k] + T[k, j]
"""
    err = _error(source)
    assert err.codes == ["E-unsupported"]
    assert " --> <source>:6:1\n" in str(err) and "reads the sparse T" in str(err)


def test_sparse_in_a_block_program():
    source = ("size N\nblocks NB of N\ninput A : f64[N, N] sparse\noutput L : f64[N, N]\n"
              "for k in 0:NB {\n  L{k, k} = chol(A{k, k})\n}\n")
    err = _error(source)
    assert err.codes == ["E-block"]
    assert "sparse declaration of 'A' in a block program\n --> <source>:3:21" in str(err)


def test_sparse_is_still_a_name():
    source = "size N = 3\ninput sparse : f64[N]\noutput y : f64[N]\ny[i] = sparse[i]\n"
    np.testing.assert_array_equal(tc.compile(source).run(sparse=np.arange(3.0))["y"],
                                  np.arange(3.0))
