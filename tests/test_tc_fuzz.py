"""Random and mutated programs: the parser, checker and compiler raise only TensorcError."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorc as tc

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.tc"))
SOURCES = [p.read_text() for p in EXAMPLES]
TOKENS = ["C", "A", "B", "[", "]", "(", ")", ",", "i", "j", "k", "+=", "=", "min=", "*", "+",
          "-", "/", "sum", "for", "in", "0:N", "{", "}", "repeat", "3", "as", "t", "?", ":",
          "|", "<-", "let", "group", "by", "+/", "count/", "size", "N", "input", "output",
          "f64", "bool", "inf", "and", "not", "1.5", "\n", "@block", "where", "$", "#"]


def _compile(text: str) -> None:
    """Compile, and when that succeeds lower it too (explain the IR)."""
    try:
        tc.compile(text).explain("ir")
    except tc.TensorcError as err:
        assert str(err)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_random_token_soup_raises_only_tensorc_errors(tokens):
    _compile(" ".join(tokens))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(range(len(SOURCES))),
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 6), st.sampled_from(TOKENS + ["", " "])),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_examples_raise_only_tensorc_errors(which, edits):
    text = SOURCES[which]
    for position, cut, insert in edits:
        at = position % (len(text) + 1)
        text = text[:at] + insert + text[at + cut:]
    _compile(text)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_text_raises_only_tensorc_errors(text):
    _compile(text)
