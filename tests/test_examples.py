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

    assert main(["demo", "--local", "--n", "32", "--f", "8", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "result check vs numpy.einsum: OK" in out
    assert "ratio tensorc / numpy" in out


@pytest.mark.ray
def test_ray_demo_runs_lshs_and_round_robin_on_a_cluster(capsys):
    """Runs before the shared cluster starts (it starts and stops a private one)."""
    from tensorc.cli import main

    # two nodes, not the default four: the same code, and half the worker processes to start
    code = main(["demo", "--n", "32", "--f", "8", "--repeats", "1", "--blocks", "2",
                 "--nodes", "2"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, out + captured.err
    assert "2 node(s)" in out
    for scheduler in ("lshs", "round_robin"):
        assert f"== scheduler {scheduler}: result OK vs numpy" in out
    assert out.count("measured") >= 4


def test_cli_reports_an_unknown_benchmark_as_a_user_error(capsys):
    from tensorc.cli import main

    assert main(["bench", "no-such-benchmark"]) == 1
    assert "no benchmark 'no-such-benchmark'" in capsys.readouterr().err
