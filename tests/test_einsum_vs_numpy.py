"""Differential tests of ``tc.einsum`` against ``numpy.einsum``.

Every check compares result dtype, shape and values with what numpy returns for the very same
call (exact for bool and integer results, ``assert_allclose`` with a dtype-dependent tolerance
for floating and complex ones). Most cases run once without plan options and again with forced
block partitionings -- ``grid`` with 2 and 3 blocks per label and ``block_shape`` of 2 -- so
that block boundaries, including uneven last blocks, are crossed; the result must not change.

Only exception *types* are asserted here; the error messages are pinned elsewhere.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numpy_reference import assert_matches, bound, label_extents, random_array

import tensorc as tc

ALL_DTYPES = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
]

# name -> (plan option, blocks or block size per label); None means no plan options.
PLANS = {
    "noplan": None,
    "grid2": ("grid", 2),
    "grid3": ("grid", 3),
    "block2": ("block_shape", 2),
}
ALL_PLANS = pytest.mark.parametrize("plan", list(PLANS.values()), ids=list(PLANS))
SOME_PLANS = pytest.mark.parametrize(
    "plan", [PLANS["noplan"], PLANS["grid3"]], ids=["noplan", "grid3"]
)


def dtype_id(dtype):
    return np.dtype(dtype).name


@pytest.fixture
def rng():
    return np.random.default_rng(20240521)


def plan_options(plan, subscripts, operands):
    """Plan keyword arguments forcing ``n`` blocks (or block size ``n``) on every label.

    ``n`` is capped by the label's extent; zero-size labels are left to the planner.
    """
    if plan is None:
        return {}
    option, n = plan
    extents = label_extents(subscripts, [np.shape(op) for op in operands])
    mapping = {label: min(n, size) for label, size in extents.items() if size > 0}
    return {option: mapping} if mapping else {}


def _split_args(args):
    """Positions of the operands in an einsum argument list (string or sublist form)."""
    if isinstance(args[0], str):
        return list(range(1, len(args)))
    last = len(args) - 1 if len(args) % 2 == 1 else None
    return [i for i in range(0, len(args), 2) if i != last]


def magnitude(args):
    """max of einsum(|operands|) in float64: a bound on the summed terms' sizes."""
    args = list(args)
    for i in _split_args(args):
        args[i] = np.abs(np.asarray(args[i])).astype(np.float64)
    return bound(np.einsum(*args))


def check(*args, plan=None, **kwargs):
    """tc.einsum(*args, **kwargs) == numpy.einsum(*args, **kwargs); inputs left untouched."""
    snapshot = [np.array(args[i], copy=True) for i in _split_args(args)]
    expected = np.einsum(*args, **kwargs)
    options = plan_options(plan, args[0], args[1:]) if plan is not None else {}
    actual = tc.einsum(*args, **kwargs, **options)
    input_dtypes = [np.asarray(args[i]).dtype for i in _split_args(args)]
    assert_matches(actual, expected, magnitude(args), input_dtypes)
    for i, before in zip(_split_args(args), snapshot, strict=True):
        np.testing.assert_array_equal(np.asarray(args[i]), before, err_msg="input was modified")
    return actual


# --------------------------------------------------------------------------------------------
# The expression matrix (float64)
# --------------------------------------------------------------------------------------------

EXPRESSIONS = [
    # the mission expressions
    ("mission-ijk,if,jf", "ijk,if,jf->if", [(5, 4, 3), (5, 6), (4, 6)]),
    ("mission-ijk,jf,kf", "ijk,jf,kf->if", [(5, 4, 3), (4, 6), (3, 6)]),
    ("mission-ijk,jkf", "ijk,jkf->if", [(5, 4, 3), (4, 3, 6)]),
    ("matmul", "ij,jk->ik", [(5, 7), (7, 4)]),
    ("matmul-transposed-lhs", "ki,kj->ij", [(7, 5), (7, 4)]),
    # other explicit forms
    ("batched-matmul", "bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
    ("chain-of-4", "ab,bc,cd,de->ae", [(3, 4), (4, 5), (5, 2), (2, 3)]),
    ("matvec", "ij,j->i", [(5, 7), (7,)]),
    ("dot", "i,i->", [(7,), (7,)]),
    ("elementwise-3", "ij,ij,ij->ij", [(4, 5), (4, 5), (4, 5)]),
    ("sum-all", "ijk->", [(3, 4, 5)]),
    ("sum-axis", "ij->j", [(5, 4)]),
    ("transpose", "ijk->kij", [(3, 4, 5)]),
    ("identity", "ij->ij", [(3, 5)]),
    ("spaces", " ij , jk -> ik ", [(5, 7), (7, 4)]),
    # implicit output (sorted labels that occur once; upper case sorts before lower case)
    ("implicit-matmul", "ij,jk", [(5, 7), (7, 4)]),
    ("implicit-identity", "ij", [(3, 5)]),
    ("implicit-transpose", "ji", [(3, 5)]),
    ("implicit-Ba", "Ba", [(3, 4)]),
    ("implicit-bA", "bA", [(3, 4)]),
    ("implicit-aB,BC", "aB,BC", [(2, 3), (3, 4)]),
    ("implicit-Az,zb", "Az,zb", [(3, 4), (4, 2)]),
    ("implicit-inner", "i,i", [(6,), (6,)]),
    ("implicit-outer", "i,j", [(4,), (3,)]),
    ("implicit-full-contraction", "ij,ij", [(3, 4), (3, 4)]),
    ("implicit-trace", "ii", [(4, 4)]),
    # ellipsis
    ("ellipsis-batched-matmul", "...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("ellipsis-broadcast-batch", "...ij,...jk->...ik", [(3, 1, 4, 5), (2, 5, 3)]),
    ("ellipsis-empty", "...ij,...jk->...ik", [(4, 5), (5, 3)]),
    ("ellipsis-leading-sum", "i...->...", [(3, 2, 4)]),
    ("ellipsis-only-implicit", "...,...", [(2, 3), (4, 1, 3)]),
    ("ellipsis-only-explicit", "...,...->...", [(2, 3), (4, 1, 3)]),
    ("ellipsis-transpose", "...ij->...ji", [(2, 3, 4)]),
    ("ellipsis-trailing", "ij...,jk...->ik...", [(3, 4, 2), (4, 5, 2)]),
    ("ellipsis-middle", "i...j,j->i...", [(3, 2, 4), (4,)]),
    ("ellipsis-implicit-reduce", "...i,...i", [(2, 3, 4), (3, 4)]),
    ("ellipsis-missing-leading", "...i,...i->...", [(2, 3, 4), (4,)]),
    ("ellipsis-output-moved", "...i->i...", [(2, 3, 4)]),
    ("ellipsis-diagonal", "ii...->i...", [(3, 3, 2)]),
    # size-1 broadcasting of a labelled dimension
    ("broadcast-label", "ij,ij->ij", [(2, 1), (2, 3)]),
    ("broadcast-label-bigger", "ij,ij->ij", [(5, 1), (5, 3)]),
    ("broadcast-label-both-sides", "ij,ij->ij", [(5, 1), (1, 3)]),
    ("broadcast-label-reduced", "ij,ij->i", [(5, 1), (5, 3)]),
    ("broadcast-label-contracted", "ij,jk->ik", [(5, 1), (4, 3)]),
    # diagonals and traces
    ("diagonal", "ii->i", [(4, 4)]),
    ("trace-explicit", "ii->", [(5, 5)]),
    ("diagonal-sandwich", "iji->j", [(4, 3, 4)]),
    ("diagonal-times-vector", "ii,i->i", [(4, 4), (4,)]),
    ("triple-diagonal", "iii->i", [(3, 3, 3)]),
    ("partial-diagonal", "iij->ij", [(3, 3, 5)]),
    ("diagonal-then-contract", "ijj,jk->ik", [(4, 3, 3), (3, 5)]),
    ("two-diagonals", "ii,ii->i", [(4, 4), (4, 4)]),
    # 0-d operands
    ("scalar-times-vector", "i,->i", [(5,), ()]),
    ("scalar-times-scalar", ",", [(), ()]),
    ("scalar-explicit", ",->", [(), ()]),
    ("scalar-identity", "->", [()]),
    ("scalar-sandwich", ",i,->i", [(), (5,), ()]),
    ("scalar-ellipsis", "...,...->...", [(), (3, 2)]),
    # outer products
    ("outer", "i,j->ij", [(5,), (3,)]),
    ("outer-reordered", "i,j->ji", [(5,), (3,)]),
    ("outer-3", "i,j,k->ijk", [(3,), (4,), (2,)]),
    ("outer-matrix-vector", "ij,k->ijk", [(3, 4), (5,)]),
]


@ALL_PLANS
@pytest.mark.parametrize(
    "subscripts,shapes", [pytest.param(s, sh, id=name) for name, s, sh in EXPRESSIONS]
)
def test_expression_matrix(rng, subscripts, shapes, plan):
    operands = [random_array(rng, shape) for shape in shapes]
    check(subscripts, *operands, plan=plan)


# --------------------------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------------------------

DTYPE_EXPRESSIONS = [
    ("matmul", "ij,jk->ik", [(5, 7), (7, 4)]),
    ("mission-ijk,if,jf", "ijk,if,jf->if", [(4, 3, 5), (4, 6), (3, 6)]),
    ("diagonal", "ii->i", [(4, 4)]),
    ("outer", "i,j->ij", [(5,), (3,)]),
    ("sum-all", "ijk->", [(3, 4, 5)]),
    ("ellipsis-broadcast", "...ij,...jk->...ik", [(3, 1, 2, 3), (2, 3, 2)]),
]


@SOME_PLANS
@pytest.mark.parametrize(
    "subscripts,shapes", [pytest.param(s, sh, id=name) for name, s, sh in DTYPE_EXPRESSIONS]
)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_every_dtype(rng, dtype, subscripts, shapes, plan):
    operands = [random_array(rng, shape, dtype) for shape in shapes]
    result = check(subscripts, *operands, plan=plan)
    assert np.asarray(result).dtype == np.dtype(dtype)


@pytest.mark.parametrize("plan", [None, ("grid", 2)], ids=["noplan", "grid2"])
@pytest.mark.parametrize(
    "dtype_a,dtype_b", list(itertools.combinations(ALL_DTYPES, 2)), ids=dtype_id
)
def test_mixed_dtype_pairs(rng, dtype_a, dtype_b, plan):
    a = random_array(rng, (5, 7), dtype_a)
    b = random_array(rng, (7, 3), dtype_b)
    result = check("ij,jk->ik", a, b, plan=plan)
    assert np.asarray(result).dtype == np.result_type(dtype_a, dtype_b)


@SOME_PLANS
@pytest.mark.parametrize(
    "dtypes",
    [
        (np.int8, np.uint8, np.float16),
        (np.bool_, np.int8, np.uint16),
        (np.uint32, np.int8, np.bool_),
        (np.int64, np.uint64, np.int8),
        (np.float16, np.int16, np.float32),
        (np.complex64, np.float64, np.int32),
        (np.float32, np.complex64, np.uint8),
    ],
    ids=lambda dts: "-".join(dtype_id(d) for d in dts),
)
def test_mixed_dtype_triples(rng, dtypes, plan):
    shapes = [(4, 3, 5), (4, 6), (3, 6)]
    operands = [random_array(rng, s, d) for s, d in zip(shapes, dtypes, strict=True)]
    check("ijk,if,jf->if", *operands, plan=plan)


# --------------------------------------------------------------------------------------------
# Python scalars and 0-d arrays (numpy converts Python scalars to default-dtype arrays: they
# are *not* "weak" in einsum, e.g. int8 array * Python int -> int64)
# --------------------------------------------------------------------------------------------

SCALAR_CASES = [
    ("vector-times-int", "i,->i", [((5,), np.float64), 3]),
    ("vector-times-float", "i,->i", [((5,), np.float64), 2.5]),
    ("int8-times-int", "i,->i", [((5,), np.int8), 5]),
    ("float32-times-float", "i,->i", [((5,), np.float32), 2.0]),
    ("float32-times-complex", "i,->i", [((5,), np.float32), 1j]),
    ("int8-times-bool", "i,->i", [((5,), np.int8), True]),
    ("int-times-int", ",", [2, 3]),
    ("int-times-float", ",", [2, 3.5]),
    ("float-times-0d-int32", ",", [1.5, ((), np.int32)]),
    ("int-single", "", [7]),
    ("float-explicit", "->", [0.25]),
    ("float-times-matrix", ",ij->ij", [1.5, ((3, 4), np.int32)]),
    ("0d-float32-times-vector", ",i->i", [((), np.float32), ((4,), np.float32)]),
    (
        "0d-int16-times-matmul",
        ",ij,jk->ik",
        [((), np.int16), ((3, 4), np.int16), ((4, 2), np.uint8)],
    ),
]


@SOME_PLANS
@pytest.mark.parametrize(
    "subscripts,specs", [pytest.param(s, sp, id=name) for name, s, sp in SCALAR_CASES]
)
def test_python_scalars_and_0d_arrays(rng, subscripts, specs, plan):
    operands = [
        random_array(rng, spec[0], spec[1]) if isinstance(spec, tuple) else spec for spec in specs
    ]
    check(subscripts, *operands, plan=plan)


# --------------------------------------------------------------------------------------------
# out=
# --------------------------------------------------------------------------------------------

OUT_CASES = [
    ("matmul", "ij,jk->ik", [(5, 7), (7, 4)], lambda: np.full((5, 4), np.nan)),
    ("matmul-fortran-out", "ij,jk->ik", [(5, 7), (7, 4)], lambda: np.full((4, 5), np.nan).T),
    ("matmul-strided-out", "ij,jk->ik", [(5, 7), (7, 4)], lambda: np.full((10, 8), 7.0)[::2, ::2]),
    (
        "mission-complex-out",
        "ijk,if,jf->if",
        [(5, 4, 3), (5, 6), (4, 6)],
        lambda: np.full((5, 6), np.nan, np.complex128),
    ),
    ("scalar-0d-out", "i,i->", [(7,), (7,)], lambda: np.full((), np.nan)),
    ("diagonal", "ii->i", [(4, 4)], lambda: np.full(4, np.nan)),
    ("ellipsis-broadcast", "...,...", [(2, 3), (4, 1, 3)], lambda: np.full((4, 2, 3), np.nan)),
]


@ALL_PLANS
@pytest.mark.parametrize(
    "subscripts,shapes,make_out",
    [pytest.param(s, sh, mk, id=name) for name, s, sh, mk in OUT_CASES],
)
def test_out_returns_the_given_array_filled(rng, subscripts, shapes, make_out, plan):
    operands = [random_array(rng, shape) for shape in shapes]
    expected = np.einsum(subscripts, *operands, out=make_out())
    out = make_out()
    options = plan_options(plan, subscripts, operands)
    result = tc.einsum(subscripts, *operands, out=out, **options)
    assert result is out
    assert_matches(out, expected, magnitude([subscripts, *operands]))


@SOME_PLANS
def test_out_with_unsafe_casting(rng, plan):
    a, b = random_array(rng, (5, 7)), random_array(rng, (7, 4))
    expected = np.einsum("ij,jk->ik", a, b, out=np.zeros((5, 4), np.float32), casting="unsafe")
    out = np.zeros((5, 4), np.float32)
    options = plan_options(plan, "ij,jk->ik", [a, b])
    result = tc.einsum("ij,jk->ik", a, b, out=out, casting="unsafe", **options)
    assert result is out
    assert_matches(out, expected, magnitude(["ij,jk->ik", a, b]))


# --------------------------------------------------------------------------------------------
# dtype= and casting=
# --------------------------------------------------------------------------------------------

CASTING_OK = [
    (np.float64, np.float32, "unsafe"),
    (np.float64, np.float32, "same_kind"),
    (np.float64, np.int64, "unsafe"),
    (np.float32, np.float16, "unsafe"),
    (np.int64, np.float64, "safe"),
    (np.int32, np.int64, "safe"),
    (np.int64, np.int8, "same_kind"),
    (np.int8, np.float16, "safe"),
    (np.uint8, np.int16, "safe"),
    (np.float32, np.complex64, "safe"),
    (np.float64, np.float64, "no"),
    (np.bool_, np.int32, "safe"),
]


@SOME_PLANS
@pytest.mark.parametrize(
    "in_dtype,dtype,casting",
    CASTING_OK,
    ids=[f"{dtype_id(i)}-to-{dtype_id(o)}-{c}" for i, o, c in CASTING_OK],
)
def test_dtype_and_casting(rng, in_dtype, dtype, casting, plan):
    a = random_array(rng, (5, 7), in_dtype)
    b = random_array(rng, (7, 4), in_dtype)
    if np.dtype(in_dtype).kind == "f":  # make the float -> int truncation matter
        a, b = (a * 3).astype(in_dtype), (b * 3).astype(in_dtype)
    result = check("ij,jk->ik", a, b, dtype=dtype, casting=casting, plan=plan)
    assert np.asarray(result).dtype == np.dtype(dtype)


CASTING_FAILURES = [
    ("f64-to-f32-default-safe", np.float64, {"dtype": np.float32}),
    ("f64-to-f32-safe", np.float64, {"dtype": np.float32, "casting": "safe"}),
    ("f64-to-i64-same-kind", np.float64, {"dtype": np.int64, "casting": "same_kind"}),
    ("i64-to-i8-safe", np.int64, {"dtype": np.int8}),
    ("c128-to-f64-same-kind", np.complex128, {"dtype": np.float64, "casting": "same_kind"}),
    ("f32-to-f64-no", np.float32, {"dtype": np.float64, "casting": "no"}),
    ("out-f32-for-f64", np.float64, {"out": lambda: np.empty((5, 4), np.float32)}),
    ("out-i32-for-f64", np.float64, {"out": lambda: np.empty((5, 4), np.int32)}),
]


@pytest.mark.parametrize("optimize", ["default", False], ids=["optimize-default", "optimize-False"])
@pytest.mark.parametrize(
    "in_dtype,kwargs", [pytest.param(d, kw, id=name) for name, d, kw in CASTING_FAILURES]
)
def test_casting_failure_raises_type_error(rng, in_dtype, kwargs, optimize):
    a = random_array(rng, (5, 7), in_dtype)
    b = random_array(rng, (7, 4), in_dtype)

    def resolved():
        kw = {k: (v() if callable(v) else v) for k, v in kwargs.items()}
        if optimize != "default":
            kw["optimize"] = optimize
        return kw

    with pytest.raises(TypeError):  # the premise: numpy refuses too
        np.einsum("ij,jk->ik", a, b, **{"optimize": False, **resolved()})
    with pytest.raises(TypeError) as info:
        tc.einsum("ij,jk->ik", a, b, **resolved())
    assert isinstance(info.value, tc.TensorcError)


# --------------------------------------------------------------------------------------------
# order=
# --------------------------------------------------------------------------------------------

ORDER_EXPRESSIONS = [
    ("matmul", "ij,jk->ik", [(5, 7), (7, 4)]),
    ("mission-ijk,jkf", "ijk,jkf->if", [(5, 4, 3), (4, 3, 6)]),
    ("batched-matmul-permuted", "bij,bjk->kbi", [(3, 4, 5), (3, 5, 2)]),
    ("outer-3", "i,j,k->ijk", [(3,), (4,), (2,)]),
]


@SOME_PLANS
@pytest.mark.parametrize(
    "subscripts,shapes", [pytest.param(s, sh, id=name) for name, s, sh in ORDER_EXPRESSIONS]
)
@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
def test_order(rng, subscripts, shapes, order, plan):
    # Fortran-ordered inputs make 'A' and 'K' differ from 'C'.
    operands = [np.asfortranarray(random_array(rng, shape)) for shape in shapes]
    result = check(subscripts, *operands, order=order, plan=plan)
    if order in "CF":
        flag = "C_CONTIGUOUS" if order == "C" else "F_CONTIGUOUS"
        assert np.einsum(subscripts, *operands, order=order).flags[flag]  # the premise
        assert result.flags[flag]


# --------------------------------------------------------------------------------------------
# optimize=
# --------------------------------------------------------------------------------------------

OPTIMIZE_EXPRESSIONS = [
    ("mission-ijk,if,jf", "ijk,if,jf->if", [(5, 4, 3), (5, 6), (4, 6)]),
    ("mission-ijk,jf,kf", "ijk,jf,kf->if", [(5, 4, 3), (4, 6), (3, 6)]),
    ("mission-ijk,jkf", "ijk,jkf->if", [(5, 4, 3), (4, 3, 6)]),
    ("chain-of-4", "ab,bc,cd,de->ae", [(3, 4), (4, 5), (5, 2), (2, 3)]),
    ("ellipsis-chain", "...ij,...jk,...kl->...il", [(2, 3, 4), (1, 4, 5), (5, 2)]),
    ("diagonals", "ii,ij,jk->k", [(4, 4), (4, 3), (3, 5)]),
    ("broadcast-label", "ij,jk,k->i", [(5, 1), (3, 4), (1,)]),
    ("scalars", ",ij,jk,->ik", [(), (3, 4), (4, 2), ()]),
]
OPTIMIZE_VALUES = {
    "False": False,
    "True": True,
    "greedy": "greedy",
    "optimal": "optimal",
    "path-greedy": "einsum_path:greedy",
    "path-optimal": "einsum_path:optimal",
    "path-left-to-right": "left-to-right",
    "path-all-at-once": "all-at-once",
}


def explicit_path(spec, subscripts, operands):
    if spec.startswith("einsum_path:"):
        return np.einsum_path(subscripts, *operands, optimize=spec.split(":")[1])[0]
    if spec == "left-to-right":
        return ["einsum_path"] + [(0, 1)] * (len(operands) - 1)
    return ["einsum_path", tuple(range(len(operands)))]


@SOME_PLANS
@pytest.mark.parametrize(
    "subscripts,shapes",
    [pytest.param(s, sh, id=name) for name, s, sh in OPTIMIZE_EXPRESSIONS],
)
@pytest.mark.parametrize("optimize", list(OPTIMIZE_VALUES.values()), ids=list(OPTIMIZE_VALUES))
def test_optimize(rng, subscripts, shapes, optimize, plan):
    operands = [random_array(rng, shape) for shape in shapes]
    if isinstance(optimize, str) and optimize not in ("greedy", "optimal"):
        optimize = explicit_path(optimize, subscripts, operands)
    check(subscripts, *operands, optimize=optimize, plan=plan)


def test_hand_written_paths_for_the_mission(rng):
    a, b, c = (random_array(rng, s) for s in [(5, 4, 3), (5, 6), (4, 6)])
    for path in (["einsum_path", (1, 2), (0, 1)], ["einsum_path", (0, 2), (0, 1)]):
        check("ijk,if,jf->if", a, b, c, optimize=path)


# --------------------------------------------------------------------------------------------
# Interleaved sublist format
# --------------------------------------------------------------------------------------------

SUBLIST_CASES = [
    ("matmul", [((5, 7), [0, 1]), ((7, 4), [1, 2])], [0, 2]),
    ("matmul-implicit", [((5, 7), [0, 1]), ((7, 4), [1, 2])], None),
    ("mission-ijk,if,jf", [((5, 4, 3), [0, 1, 2]), ((5, 6), [0, 5]), ((4, 6), [1, 5])], [0, 5]),
    ("trace", [((4, 4), [0, 0])], []),
    ("diagonal", [((4, 4), [0, 0])], [0]),
    ("dot-to-scalar", [((6,), [3]), ((6,), [3])], []),
    ("transpose-implicit", [((3, 5), [1, 0])], None),
    ("large-label-numbers", [((5, 7), [30, 40]), ((7, 4), [40, 50])], [30, 50]),
    ("ellipsis", [((2, 3, 4), [Ellipsis, 0, 1]), ((4, 5), [1, 2])], [Ellipsis, 0, 2]),
    ("ellipsis-implicit", [((2, 3, 4), [Ellipsis, 1]), ((3, 4), [Ellipsis, 1])], None),
    ("scalar-operand", [((), []), ((5,), [0])], [0]),
]


@pytest.mark.parametrize(
    "pieces,output", [pytest.param(p, o, id=name) for name, p, o in SUBLIST_CASES]
)
def test_sublist_format(rng, pieces, output):
    args = []
    for shape, sublist in pieces:
        args += [random_array(rng, shape), list(sublist)]
    if output is not None:
        args.append(list(output))
    check(*args)


def test_sublist_format_with_out_and_dtype(rng):
    a, b = random_array(rng, (5, 7)), random_array(rng, (7, 4))
    out = np.zeros((5, 4), np.complex128)
    result = tc.einsum(a, [0, 1], b, [1, 2], [0, 2], out=out)
    assert result is out
    expected = np.einsum(a, [0, 1], b, [1, 2], [0, 2], out=np.zeros_like(out))
    assert_matches(out, expected, magnitude([a, [0, 1], b, [1, 2], [0, 2]]))
    check(a, [0, 1], b, [1, 2], [0, 2], dtype=np.float32, casting="same_kind")


# --------------------------------------------------------------------------------------------
# zero-size dimensions
# --------------------------------------------------------------------------------------------

ZERO_SIZE_CASES = [
    ("contracted-dim-empty", "ij,jk->ik", [(2, 0), (0, 3)]),
    ("free-dim-empty", "ij,jk->ik", [(0, 5), (5, 3)]),
    ("all-empty-dot", "i,i->", [(0,), (0,)]),
    ("empty-vs-size-1", "ij,ij->ij", [(0, 1), (1, 3)]),
    ("empty-broadcast-label", "ij,ij->ij", [(2, 0), (2, 1)]),
    ("empty-ellipsis", "...i,...i->...", [(0, 3), (0, 3)]),
    ("empty-ellipsis-broadcast", "...ij,...jk->...ik", [(0, 1, 2, 3), (4, 3, 2)]),
    ("empty-diagonal", "ii->i", [(0, 0)]),
    ("empty-trace", "ii", [(0, 0)]),
    ("mission-empty-k", "ijk,jkf->if", [(5, 4, 0), (4, 0, 6)]),
    ("mission-empty-f", "ijk,if,jf->if", [(5, 4, 3), (5, 0), (4, 0)]),
    ("empty-sum-all", "ijk->", [(3, 0, 2)]),
    ("empty-outer", "i,j->ij", [(0,), (3,)]),
]


@ALL_PLANS
@pytest.mark.parametrize(
    "subscripts,shapes", [pytest.param(s, sh, id=name) for name, s, sh in ZERO_SIZE_CASES]
)
@pytest.mark.parametrize("dtype", [np.float64, np.int32], ids=dtype_id)
def test_zero_size(rng, subscripts, shapes, dtype, plan):
    operands = [random_array(rng, shape, dtype) for shape in shapes]
    check(subscripts, *operands, plan=plan)


# --------------------------------------------------------------------------------------------
# memory orders and strides: Fortran order, strided, negative strides, transposed and
# zero-stride views
# --------------------------------------------------------------------------------------------


def _memory_cases(rng):
    r = rng
    big = random_array(r, (10, 14))
    return {
        "fortran-matmul": (
            "ij,jk->ik",
            [
                np.asfortranarray(random_array(r, (5, 7))),
                np.asfortranarray(random_array(r, (7, 4))),
            ],
        ),
        "strided-matmul": ("ij,jk->ik", [big[::2, 1::2], random_array(r, (4, 14))[::-1, ::2].T]),
        "transposed-views": ("ki,kj->ij", [random_array(r, (5, 7)).T, random_array(r, (4, 7)).T]),
        "negative-strides-mission": (
            "ijk,jkf->if",
            [
                random_array(r, (5, 4, 3))[::-1, :, ::-1],
                np.asfortranarray(random_array(r, (4, 3, 6))),
            ],
        ),
        "mission-ijk,if,jf-mixed": (
            "ijk,if,jf->if",
            [
                np.asfortranarray(random_array(r, (5, 4, 3))),
                random_array(r, (6, 5)).T,
                random_array(r, (8, 12))[::2, ::2],
            ],
        ),
        "zero-stride-broadcast-view": (
            "ij,ij->ij",
            [np.broadcast_to(random_array(r, (1, 6)), (5, 6)), random_array(r, (5, 6))],
        ),
        "zero-stride-contracted": (
            "ij,jk->ik",
            [np.broadcast_to(random_array(r, (5, 1)), (5, 7)), random_array(r, (7, 4))],
        ),
        "strided-diagonal": ("ii->i", [big[::2, ::3][:, :5].T]),
        "moveaxis-ellipsis": (
            "...ij,...jk->...ik",
            [
                np.moveaxis(random_array(r, (4, 2, 3)), 0, -1),
                np.moveaxis(random_array(r, (5, 2, 4)), 0, -1),
            ],
        ),
        "fortran-float32-complex64": (
            "ij,jk->ik",
            [
                np.asfortranarray(random_array(r, (5, 7), np.float32)),
                random_array(r, (4, 7), np.complex64).T,
            ],
        ),
        "strided-int16": (
            "ijk,jf,kf->if",
            [
                random_array(r, (10, 4, 6), np.int16)[::2, :, ::2],
                random_array(r, (6, 4), np.int16).T,
                np.asfortranarray(random_array(r, (3, 6), np.int16)),
            ],
        ),
    }


MEMORY_CASE_NAMES = list(_memory_cases(np.random.default_rng(0)))


@ALL_PLANS
@pytest.mark.parametrize("name", MEMORY_CASE_NAMES)
def test_memory_orders_and_strides(rng, name, plan):
    subscripts, operands = _memory_cases(rng)[name]
    check(subscripts, *operands, plan=plan)


# --------------------------------------------------------------------------------------------
# error types (messages are pinned elsewhere)
# --------------------------------------------------------------------------------------------


def _m(*shape):
    return np.ones(shape)


ERROR_CASES = [
    ("too-few-operands", lambda: ("ij,jk->ik", _m(2, 3))),
    ("too-many-operands", lambda: ("ij->ij", _m(2, 3), _m(3, 4))),
    ("invalid-subscript-char", lambda: ("i$,jk->ik", _m(2, 3), _m(3, 4))),
    ("invalid-subscript-digit", lambda: ("i1,jk->ik", _m(2, 3), _m(3, 4))),
    ("invalid-output-char", lambda: ("ij,jk->i%", _m(2, 3), _m(3, 4))),
    ("output-label-not-in-inputs", lambda: ("ij->k", _m(2, 3))),
    ("output-label-not-in-inputs-2", lambda: ("ij,jk->iz", _m(2, 3), _m(3, 4))),
    ("repeated-output-label", lambda: ("ij,jk->ikk", _m(2, 3), _m(3, 4))),
    ("repeated-output-label-diag", lambda: ("ii->ii", _m(3, 3))),
    ("too-many-subscripts", lambda: ("ijk->i", _m(2, 3))),
    ("too-many-subscripts-second-operand", lambda: ("ij,jkl->ik", _m(2, 3), _m(3, 4))),
    ("too-few-subscripts", lambda: ("i->i", _m(2, 3))),
    ("shape-mismatch", lambda: ("ij,jk->ik", _m(2, 3), _m(4, 5))),
    ("shape-mismatch-mission", lambda: ("ijk,if,jf->if", _m(5, 4, 3), _m(5, 6), _m(4, 7))),
    ("shape-mismatch-diagonal", lambda: ("ii->i", _m(2, 3))),
    ("shape-mismatch-ellipsis", lambda: ("...,...", _m(3), _m(4))),
]


@pytest.mark.parametrize("make_args", [pytest.param(f, id=n) for n, f in ERROR_CASES])
def test_invalid_einsum_raises_value_error(make_args):
    args = make_args()
    with pytest.raises(ValueError):  # the premise: numpy refuses too
        np.einsum(*args)
    with pytest.raises(ValueError) as info:
        tc.einsum(*args)
    assert isinstance(info.value, tc.TensorcError)


@pytest.mark.parametrize("make_args", [pytest.param(f, id=n) for n, f in ERROR_CASES[-4:-1]])
def test_shape_mismatch_raises_with_a_grid_too(make_args):
    args = make_args()
    labels = sorted({c for c in args[0].split("->")[0] if c.isalpha()})
    with pytest.raises(ValueError) as info:
        tc.einsum(*args, grid={label: 1 for label in labels})
    assert isinstance(info.value, tc.TensorcError)
