"""Shared test switches: ``--update-golden`` rewrites the golden snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/*.txt from the current output instead of comparing",
    )


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """``golden(name, text)``: compare ``text`` with ``tests/golden/<name>.txt``."""
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = GOLDEN / f"{name}.txt"
        if update or not path.exists():
            if not update:
                pytest.fail(f"missing golden file {path}; run pytest --update-golden")
            path.write_text(text + "\n")
            return
        expected = path.read_text().rstrip("\n")
        assert text == expected, f"{path.name} differs; rerun with --update-golden if intended"

    return check
