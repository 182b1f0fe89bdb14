"""Reading and writing arrays in files: ``.npy`` and zarr v3.

``read_npy(path)`` / ``read_zarr(path_or_store)`` read an array; ``write_npy(path, value)`` /
``write_zarr(value, path)`` write one (an ndarray, anything ``np.asarray`` takes, or a
``DistributedArray``). Contract:

- **Without a Ray session** (the session's executor runs in process) a read returns the
  stored array (:mod:`tensorc.stored`: ``NpyFile``, ``ZarrArray``), read block by block by
  the tasks that use it (a zarr array of a non-numeric dtype is loaded whole).
- **With a Ray session and neither ``block_shape=`` nor ``grid=``** a read returns the
  stored array too: nothing is read up front. The calls that use its blocks read them from
  the store on their nodes, within each node's memory budget, never through the driver or
  Ray's object store (:mod:`tensorc.runtime.ray.stages`); an einsum over it is planned with
  blocks of whole chunks. The driver asks every node's worker whether a local path exists
  there first, and refuses one some node cannot see.
- **With a Ray session and ``block_shape=`` or ``grid=``** a read returns a
  ``DistributedArray``, for data wanted in the cluster's memory (read once, used by many
  calls): blocked as asked, each block read *on its block-cyclic node* by one task that
  opens the file itself and copies only its block's slice into Ray's object store: nothing
  passes through the driver. A ``.npy`` block is a copy out of a memory map, so a node reads
  only the pages of its blocks. Every block is read at once, so the array must fit the
  object stores (beyond them Ray spills blocks to disk and reads them back, which is slow).
  The driver checks the file (or store) before submitting anything; a file changed after
  that fails when its blocks are used. A ``DistributedArray``'s blocks are written the same
  way, one task per block on the block's node. **The nodes must share the filesystem the
  path is on** (true of this machine's nodes; a multi-machine cluster needs a shared
  filesystem whose writes to disjoint byte ranges of one file are coherent).
- A zarr array read into a ``DistributedArray`` is blocked as ``block_shape=``/``grid=``
  say (a block may then read parts of chunks).
- **A write never leaves a file that looks complete but is not**: the data goes to a hidden
  temporary sibling (``.<name>.tmp-<random>``, same directory), which is renamed onto the
  path only after every block is written and flushed; on any failure the temporary is
  removed, the path is left as it was, and a :class:`~tensorc.errors.StorageError` says
  which block failed and why. An existing target is replaced, as ``np.save`` does: a file by
  an atomic ``os.replace``; an existing zarr store (a directory holding ``zarr.json``,
  ``.zarray`` or ``.zgroup``) or an empty directory by renaming it aside, renaming the new
  store in and then deleting the old one. Anything else at a zarr path is left alone and
  the write refused.
- ``write_npy`` follows ``np.save``: a path not ending in ``.npy`` gets ``.npy`` appended.
  Both writes return the path written, as a string.
- ``write_zarr`` makes a zarr v3 array at a local directory path. ``chunks=None`` means: for
  a ``DistributedArray`` its block shape (per dimension the greatest common divisor of the inner
  block boundaries, which is the block shape for a regular blocking), so every block is
  whole chunks and no two tasks write one chunk; given chunks must divide every inner block
  boundary for the same reason. For an ndarray, zarr's default (``"auto"``).
- ``streamed_zarr(path, shape, dtype)`` (and ``streamed_zarr_group``) yields a
  :class:`ZarrSink` a result is written into block by block as it completes (``tc.to_zarr``
  of a lazy array), with the same temporary-then-rename rule; its node writer
  (:class:`ZarrBlockWriter`, pickled as the temporary store's path) lets Ray nodes write the
  blocks they computed, each block whole chunks.
- Compression of a written zarr array: ``compressors=`` of ``write_zarr`` and
  ``streamed_zarr`` is zarr's own (``"auto"``: zarr's default, zstd for zarr v3; ``None``:
  uncompressed; or codecs). :func:`compressors_like` picks what ``tc.to_zarr`` inherits
  from the stored zarr arrays a result is computed from: uncompressed when every one is
  (compressing 2 GB of float64 that did not compress on the way in cost 3-7x the
  uncompressed write), their codecs when they all share zarr v3 codecs, else zarr's
  default.
- ``.npy`` files of format 1.0, 2.0 and 3.0 are read, in either memory order (a
  Fortran-ordered file's blocks are C-ordered copies). Files whose dtype holds Python
  objects are refused (loading them means unpickling, and they cannot be memory-mapped);
  so are values of such a dtype on write. On Ray, a zarr store that lives in this process's
  memory (``zarr.storage.MemoryStore``) is refused: tasks on other workers cannot open it.
- Paths are made absolute on the driver before tasks get them (workers may run in another
  working directory).

Every error is a :class:`~tensorc.errors.TensorcError`; those about a file or store are
:class:`~tensorc.errors.StorageError` (also an ``OSError``) and name the path, e.g.
``cannot read 'x.npy': no such file``, ``'x.npy' is not a .npy file (bad magic string)``.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import uuid

import numpy as np
from numpy.lib import format as npy_format

from tensorc.errors import PlanError, StorageError, TypeCheckError, first_line
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.ray.storage_tasks import (
    blocking_for,
    read_on_nodes,
    unseen_by,
    write_on_nodes,
)
from tensorc.session import current
from tensorc.stored import BlockSink, NpyFile, ZarrArray

_ZARR_MARKERS = ("zarr.json", ".zarray", ".zgroup")


# ---------------------------------------------------------------- .npy


def read_npy(path, *, block_shape=None, grid=None):
    """The array in ``.npy`` file ``path``, read block by block by the tasks that use it
    (an ``NpyFile``); with a Ray session and ``block_shape=``/``grid=``, a
    ``DistributedArray`` whose blocks are read on their nodes (see the module docstring)."""
    shown = _shown(path)
    full = os.path.abspath(os.fspath(path))
    shape, dtype, fortran, offset = _npy_header(full, shown)
    in_process = current().executor.in_process
    if in_process or (block_shape is None and grid is None):
        if not in_process:
            _check_nodes_see(full, shown)
        return NpyFile(full, shape, dtype, offset, fortran, shown=shown)
    block = blocking_for(shape, block_shape, grid)
    return read_on_nodes(shape, dtype, block, _read_npy_block, full)


def write_npy(path, value) -> str:
    """Write ``value`` (an ndarray or a ``DistributedArray``) to ``.npy`` file ``path`` (``.npy``
    appended when missing, as ``np.save`` does); returns the path written. A ``DistributedArray``'s
    blocks are written on their nodes into a memory map of a temporary file that replaces
    ``path`` once every block is in (see the module docstring)."""
    target = _shown(path)
    if not target.endswith(".npy"):
        target += ".npy"
    full = os.path.abspath(target)
    value, shape, dtype = _value_meta(value, target)
    if os.path.isdir(full):
        raise StorageError(f"cannot write '{target}': it is a directory")
    _check_parent(full, target)
    tmp = _temp_sibling(full, "tmp")
    try:
        try:
            npy_format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape).flush()
        except (OSError, ValueError) as err:
            raise StorageError(f"cannot write '{target}': {err}") from err
        _write_blocks(value, _write_npy_block, tmp, target)
        os.replace(tmp, full)
    except BaseException:
        _remove(tmp)
        raise
    return target


def _npy_header(full: str, shown: str):
    """``(shape, dtype)`` of a ``.npy`` file, read from its header without its data; a
    clear error for a missing, foreign, corrupt, truncated or object file."""
    try:
        with open(full, "rb") as fp:
            size = os.fstat(fp.fileno()).st_size
            if size == 0:
                raise StorageError(f"'{shown}' is not a .npy file (it is empty)")
            try:
                version = npy_format.read_magic(fp)
            except ValueError as err:
                raise StorageError(f"'{shown}' is not a .npy file (bad magic string)") from err
            try:
                if version == (1, 0):
                    shape, fortran, dtype = npy_format.read_array_header_1_0(fp)
                elif version == (2, 0):
                    shape, fortran, dtype = npy_format.read_array_header_2_0(fp)
                elif version == (3, 0):  # utf-8 header: numpy reads it only in open_memmap
                    shape, dtype, offset, fortran = _npy_header_3_0(full)
                    fp.seek(offset)
                else:
                    raise StorageError(
                        f"'{shown}' is not a readable .npy file (format version "
                        f"{version[0]}.{version[1]}; numpy writes 1.0, 2.0 and 3.0)")
            except ValueError as err:
                if "EOF" in str(err):
                    raise StorageError(f"'{shown}' is truncated (it ends inside its header)"
                                       ) from err
                raise StorageError(f"'{shown}' is not a valid .npy file (bad header: "
                                   f"{first_line(err)})") from err
            offset = fp.tell()
    except FileNotFoundError as err:
        raise StorageError(f"cannot read '{shown}': no such file") from err
    except IsADirectoryError as err:
        raise StorageError(f"cannot read '{shown}': it is a directory") from err
    except PermissionError as err:
        raise StorageError(f"cannot read '{shown}': permission denied") from err
    except StorageError:
        raise
    except OSError as err:
        raise StorageError(f"cannot read '{shown}': {err.strerror or err}") from err
    if dtype.hasobject:
        raise StorageError(
            f"cannot read '{shown}': its dtype {dtype} holds pickled Python objects, which "
            "tensorc does not load (unpickling a file runs its code; it cannot be "
            "memory-mapped)")
    need = math.prod(shape) * dtype.itemsize
    if size - offset < need:
        raise StorageError(
            f"'{shown}' is truncated: its header describes {need} bytes of data ({dtype}, "
            f"shape {tuple(shape)}), the file holds {size - offset}")
    return tuple(shape), dtype, bool(fortran) and len(shape) > 1, offset


def _npy_header_3_0(full: str):
    """``(shape, dtype, data offset, Fortran order)`` of a format 3.0 file (numpy has no
    public reader of its utf-8 header but ``open_memmap``, which maps the data without
    reading it)."""
    marray = npy_format.open_memmap(full, mode="r")
    return (marray.shape, marray.dtype, marray.offset,
            not marray.flags.c_contiguous and marray.ndim > 1)


def _read_npy_block(full: str, slices: tuple[slice, ...]) -> np.ndarray:
    """Block ``slices`` of ``.npy`` file ``full``, copied out of a memory map (runs on the
    block's node; ``np.array`` keeps a 0-d block 0-d)."""
    return np.array(np.load(full, mmap_mode="r")[slices], order="C")


def _write_npy_block(tmp: str, slices: tuple[slice, ...], block) -> int:
    """Write ``block`` at ``slices`` of the ``.npy`` file ``tmp`` through a memory map and
    flush it (runs on the block's node); returns the bytes written."""
    block = np.asarray(block)
    if block.size:
        marray = np.load(tmp, mmap_mode="r+")
        marray[slices] = block
        marray.flush()
        del marray
    return int(block.nbytes)


# ---------------------------------------------------------------- zarr


def read_zarr(path_or_store, *, block_shape=None, grid=None, missing_chunks="error"):
    """The zarr array at ``path_or_store`` (a directory path, a URL zarr opens, or a zarr
    store), read block by block by the tasks that use it (a ``ZarrArray``); with a Ray
    session and ``block_shape=``/``grid=``, a ``DistributedArray`` whose blocks are read on
    their nodes (see the module docstring)."""
    store, shown = _zarr_source(path_or_store)
    array = _open_zarr(store, shown)
    if current().executor.in_process:
        if np.dtype(array.dtype).hasobject:  # not numbers: read whole, as zarr gives it
            try:
                return np.asarray(array[...])
            except Exception as err:
                raise StorageError(f"cannot read '{shown}': {first_line(err)}") from err
        return ZarrArray(array, store, shown, missing_chunks)
    from zarr.storage import MemoryStore

    if isinstance(store, MemoryStore):
        raise StorageError(
            f"cannot read '{shown}' on Ray: a MemoryStore lives in this process's memory "
            "and tasks on the nodes cannot open it; write it to a directory first, or read "
            "it without a Ray session")
    shape, dtype = tuple(array.shape), np.dtype(array.dtype)
    if dtype.hasobject:
        raise StorageError(f"cannot read '{shown}' on Ray: its dtype {array.dtype} is not "
                           "numeric (a distributed array holds numbers and bools)")
    if block_shape is None and grid is None:
        if isinstance(store, str) and "://" not in store:
            _check_nodes_see(store, shown)
        return ZarrArray(array, store, shown, missing_chunks)
    block = blocking_for(shape, block_shape, grid)
    return read_on_nodes(shape, dtype, block, _read_zarr_block, store)


def write_zarr(value, path, *, chunks=None, compressors="auto") -> str:
    """Write ``value`` (an ndarray or a ``DistributedArray``) as a zarr v3 array at directory
    ``path`` (``compressors`` as zarr's: ``"auto"``, ``None`` or codecs); returns the path.
    A ``DistributedArray``'s blocks are written on their nodes into a temporary store that
    replaces ``path`` once every block is in (see the module docstring)."""
    target, full = _local_target(path, "write_zarr writes")
    value, shape, dtype = _value_meta(value, target)
    chunks = _write_chunks(value, chunks, target)
    _check_store_target(full, target)
    import zarr

    tmp = _temp_sibling(full, "tmp")
    try:
        try:
            zarr.create_array(tmp, shape=shape, dtype=dtype,
                              chunks="auto" if chunks is None else chunks, zarr_format=3,
                              compressors=compressors)
        except Exception as err:
            raise StorageError(f"cannot write '{target}': {first_line(err)}") from err
        _write_blocks(value, _write_zarr_block, tmp, target)
        _install_dir(tmp, full, target)
    except BaseException:
        _remove(tmp)
        raise
    return target


class ZarrSink(BlockSink):
    """A zarr v3 array written block by block into a hidden temporary store beside ``path``
    (:func:`streamed_zarr` installs it at ``path`` when every block is in, or removes it)."""

    def __init__(self, tmp: str, target: str, shape, dtype, chunks,
                 compressors="auto") -> None:
        self.tmp, self.target = tmp, target
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.chunks = chunks
        self.compressors = compressors
        self._array = None

    def open(self, block_shape: tuple[int, ...]) -> None:
        import zarr

        chunks = self.chunks or tuple(max(1, int(b)) for b in block_shape) or None
        try:
            self._array = zarr.create_array(self.tmp, shape=self.shape, dtype=self.dtype,
                                            chunks=chunks or "auto",
                                            zarr_format=3, compressors=self.compressors,
                                            config={"write_empty_chunks": True})
        except Exception as err:
            raise StorageError(f"cannot write '{self.target}': {first_line(err)}") from err

    def write(self, slices: tuple[slice, ...], block: np.ndarray) -> None:
        _write_block(self._array, self.target, slices, block)

    def node_writer(self) -> ZarrBlockWriter:
        """The sink's temporary store as a :class:`ZarrBlockWriter` (after :meth:`open`)."""
        return ZarrBlockWriter(self.tmp, self.target)


class ZarrBlockWriter:
    """Writes blocks of a :class:`ZarrSink`'s temporary store from any process that sees its
    path (a Ray node writing the result blocks it computed): pickles as the two paths, opens
    the array once per process. Each block is whole chunks, so no two writers share one."""

    def __init__(self, tmp: str, target: str) -> None:
        self.tmp, self.target = tmp, target
        self._array = None

    def __getstate__(self) -> dict:
        return {"tmp": self.tmp, "target": self.target}

    def __setstate__(self, state: dict) -> None:
        self.tmp, self.target, self._array = state["tmp"], state["target"], None

    def write(self, slices: tuple[slice, ...], block: np.ndarray) -> None:
        if self._array is None:
            import zarr

            try:
                self._array = zarr.open_array(self.tmp, mode="r+").with_config(
                    {"write_empty_chunks": True})  # every chunk file written, as open()'s
            except Exception as err:
                raise StorageError(f"cannot write '{self.target}': its temporary store "
                                   f"'{self.tmp}' cannot be opened here "
                                   f"({first_line(err)})") from err
        _write_block(self._array, self.target, slices, block)


def _write_block(array, target: str, slices: tuple[slice, ...], block) -> None:
    """``array[slices] = block``; a failure is a ``StorageError`` naming the block."""
    try:
        array[slices] = block
    except Exception as err:
        where = ", ".join(f"{s.start}:{s.stop}" for s in slices)
        raise StorageError(f"cannot write '{target}': block [{where}] failed: "
                           f"{first_line(err)}") from err


def compressors_like(stored) -> object:
    """The compressors a result computed from the stored arrays ``stored`` is written
    with: ``None`` (uncompressed) when every zarr array among them is uncompressed, their
    codecs when all share the same zarr v3 codecs, else ``"auto"`` (zarr's default, also
    when none is a zarr array)."""
    from zarr.abc.codec import BytesBytesCodec

    found = [tuple(a._opened().compressors)  # noqa: SLF001 - the stored layer's array
             for a in stored if isinstance(a, ZarrArray)]
    if not found or any(codecs != found[0] for codecs in found[1:]):
        return "auto"
    if not found[0]:
        return None
    return found[0] if all(isinstance(c, BytesBytesCodec) for c in found[0]) else "auto"


@contextlib.contextmanager
def streamed_zarr(path, shape, dtype, chunks=None, compressors="auto"):
    """A :class:`ZarrSink` for a result of ``shape`` and ``dtype`` to be written at
    ``path`` block by block (``compressors`` as zarr's): installed there (replacing a
    store, as :func:`write_zarr` does) when the block exits normally, removed otherwise, so
    a failed or interrupted write leaves nothing that looks complete."""
    target, full = _local_target(path, "write_zarr writes")
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise StorageError(f"cannot write '{target}': its dtype {dtype} holds Python objects")
    if chunks is not None:
        chunks = tuple(int(c) for c in chunks)
        if len(chunks) != len(shape) or any(c < 1 for c in chunks):
            raise PlanError(f"cannot write '{target}': chunks {chunks} do not fit an array of "
                            f"{len(shape)} dimension(s): one positive size per dimension")
    _check_store_target(full, target)
    tmp = _temp_sibling(full, "tmp")
    sink = ZarrSink(tmp, target, shape, dtype, chunks, compressors)
    try:
        yield sink
        if sink._array is None:  # nothing was written (an empty result): still an array
            sink.open(tuple(shape))
        _install_dir(tmp, full, target)
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def streamed_zarr_group(path, specs: dict):
    """A zarr group at ``path`` holding one array per name of ``specs`` (name → ``(shape,
    dtype)``), each a :class:`ZarrSink` written block by block; the group is installed at
    ``path`` when the block exits normally, removed otherwise."""
    import zarr

    target, full = _local_target(path, "a zarr group is written")
    _check_store_target(full, target)
    tmp = _temp_sibling(full, "tmp")
    try:
        zarr.open_group(tmp, mode="w", zarr_format=3)
        sinks = {name: ZarrSink(os.path.join(tmp, name), f"{target}/{name}", shape, dtype, None)
                 for name, (shape, dtype) in specs.items()}
        yield sinks
        for sink in sinks.values():
            if sink._array is None:  # noqa: SLF001 - this module's own sink
                sink.open(sink.shape)
        _install_dir(tmp, full, target)
    except BaseException:
        _remove(tmp)
        raise


def _check_nodes_see(full: str, shown: str) -> None:
    """Refuse a local path some node of the Ray session cannot see (the calls reading its
    blocks would fail there)."""
    unseen = unseen_by(full)
    if unseen:
        raise StorageError(
            f"cannot read '{shown}' on Ray: node(s) {', '.join(map(str, unseen))} of the "
            f"session cannot see it (no '{full}' there); the nodes must share the "
            "filesystem the path is on")


def _zarr_source(path_or_store):
    """``(what tasks open, how messages name it)``; a missing local path fails here."""
    from zarr.abc.store import Store
    from zarr.storage import LocalStore

    if isinstance(path_or_store, LocalStore):
        full = os.path.abspath(os.fspath(path_or_store.root))
        _check_store_path(full, str(path_or_store.root))
        return full, str(path_or_store.root)
    if isinstance(path_or_store, Store):
        return path_or_store, str(path_or_store)
    if not isinstance(path_or_store, (str, os.PathLike)):
        raise StorageError(f"read_zarr reads a path, a URL or a zarr store, got "
                           f"{type(path_or_store).__name__}")
    shown = os.fspath(path_or_store)
    if "://" in shown:
        return shown, shown
    full = os.path.abspath(shown)
    _check_store_path(full, shown)
    return full, shown


def _check_store_path(full: str, shown: str) -> None:
    if not os.path.exists(full):
        raise StorageError(f"cannot read '{shown}': no such file or directory")
    if not os.path.isdir(full):
        raise StorageError(f"cannot read '{shown}': not a zarr store (it is a file, not a "
                           "directory)")


def _open_zarr(store, shown: str):
    import zarr

    try:
        return zarr.open_array(store, mode="r")
    except FileNotFoundError as err:
        raise StorageError(f"cannot read '{shown}': no zarr array there") from err
    except Exception as err:
        raise StorageError(f"cannot read '{shown}': not a zarr array "
                           f"({first_line(err)})") from err


def _read_zarr_block(store, slices: tuple[slice, ...]) -> np.ndarray:
    """Block ``slices`` of the zarr array at ``store`` (runs on the block's node)."""
    import zarr

    return np.array(zarr.open_array(store, mode="r")[slices], order="C")


def _write_zarr_block(store: str, slices: tuple[slice, ...], block) -> int:
    """Write ``block`` at ``slices`` of the zarr array at ``store`` (runs on the block's
    node; the block is whole chunks, so no other task writes them); returns its bytes."""
    import zarr

    block = np.asarray(block)
    if block.size:  # every chunk file written, zeros too: a missing one reads as an error
        zarr.open_array(store, mode="r+").with_config({"write_empty_chunks": True})[
            slices] = block
    return int(block.nbytes)


def _write_chunks(value, chunks, target: str):
    """The chunk shape ``write_zarr`` uses (``None``: zarr's default), checked against the
    blocks of a ``DistributedArray``."""
    if isinstance(value, DistributedArray):
        bounds = value.layout.bounds
        inner = [edges[1:-1] for edges in bounds]
        if chunks is None:
            return tuple(math.gcd(*cuts) if cuts else max(1, edges[-1])
                         for cuts, edges in zip(inner, bounds, strict=True))
    if chunks is None:
        return None
    try:
        out = tuple(int(c) for c in chunks)
    except TypeError as err:
        raise PlanError(f"cannot write '{target}': chunks must be a sequence of ints, got "
                        f"{chunks!r}") from err
    ndim = value.ndim
    if len(out) != ndim or any(c < 1 for c in out):
        raise PlanError(f"cannot write '{target}': chunks {out} do not fit an array of "
                        f"{ndim} dimension(s): one positive size per dimension")
    if isinstance(value, DistributedArray):
        for d, (c, cuts) in enumerate(zip(out, inner, strict=True)):
            bad = [cut for cut in cuts if cut % c]
            if bad:
                raise PlanError(
                    f"cannot write '{target}': chunks {out} do not align with the array's "
                    f"blocks (dimension {d} is cut at {list(cuts)}, not multiples of {c}); "
                    "blocks are written in parallel, so each must be whole chunks: give "
                    "chunks dividing the block shape, or chunks=None")
    return out


def _local_target(path, what: str) -> tuple[str, str]:
    """``(path as given, absolute path)`` of a zarr store to write; refused unless it is a
    local directory path."""
    if not isinstance(path, (str, os.PathLike)) or "://" in os.fspath(path):
        raise StorageError(f"{what} to a local directory path, got {path!r}")
    target = os.fspath(path)
    return target, os.path.abspath(target)


def _check_store_target(full: str, target: str) -> None:
    """Refuse a zarr write over anything but a zarr store or an empty directory, or into a
    missing parent directory."""
    if os.path.lexists(full) and not _replaceable_store(full):
        raise StorageError(f"cannot write '{target}': it exists and is not a zarr store "
                           "(only a zarr store or an empty directory is replaced)")
    _check_parent(full, target)


def _replaceable_store(full: str) -> bool:
    if not os.path.isdir(full) or os.path.islink(full):
        return False
    names = os.listdir(full)
    return not names or any(marker in names for marker in _ZARR_MARKERS)


def _install_dir(tmp: str, full: str, target: str) -> None:
    """Rename the finished store ``tmp`` onto ``full``, an existing store renamed aside
    first and deleted once the new one is in place."""
    aside = None
    try:
        if os.path.lexists(full):
            aside = _temp_sibling(full, "old")
            os.rename(full, aside)
        try:
            os.rename(tmp, full)
        except BaseException:
            if aside is not None:
                os.rename(aside, full)
                aside = None
            raise
    except OSError as err:
        raise StorageError(f"cannot write '{target}': {err.strerror or err}") from err
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


# ---------------------------------------------------------------- shared


def _value_meta(value, target: str):
    """``(value, shape, dtype)`` of a value to write: a ``DistributedArray`` as it is, anything
    else as the ndarray ``np.asarray`` makes of it (once); an object dtype is refused."""
    if not isinstance(value, DistributedArray):
        value = np.asarray(value)
    if value.dtype.hasobject:
        raise TypeCheckError(f"cannot write '{target}': dtype {value.dtype} holds Python "
                             "objects; tensorc writes numbers, bools and fixed-size strings")
    return value, tuple(value.shape), value.dtype


def _write_blocks(value, writer, tmp: str, target: str) -> None:
    """Write every block of ``value`` into ``tmp`` with ``writer(tmp, slices, block)``: an
    ndarray as one block on the driver; a ``DistributedArray``'s blocks by one task each on the
    block's node. Waits for every task, then raises a ``StorageError`` naming the first
    block that failed."""
    if not isinstance(value, DistributedArray):
        try:
            writer(tmp, tuple(slice(0, n) for n in value.shape), value)
        except Exception as err:
            raise StorageError(f"cannot write '{target}': {first_line(err)}; nothing was "
                               f"written at '{target}'") from err
        return
    failed = write_on_nodes(value, writer, tmp)
    if failed is not None:
        key, err = failed
        cause = getattr(err, "cause", None) or err
        raise StorageError(
            f"cannot write '{target}': block {key} failed ({type(cause).__name__}: "
            f"{first_line(cause)}); nothing was written at '{target}'") from err


def _check_parent(full: str, target: str) -> None:
    parent = os.path.dirname(full)
    if not os.path.isdir(parent):
        raise StorageError(f"cannot write '{target}': no such directory "
                           f"'{os.path.dirname(target) or parent}'")


def _temp_sibling(full: str, kind: str) -> str:
    head, name = os.path.split(full)
    return os.path.join(head, f".{name}.{kind}-{uuid.uuid4().hex[:12]}")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        with contextlib.suppress(OSError):
            os.remove(path)


def _shown(path) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise StorageError(f"expected a file path, got {type(path).__name__}")
    return os.fspath(path)
