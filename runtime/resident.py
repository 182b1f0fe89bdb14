"""Measured resident memory of this process: what ``tc.last_stats()["peak_rss_bytes"]`` is.

Contract: :class:`PeakResident` measures the peak resident set size (RSS) of this process
over a block of code. On Linux it resets the kernel's high-water mark before
(``/proc/self/clear_refs``) and reads it after (``VmHWM`` in ``/proc/self/status``), so the
figure is exact and costs two small file writes/reads; where that is not allowed, it falls
back to the process's lifetime peak (``ru_maxrss``), which can only over-state. The Ray
executor measures each node worker the same way inside its calls.
"""

from __future__ import annotations

import resource


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        return None
    return None


def resident_bytes() -> int | None:
    """This process's resident set size now."""
    return _status_bytes("VmRSS:")


class PeakResident:
    """``with PeakResident() as peak: ...`` then ``peak.before`` and ``peak.peak`` (bytes);
    ``PeakResident(False)`` measures nothing (both stay ``None``)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.before: int | None = None
        self.peak: int | None = None
        self._exact = False

    def __enter__(self) -> PeakResident:
        if not self.enabled:
            return self
        self.before = resident_bytes()
        try:
            with open("/proc/self/clear_refs", "w") as refs:
                refs.write("5")
            self._exact = True
        except OSError:  # pragma: no cover - not Linux, or not allowed
            self._exact = False
        return self

    def __exit__(self, *exc) -> None:
        if not self.enabled:
            return
        peak = _status_bytes("VmHWM:") if self._exact else None
        if peak is None:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.peak = peak

    def stats(self) -> dict:
        return {"peak_rss_bytes": self.peak, "rss_before_bytes": self.before}
