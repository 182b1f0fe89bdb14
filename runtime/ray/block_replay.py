"""A block program's placed waves, kept for the next call on inputs laid out the same way.

Contract: a run of :mod:`tensorc.runtime.ray.block_program` expands, places and submits its
DAG wave by wave; a :class:`Recording` keeps what it submitted, without a single Ray ref:
per wave, its calls as the run formed them, payloads pickled
(:class:`~tensorc.runtime.ray.block_waves.Prepared`), with *symbolic* arguments
(:data:`INPUT` ``(name, coords)``: block ``coords`` of input ``name``, of its stored
blocking when it is on the cluster, of the program's when it is a numpy array; :data:`MADE`
``(wave, unit, j)``: a result an earlier wave returned; or the wave's own ``(PENDING, unit,
j)``), the threads of each node's calls, the output blocks' final versions and the run's
statistics. :func:`replay_key` names what a placement depends on: the program (the same
object) and its sizes and block counts, the scheduler, the dtype, the wave size, the
cluster's nodes and CPUs, the machine's figures with the node's memory budget and a call's
share of its object store (:func:`~tensorc.runtime.ray.block_waves.call_budget`: both shape
the placement and the calls), and every input's shape and dtype and, for
an input on the cluster, its block bounds and the node of each block (not its values, not
its refs). Two calls with equal keys place every task on the same node, so the second
binds the recorded calls to its own inputs and submits them
(:func:`~tensorc.runtime.ray.block_program.run_block_dag_on_ray`) instead of walking the DAG,
placing it, forming its calls and pickling their payloads again: a TSQR of 65,536 x 40 in 8
blocks spends most of its driver time there (``docs/performance.md``).

:data:`RECORDINGS` keeps the last :data:`KEPT` recordings (least recently used dropped
first); a run stops recording once it passes :data:`MAX_RECORDED_TASKS` tasks (a recording
holds every call's payload, the run itself only its frontier: 62 KB for a Cholesky of 816
tasks). :meth:`Recording.released` lists, per wave, the results whose last readers it
holds, so a replay drops their refs once it is submitted, as the run does.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

INPUT, MADE = "input", "made"
"""Symbolic argument kinds (beside ``block_waves.PENDING``): an input block, an earlier
wave's result."""

KEPT = 32
MAX_RECORDED_TASKS = 20_000


@dataclass
class RecordedWave:
    """One submitted wave: its calls and payloads with symbolic arguments (a
    :class:`~tensorc.runtime.ray.block_waves.Prepared`) and each node's call ``threads``."""

    prepared: object
    threads: list


@dataclass
class Recording:
    """A run's waves (see the module docstring); ``finals`` maps each output block
    ``(name, coords)`` to ``((MADE, wave, unit, j), node, shape)``."""

    waves: list[RecordedWave] = field(default_factory=list)
    finals: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    tasks: int = 0
    drops: list = field(default_factory=list)  # released(), once the recording is kept

    def add_wave(self, prepared, threads) -> None:
        self.waves.append(RecordedWave(prepared, list(threads)))

    def released(self) -> list[list[tuple]]:
        """Per wave ``v``: the :data:`MADE` results whose last readers are in ``v`` (or that
        ``v`` itself returned and no later wave reads) and that are no output's final
        block, to drop once ``v`` is submitted."""
        last: dict = {}
        for v, wave in enumerate(self.waves):
            for result in wave.prepared.wanted:
                last.setdefault((MADE, v, *result), v)
            for _, args, _, _ in wave.prepared.calls:
                for symbol in args:
                    if symbol[0] == MADE:
                        last[symbol] = v
        finals = {symbol for symbol, _, _ in self.finals.values()}
        drops: list[list] = [[] for _ in self.waves]
        for symbol, v in last.items():
            if symbol not in finals:
                drops[v].append(symbol)
        return drops


RECORDINGS: OrderedDict = OrderedDict()
_LOCK = threading.Lock()  # calls from several threads share the recordings


def recorded(key) -> Recording | None:
    """The recording kept under ``key`` (``None`` for none, or for no key)."""
    with _LOCK:
        found = RECORDINGS.get(key) if key is not None else None
        if found is not None:
            RECORDINGS.move_to_end(key)
        return found


def keep(key, recording: Recording | None) -> None:
    """Keep ``recording`` under ``key`` (``None``: a run that stopped recording, past
    :data:`MAX_RECORDED_TASKS` tasks, or one without a key)."""
    if key is None or recording is None:
        return
    recording.drops = recording.released()
    with _LOCK:
        RECORDINGS[key] = recording
        RECORDINGS.move_to_end(key)
        while len(RECORDINGS) > KEPT:
            RECORDINGS.popitem(last=False)


def forget(key) -> None:
    with _LOCK:
        RECORDINGS.pop(key, None)


def replay_key(dag, inputs: dict, scheduler: str, dtype, window: int, cluster, figures):
    """What a run's placement depends on (module docstring), hashable; ``None`` when an input
    is neither a numpy array nor an array on the cluster."""
    signature = []
    for name in sorted(inputs):
        value = inputs[name]
        if isinstance(value, np.ndarray):
            signature.append((name, "numpy", value.shape, value.dtype.str))
            continue
        stored = getattr(value, "layout", None)  # its blocks stay held, if they are
        if stored is None:
            return None
        signature.append((name, "cluster", stored.bounds, np.dtype(stored.dtype).str,
                          tuple(sorted(stored.nodes.items()))))
    return (_Identity(dag.program), tuple(sorted(dag.env.items())), scheduler,
            None if dtype is None else np.dtype(dtype).str, window,
            tuple(cluster.node_ids), tuple(cluster.cpus), figures, tuple(signature))


class _Identity:
    """A key part equal only to itself: the program (its IR is compared by identity, as the
    block-count and DAG caches compare it)."""

    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Identity) and other.value is self.value
