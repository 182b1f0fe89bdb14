"""Run statistics: what ``tc.last_stats()`` returns, per thread.

Contract: every run's statistics go through :func:`record` and come back from
:func:`last_stats` (per thread, a copy): an einsum records its call; a ``.tc`` or lazy array
program records its whole run (:func:`program_stats`), a block program its run, whichever
executor ran them. The executors build the statistics; the driver records them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

_state = threading.local()


def record(stats: dict) -> None:
    """Keep ``stats`` as this thread's last run (what :func:`last_stats` returns)."""
    _state.stats = stats


def last_stats() -> dict:
    """Statistics of the last run in this thread (``{}`` before any)."""
    return dict(getattr(_state, "stats", {}))


SUMMED = ("tasks", "flops", "plan_seconds", "run_seconds", "inter_node_bytes",
          "repartition_bytes", "remote_calls", "put_bytes", "sink_bytes")
PER_NODE_SUMMED = ("node_recv_bytes", "node_send_bytes", "measured_node_recv_bytes",
                   "node_repartition_bytes", "node_read_bytes", "node_sink_bytes")
PER_NODE_PEAK = ("node_peak_rss_bytes",)


def program_stats(statements: Sequence[tuple[str, dict]], *, backend: str,
                  seconds: float, remote_calls: int | None = None) -> dict:
    """One ``.tc`` program run's statistics from its statements' (label, stats): counts,
    bytes and seconds summed over the statements (per node too), the busiest node of
    those sums, the peak memory of any statement (modelled, measured and its budget; per
    node, the highest each node measured), each
    statement's own stats under
    ``statements`` and how many small ones ran on the driver (``statements_on_driver``).
    ``seconds`` is the whole run, wall clock; ``remote_calls``, when given, the calls the run
    submitted (its statements' calls merged), in place of their sum."""
    total: dict = {"backend": backend, "program_seconds": seconds,
                   "statements": [{"label": label, **stats} for label, stats in statements],
                   "statements_on_driver": sum(1 for _, s in statements if s.get("on_driver"))}
    runs = [stats for _, stats in statements]
    for key in SUMMED:
        values = [s[key] for s in runs if s.get(key) is not None]
        total[key] = sum(values) if values else None
    if remote_calls is not None:
        total["remote_calls"] = remote_calls
    for key in PER_NODE_SUMMED:
        rows = [s[key] for s in runs if s.get(key)]
        if rows:
            total[key] = [sum(column) for column in zip(*rows, strict=True)]
    for key in PER_NODE_PEAK:
        rows = [s[key] for s in runs if s.get(key)]
        if rows:
            total[key] = [max((v for v in column if v is not None), default=None)
                          for column in zip(*rows, strict=False)]
    measured = [s.get("measured_inter_node_bytes") for s in runs]
    total["measured_inter_node_bytes"] = (
        None if not runs or any(m is None for m in measured) else sum(measured))
    if "node_recv_bytes" in total:
        total["max_node_recv_bytes"] = max(total["node_recv_bytes"])
    if "measured_node_recv_bytes" in total:
        total["measured_max_node_recv_bytes"] = max(total["measured_node_recv_bytes"])
    peaks = [s["max_node_memory_bytes"] for s in runs if s.get("max_node_memory_bytes")]
    total["max_node_memory_bytes"] = max(peaks) if peaks else None
    for key in ("memory_limit_bytes", "modelled_peak_bytes", "peak_rss_bytes"):
        values = [s[key] for s in runs if s.get(key) is not None]
        total[key] = max(values) if values else None
    before = [s["rss_before_bytes"] for s in runs if s.get("rss_before_bytes") is not None]
    total["rss_before_bytes"] = min(before) if before else None
    for key in ("scheduler", "nodes"):
        values = {s.get(key) for s in runs}
        total[key] = values.pop() if len(values) == 1 else None
    if len(runs) == 1:  # one statement (an einsum making its operands): its own figures too
        for key, value in runs[0].items():
            total.setdefault(key, value)
    return total
