"""The front end of ``.tc`` block programs: grammar, the IR it builds, every diagnostic."""

from __future__ import annotations

from pathlib import Path

import pytest

import tensorc as tc
from tensorc.errors import TcParseError, TcShapeError, TcTypeError
from tensorc.frontend import tc_ast as ast
from tensorc.frontend.block_check import (
    check_block_program,
    is_block_program,
    parse_block_program,
)
from tensorc.frontend.diagnostics import Source, Span
from tensorc.frontend.tc_parse import parse
from tensorc.ir import block_program as ir
from tensorc.ir.block_program import format_statements

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

CHOLESKY = """\
# Lower Cholesky factor of a symmetric positive definite matrix, by blocks.
size N
blocks NB of N
input  A : f64[N, N]
output L : f64[N, N]

for k in 0:NB {
  L{k, k} = chol(A{k, k})
  for i in k+1:NB {
    L{i, k} = T(lsolve(L{k, k}, T(A{i, k})))
  }
  for i in k+1:NB {
    for j in k+1:i+1 {
      A{i, j} = A{i, j} - L{i, k} @ T(L{j, k})
    }
  }
}
"""

TSQR = """\
size M, N
blocks MB of M
input  A : f64[M, N]
output R : f64[N, N]
tensor Rs : f64

for i in 0:MB {
  Rs{0, i} = qr_r(A{i, 0})
}
for l in 0:log2(MB) {
  for i in 0:MB:2**(l+1) {
    if i + 2**l < MB {
      Rs{l+1, i} = qr_r(stack(Rs{l, i}, Rs{l, i + 2**l}))
    } else {
      Rs{l+1, i} = Rs{l, i}
    }
  }
}
R{0, 0} = Rs{log2(MB), 0}
"""

HEAD = """\
size N, M
blocks NB of N
input  A : f64[N, M]
output L : f64[N, M]
tensor Rs : f64
"""  # five lines: the statements of a test start on line 6


def _program(text: str, name: str = "prog.tc") -> ir.BlockProgramIR:
    return parse_block_program(Source(name, text))


def _error(text: str) -> tc.TcError:
    with pytest.raises(tc.TcError) as info:
        _program(text)
    return info.value


def _only(err: tc.TcError, code: str):
    assert err.codes == [code], str(err)
    return err.diagnostics[0]


# ---- the two examples -------------------------------------------------------------------


def test_cholesky_parses_into_the_expected_ir():
    prog = _program(CHOLESKY, "chol.tc")
    assert prog.name == "chol.tc"
    assert prog.sizes == ("N",)
    assert prog.blocks == {"NB": "N"}
    assert prog.tensors == {
        "A": ir.TensorSpec("A", "input", "f64", ("N", "N")),
        "L": ir.TensorSpec("L", "output", "f64", ("N", "N")),
    }
    assert prog.inputs() == ["A"] and prog.outputs() == ["L"]
    assert format_statements(prog.body) == (
        "for k in 0:NB\n"
        "  L{k, k} = chol(A{k, k})\n"
        "  for i in k + 1:NB\n"
        "    L{i, k} = T(lsolve(L{k, k}, T(A{i, k})))\n"
        "  for i in k + 1:NB\n"
        "    for j in k + 1:i + 1\n"
        "      A{i, j} = A{i, j} - L{i, k} @ T(L{j, k})"
    )
    (outer,) = prog.body
    assert isinstance(outer, ir.Loop) and outer.var == "k"
    assert (outer.start, outer.stop, outer.step) == (ir.IntConst(0), ir.Var("NB"), ir.IntConst(1))
    diag, solve, update = outer.body
    assert diag.targets == (ir.BlockRef("L", (ir.Var("k"), ir.Var("k"))),)
    assert diag.value == ir.Kernel("chol", (ir.Read(ir.BlockRef("A", (ir.Var("k"),) * 2)),))
    assert [loop.var for loop in (solve, update, update.body[0])] == ["i", "i", "j"]
    inner = update.body[0]
    assert inner.stop == ir.IntOp("+", ir.Var("i"), ir.IntConst(1))
    (assign,) = inner.body
    assert assign.value.name == "sub" and assign.value.args[1].name == "matmul"


def test_cholesky_spans_point_at_the_source():
    prog = _program(CHOLESKY)
    (outer,) = prog.body
    assert outer.span.line == 7 and outer.span.col == 1  # the for statement
    diag = outer.body[0]
    assert diag.span == Span(8, 3, 8, 26)  # the whole statement
    assert diag.targets[0].span == Span(8, 3, 8, 10)  # L{k, k}
    assert diag.value.span == Span(8, 13, 8, 26)  # chol(...)
    assert diag.value.args[0].ref.span == Span(8, 18, 8, 25)  # A{k, k}
    update = outer.body[2].body[0].body[0]
    assert update.value.span.col == 17  # the '-' operator spans A{i, j} - ...
    assert update.value.args[1].span.col == 27  # the '@' operator spans L{i, k} @ ...


def test_tsqr_parses_into_the_expected_ir():
    prog = _program(TSQR)
    assert prog.sizes == ("M", "N")
    assert prog.blocks == {"MB": "M"}
    assert prog.tensors["Rs"] == ir.TensorSpec("Rs", "tensor", "f64", None)
    assert prog.block_grid("A", {"MB": 4}) == (4, 1)
    assert prog.block_grid("Rs", {"MB": 4}) is None
    assert format_statements(prog.body) == (
        "for i in 0:MB\n"
        "  Rs{0, i} = qr_r(A{i, 0})\n"
        "for l in 0:log2(MB)\n"
        "  for i in 0:MB:2**(l + 1)\n"
        "    if i + 2**l < MB\n"
        "      Rs{l + 1, i} = qr_r(stack(Rs{l, i}, Rs{l, i + 2**l}))\n"
        "    else\n"
        "      Rs{l + 1, i} = Rs{l, i}\n"
        "R{0, 0} = Rs{log2(MB), 0}"
    )
    levels = prog.body[1]
    assert levels.stop == ir.IntCall("log2", (ir.Var("MB"),))
    strided = levels.body[0]
    level = ir.IntOp("+", ir.Var("l"), ir.IntConst(1))
    assert strided.step == ir.IntOp("**", ir.IntConst(2), level)
    branch = strided.body[0]
    assert isinstance(branch, ir.If)
    assert branch.cond == ir.Compare(
        "<", ir.IntOp("+", ir.Var("i"), ir.IntOp("**", ir.IntConst(2), ir.Var("l"))), ir.Var("MB"))
    copy = branch.orelse[0]
    assert copy.value == ir.Read(ir.BlockRef("Rs", (ir.Var("l"), ir.Var("i"))))
    last = prog.body[2]
    assert last.targets == (ir.BlockRef("R", (ir.IntConst(0), ir.IntConst(0))),)
    # the bounds evaluate as the IR defines them: log2 is the ceiling, log2(1) == 0
    assert ir.eval_int(levels.stop, {"MB": 5}) == 3
    assert ir.eval_int(levels.stop, {"MB": 1}) == 0


def test_the_shipped_block_examples_check_when_present():
    names = ["cholesky", "tsqr", "tsqr_q", "lu", "lower_solve", "upper_solve"]
    found = [EXAMPLES / f"{n}.tc" for n in names if (EXAMPLES / f"{n}.tc").exists()]
    for path in found:
        prog = _program(path.read_text(), str(path))
        assert prog.body and prog.outputs()


# ---- grammar -----------------------------------------------------------------------------


def test_several_targets_take_the_results_of_one_kernel():
    prog = _program(HEAD + "tensor Q : f64\nfor i in 0:NB {\n  Q{0, i}, Rs{0, i} = qr(A{i, 0})\n}\n"
                    "L{0, 0} = Rs{0, 0}\n")
    assign = prog.body[0].body[0]
    assert assign.targets == (ir.BlockRef("Q", (ir.IntConst(0), ir.Var("i"))),
                              ir.BlockRef("Rs", (ir.IntConst(0), ir.Var("i"))))
    assert assign.value.name == "qr"
    assert str(assign) == "Q{0, i}, Rs{0, i} = qr(A{i, 0})"


def test_operator_precedence_and_power():
    module = parse(Source("p.tc", "blocks NB of N\nx = -2**2 + 2**3**2 * 1\n"))
    rhs = module.stmts[0].rhs
    assert rhs.op == "add"
    neg, product = rhs.a, rhs.b
    assert neg.op == "neg" and neg.x.op == "pow"  # -2**2 == -(2**2)
    assert product.op == "mul" and product.a.op == "pow" and product.a.b.op == "pow"  # right
    prog = _program(HEAD + "L{0, 0} = A{0, 0} * 2 @ A{0, 0} / 3 - -A{0, 0}\n"
                    "for i in 0:-2**2 + NB { L{i, 0} = A{i, 0} }\n")
    value = prog.body[0].value
    assert str(value) == "A{0, 0} * 2.0 @ A{0, 0} / 3.0 - -A{0, 0}"
    assert [value.name, value.args[0].name, value.args[0].args[0].name] == ["sub", "div",
                                                                             "matmul"]
    assert prog.body[1].stop == ir.IntOp("+", ir.IntOp("-", ir.IntConst(0), ir.IntOp(
        "**", ir.IntConst(2), ir.IntConst(2))), ir.Var("NB"))
    assert ir.eval_int(prog.body[1].stop, {"NB": 10}) == 6


def test_brace_glued_to_a_name_is_a_block_access_and_a_space_opens_a_body():
    ok = _program(HEAD + "for k in 0:NB {\n  L{k, 0} = A{k, 0}\n}\n")
    assert ok.body[0].body[0].targets[0] == ir.BlockRef("L", (ir.Var("k"), ir.IntConst(0)))
    err = _error(HEAD + "for k in 0:NB{\n  L{k, 0} = A{k, 0}\n}\n")
    diag = _only(err, "E-parse")
    assert diag.message == "unexpected '='"
    assert " --> prog.tc:7:11\n" in str(err)
    assert "'NB{' reads a block of NB: put a space before '{' to open a body" in str(err)
    assert isinstance(err, TcParseError)
    # `else{` is the keyword and a brace, not a block access of `else`
    prog = _program(HEAD + "for k in 0:NB {\n  if k == 0 {\n    L{k, 0} = A{k, 0}\n  } else{\n"
                    "    L{k, 0} = -A{k, 0}\n  }\n}\n")
    assert prog.body[0].body[0].orelse[0].value.name == "neg"


def test_nested_bindings_else_if_and_conditions():
    prog = _program(HEAD + "for i in 0:NB, j in i:min(i + 2, NB) {\n"
                    "  if i == j and not i > 2 {\n    L{i, 0} = A{j, 0}\n"
                    "  } else if i < 1 or j >= max(NB, 3) {\n    L{i, 0} = zeros(A{j, 0})\n"
                    "  }\n}\n")
    outer = prog.body[0]
    inner = outer.body[0]
    assert (outer.var, inner.var) == ("i", "j")
    assert inner.start == ir.Var("i")
    two_on = ir.IntOp("+", ir.Var("i"), ir.IntConst(2))
    assert inner.stop == ir.IntCall("min", (two_on, ir.Var("NB")))
    assert inner.span.line == 6 and inner.span.col == 16  # an inner binding has its own span
    branch = inner.body[0]
    assert str(branch.cond) == "(i == j and not i > 2)"
    (nested,) = branch.orelse
    assert str(nested.cond) == "(i < 1 or j >= max(NB, 3))"
    assert nested.orelse == ()


def test_writing_an_input_is_allowed():
    prog = _program(HEAD + "A{0, 0} = 2 * A{0, 0}\nL{0, 0} = A{0, 0}\n")
    assert prog.body[0].targets[0].tensor == "A"


def test_element_programs_parse_as_before():
    for name in ["matmul", "mttkrp", "contraction", "shortest_path", "logreg",
                 "power_iteration", "als"]:
        path = EXAMPLES / f"{name}.tc"
        module = parse(Source(str(path), path.read_text()))
        assert not is_block_program(module)
        assert module.blocks == ()
        assert not any(isinstance(n, (ast.IfStmt, ast.BlockAssign, ast.BlockAccess))
                       for n in ast.walk(module.stmts))
    prog = tc.compile("size N = 3\ninput x : f64[N]\noutput y : f64[N]\ny[i] = 2 * x[i]\n")
    assert prog.run(x=[1.0, 2.0, 3.0])["y"].tolist() == [2.0, 4.0, 6.0]


def test_new_keywords_stay_names_where_only_a_name_fits():
    module = parse(Source("p.tc", "size of\ninput x : f64[of]\noutput y : f64[of]\n"
                          "y[if] = x[if]\n"))
    assert not is_block_program(module)
    assert module.stmts[0].subs[0].name == "if"


# ---- block syntax in an element program -------------------------------------------------


ELEMENT = "size N\ninput A : f64[N]\noutput B : f64[N]\n"


def test_block_syntax_in_an_element_program_is_e_block():
    with pytest.raises(tc.TcError) as info:
        tc.compile(ELEMENT + "for i in 0:N:2 { B[i] = A[i] }\nif 1 < 2 { B[i] = A[i] @ A[i] }\n"
                   "B[i], A[i] = A[i]\n")
    err = info.value
    assert err.codes == ["E-block"] * 4
    text = str(err)
    assert "error[E-block]: a loop step is only allowed in a block program (loop of 'i')\n" \
           " --> <source>:4:14\n" in text
    assert "error[E-block]: 'if' is only allowed in a block program\n --> <source>:5:1\n" \
           "  |\n5 | if 1 < 2 { B[i] = A[i] @ A[i] }\n  | ^^ choose values" in text
    assert "error[E-block]: '@' (the matrix product) is only allowed in a block program\n" \
           " --> <source>:5:19\n" in text
    assert "error[E-block]: several targets are only allowed in a block program\n" \
           " --> <source>:6:7\n" in text


def test_power_in_an_element_program_is_still_a_syntax_error():
    with pytest.raises(tc.TcError) as info:
        tc.compile(ELEMENT + "B[i] = A[i] ** 2\n")
    err = info.value
    assert err.codes == ["E-parse"]
    assert str(err).startswith("error[E-parse]: unexpected '*'\n --> <source>:4:14\n")
    assert "('**' is a power only in the index expressions of block programs)" in str(err)


def test_check_block_program_rejects_an_element_module():
    source = Source("e.tc", ELEMENT + "B[i] = A[i]\n")
    err = None
    with pytest.raises(tc.TcError) as info:
        check_block_program(parse(source), source)
    err = info.value
    assert err.codes[0] == "E-block"
    assert "not a block program" in str(err)


# ---- diagnostics ---------------------------------------------------------------------------


def test_e_arity_kernel_arguments():
    err = _error(HEAD + "for k in 0:NB {\n  L{k, 0} = lsolve(A{k, 0})\n}\n")
    assert str(err) == (
        "error[E-arity]: kernel 'lsolve' takes 2 blocks, got 1\n"
        " --> prog.tc:7:13\n"
        "  |\n"
        "7 |   L{k, 0} = lsolve(A{k, 0})\n"
        "  |             ^^^^^^^^^^^^^^^ lsolve: L^-1 B for a lower-triangular L"
    )
    assert isinstance(err, TcTypeError) and isinstance(err, TypeError)


def test_e_arity_targets_and_results():
    err = _error(HEAD + "for k in 0:NB {\n  L{k, 0} = qr(A{k, 0})\n}\n")
    diag = _only(err, "E-arity")
    assert diag.message == "'qr' returns 2 blocks (Q, R), but 1 target is written"
    assert " --> prog.tc:7:13\n" in str(err)
    err = _error(HEAD + "L{0, 0}, Rs{0} = chol(A{0, 0})\n")
    assert _only(err, "E-arity").message == "'chol' returns 1 block, but 2 targets are written"
    err = _error(HEAD + "L{0, 0} = T(lu(A{0, 0}))\n")
    assert _only(err, "E-arity").message == (
        "'lu' returns 2 blocks (L, U); it must be the whole right side of an assignment")
    err = _error(HEAD + "L{0, 0}, Rs{0} = A{0, 0} + A{0, 0}\n")
    assert _only(err, "E-arity").message == "the right side is 1 block, but 2 targets are written"


def test_unknown_kernel_suggests_one():
    err = _error(HEAD + "L{0, 0} = cholx(A{0, 0})\n")
    assert str(err) == (
        "error[E-undefined]: unknown kernel 'cholx'\n"
        " --> prog.tc:6:11\n"
        "  |\n"
        "6 | L{0, 0} = cholx(A{0, 0})\n"
        "  |           ^^^^^^^^^^^^^^ did you mean 'chol'?"
    )
    assert isinstance(err, TcParseError)


def test_e_affine_every_form():
    err = _error(HEAD + "for i in 0:NB, j in 0:NB {\n  L{i*j, 0} = A{i*i, 0}\n"
                 "  Rs{i**2} = A{min(i, 1), 0}\n}\n")
    assert err.codes == ["E-affine"] * 4
    text = str(err)
    assert (
        "error[E-affine]: block subscript 'i*j' is not affine: both factors of '*' contain "
        "loop variables\n --> prog.tc:7:5\n  |\n7 |   L{i*j, 0} = A{i*i, 0}\n"
        "  |     ^^^ a block subscript is affine in the loop variables, like 2*i + 1 or i + 2**l"
    ) in text
    assert "block subscript 'i*i' is not affine: both factors of '*' contain loop variables\n" \
           " --> prog.tc:7:17\n" in text
    assert "block subscript 'i**2' is not affine: loop variable 'i' in the base of '**'\n" \
           " --> prog.tc:8:6\n" in text
    assert "block subscript 'min(i, 1)' is not affine: loop variable 'i' inside 'min'\n" \
           " --> prog.tc:8:16\n" in text
    assert text.endswith("4 errors")
    assert isinstance(err, TcTypeError)


def test_affine_subscripts_with_exponents_and_counts_are_fine():
    prog = _program(HEAD + "for l in 0:log2(NB), i in 0:NB {\n"
                    "  Rs{l, i + 2**l} = A{2*i + 1, 0}\n"
                    "  Rs{l, min(NB, 3) - i} = A{NB - 1 - i, 0}\n"
                    "}\nL{0, 0} = Rs{0, 0}\n")
    assign = prog.body[0].body[0].body[0]
    assert assign.targets[0].coords[1] == ir.IntOp(
        "+", ir.Var("i"), ir.IntOp("**", ir.IntConst(2), ir.Var("l")))
    assert str(assign.targets[0]) == "Rs{l, i + 2**l}"


def test_e_unwritten():
    err = _error(HEAD + "for k in 0:NB {\n  L{k, 0} = Rs{k}\n  L{k, 0} = Rs{k + 1}\n}\n")
    assert str(err) == (
        "error[E-unwritten]: 'Rs' is read but no statement writes it\n"
        " --> prog.tc:7:13\n"
        "  |\n"
        "7 |   L{k, 0} = Rs{k}\n"
        "  |             ^^^^^ write Rs{...} first, or declare it as an input"
    )
    err = _error(HEAD + "Rs{0} = A{0, 0}\n")
    diag = _only(err, "E-unwritten")
    assert diag.message == "output 'L' is never written"
    assert diag.span.line == 4
    assert isinstance(err, TcTypeError)


def test_e_block_coordinates():
    err = _error(HEAD + "L{0} = A{0, 0, 0}\nRs{0} = A{0, 0}\nRs{0, 1} = A{0, 1}\n")
    assert err.codes == ["E-block"] * 4
    text = str(err)
    assert (
        "error[E-block]: 'L' has 2 dimensions but 1 block coordinate is given\n"
        " --> prog.tc:6:1\n  |\n6 | L{0} = A{0, 0, 0}\n"
        "  | ^^^^ declared L : f64[N, M]: one coordinate per dimension, 0 for one not cut"
    ) in text
    assert "'A' has 2 dimensions but 3 block coordinates are given\n --> prog.tc:6:8\n" in text
    assert ("'Rs' is used with 2 block coordinates here but with 1 at 7:1\n"
            " --> prog.tc:8:1\n") in text
    assert ("block coordinate 1 is out of range: dimension 1 of 'A' (M) is not cut, so its "
            "only block is 0\n --> prog.tc:8:17\n") in text
    assert isinstance(err, TcShapeError) and isinstance(err, ValueError)


def test_e_block_element_forms_in_a_block_program():
    err = _error(HEAD + "L[i, j] = A[i, j]\nL{0, 0} = A[0, 0]\nrepeat 2 { L{0, 0} = A{0, 0} }\n"
                 "L{0, 0} += A{0, 0}\nL{0, 0} = sum[k](A{0, 0})\n")
    assert err.codes == ["E-block"] * 5
    text = str(err)
    assert "error[E-block]: element assignment to 'L' in a block program\n --> prog.tc:6:1\n" \
        in text
    assert "error[E-block]: element access 'A[0, 0]' in a block program\n --> prog.tc:7:11\n" \
        in text
    assert "error[E-block]: 'repeat' in a block program\n --> prog.tc:8:1\n" in text
    assert "error[E-block]: '+=' in a block program\n --> prog.tc:9:9\n" in text
    assert "error[E-block]: a reduction is not allowed in a block program\n" \
           "  --> prog.tc:10:11\n" in text


def test_e_block_declarations_and_names():
    err = _error("size N\nblocks NB of Q\ninput A : f64[N]\noutput B : f64[N]\n"
                 "for N in 0:NB {\n  for i in 0:NB, i in 0:2 {\n    B{i} = A{i}\n  }\n}\n")
    assert err.codes == ["E-block"] * 3
    text = str(err)
    assert (
        "error[E-block]: block count 'NB' cuts 'Q', which is not a declared size\n"
        " --> prog.tc:2:14\n  |\n2 | blocks NB of Q\n  |              ^ declare it: size Q"
    ) in text
    assert "error[E-block]: loop variable 'N' shadows the size 'N'\n --> prog.tc:5:5\n" in text
    assert ("error[E-block]: loop variable 'i' shadows the loop variable 'i' of the loop at 6:7\n"
            " --> prog.tc:6:18\n") in text


def test_e_block_wrong_kind_of_expression():
    err = _error(HEAD + "for k in 0:NB {\n  L{k, 0} = A{k, 0} ** 2\n  L{k @ k, 0} = A{k, 0.5}\n}\n")
    assert err.codes == ["E-block"] * 3
    text = str(err)
    assert (
        "error[E-block]: '**' on blocks\n --> prog.tc:7:13\n  |\n7 |   L{k, 0} = A{k, 0} ** 2\n"
        "  |             ^^^^^^^^^^^^ '**' is for index expressions; multiply blocks with '*' "
        "or '@'"
    ) in text
    assert "error[E-block]: '@' in an index expression\n --> prog.tc:8:5\n" in text
    assert "error[E-block]: index expressions are integers, got 0.5\n --> prog.tc:8:22\n" in text


def test_e_cycle():
    err = _error(HEAD + "tensor U : f64\nfor k in 0:NB {\n  Rs{k}, Rs{k} = lu(A{k, 0})\n}\n"
                 "L{0, 0} = Rs{0}\n")
    assert str(err) == (
        "error[E-cycle]: block 'Rs{k}' is written twice by one statement\n"
        " --> prog.tc:8:10\n"
        "  |\n"
        "8 |   Rs{k}, Rs{k} = lu(A{k, 0})\n"
        "  |          ^^^^^ the task would depend on itself: write distinct blocks"
    )
    assert isinstance(err, TcTypeError)
    _program(HEAD + "tensor U : f64\nRs{0}, Rs{1} = lu(A{0, 0})\nL{0, 0} = Rs{1}\n")  # distinct


def test_undefined_names_in_index_expressions():
    err = _error(HEAD + "for k in 0:NB {\n  L{kk, 0} = A{k, 0}\n}\n"
                 "for i in 0:NBB { L{i, 0} = A{i, 0} }\nL{0, 0} = Ax{0, 0}\n")
    assert err.codes == ["E-undefined"] * 3
    text = str(err)
    assert (
        "error[E-undefined]: unknown name 'kk'\n --> prog.tc:7:5\n  |\n"
        "7 |   L{kk, 0} = A{k, 0}\n  |     ^^ did you mean 'k'?"
    ) in text
    assert "error[E-undefined]: unknown name 'NBB'\n --> prog.tc:9:12\n" in text
    assert "did you mean 'NB'?" in text
    assert "error[E-undefined]: unknown tensor 'Ax'\n  --> prog.tc:10:11\n" in text


def test_a_constant_step_must_be_positive():
    err = _error(HEAD + "for i in 0:NB:0 { L{i, 0} = A{i, 0} }\n")
    diag = _only(err, "E-loop")
    assert diag.message == "the step of 'i' is 0; a loop step must be positive"
    assert diag.span == Span(6, 15, 6, 16)


def test_independent_errors_are_all_reported_in_order():
    err = _error(HEAD + "for k in 0:NB {\n  L{k, 0} = lsolve(A{k, 0})\n  L{k*k, 0} = A{k}\n"
                 "  L{k, 0} = cholx(A{k, 0})\n}\n")
    assert err.codes == ["E-arity", "E-affine", "E-block", "E-undefined"]
    assert [d.span.line for d in err.diagnostics] == [7, 8, 8, 9]
    assert str(err).endswith("4 errors")
