"""Every example script runs and checks itself against numpy."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_example_runs(script, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(script)])
    with pytest.raises(SystemExit) as info:
        runpy.run_path(str(script), run_name="__main__")
    assert info.value.code == 0
    assert capsys.readouterr().out.rstrip().endswith("all results match numpy")


def test_demo_command_checks_against_numpy(capsys):
    from tensorc.cli import main

    assert main(["demo", "--n", "32", "--f", "8", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "result check vs numpy.einsum: OK" in out
    assert "ratio tensorc / numpy" in out


def test_cli_reports_an_unknown_benchmark_as_a_user_error(capsys):
    from tensorc.cli import main

    assert main(["bench", "no-such-benchmark"]) == 1
    assert "no benchmark 'no-such-benchmark'" in capsys.readouterr().err
