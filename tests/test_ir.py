"""The IR: every node type answers every rule table; verifier, printer and interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from tensorc.errors import IRVerificationError
from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import parse_einsum
from tensorc.ir.interpret import INTERPRET_RULES, interpret
from tensorc.ir.keys import KEY_RULES
from tensorc.ir.nodes import (
    NODE_TYPES,
    Arg,
    Function,
    InputDecl,
    Join,
    Map,
    Merge,
    ReduceByKey,
    Scan,
)
from tensorc.ir.printer import PRINT_RULES, format_program
from tensorc.ir.verify import VERIFY_RULES, verify


@pytest.mark.parametrize(
    "table",
    [KEY_RULES, VERIFY_RULES, PRINT_RULES, INTERPRET_RULES],
    ids=["keys", "verify", "print", "interpret"],
)
def test_every_node_type_has_a_rule_in_every_table(table):
    assert set(table) == set(NODE_TYPES)


def _program(subscripts, *shapes, dtype="float64"):
    spec = parse_einsum(subscripts, shapes)
    return einsum_program(spec, shapes, [dtype] * len(shapes), dtype)


def test_nodes_are_frozen_and_structurally_equal():
    a = Scan("A", ("i", "k"))
    assert a == Scan("A", ("i", "k"))
    assert hash(a) == hash(Scan("A", ("i", "k")))
    with pytest.raises(AttributeError):
        a.tensor = "B"  # type: ignore[misc]


def test_printer_is_deterministic_and_readable():
    program = _program("ik,kj->ij", (2, 3), (3, 4))
    text = format_program(program)
    assert text == format_program(_program("ik,kj->ij", (2, 3), (3, 4)))
    assert "%2 = join(%0, %1) on [k] -> [i,k,j]" in text
    assert "%4 = reduce_by_key(+, %3) -> [i,j]" in text


def test_verifier_rejects_a_map_that_drops_an_index():
    program = _program("ik,kj->ij", (2, 3), (3, 4))
    join = program.output.x.x
    bad = program.with_output(Map(Arg(0), join, ("i", "j")))
    with pytest.raises(IRVerificationError, match="is not a permutation of its input key"):
        verify(bad)


def test_verifier_rejects_a_join_on_the_wrong_names():
    scans = (Scan("A", ("i", "k")), Scan("B", ("k", "j")))
    decls = (InputDecl("A", (2, 3), "float64"), InputDecl("B", (3, 4), "float64"))
    program = Function(decls, (("i", 2), ("j", 4), ("k", 3)), Join(scans, ("i",)), "float64")
    with pytest.raises(IRVerificationError, match=r"joins on \('i',\) but the inputs share"):
        verify(program)


def test_verifier_rejects_a_scan_with_the_wrong_rank():
    decls = (InputDecl("A", (2, 3), "float64"),)
    program = Function(decls, (("i", 2),), Scan("A", ("i",)), "float64")
    with pytest.raises(IRVerificationError, match="1 indices for a rank-2 tensor"):
        verify(program)


def test_verifier_rejects_an_unknown_monoid():
    decls = (InputDecl("A", (2,), "float64"),)
    program = Function(decls, (("i", 2),), ReduceByKey("xor", Scan("A", ("i",)), ()), "float64")
    with pytest.raises(IRVerificationError, match="unknown monoid 'xor'"):
        verify(program)


def test_interpreter_matches_numpy_on_a_diagonal_and_a_trace():
    rng = np.random.default_rng(1)
    a = rng.random((3, 3))
    assert np.allclose(interpret(_program("ii->i", (3, 3)), {"in0": a}), np.diag(a))
    assert np.allclose(interpret(_program("ii", (3, 3)), {"in0": a}), np.trace(a))


def test_interpreter_merge_accumulates_with_the_monoid():
    decls = (InputDecl("A", (3,), "float64"), InputDecl("B", (3,), "float64"))
    program = Function(
        decls, (("i", 3),), Merge(Scan("A", ("i",)), Scan("B", ("i",)), "max"), "float64"
    )
    verify(program)
    got = interpret(program, {"A": np.array([1.0, 5.0, 2.0]), "B": np.array([3.0, 0.0, 2.5])})
    assert got.tolist() == [3.0, 5.0, 2.5]


def test_constants_are_equal_only_as_the_same_value_and_type():
    from tensorc.ir.nodes import Const

    assert Const(0.0) != Const(-0.0)
    assert Const(1) != Const(1.0) and Const(1) != Const(True)
    assert Const(float("nan")) == Const(float("nan"))
    assert Const(2.5) == Const(2.5) and hash(Const(2.5)) == hash(Const(2.5))
    assert len({Const(0.0), Const(-0.0), Const(0), Const(False)}) == 4


def test_signed_zero_constants_get_their_own_plans():
    import tensorc as tc

    a = tc.asarray(np.arange(1.0, 4.0))
    with np.errstate(divide="ignore"):
        assert np.asarray(a / 0.0).tolist() == [np.inf] * 3
        assert np.asarray(a / -0.0).tolist() == [-np.inf] * 3
