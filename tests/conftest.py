"""Shared test switches: ``--update-golden`` rewrites the golden snapshots."""

from __future__ import annotations

import dataclasses
import os
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
    parser.addoption(
        "--ray",
        choices=("all", "only", "skip"),
        default="all",
        help="run every test, only the tests on Ray, or only those without Ray",
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


@pytest.fixture(autouse=True)
def no_recordings():
    """Every test places its block programs' first runs on Ray itself: no recording an
    earlier test left is replayed (``runtime/ray/block_replay.py``)."""
    from tensorc.runtime.ray import block_replay

    block_replay.RECORDINGS.clear()


RAY_NODES = 4


RAY_FIXTURES = {"ray_cluster", "dying_cluster"}


def uses_ray(item: pytest.Item) -> bool:
    """Whether ``item`` runs on Ray: on the shared cluster, or on a private one it starts
    (marked ``ray``)."""
    return (item.get_closest_marker("ray") is not None
            or bool(RAY_FIXTURES & set(getattr(item, "fixturenames", ()))))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests without Ray first (they run on the local session), then those that start and
    stop a private cluster, then the tests on the shared cluster, then those marked
    ``last`` (they remove its nodes). ``--ray=only`` keeps the Ray tests, ``--ray=skip``
    the others (``tools/run_tests.py`` runs the two halves side by side)."""

    def rank(item: pytest.Item) -> int:
        if not uses_ray(item):
            return 0
        if item.get_closest_marker("last") is not None:
            return 3
        return 2 if RAY_FIXTURES & set(getattr(item, "fixturenames", ())) else 1

    items.sort(key=rank)
    which = config.getoption("--ray")
    if which != "all":
        kept = [item for item in items if uses_ray(item) == (which == "only")]
        dropped = [item for item in items if uses_ray(item) != (which == "only")]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers",
                            "last: run after every other Ray test (removes shared Ray's nodes)")
    config.addinivalue_line("markers", "ray: starts and stops a private Ray cluster")


FAST_DEATH_NOTICE = {
    "RAY_health_check_initial_delay_ms": "500",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_failure_threshold": "3",
}
"""Ray's health check, set for the shared cluster's processes: a node the last tests remove
is declared dead after 1.5 s, not Ray's default 15 s (what they check is what happens
after)."""


@pytest.fixture(scope="session")
def ray_cluster():
    """One 4-node local Ray cluster (``ray.cluster_utils.Cluster``, one CPU and a small object
    store per node) shared by every Ray test; compiler-only tests never start it. The tests
    marked ``last`` remove its nodes one by one."""
    import tensorc as tc

    # every block above 1 KiB in the object store, where Ray's directory sees (and
    # measure=True measures) it; a private cluster otherwise inlines blocks below 100 KiB
    os.environ.setdefault("TENSORC_RAY_INLINE_BYTES", "1024")
    saved = {name: os.environ.get(name) for name in FAST_DEATH_NOTICE}
    os.environ.update(FAST_DEATH_NOTICE)  # read by the processes the cluster starts
    try:
        session = tc.init(num_nodes=RAY_NODES, measure=True)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    yield session.cluster
    tc.shutdown()


STATED = {"network_bytes_per_second": 1e9, "sparse_flops_per_core": 1.9e9,
          "cores_per_node": 1}
"""The figures the node count of a call is chosen at in these tests (a node is sent the dense
operands at 1 GB/s; a sparse kernel runs at 1.9 GFLOP/s): what ``tc.init`` calibrates
varies from run to run and machine to machine, and a test's spread must not."""


@pytest.fixture
def stated_machine():
    """Price with :data:`STATED` (the machine's other figures as calibrated); the calibrated
    figures come back after the test."""
    from tensorc.planning import cost

    calibrated = cost.machine()
    cost.use_machine(dataclasses.replace(calibrated, **STATED))
    yield
    cost.use_machine(calibrated)
