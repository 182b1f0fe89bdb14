"""Every ``.tc`` error code with its exact message, location, caret and hint."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc

HEAD = "size M = 4, N = 5, K = 3\ninput A : f64[M, K]\ninput B : f64[K, N]\noutput C : f64[M, N]\n"


def _error(source: str) -> tc.TcError:
    with pytest.raises(tc.TcError) as info:
        tc.compile(source)
    return info.value


def test_e_reduce_exactly_as_the_spec_shows():
    err = _error(HEAD + "C[i, j] = A[i, k] * B[k, j]\n")
    assert str(err) == (
        "error[E-reduce]: index 'k' appears only on the right of '=', so it is never reduced\n"
        " --> <source>:5:9\n"
        "  |\n"
        "5 | C[i, j] = A[i, k] * B[k, j]\n"
        "  |         ^ use '+=' to sum over k, or write sum[k](...)"
    )
    assert isinstance(err, tc.ParseError) and isinstance(err, ValueError)
    assert err.codes == ["E-reduce"]


def test_e_reduce_names_the_file(tmp_path):
    path = tmp_path / "matmul.tc"
    path.write_text(HEAD + "\n\nC[i, j] = A[i, k] * B[k, j]\n")
    with pytest.raises(tc.TcError, match=r" --> .*matmul\.tc:7:9\n"):
        tc.compile(path)


CASES = {
    "E-undefined": (
        HEAD + "C[i, j] += A[i, k] * Bb[k, j]\n",
        "error[E-undefined]: unknown tensor 'Bb'\n --> <source>:5:22\n  |\n"
        "5 | C[i, j] += A[i, k] * Bb[k, j]\n  |                      ^^^^^^^^ did you mean 'B'?",
    ),
    "E-undefined-function": (
        HEAD + "C[i, j] += exq(A[i, k]) * B[k, j]\n",
        "error[E-undefined]: unknown function 'exq'\n --> <source>:5:12\n  |\n"
        "5 | C[i, j] += exq(A[i, k]) * B[k, j]\n  |            ^^^^^^^^^^^^ did you mean 'exp'?",
    ),
    "E-rank": (
        HEAD + "C[i, j] += A[i, k, j] * B[k, j]\n",
        "error[E-rank]: 'A' has rank 2 but is indexed with 3 subscript(s)\n --> <source>:5:12\n"
        "  |\n5 | C[i, j] += A[i, k, j] * B[k, j]\n"
        "  |            ^^^^^^^^^^ declared A : f64[M, K]",
    ),
    "E-size": (
        HEAD + "C[i, j] += A[i, k] * B[k, i]\n",
        "error[E-size]: index 'i' has size N here (dimension 1 of B) but size M at 5:3 "
        "(dimension 0 of C)\n --> <source>:5:27\n  |\n5 | C[i, j] += A[i, k] * B[k, i]\n"
        "  |                           ^ one index ranges over one size: declare both "
        "dimensions with the same size",
    ),
    "E-type": (
        HEAD + "C[i, j] += (A[i, k] > 0) * B[k, j]\n",
        "error[E-type]: '*' needs numeric operands, got boolean\n --> <source>:5:13\n  |\n"
        "5 | C[i, j] += (A[i, k] > 0) * B[k, j]\n  |             ^^^^^^^^^^^ compare numbers "
        "with < <= > >= == !=, combine booleans with and/or",
    ),
    "E-loop": (
        HEAD + "for i in 0:M, j in 0:N {\n  for k in 0:K { C[i * j, j] += A[i, k] * B[k, j] }\n}\n",
        "error[E-loop]: destination subscript of 'C' is not affine in the loop variables\n"
        " --> <source>:6:20\n  |\n6 |   for k in 0:K { C[i * j, j] += A[i, k] * B[k, j] }\n"
        "  |                    ^^^^^ a destination must be written at loop variables",
    ),
    "E-loop-read": (
        "size N = 4\ninput x : f64[N]\noutput y : f64[N]\noutput z : f64[N]\n"
        "for i in 0:N {\n  y[i] = x[i]\n  z[i] = y[i] * 2\n}\n",
        "error[E-loop]: 'y' is written in this loop and read here\n --> <source>:7:10\n  |\n"
        "7 |   z[i] = y[i] * 2\n  |          ^^^^ only 'y[...] op= ... y[...]' at the same "
        "subscripts may read a destination inside its loop",
    ),
    "E-parse": (
        HEAD + "C[i, j] += A[i, k] * B[k, j\n",
        "error[E-parse]: unexpected end of file\n --> <source>:5:27\n  |\n"
        "5 | C[i, j] += A[i, k] * B[k, j\n  |                           ^ expected ',', ']'",
    ),
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_error_code_with_its_exact_message(code):
    source, expected = CASES[code]
    err = _error(source)
    assert str(err) == expected
    assert err.codes == [code.split("-")[0] + "-" + code.split("-")[1]]


def test_parse_errors_use_the_languages_words():
    err = _error(HEAD + "C[i, j] += A[i, k] ** B[k, j]\n")
    text = str(err)
    assert "unexpected '*'" in text
    assert "identifier" in text and "number" in text and "'('" in text
    assert "NAME" not in text and "LPAR" not in text and "RSQB" not in text


def test_several_independent_errors_are_all_reported():
    source = HEAD + (
        "C[i, j] = A[i, k] * B[k, j]\n"
        "C[i, j] += A[i, k] * Bx[k, j]\n"
        "C[i] += A[i, k]\n"
    )
    err = _error(source)
    assert err.codes == ["E-reduce", "E-undefined", "E-rank"]
    assert str(err).endswith("3 errors")
    assert "5:9" in str(err) and "6:22" in str(err) and "7:1" in str(err)


def test_several_parse_errors_are_reported_per_statement():
    err = _error(HEAD + "C[i, j] += A[i, k] * B[k, j\nC[i, j] += A[i, k] ** B[k, j]\nD = $\n")
    assert err.codes == ["E-parse", "E-parse", "E-parse"]
    assert [d.span.line for d in err.diagnostics] == [5, 6, 7]
    assert "unexpected character '$'" in str(err)


def test_unknown_name_suggests_a_declared_one():
    err = _error("size N = 3\nparam alpha : f64 = 1.0\ninput x : f64[N]\noutput y : f64[N]\n"
                 "y[i] = alpah * x[i]\n")
    assert "error[E-undefined]: unknown name 'alpah'" in str(err)
    assert "did you mean 'alpha'?" in str(err)


def test_type_errors_on_declarations_and_monoids():
    err = _error("size N = 3\ninput x : f16[N]\noutput y : f64[N]\ny[i] or= x[i] > 0\n")
    assert err.codes == ["E-type", "E-type"]
    assert "unknown dtype 'f16'" in str(err)
    assert "'or=' needs a boolean tensor but 'y' is f64" in str(err)
    assert isinstance(err, tc.TypeCheckError) and isinstance(err, TypeError)


def test_read_before_write_and_unassigned_output():
    err = _error("size N = 3\ninput x : f64[N]\noutput y : f64[N]\ntensor t : f64[N]\n"
                 "output z : f64[N]\ny[i] = t[i] + x[i]\n")
    assert "'t' is read before any value is assigned to it" in str(err)
    assert "output 'z' is never assigned" in str(err)


def test_repeat_counts_must_be_static():
    err = _error("size N = 3\ninput x : f64[N]\noutput y : f64[N]\ny[i] = x[i]\n"
                 "repeat x[0] { y[i] = y[i] * 2 }\n")
    assert err.codes == ["E-loop"]
    assert "a repeat count is a literal, a size or a param" in str(err)


PROGRAM = (
    "size N\ninput A : f64[N, N]\ninput x : f64[N]\noutput y : f64[N]\n"
    "y[i] += A[i, j] * x[j]\n"
)


@pytest.mark.parametrize(
    ("inputs", "cls", "expected"),
    [
        ({"A": np.ones((3, 3))}, tc.ShapeError,
         "error[E-input]: missing input 'x'\n --> <source>:3:1\n  |\n3 | input x : f64[N]\n"
         "  | ^^^^^^^^^^^^^^^^ pass x=<array> to run"),
        ({"A": np.ones((3, 3)), "x": np.ones(4)}, tc.ShapeError,
         "error[E-size]: size N is 3 from dimension 0 of input 'A' but 4 from dimension 0 of "
         "input 'x'\n --> <source>:3:1\n  |\n3 | input x : f64[N]\n  | ^^^^^^^^^^^^^^^^ every "
         "use of one size symbol must have the same extent"),
        ({"A": np.ones((3, 3), dtype=complex), "x": np.ones(3)}, tc.TypeCheckError,
         "error[E-input]: input 'A' has dtype complex128 but is declared f64 (float64)\n"
         " --> <source>:2:1\n  |\n2 | input A : f64[N, N]\n  | ^^^^^^^^^^^^^^^^^^^ pass an "
         "array that casts safely to float64"),
        ({"A": np.ones(3), "x": np.ones(3)}, tc.ShapeError,
         "error[E-input]: input 'A' has shape (3,) but is declared with rank 2\n"
         " --> <source>:2:1\n  |\n2 | input A : f64[N, N]\n  | ^^^^^^^^^^^^^^^^^^^"),
    ],
    ids=["missing", "size-conflict", "dtype", "rank"],
)
def test_run_time_input_errors(inputs, cls, expected):
    program = tc.compile(PROGRAM)
    with pytest.raises(tc.TcError) as info:
        program.run(**inputs)
    assert str(info.value) == expected
    assert isinstance(info.value, cls)


def test_unknown_run_argument_is_an_input_error():
    with pytest.raises(tc.TcError, match="no input, param or size named 'q'"):
        tc.compile(PROGRAM).run(A=np.ones((3, 3)), x=np.ones(3), q=1)


def test_parsing_never_evaluates_user_text(monkeypatch):
    import builtins

    marker = "exp(A[i, k])"
    real_eval, real_exec = builtins.eval, builtins.exec

    def guarded(real):
        def call(code, *args, **kwargs):
            assert not (isinstance(code, str) and marker in code), "user text was evaluated"
            return real(code, *args, **kwargs)

        return call

    monkeypatch.setattr(builtins, "eval", guarded(real_eval))
    monkeypatch.setattr(builtins, "exec", guarded(real_exec))
    program = tc.compile(HEAD + f"C[i, j] += {marker} * B[k, j]\n")
    out = program.run(A=np.ones((4, 3)), B=np.ones((3, 5)))
    np.testing.assert_allclose(out["C"], np.exp(np.ones((4, 3))) @ np.ones((3, 5)))
