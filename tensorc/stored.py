"""Arrays that stay in their file or store and are read block by block.

Contract: a :class:`StoredArray` stands for an array on disk: ``.npy`` (:class:`NpyFile`, also
what a numpy memmap passed to ``tc.einsum`` becomes) or zarr (:class:`ZarrArray`). It has
the array's ``shape``, ``dtype`` and ``chunks`` (the unit a read never splits: zarr's chunks
or shards; for ``.npy`` one element: any block reads only its own bytes) and reads nothing
until a task asks:

- :meth:`StoredArray.read` ``(slices)`` returns that block as a fresh C-ordered ndarray
  (Fortran-ordered ``.npy`` files give an F-ordered block), read straight from the file with
  positioned reads (``.npy``: no memory map, so pages read are not kept resident by this
  process) or through zarr (only the chunks the block touches; an uncompressed zarr v3
  array in a local directory, chunked along its first dimension only, is read straight
  from its chunk files into the block's buffer: zarr's own read costs a fresh buffer and a
  copy per chunk, 2.3 against 0.9 CPU-s for 2 GB here);
- ``np.asarray(stored)`` reads it whole (an operation that needs the whole array);
- it pickles as its path (a Ray node worker reopens it there), so a block is read by the task
  that needs it, wherever that runs;
- every failure is a :class:`~tensorc.errors.StorageError` naming the path and, for zarr, the
  chunk: a missing chunk file (zarr would silently read it as the fill value; a deleted or
  half-copied chunk is data loss, so tensorc refuses it unless the array was opened with
  ``missing_chunks="fill"``, for stores that omit chunks holding only the fill value), a
  corrupt or truncated chunk, a store deleted while it is read.

A :class:`BlockSink` is the other direction: where a result's blocks are written as they
complete (``tc.to_zarr`` of a lazy array); its ``node_writer()`` writes them from another
process (a Ray node writing the blocks it computed).
"""

from __future__ import annotations

import itertools
import math
import mmap
import os
import sys
import threading

import numpy as np

from tensorc.errors import StorageError, first_line

MISSING_CHUNKS = ("error", "fill")


class StoredArray:
    """An array in a file or store, read block by block (see the module docstring)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[int, ...]
    shown: str
    """How messages name the file or store."""
    order: str = "C"
    """The memory order of the blocks a read returns (``"C"``, or ``"F"`` for a
    Fortran-ordered ``.npy``): what the local plan keys on, as for an in-memory operand."""

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def read(self, slices: tuple[slice, ...], out: np.ndarray | None = None) -> np.ndarray:
        """Block ``slices`` (unit-step slices, one per dimension): into ``out`` when given (a
        C-ordered buffer of the block's shape and this dtype, reused across reads: fresh
        pages cost more than the read itself for blocks over glibc's mmap threshold), else
        as a fresh ndarray."""
        raise NotImplementedError

    def whole(self) -> tuple[slice, ...]:
        return tuple(slice(0, n) for n in self.shape)

    def __array__(self, dtype=None, copy=None):
        value = self.read(self.whole())
        return value if dtype is None else value.astype(dtype, copy=False)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d stored array")
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.shown!r}, shape={self.shape}, "
                f"dtype={self.dtype}, chunks={self.chunks})")


def stored_chunks(operands) -> dict[str, tuple[int, ...]]:
    """Input name (``in0``, ``in1``, ... by position) → chunk shape of every stored operand
    among ``operands``: what the planner aligns blocks with and counts reads of."""
    return {f"in{k}": op.chunks for k, op in enumerate(operands) if isinstance(op, StoredArray)}


def _runs(shape: tuple[int, ...], slices: tuple[slice, ...]) -> tuple[int, int]:
    """``(leading dimensions iterated, elements per contiguous run)`` of a C-ordered block
    ``slices`` of an array of ``shape``: trailing dimensions read whole merge into one run."""
    split = len(shape)
    run = 1
    while split > 0:
        d = split - 1
        extent = slices[d].stop - slices[d].start
        run *= extent
        split = d
        if extent != shape[d]:
            break
    return split, run


class NpyFile(StoredArray):
    """A ``.npy`` file's data (or any raw C- or F-ordered array at ``offset`` of a file)."""

    def __init__(self, path: str, shape, dtype, offset: int, fortran: bool = False,
                 shown: str | None = None) -> None:
        self.path = os.path.abspath(path)
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.offset = int(offset)
        self.fortran = bool(fortran)
        self.order = "F" if self.fortran else "C"
        self.chunks = (1,) * len(self.shape)  # any block reads only its own bytes
        self.shown = shown or path
        self._fd: int | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_fd"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)

    def _descriptor(self) -> int:
        with self._lock:
            if self._fd is None:
                try:
                    self._fd = os.open(self.path, os.O_RDONLY)
                except FileNotFoundError as err:
                    raise StorageError(f"cannot read '{self.shown}': no such file (it was "
                                       "removed after it was opened)") from err
                except OSError as err:
                    raise StorageError(f"cannot read '{self.shown}': {err.strerror}") from err
            return self._fd

    def read(self, slices: tuple[slice, ...], out: np.ndarray | None = None) -> np.ndarray:
        if self.fortran:  # the file holds the transpose in C order
            shape, slices = self.shape[::-1], tuple(reversed(slices))
            out = None if out is None else out.T
        else:
            shape = self.shape
        extent = tuple(s.stop - s.start for s in slices)
        if out is None or not out.flags.c_contiguous:
            out = np.empty(extent, dtype=self.dtype)
        if out.size:
            self._read_into(out, shape, slices)
        return out.T if self.fortran else out

    def _read_into(self, out: np.ndarray, shape, slices) -> None:
        fd = self._descriptor()
        itemsize = self.dtype.itemsize
        split, run = _runs(shape, slices)
        run_bytes = run * itemsize
        strides = [itemsize * math.prod(shape[d + 1:]) for d in range(len(shape))]
        base = self.offset + sum(s.start * st for s, st in zip(slices, strides, strict=True))
        buffer = memoryview(out.reshape(-1).view(np.uint8))
        leading = [range(s.stop - s.start) for s in slices[:split]]
        for position, index in enumerate(itertools.product(*leading)):
            at = base + sum(i * st for i, st in zip(index, strides, strict=False))
            view = buffer[position * run_bytes:(position + 1) * run_bytes]
            try:
                got = _read_fully(fd, view, at)
            except OSError as err:
                raise StorageError(f"cannot read '{self.shown}': {err.strerror}") from err
            if got < run_bytes:
                raise StorageError(f"'{self.shown}' is truncated: it ends at byte "
                                   f"{at + got}, inside the data its header describes")


def _read_fully(fd: int, view: memoryview, at: int) -> int:
    """Fill ``view`` from file offset ``at`` with positioned reads; the bytes read (fewer
    than ``len(view)`` only when the file ends first). ``OSError`` passes through."""
    got = 0
    while got < len(view):
        count = os.preadv(fd, [view[got:]], at + got)
        if count == 0:
            break
        got += count
    return got


def from_memmap(array: np.memmap) -> NpyFile | None:
    """The file behind a contiguous numpy memmap, read with positioned reads; ``None`` when
    the memmap is not contiguous or has no file name (then it is used as an array)."""
    filename = getattr(array, "filename", None)
    mapped = getattr(array, "_mmap", None)
    if not filename or not isinstance(mapped, mmap.mmap) or array.dtype.hasobject:
        return None
    if not (array.flags.c_contiguous or array.flags.f_contiguous) or array.ndim == 0:
        return None
    start = array.offset - array.offset % mmap.ALLOCATIONGRANULARITY
    mapped_at = np.frombuffer(mapped, dtype=np.uint8).ctypes.data
    file_offset = start + (array.ctypes.data - mapped_at)
    fortran = not array.flags.c_contiguous
    return NpyFile(filename, array.shape, array.dtype, file_offset, fortran, shown=filename)


class ZarrArray(StoredArray):
    """A zarr array (v2 or v3), read through zarr, chunk-aligned blocks at a time."""

    def __init__(self, array, location, shown: str, missing_chunks: str = "error") -> None:
        if missing_chunks not in MISSING_CHUNKS:
            raise StorageError(f"missing_chunks must be 'error' or 'fill', got "
                               f"{missing_chunks!r}")
        self.location = location  # a path, URL or store zarr opens
        self.shown = shown
        self.shape = tuple(int(n) for n in array.shape)
        self.dtype = np.dtype(array.dtype)
        shards = getattr(array, "shards", None)
        self.chunks = tuple(int(c) for c in (shards or array.chunks))
        self.missing_chunks = missing_chunks
        self._array = array

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_array"] = None
        return state

    def _opened(self):
        if self._array is None:
            import zarr

            try:
                self._array = zarr.open_array(self.location, mode="r")
            except Exception as err:
                raise StorageError(f"cannot open '{self.shown}': {first_line(err)}") from err
        return self._array

    def chunk_range(self, slices: tuple[slice, ...]):
        """The chunk coordinates block ``slices`` touches."""
        return itertools.product(*(range(s.start // c, max(s.start // c, (s.stop - 1) // c) + 1)
                                   for s, c in zip(slices, self.chunks, strict=True)))

    def _check_chunks(self, array, slices) -> None:
        """Refuse a block whose chunk files are missing (see the module docstring)."""
        if self.missing_chunks == "fill" or not isinstance(self.location, str):
            return
        encode = getattr(array.metadata, "encode_chunk_key", None)
        if encode is None or "://" in self.location:
            return
        if not os.path.isdir(self.location):
            raise StorageError(f"cannot read '{self.shown}': the store is gone (no such "
                               "directory; it was removed after it was opened)")
        for coords in self.chunk_range(slices):
            key = encode(coords)
            if not os.path.exists(os.path.join(self.location, key)):
                raise StorageError(
                    f"cannot read '{self.shown}': chunk {tuple(coords)} ('{key}') is missing; "
                    "if the store omits chunks that hold only the fill value, open it with "
                    "tc.from_zarr(..., missing_chunks='fill')")

    def _raw_rows(self, array) -> int | None:
        """Bytes per row of the first dimension when each chunk file is that many bytes per
        row in C order (zarr v3, the one codec ``bytes`` in native order, no shards, chunks
        spanning every other dimension, a local store): then a block is read straight from
        the chunk files into its buffer. ``None`` otherwise (read through zarr)."""
        if "_raw" not in self.__dict__:
            self._raw = None
            codecs = getattr(array.metadata, "codecs", None)
            if (isinstance(self.location, str) and "://" not in self.location
                    and codecs is not None and len(codecs) == 1 and self.ndim
                    and getattr(array, "shards", None) is None
                    and type(codecs[0]).__name__ == "BytesCodec" and self.dtype.isnative
                    and self.dtype.kind in "biufc"
                    and (self.dtype.itemsize == 1 or (
                        getattr(codecs[0].endian, "value", None) == sys.byteorder))
                    and tuple(self.chunks[1:]) == self.shape[1:]):
                self._raw = math.prod(self.shape[1:]) * self.dtype.itemsize
        return self._raw

    def _read_raw(self, array, slices, out: np.ndarray, row_bytes: int) -> bool:
        """Read block ``slices`` (whole in every dimension but the first) from the chunk
        files into ``out``; ``False`` (nothing trusted) when a chunk file is missing, not its
        full size or unreadable: zarr then reads it, and names the failure."""
        start, stop = slices[0].start, slices[0].stop
        rows = self.chunks[0]
        buffer = memoryview(out.reshape(-1).view(np.uint8))
        for (c, *_) in self.chunk_range(slices):
            path = os.path.join(self.location, array.metadata.encode_chunk_key(
                (c,) + (0,) * (self.ndim - 1)))
            first, last = max(start, c * rows), min(stop, (c + 1) * rows)
            at, size = (first - c * rows) * row_bytes, (last - first) * row_bytes
            view = buffer[(first - start) * row_bytes:(last - start) * row_bytes]
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                return False
            try:
                if (os.fstat(fd).st_size != rows * row_bytes
                        or _read_fully(fd, view, at) < size):
                    return False
            except OSError:
                return False
            finally:
                os.close(fd)
        return True

    def read(self, slices: tuple[slice, ...], out: np.ndarray | None = None) -> np.ndarray:
        array = self._opened()
        self._check_chunks(array, slices)
        row_bytes = self._raw_rows(array)
        if row_bytes and all(s.start == 0 and s.stop == n
                             for s, n in zip(slices[1:], self.shape[1:], strict=True)):
            if out is None or not out.flags.c_contiguous or out.dtype != self.dtype:
                out = np.empty(tuple(s.stop - s.start for s in slices), dtype=self.dtype)
            if not out.size or self._read_raw(array, slices, out, row_bytes):
                return out
        try:
            if out is None or not out.flags.c_contiguous or out.dtype != self.dtype:
                return np.asarray(array[slices])
            from zarr.core.buffer import default_buffer_prototype

            wrapped = default_buffer_prototype().nd_buffer.from_numpy_array(out)
            array.get_basic_selection(slices, out=wrapped)
            return out
        except Exception as err:  # noqa: BLE001 - named by chunk below
            raise StorageError(self._failure(array, slices, err)) from err

    def _failure(self, array, slices, err) -> str:
        """The message of a failed block read, naming the first chunk that fails alone."""
        for coords in self.chunk_range(slices):
            where = tuple(slice(c * k, min((c + 1) * k, n))
                          for c, k, n in zip(coords, self.chunks, self.shape, strict=True))
            try:
                array[where]
            except Exception as chunk_err:  # noqa: BLE001 - reported
                return (f"cannot read '{self.shown}': chunk {tuple(coords)} is corrupt or "
                        f"unreadable ({type(chunk_err).__name__}: {first_line(chunk_err)})")
        return f"cannot read '{self.shown}': {type(err).__name__}: {first_line(err)}"


class BlockSink:
    """Where a result larger than memory goes: its blocks are written as they complete and
    never held together (``tc.to_zarr`` of a lazy expression). The runtime calls
    :meth:`open` once with the result's block shape (the plan's), then :meth:`write` per
    block, from worker threads, never two for one chunk."""

    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[int, ...] | None
    """The chunk shape asked for (the plan's blocks align with it), or ``None``: the plan's
    block shape becomes the chunk shape."""

    def open(self, block_shape: tuple[int, ...]) -> None:
        raise NotImplementedError

    def write(self, slices: tuple[slice, ...], block: np.ndarray) -> None:
        raise NotImplementedError

    def node_writer(self):
        """What writes this sink's blocks from another process once :meth:`open` ran: a
        picklable object whose ``write(slices, block)`` writes one block (the Ray nodes
        write the blocks they computed), or ``None`` when only this process can."""
        return None


class FanOut(BlockSink):
    """One result written to several sinks of one shape (two outputs naming one value)."""

    def __init__(self, sinks: list[BlockSink]) -> None:
        self.sinks = sinks
        self.shape, self.dtype, self.chunks = sinks[0].shape, sinks[0].dtype, sinks[0].chunks

    def open(self, block_shape: tuple[int, ...]) -> None:
        for sink in self.sinks:
            sink.open(block_shape)

    def write(self, slices: tuple[slice, ...], block: np.ndarray) -> None:
        for sink in self.sinks:
            sink.write(slices, block)

    def node_writer(self):
        writers = [sink.node_writer() for sink in self.sinks]
        return None if None in writers else FanOutWriter(writers)


class FanOutWriter:
    """The node writers of a :class:`FanOut`'s sinks, one block written to each."""

    def __init__(self, writers: list) -> None:
        self.writers = writers

    def write(self, slices: tuple[slice, ...], block: np.ndarray) -> None:
        for writer in self.writers:
            writer.write(slices, block)
