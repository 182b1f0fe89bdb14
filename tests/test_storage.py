"""``tensorc.storage``: ``.npy`` and zarr v3 files in and out, locally and on the shared
4-node Ray cluster (the ``ray_cluster`` fixture; tests without it run on the local session).

Real files under ``tmp_path`` and real zarr stores: round trips equal numpy exactly, blocks
read on Ray sit on their block-cyclic nodes, bad files give the documented errors, and a
write that fails part way leaves nothing at its path.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest
import zarr
from numpy.lib import format as npy_format

from tensorc import session, storage
from tensorc.errors import PlanError, StorageError, TensorcError, TypeCheckError
from tensorc.placement.layout import block_cyclic_node
from tensorc.runtime.ray.arrays import DistributedArray, asarray
from tensorc.runtime.ray.calls import submit
from tensorc.stored import NpyFile, StoredArray, ZarrArray


def _values():
    rng = np.random.default_rng(7)
    return {
        "float64": rng.random((10, 7)),
        "float32": rng.random((10, 7)).astype(np.float32),
        "int64": rng.integers(-(2**40), 2**40, size=(10, 7)),
        "bool": rng.random((10, 7)) < 0.5,
        "0-d": np.array(3.25),
        "3-d": rng.random((5, 4, 3)),
    }


VALUES = _values()


def _same(got, expected):
    if isinstance(got, StoredArray):  # read block by block; whole here
        assert got.shape == expected.shape and got.dtype == expected.dtype
        got = np.asarray(got)
    assert isinstance(got, np.ndarray)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def _q(path) -> str:
    """``path`` as a regular expression matching it literally."""
    return re.escape(str(path))


def _left_in(directory) -> list[str]:
    return sorted(os.listdir(directory))


def _on_layout_nodes(array: DistributedArray) -> None:
    nodes = array.block_nodes()
    assert nodes == {c: block_cyclic_node(c, array.node_grid) for c in np.ndindex(*array.grid)}


# ---------------------------------------------------------------- local .npy


@pytest.mark.parametrize("name", sorted(VALUES))
def test_npy_round_trip_local(tmp_path, name):
    assert session.current().backend == "local"
    value = VALUES[name]
    written = storage.write_npy(tmp_path / "a.npy", value)
    assert written == str(tmp_path / "a.npy")
    _same(np.load(written), value)
    got = storage.read_npy(written)
    assert type(got) is NpyFile and got._fd is None  # nothing read until a task asks
    _same(got, value)


def test_write_npy_appends_the_suffix_like_np_save(tmp_path):
    written = storage.write_npy(str(tmp_path / "plain"), VALUES["int64"])
    assert written.endswith("plain.npy") and _left_in(tmp_path) == ["plain.npy"]
    _same(storage.read_npy(written), VALUES["int64"])


def test_writes_take_array_likes_and_paths_only(tmp_path):
    storage.write_npy(tmp_path / "l.npy", [[1, 2], [3, 4]])
    _same(storage.read_npy(tmp_path / "l.npy"), np.array([[1, 2], [3, 4]]))
    storage.write_zarr([True, False], tmp_path / "l.zarr")
    _same(storage.read_zarr(tmp_path / "l.zarr"), np.array([True, False]))
    with pytest.raises(StorageError, match=r"expected a file path, got int"):
        storage.write_npy(3, np.zeros(2))
    with pytest.raises(StorageError, match=r"write_zarr writes to a local directory path"):
        storage.write_zarr(np.zeros(2), "s3://bucket/x.zarr")


def test_write_npy_replaces_an_existing_file(tmp_path):
    path = tmp_path / "a.npy"
    storage.write_npy(path, np.zeros(3))
    storage.write_npy(path, VALUES["float32"])
    _same(storage.read_npy(path), VALUES["float32"])
    assert _left_in(tmp_path) == ["a.npy"]


def test_fortran_order_and_format_versions_are_read(tmp_path):
    value = np.asfortranarray(VALUES["float64"])
    np.save(tmp_path / "f.npy", value)
    got = np.asarray(storage.read_npy(tmp_path / "f.npy"))
    assert got.flags.f_contiguous
    _same(got, value)
    for version in [(1, 0), (2, 0), (3, 0)]:
        path = tmp_path / f"v{version[0]}.npy"
        with open(path, "wb") as fp:
            npy_format.write_array(fp, VALUES["int64"], version=version)
        _same(storage.read_npy(path), VALUES["int64"])


def test_reading_bad_npy_files_names_the_path_and_the_fault(tmp_path):
    missing = tmp_path / "missing.npy"
    with pytest.raises(StorageError, match=rf"^cannot read '{_q(missing)}': no such file$"):
        storage.read_npy(missing)
    text = tmp_path / "x.npy"
    text.write_text("hello, this is not an array\n")
    with pytest.raises(StorageError,
                       match=rf"^'{_q(text)}' is not a \.npy file \(bad magic string\)$"):
        storage.read_npy(text)
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    with pytest.raises(StorageError, match=r"is not a \.npy file \(it is empty\)"):
        storage.read_npy(empty)
    whole = tmp_path / "whole.npy"
    np.save(whole, VALUES["float64"])
    data = whole.read_bytes()
    cut = tmp_path / "cut.npy"
    cut.write_bytes(data[:300])
    with pytest.raises(StorageError, match=rf"^'{_q(cut)}' is truncated: its header describes 560 "
                       r"bytes of data \(float64, shape \(10, 7\)\), the file holds 172$"):
        storage.read_npy(cut)
    cut_header = tmp_path / "cut_header.npy"
    cut_header.write_bytes(data[:40])
    with pytest.raises(StorageError, match=r"is truncated \(it ends inside its header\)"):
        storage.read_npy(cut_header)
    garbled = tmp_path / "garbled.npy"
    garbled.write_bytes(data[:10] + b"{'nonsense': 1}".ljust(118) + data[128:])
    with pytest.raises(StorageError, match=r"is not a valid \.npy file \(bad header: "):
        storage.read_npy(garbled)
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(StorageError, match=r"dtype object holds pickled Python objects"):
        storage.read_npy(objects)
    with pytest.raises(StorageError, match=r"it is a directory"):
        storage.read_npy(tmp_path)


def test_errors_are_tensorc_errors_and_os_errors(tmp_path):
    with pytest.raises(TensorcError) as caught:
        storage.read_npy(tmp_path / "nope.npy")
    assert isinstance(caught.value, OSError)


def test_write_npy_refusals(tmp_path):
    with pytest.raises(TypeCheckError, match=r"cannot write '.*o\.npy': dtype object"):
        storage.write_npy(tmp_path / "o.npy", np.array([None, 1], dtype=object))
    with pytest.raises(StorageError, match=r"no such directory"):
        storage.write_npy(tmp_path / "no" / "a.npy", np.zeros(2))
    (tmp_path / "d.npy").mkdir()
    with pytest.raises(StorageError, match=r"cannot write '.*d\.npy': it is a directory"):
        storage.write_npy(tmp_path / "d.npy", np.zeros(2))
    assert _left_in(tmp_path) == ["d.npy"]


def test_failed_npy_write_leaves_nothing_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "a.npy"

    def half_then_fail(tmp, slices, block):
        marray = np.load(tmp, mmap_mode="r+")
        marray[: len(block) // 2] = block[: len(block) // 2]
        marray.flush()
        raise OSError("disk full")

    monkeypatch.setattr(storage, "_write_npy_block", half_then_fail)
    with pytest.raises(StorageError, match=rf"cannot write '{_q(path)}': disk full; nothing was "
                       "written"):
        storage.write_npy(path, VALUES["float64"])
    assert _left_in(tmp_path) == []
    monkeypatch.undo()
    storage.write_npy(path, VALUES["int64"])
    monkeypatch.setattr(storage, "_write_npy_block", half_then_fail)
    with pytest.raises(StorageError):
        storage.write_npy(path, VALUES["float64"])
    assert _left_in(tmp_path) == ["a.npy"]
    _same(np.load(path), VALUES["int64"])


# ---------------------------------------------------------------- local zarr


@pytest.mark.parametrize("name", sorted(VALUES))
def test_zarr_round_trip_local(tmp_path, name):
    value = VALUES[name]
    path = tmp_path / "a.zarr"
    assert storage.write_zarr(value, path) == str(path)
    opened = zarr.open_array(path, mode="r")
    assert opened.metadata.zarr_format == 3
    _same(np.asarray(opened[...]), value)
    _same(storage.read_zarr(path), value)
    _same(storage.read_zarr(str(path)), value)
    _same(storage.read_zarr(zarr.storage.LocalStore(path)), value)
    assert _left_in(tmp_path) == ["a.zarr"]


def test_a_zarr_written_with_chunks_of_zeros_reads_back_as_it_was_written(tmp_path):
    """Zarr leaves out chunks that hold only the fill value unless told otherwise, and a
    store with chunks missing is an error to read (unless ``missing_chunks="fill"``): the
    writer writes every chunk, so its own output reads back (a Cholesky factor's upper
    blocks did not)."""
    value = np.zeros((8, 8))
    value[:4, :4] = 1.0
    path = tmp_path / "z.zarr"
    storage.write_zarr(value, path, chunks=(4, 4))
    assert sorted(p.name for p in (path / "c" / "0").iterdir()) == ["0", "1"]
    _same(storage.read_zarr(path), value)


def test_write_zarr_chunks_and_memory_stores(tmp_path):
    path = tmp_path / "c.zarr"
    storage.write_zarr(VALUES["float64"], path, chunks=(5, 4))
    assert zarr.open_array(path, mode="r").chunks == (5, 4)
    store = zarr.storage.MemoryStore()
    zarr.create_array(store, data=VALUES["int64"], chunks=(3, 3))
    _same(storage.read_zarr(store), VALUES["int64"])
    with pytest.raises(PlanError, match=r"chunks \(5,\) do not fit an array of 2 dimension"):
        storage.write_zarr(VALUES["float64"], tmp_path / "bad.zarr", chunks=(5,))


def test_write_zarr_replaces_a_store_but_not_other_things(tmp_path):
    path = tmp_path / "a.zarr"
    storage.write_zarr(np.zeros((3, 3)), path, chunks=(1, 1))
    storage.write_zarr(VALUES["bool"], path)
    _same(storage.read_zarr(path), VALUES["bool"])
    assert _left_in(tmp_path) == ["a.zarr"]
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(StorageError, match=rf"cannot write '{_q(precious)}': it exists and is not "
                       "a zarr store"):
        storage.write_zarr(VALUES["bool"], precious)
    assert (precious / "notes.txt").read_text() == "keep me"
    (tmp_path / "empty").mkdir()
    storage.write_zarr(VALUES["bool"], tmp_path / "empty")
    _same(storage.read_zarr(tmp_path / "empty"), VALUES["bool"])


def test_reading_bad_zarr_stores_names_them(tmp_path):
    missing = tmp_path / "missing.zarr"
    with pytest.raises(StorageError,
                       match=rf"^cannot read '{_q(missing)}': no such file or directory$"):
        storage.read_zarr(missing)
    afile = tmp_path / "file.zarr"
    afile.write_text("x")
    with pytest.raises(StorageError, match=r"not a zarr store \(it is a file"):
        storage.read_zarr(afile)
    (tmp_path / "empty").mkdir()
    with pytest.raises(StorageError, match=r"cannot read '.*empty': no zarr array there"):
        storage.read_zarr(tmp_path / "empty")
    zarr.open_group(tmp_path / "group.zarr", mode="w")
    with pytest.raises(StorageError, match=r"cannot read '.*group\.zarr': not a zarr array"):
        storage.read_zarr(tmp_path / "group.zarr")
    with pytest.raises(StorageError, match=r"a path, a URL or a zarr store, got int"):
        storage.read_zarr(3)


def test_failed_zarr_write_leaves_nothing(tmp_path, monkeypatch):
    real = storage._write_zarr_block

    def write_then_fail(store, slices, block):
        real(store, slices, block)
        raise OSError("quota exceeded")

    monkeypatch.setattr(storage, "_write_zarr_block", write_then_fail)
    with pytest.raises(StorageError, match=r"cannot write '.*a\.zarr': quota exceeded"):
        storage.write_zarr(VALUES["float64"], tmp_path / "a.zarr")
    assert _left_in(tmp_path) == []


# ---------------------------------------------------------------- on Ray


@pytest.mark.parametrize("name", sorted(VALUES))
def test_npy_round_trip_on_ray(ray_cluster, tmp_path, name):
    value = VALUES[name]
    path = tmp_path / "a.npy"
    storage.write_npy(path, value)
    block_shape = {2: (4, 3), 3: (2, 3, 2)}.get(value.ndim, ())
    array = storage.read_npy(path, block_shape=block_shape)
    assert isinstance(array, DistributedArray)
    assert array.shape == value.shape and array.dtype == value.dtype
    if value.ndim == 2:
        assert array.block_shape == (4, 3) and array.grid == (3, 3)
    _on_layout_nodes(array)
    _same(array.numpy(), value)
    again = storage.write_npy(tmp_path / "b.npy", array)
    _same(np.load(again), value)
    assert _left_in(tmp_path) == ["a.npy", "b.npy"]


def test_npy_on_ray_stays_in_its_file_unless_blocked_and_fortran_files(ray_cluster, tmp_path):
    value = np.asfortranarray(VALUES["float64"])
    np.save(tmp_path / "f.npy", value)
    stored = storage.read_npy(tmp_path / "f.npy")  # no blocking: read by the calls using it
    assert isinstance(stored, NpyFile) and stored.fortran
    _same(stored, VALUES["float64"])
    array = storage.read_npy(tmp_path / "f.npy", grid=(2, 2))
    _on_layout_nodes(array)
    _same(array.numpy(), VALUES["float64"])
    by_grid = storage.read_npy(tmp_path / "f.npy", grid=(1, 4))
    assert by_grid.grid == (1, 4)
    _same(by_grid.numpy(), VALUES["float64"])


def test_npy_errors_on_ray_come_before_any_task(ray_cluster, tmp_path):
    missing = tmp_path / "missing.npy"
    with pytest.raises(StorageError, match=rf"^cannot read '{_q(missing)}': no such file$"):
        storage.read_npy(missing)
    text = tmp_path / "x.npy"
    text.write_text("not numpy")
    with pytest.raises(StorageError, match=r"is not a \.npy file \(bad magic string\)"):
        storage.read_npy(text)


def test_zarr_on_ray_stays_in_its_store_unless_blocked(ray_cluster, tmp_path):
    value = VALUES["float64"]
    path = tmp_path / "c.zarr"
    storage.write_zarr(value, path, chunks=(5, 4))
    stored = storage.read_zarr(path)  # no blocking: read by the calls using it
    assert isinstance(stored, ZarrArray) and stored.chunks == (5, 4)
    _same(stored, value)
    array = storage.read_zarr(path, block_shape=(5, 4))  # in the cluster's memory
    assert array.block_shape == (5, 4) and array.grid == (2, 2)
    _on_layout_nodes(array)
    _same(array.numpy(), value)
    cut = storage.read_zarr(path, block_shape=(4, 3))  # across chunks: still exact
    assert cut.block_shape == (4, 3)
    _same(cut.numpy(), value)
    tiny = tmp_path / "tiny.zarr"
    zarr.create_array(tiny, data=np.arange(1600.0).reshape(40, 40), chunks=(2, 2))
    _same(storage.read_zarr(zarr.storage.LocalStore(tiny)), np.arange(1600.0).reshape(40, 40))


@pytest.mark.parametrize("name", sorted(VALUES))
def test_zarr_round_trip_on_ray(ray_cluster, tmp_path, name):
    value = VALUES[name]
    block_shape = {2: (4, 3), 3: (2, 3, 2)}.get(value.ndim, ())
    array = asarray(value, block_shape=block_shape)
    path = tmp_path / "a.zarr"
    storage.write_zarr(array, path)
    opened = zarr.open_array(path, mode="r")
    assert opened.chunks == (block_shape or ())
    _same(np.asarray(opened[...]), value)
    _same(storage.read_zarr(path), value)  # the stored array, read on the driver here
    back = storage.read_zarr(path, grid=(2,) * value.ndim)
    assert math.prod(back.grid) == (2 ** value.ndim if value.ndim else 1)
    _on_layout_nodes(back)
    _same(back.numpy(), value)
    assert _left_in(tmp_path) == ["a.zarr"]


def test_write_zarr_on_ray_refuses_chunks_blocks_would_share(ray_cluster, tmp_path):
    array = asarray(VALUES["float64"], block_shape=(4, 3))
    with pytest.raises(PlanError, match=r"chunks \(3, 3\) do not align with the array's "
                       r"blocks \(dimension 0 is cut at \[4, 8\]"):
        storage.write_zarr(array, tmp_path / "a.zarr", chunks=(3, 3))
    storage.write_zarr(array, tmp_path / "a.zarr", chunks=(2, 3))
    _same(storage.read_zarr(tmp_path / "a.zarr"), VALUES["float64"])


def test_memory_store_is_refused_on_ray(ray_cluster):
    store = zarr.storage.MemoryStore()
    zarr.create_array(store, data=np.ones(4))
    with pytest.raises(StorageError, match=r"a MemoryStore lives in this process's memory"):
        storage.read_zarr(store)


def _with_failing_block(ray_cluster) -> DistributedArray:
    """A (10, 7) array cut (4, 3) whose block (1, 0) raises when read."""

    def boom():
        raise OSError("the block was lost")

    array = asarray(VALUES["float64"], block_shape=(4, 3))
    array.blocks.refs[(1, 0)], _ = submit(ray_cluster, "run", 1, boom)
    return array


@pytest.mark.parametrize("fmt", ["npy", "zarr"])
def test_failed_write_on_ray_leaves_nothing(ray_cluster, tmp_path, fmt):
    array = _with_failing_block(ray_cluster)
    path = tmp_path / f"a.{fmt}"
    write = storage.write_npy if fmt == "npy" else (lambda p, v: storage.write_zarr(v, p))
    with pytest.raises(StorageError, match=rf"cannot write '{_q(path)}': block \(1, 0\) failed "
                       r"\(OSError: the block was lost\); nothing was written"):
        write(path, array)
    assert _left_in(tmp_path) == []


@pytest.mark.parametrize("fmt", ["npy", "zarr"])
def test_writer_failing_midway_on_ray_leaves_nothing(ray_cluster, tmp_path, monkeypatch, fmt):
    name = f"_write_{fmt}_block"
    real = getattr(storage, name)

    def fails_after_the_first_row_of_blocks(tmp, slices, block):
        if slices[0].start > 0:
            raise OSError("no space left")
        return real(tmp, slices, block)

    monkeypatch.setattr(storage, name, fails_after_the_first_row_of_blocks)
    array = asarray(VALUES["int64"], block_shape=(4, 3))
    path = tmp_path / f"a.{fmt}"
    write = storage.write_npy if fmt == "npy" else (lambda p, v: storage.write_zarr(v, p))
    with pytest.raises(StorageError, match=r"block \(1, 0\) failed \(OSError: no space left\)"):
        write(path, array)
    assert _left_in(tmp_path) == []
