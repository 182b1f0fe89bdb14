"""Data in and out: ``tc.load``/``tc.save`` (``.npy``, memory-mapped: on Ray each node reads
only its blocks) and ``tc.from_zarr``/``tc.to_zarr`` (zarr v3: chunks become blocks, each node
reads and writes its own), over :mod:`tensorc.storage`. A save evaluates the array first; a
failed write never leaves a file or store that looks complete. ``to_zarr`` compresses as the
stored zarr arrays the result is computed from do (uncompressed in, uncompressed out) unless
told otherwise."""

from __future__ import annotations

import os

from tensorc import storage
from tensorc.lazy.array_object import Array, wrap
from tensorc.lazy.evaluate import evaluate_into
from tensorc.lazy.graph import leaf
from tensorc.lazy.lowering import post_order

INHERIT = "inherit"
"""``to_zarr``'s default ``compressors``: those of the stored zarr arrays read
(:func:`tensorc.storage.compressors_like`)."""


def _stored(x):
    return x.value() if isinstance(x, Array) else x


def load(path, *, block_shape=None, grid=None) -> Array:
    """The array in the ``.npy`` file ``path``."""
    return wrap(leaf(storage.read_npy(path, block_shape=block_shape, grid=grid)))


def save(path, x, /) -> str:
    """Write ``x`` to the ``.npy`` file ``path`` (``.npy`` appended when missing, like
    ``numpy.save``); returns the path written."""
    return storage.write_npy(path, _stored(x))


def from_zarr(path_or_store, *, block_shape=None, grid=None, missing_chunks="error") -> Array:
    """The zarr array at ``path_or_store`` (chunks become blocks where they fit), read block
    by block by the tasks that use it. A missing chunk file is an error unless
    ``missing_chunks="fill"`` (zarr's reading: the fill value)."""
    return wrap(leaf(storage.read_zarr(path_or_store, block_shape=block_shape, grid=grid,
                                       missing_chunks=missing_chunks)))


def to_zarr(x, path, /, *, chunks=None, compressors=INHERIT) -> str:
    """Write ``x`` as a zarr v3 array at ``path`` (chunks default to the blocks). An
    unevaluated ``x`` streams: its blocks are written as they complete and the whole result
    is never held (a result larger than memory), within the memory budget; on Ray each node
    writes the blocks it computed, none passes through the driver or Ray's object store.
    ``x`` stays unevaluated. A failed write leaves nothing at ``path`` that looks
    complete. ``compressors``: zarr's (``"auto"``: its default, zstd; ``None``:
    uncompressed; codecs), or ``"inherit"`` (the default): as the stored zarr arrays ``x``
    is computed from (uncompressed when they are; zarr's default when there are none or
    they differ)."""
    if isinstance(compressors, str) and compressors == INHERIT:
        compressors = _inherited(x)
    if isinstance(x, Array) and not x.evaluated and x.size:
        with storage.streamed_zarr(path, x.shape, x.dtype, chunks, compressors) as sink:
            evaluate_into(x._expr, sink)  # noqa: SLF001 - the lazy layer's own node
        return os.fspath(path)
    return storage.write_zarr(_stored(x), path, chunks=chunks, compressors=compressors)


def _inherited(x):
    """The compressors of the stored arrays under ``x`` (see :func:`to_zarr`)."""
    if not isinstance(x, Array):
        return storage.compressors_like([x])
    nodes = post_order([x._expr])  # noqa: SLF001 - the lazy layer's own node
    return storage.compressors_like([n.value for n in nodes if n.value is not None])
