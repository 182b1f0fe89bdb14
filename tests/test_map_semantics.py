"""Element-wise evaluation of map expressions (tensorc.ir.semantics): values equal numpy's,
the operands are never written (a float operator may reuse a temporary the expression made),
and the element-wise kernel hands back its own temporary without copying it again."""

from __future__ import annotations

import numpy as np

from tensorc.codegen.kernels import ElementwiseBlock
from tensorc.ir.nodes import Arg, Const, OpCall
from tensorc.ir.semantics import evaluate_map_expr

F8 = np.dtype("float64")


def _standardize_expr():
    """``(#0 - #1 / n) / sqrt(#2 / n)``: the standardize statement's map."""
    n = Const(4.0)
    return OpCall("div", (OpCall("sub", (Arg(0), OpCall("div", (Arg(1), n)))),
                          OpCall("sqrt", (OpCall("div", (Arg(2), n)),))))


def test_a_map_equals_numpy_and_leaves_its_operands_alone():
    rng = np.random.default_rng(0)
    x, s1, s2 = rng.random((6, 5)), rng.random(5), rng.random(5) + 1.0
    kept = [a.copy() for a in (x, s1, s2)]
    got = evaluate_map_expr(_standardize_expr(), [x, s1, s2], F8)
    np.testing.assert_array_equal(got, (x - s1 / 4.0) / np.sqrt(s2 / 4.0))  # bit for bit
    for a, b in zip((x, s1, s2), kept, strict=True):
        np.testing.assert_array_equal(a, b)
    squares = evaluate_map_expr(OpCall("square", (OpCall("sub", (Arg(0), Arg(1))),)),
                                [x, s1], F8)
    np.testing.assert_array_equal(squares, np.square(x - s1))
    np.testing.assert_array_equal(x, kept[0])


def test_an_operator_returning_its_operand_is_not_taken_for_a_temporary():
    x = np.arange(12.0).reshape(3, 4)
    kept = x.copy()
    # np.real of a real array is the array itself: adding into it would change x
    got = evaluate_map_expr(OpCall("add", (OpCall("real", (Arg(0),)), Const(1.0))), [x], F8)
    np.testing.assert_array_equal(got, kept + 1.0)
    np.testing.assert_array_equal(x, kept)
    # a variadic sum folds left, reusing its first temporary, never an operand
    got = evaluate_map_expr(OpCall("add", (Arg(0), Arg(0), OpCall("neg", (Arg(0),)), Arg(0))),
                            [x], F8)
    np.testing.assert_array_equal(got, kept + kept - kept + kept)
    np.testing.assert_array_equal(x, kept)


def test_the_elementwise_kernel_copies_only_what_is_not_its_own():
    rng = np.random.default_rng(1)
    x, s1, s2 = rng.random((6, 5)), rng.random(5), rng.random(5) + 1.0
    key = ("i", "j")
    block = ElementwiseBlock(_standardize_expr(), [key, ("j",), ("j",)], key, key, None, F8)
    got = block(x, s1, s2)
    np.testing.assert_array_equal(got, (x - s1 / 4.0) / np.sqrt(s2 / 4.0))
    assert got.flags.c_contiguous and got.flags.owndata  # its temporary, not a copy of one
    identity = ElementwiseBlock(Arg(0), [key], key, key, None, F8)
    same = identity(x)
    np.testing.assert_array_equal(same, x)
    assert not np.may_share_memory(same, x)  # an operand is copied: its buffer is reused
