"""Small values a process posts for others to pull: a block program's hand-over between its
calls and the driver's units, without a round trip through Ray.

Contract: :func:`post(key, value, readers) <post>` makes ``value`` available under ``key`` in
this process (a node worker or the driver) until ``readers`` pulls have taken it (then it is
dropped); :func:`fail(keys) <fail>` marks keys whose value will never come (the call or the
driver run that would have posted them failed), so that a reader stops waiting. The block
server of :mod:`~tensorc.runtime.ray.peer_blocks` answers a pull by key with :func:`take`,
which waits for the post up to a deadline. :func:`drop_run(prefix) <drop_run>` drops a
run's values (a run that failed), its keys marked failed. At most :data:`KEPT` keys are
kept: a value posted for a reader that never came (the driver read it through Ray) is
dropped with the oldest.

Why: a block program's small tasks at a hop run in the driver (a TSQR's tree above its
leaves). Through Ray, their inputs come back in the calls' replies, and the calls reading
their results are submitted only once the driver has run them: on 4 nodes of this machine
the hop took 4.4 ms of a 25 ms TSQR (the last reply 0.6 ms, the fetch 0.4, the driver's
units 0.6, four submissions 1.4, then each call's start). Posted, the calls that read them
are submitted with the rest of the wave, each waits in its worker, and a value crosses one
connection each way.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

KEPT = 4096
"""The most keys a process keeps posted (values are at most the cluster's inline size): a
wave of at most 1,024 tasks, two in flight, posts fewer. A run's values go as their
readers pull them, or with the run when it fails (:func:`drop_run`)."""

_FAILED = object()
_VALUES: OrderedDict[str, list] = OrderedDict()  # key -> [value, readers left]
_CHANGED = threading.Condition()


def post(key: str, value, readers: int = 1) -> None:
    """Make ``value`` available under ``key`` for ``readers`` pulls."""
    post_many([(key, value, readers)])


def post_many(values: list[tuple[str, object, int]]) -> None:
    """:func:`post` each ``(key, value, readers)``, waking the waiting servers once: a
    server's thread woken while the poster still computes waits for the interpreter's lock
    (a TSQR's driver posting each of its units' values as it made them took 3-4 ms for
    0.6 ms of units)."""
    with _CHANGED:
        for key, value, readers in values:
            _VALUES[key] = [value, max(1, readers)]
        while len(_VALUES) > KEPT:
            _VALUES.popitem(last=False)
        _CHANGED.notify_all()


def fail(keys) -> None:
    """Mark ``keys`` as never coming: a reader waiting for one is answered at once."""
    with _CHANGED:
        for key in keys:
            if key not in _VALUES:
                _VALUES[key] = [_FAILED, 1]
        while len(_VALUES) > KEPT:
            _VALUES.popitem(last=False)
        _CHANGED.notify_all()


def drop_run(prefix: str) -> None:
    """Drop the values of every key starting with ``prefix`` (a run that failed), each
    marked failed instead, so that a reader asking later is answered at once."""
    with _CHANGED:
        for key in [key for key in _VALUES if key.startswith(prefix)]:
            _VALUES[key] = [_FAILED, 1]
        _CHANGED.notify_all()


def take(key: str, deadline: float) -> tuple[bool, object]:
    """``(True, value)`` once ``key`` is posted (one of its reads used up), ``(False,
    None)`` if it was marked failed, ``(False, MISSING)`` at ``deadline`` (monotonic)."""
    with _CHANGED:
        while key not in _VALUES:
            left = deadline - time.monotonic()
            if left <= 0:
                return False, MISSING
            _CHANGED.wait(left)
        entry = _VALUES[key]
        if entry[0] is _FAILED:
            return False, None
        entry[1] -= 1
        if entry[1] <= 0:
            del _VALUES[key]
        return True, entry[0]


MISSING = object()
"""What :func:`take` answers for a key not posted by its deadline."""
