"""Results written to a sink by the nodes that compute them (``tc.to_zarr`` of a lazy array,
``Program.run_to_zarr``, on Ray).

Contract:

- a staged graph whose result streams (:func:`~tensorc.runtime.ray.stages.stage` with
  ``sink=True``) ends every result block in a :class:`~tensorc.runtime.ray.stages.SinkWrite`
  step on the node holding the block, in the call that computed it: the step writes the
  block through the sink's node writer (the argument ``("st", SINK)``, passed by value: for
  zarr the temporary store's path) and returns only the bytes it wrote. The block is
  dropped after that step, like any step result used once, so it never enters Ray's object
  store, nor the driver;
- :func:`sink_chunks` is the chunk shape a sink is opened with for a result cut at
  ``bounds``: every block whole chunks, so no two nodes write one chunk (the chunks asked
  for, when they divide every inner block boundary; ``None`` when they do not: the result
  cannot be written by its nodes);
- :func:`written_per_node` gathers the bytes each node wrote (the steps' 8-byte returns,
  after the calls were waited for);
- :func:`write_result` writes a result computed whole into a sink: a ``DistributedArray``
  block by block, each on its node, when the sink's chunks align with its blocks; anything
  else gathered and written as one block from the driver;
- :func:`settle` waits for every call of a failed run before the caller removes what they
  were writing into.
"""

from __future__ import annotations

import math

import numpy as np

from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.ray.storage_tasks import write_on_nodes
from tensorc.runtime.ray.tasks import read_report
from tensorc.runtime.statements import write_whole

SETTLE_SECONDS = 60.0


def sink_chunks(bounds, chunks) -> tuple[int, ...] | None:
    """The chunk shape a result cut at ``bounds`` (per dimension, its block edges) is
    written in: ``chunks`` when given and every inner edge is a multiple of it, else
    ``None``; with no ``chunks``, per dimension the greatest common divisor of the inner
    edges (the block shape of a regular blocking)."""
    inner = [tuple(edges[1:-1]) for edges in bounds]
    if chunks is None:
        return tuple(math.gcd(*cuts) if cuts else max(1, int(edges[-1]))
                     for cuts, edges in zip(inner, bounds, strict=True))
    if any(cut % int(c) for cuts, c in zip(inner, chunks, strict=True) for cut in cuts):
        return None
    return tuple(int(c) for c in chunks)


def written_per_node(blocks, cluster) -> list[int]:
    """Bytes written per node by the write steps whose returns ``blocks`` holds (their
    node: the report of the call that ran them)."""
    import ray

    keys = sorted(blocks.refs)
    counts = ray.get([blocks.refs[k] for k in keys])
    reports = ([read_report(r) for r in ray.get([blocks.reported[k] for k in keys])]
               if all(k in blocks.reported for k in keys) else [None] * len(keys))
    out = [0] * cluster.nodes
    for key, count, report in zip(keys, counts, reports, strict=True):
        node = cluster.index_of(report) if report is not None else blocks.nodes.get(key)
        if node is not None and 0 <= node < len(out):
            out[node] += int(count)
    return out


def _write_with(writer, slices: tuple[slice, ...], block) -> int:
    """Runs on a block's node: the block written through ``writer``; its bytes."""
    block = np.asarray(block)
    writer.write(slices, block)
    return int(block.nbytes)


def write_result(sink, value) -> None:
    """Write ``value``, computed whole, into ``sink`` (module docstring)."""
    if isinstance(value, DistributedArray) and value.size:
        chunks = sink_chunks(value.layout.bounds, sink.chunks)
        writer = sink.node_writer()
        if chunks is not None and writer is not None:
            sink.open(chunks)
            failed = write_on_nodes(value, _write_with, sink.node_writer())
            if failed is not None:
                _, err = failed
                raise getattr(err, "cause", None) or err
            return
    write_whole(sink, np.asarray(value.numpy() if isinstance(value, DistributedArray)
                                 else value))


def settle(pending: list) -> None:
    """Wait (at most :data:`SETTLE_SECONDS`) for the calls ``pending`` refs come from,
    failed ones included."""
    import ray

    if pending:
        ray.wait(list(pending), num_returns=len(pending), timeout=SETTLE_SECONDS,
                 fetch_local=False)
