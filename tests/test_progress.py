"""The progress bar: off without a terminal or with TENSORC_PROGRESS=0; counts per node."""

from __future__ import annotations

import io
import sys

import tensorc.progress as progress


def test_off_without_a_terminal_and_with_the_switch(monkeypatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress.enabled() is False

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    assert progress.enabled() is True
    monkeypatch.setenv("TENSORC_PROGRESS", "0")
    assert progress.enabled() is False


def test_a_forced_bar_counts_tasks_per_node(monkeypatch) -> None:
    monkeypatch.setattr(progress, "DELAY_SECONDS", 0.0)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress.Progress(10, nodes=2, force=True) as bar:
        bar.advance(4, [3, 1])
        bar.advance(6, [1, 5])
        assert bar.bar.n == 10
        assert bar.per_node == [4, 6]
        assert "n0:4 n1:6" in bar.bar.postfix
