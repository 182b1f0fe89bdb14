"""More data than memory: stored inputs stream through a plan within its memory budget.

A ~256 MB zarr input runs under ``memory_limit="32MB"`` in a fresh process, whose peak
resident memory (the kernel's high-water mark) must grow by at most 1.5× the budget plus a
fixed allowance, with results equal to numpy's. Bad input gets a clear error and leaves
nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import zarr

import tensorc as tc
from tensorc import session
from tensorc.errors import MemoryLimitError, PlanError, StorageError
from tensorc.planning.options import memory_bytes
from tensorc.stored import NpyFile, ZarrArray

CHILD = os.path.join(os.path.dirname(__file__), "clients", "out_of_core_child.py")
ALLOWANCE = 48 << 20
"""Resident memory a run may add beyond 1.5× its budget: thread stacks, the plan, zarr's
event loop and codec buffers on first use."""


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    """A 256 × 256 × 512 float64 zarr array (256 MiB), chunks 32 × 64 × 512 (8 MiB)."""
    path = str(tmp_path_factory.mktemp("ooc") / "x.zarr")
    z = zarr.create_array(path, shape=(256, 256, 512), chunks=(32, 64, 512), dtype="f8",
                          compressors=None)
    for i in range(0, 256, 32):
        z[i:i + 32] = np.random.default_rng(i).random((32, 256, 512))
    return path


@pytest.mark.parametrize("kind", ["einsum", "program", "gram", "standardize"])
def test_a_store_eight_times_the_budget_streams_within_it(big_store, kind):
    path = big_store if kind in ("einsum", "program") else _tall(big_store)
    done = subprocess.run([sys.executable, CHILD, path, kind, "32MB"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["ok"]
    assert report["budget"] == 32 * 10**6
    assert report["modelled"] <= report["budget"]
    assert report["growth"] <= 1.5 * report["budget"] + ALLOWANCE, report
    assert report["measured"] >= report["before"] > 0


def _tall(big_store) -> str:
    """A 262144 × 128 float64 matrix (256 MiB) beside the cube, chunks of 4096 rows."""
    path = os.path.join(os.path.dirname(big_store), "tall.zarr")
    if not os.path.exists(path):
        z = zarr.create_array(path, shape=(262144, 128), chunks=(4096, 128), dtype="f8",
                              compressors=None)
        for i in range(0, 262144, 32768):
            z[i:i + 32768] = np.random.default_rng(i).random((32768, 128))
    return path


def test_a_streamed_write_that_fails_leaves_nothing_at_the_path(small_store, tmp_path):
    path, value = small_store
    x = tc.from_zarr(path)
    out = tmp_path / "out.zarr"
    tc.to_zarr(x * 2.0, out)  # streamed: x * 2 is never held whole
    np.testing.assert_allclose(zarr.open_array(str(out))[:], value * 2.0)
    os.remove(os.path.join(path, "c", "3", "2", "0"))
    with pytest.raises(StorageError, match=r"chunk \(3, 2, 0\)"):
        tc.to_zarr(x + 1.0, tmp_path / "failed.zarr")
    assert sorted(os.listdir(tmp_path)) == ["out.zarr", "s.zarr"]


def test_a_streamed_result_is_compressed_as_the_stores_it_reads(small_store, tmp_path):
    path, value = small_store  # uncompressed
    x = tc.from_zarr(path)

    def written(name, expr, **kwargs):
        out = zarr.open_array(tc.to_zarr(expr, tmp_path / name, **kwargs), mode="r")
        return out[:], tuple(type(c).__name__ for c in out.compressors)

    got, codecs = written("plain.zarr", (x - tc.mean(x, axis=0)) / tc.std(x, axis=0))
    np.testing.assert_allclose(got, (value - value.mean(axis=0)) / value.std(axis=0))
    assert codecs == ()  # uncompressed in, uncompressed out
    zpath = str(tmp_path / "z.zarr")
    zarr.create_array(zpath, shape=value.shape, chunks=(16, 16, 40), dtype="f8",
                      compressors=zarr.codecs.ZstdCodec(level=3))[:] = value
    z = tc.from_zarr(zpath)
    got, codecs = written("z2.zarr", z * 2.0)
    np.testing.assert_allclose(got, value * 2.0)
    assert codecs == ("ZstdCodec",)
    assert zarr.open_array(str(tmp_path / "z2.zarr")).compressors[0].level == 3
    assert written("mixed.zarr", z + x)[1] == ("ZstdCodec",)  # they differ: zarr's default
    assert written("asked.zarr", z * 2.0, compressors=None)[1] == ()
    assert written("auto.zarr", x * 2.0, compressors="auto")[1] == ("ZstdCodec",)
    assert written("eager.zarr", value)[1] == ("ZstdCodec",)  # no store read: the default


@pytest.fixture
def small_store(tmp_path):
    value = np.random.default_rng(0).random((64, 48, 40))
    path = str(tmp_path / "s.zarr")
    z = zarr.create_array(path, shape=value.shape, chunks=(16, 16, 40), dtype="f8",
                          compressors=None)
    z[:] = value
    return path, value


def test_stored_operands_equal_numpy_and_blocks_align_with_chunks(small_store, tmp_path):
    path, value = small_store
    rng = np.random.default_rng(1)
    b, c, y = rng.random((64, 5)), rng.random((48, 5)), rng.random((48, 40, 5))
    x = tc.from_zarr(path)
    got = np.asarray(tc.einsum("ijk,if,jf->if", x, b, c, memory_limit="1MB"))
    np.testing.assert_allclose(got, np.einsum("ijk,if,jf->if", value, b, c))
    stats = tc.last_stats()
    blocks = dict(part.split(": ") for part in stats["blocking"].split(", "))
    assert int(blocks["i"].split("/")[1].split(" ")[0]) % 16 == 0  # whole chunks
    assert int(blocks["j"].split("/")[1].split(" ")[0]) % 16 == 0
    assert stats["modelled_peak_bytes"] <= stats["memory_limit_bytes"] == 10**6
    assert stats["peak_rss_bytes"] is None  # under 16 MB moved: not worth measuring
    got = np.asarray(tc.einsum("ijk,jkf->if", x, y, memory_limit="2MB"))
    np.testing.assert_allclose(got, np.einsum("ijk,jkf->if", value, y))
    np.save(tmp_path / "x.npy", np.asfortranarray(value))
    loaded = tc.load(tmp_path / "x.npy")
    assert isinstance(loaded.value(), NpyFile) and loaded.value().order == "F"
    planned = tc.plan("ijk,if->kf", loaded.value(), b, memory_limit="1MB")
    np.testing.assert_allclose(np.asarray(tc.einsum("ijk,if->kf", loaded, b,
                                                    memory_limit="1MB")),
                               np.einsum("ijk,if->kf", value, b))
    assert tc.last_stats()["blocking"] == planned.stats["blocking"]  # tc.plan plans the run
    np.testing.assert_allclose(np.asarray(tc.einsum("ijk->kj", loaded, memory_limit="1MB")),
                               value.sum(axis=0).T)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    np.testing.assert_allclose(tc.einsum("ijk,if->kf", mapped, b, memory_limit="1MB"),
                               np.einsum("ijk,if->kf", value, b))


def test_a_plan_over_nodes_keeps_whole_the_indices_a_stored_input_lacks(tmp_path):
    """``ijk,jkf->if`` over a stored X on 4 nodes: ``f`` (32) in one block, so each block of
    X read is used by one product of full width (the model alone cut it in 4)."""
    path = str(tmp_path / "x.zarr")  # metadata only: planning reads no chunk
    zarr.create_array(path, shape=(640, 640, 640), chunks=(128, 128, 128), dtype="f8",
                      compressors=None)
    plan = tc.plan("ijk,jkf->if", tc.from_zarr(path), (640, 640, 32), nodes=4,
                   memory_limit="2GB")
    assert plan.stats["blocking"] == ("f: 32/32 -> 1, i: 640/128 -> 5, j: 640/128 -> 5, "
                                      "k: 640/128 -> 5")
    assert "index(es) f kept whole beside the stored input" in plan.explain()


def test_explain_shows_the_modelled_peak_next_to_the_budget():
    plan = tc.plan("ij,jk->ik", (2000, 2000), (2000, 2000), memory_limit="64MB")
    text = plan.explain()
    assert "== memory ==" in text
    assert "of a 64 MB budget (result 32 MB" in text
    assert plan.stats["modelled_peak_bytes"] <= 64 * 10**6


def test_a_budget_too_small_is_refused_before_anything_runs(small_store):
    path, _ = small_store
    x = tc.from_zarr(path)
    with pytest.raises(MemoryLimitError) as info:
        tc.einsum("ijk,if->if", x, np.ones((64, 3)), memory_limit="100kB")
    message = str(info.value)
    assert message.startswith("memory_limit 100 kB is too small for einsum 'ijk,if->if': "
                              "even at its finest blocking (")
    assert "give memory_limit of at least" in message
    need = message.split("give memory_limit of at least ")[1].split(",")[0]
    np.asarray(tc.einsum("ijk,if->if", x, np.ones((64, 3)),
                         memory_limit=need.replace(" ", "")))  # the named budget works
    assert isinstance(info.value, PlanError) and isinstance(info.value, MemoryError)


def test_memory_limit_reads_sizes_like_dask_and_cubed():
    assert memory_bytes("768MB") == 768 * 10**6
    assert memory_bytes("1.5 GiB") == 3 * 2**29
    assert memory_bytes(4096) == 4096
    with pytest.raises(PlanError, match="memory_limit must be bytes or a size such as"):
        memory_bytes("4 parsecs")


def test_the_session_sets_the_budget_and_a_call_overrides_it():
    try:
        tc.init(backend="local", memory_limit="3GB")
        assert session.current().memory_budget() == (3 * 10**9,
                                                     "the session's memory_limit (tc.init)")
        assert session.current().memory_budget(5)[0] == 5
        plan = tc.plan("ij,jk->ik", (10, 10), (10, 10))
        assert plan.stats["memory_limit_bytes"] == 3 * 10**9
    finally:
        tc.shutdown()
    budget, source = session.current().memory_budget()
    assert budget > 0 and source.startswith("the default: 60% of the memory available")


def test_a_missing_chunk_is_an_error_naming_it_unless_fill_is_asked(small_store):
    path, value = small_store
    os.remove(os.path.join(path, "c", "1", "2", "0"))
    x = tc.from_zarr(path)
    with pytest.raises(StorageError, match=r"chunk \(1, 2, 0\) \('c/1/2/0'\) is missing; if "
                       "the store omits chunks"):
        tc.einsum("ijk->i", x)
    filled = np.asarray(tc.einsum("ijk->i", tc.from_zarr(path, missing_chunks="fill")))
    expected = value.copy()
    expected[16:32, 32:48] = 0
    np.testing.assert_allclose(filled, expected.sum(axis=(1, 2)))


def test_a_corrupt_chunk_and_a_deleted_store_are_errors_naming_them(small_store):
    path, _ = small_store
    with open(os.path.join(path, "c", "2", "0", "0"), "wb") as chunk:
        chunk.write(b"not a chunk")
    x = tc.from_zarr(path)
    with pytest.raises(StorageError, match=r"chunk \(2, 0, 0\) is corrupt or unreadable"):
        tc.einsum("ijk->i", x)
    shutil.rmtree(path)
    with pytest.raises(StorageError, match=r"the store is gone \(no such directory"):
        tc.einsum("ijk->j", x)


def test_row_chunks_read_straight_from_their_files_equal_zarrs_reads(tmp_path):
    value = np.random.default_rng(3).random((100, 7)) + 1e8  # an edge chunk of 4 rows
    path = str(tmp_path / "rows.zarr")
    zarr.create_array(path, shape=value.shape, chunks=(16, 7), dtype="f8",
                      compressors=None)[:] = value
    x = tc.from_zarr(path)
    stored = x.value()
    assert stored._raw_rows(stored._opened()) == 7 * 8  # the direct path applies
    for rows in (slice(0, 16), slice(5, 45), slice(90, 100), slice(0, 100), slice(33, 33)):
        buffer = np.empty((rows.stop - rows.start, 7))
        assert stored.read((rows, slice(0, 7)), out=buffer) is buffer
        np.testing.assert_array_equal(buffer, value[rows])
        np.testing.assert_array_equal(stored.read((rows, slice(0, 7))), value[rows])
    np.testing.assert_array_equal(stored.read((slice(3, 9), slice(2, 5))), value[3:9, 2:5])
    got = tc.to_zarr((x - tc.mean(x, axis=0)) / tc.std(x, axis=0), tmp_path / "out.zarr")
    np.testing.assert_allclose(zarr.open_array(got)[:],
                               (value - value.mean(axis=0)) / value.std(axis=0), rtol=1e-9)
    with open(os.path.join(path, "c", "2", "0"), "wb") as chunk:
        chunk.write(b"short")  # not a whole chunk: zarr reads it and names it
    with pytest.raises(StorageError, match=r"chunk \(2, 0\) is corrupt or unreadable"):
        stored.read((slice(30, 50), slice(0, 7)))
    os.remove(os.path.join(path, "c", "2", "0"))
    filled = tc.from_zarr(path, missing_chunks="fill").value()
    got = filled.read((slice(16, 64), slice(0, 7)))
    np.testing.assert_array_equal(got[16:32], 0.0)  # zarr's fill value
    np.testing.assert_array_equal(got[32:], value[48:64])


def test_a_truncated_npy_read_block_by_block_names_the_file(tmp_path):
    np.save(tmp_path / "t.npy", np.ones((100, 100)))
    stored = NpyFile(str(tmp_path / "t.npy"), (200, 100), np.float64, 128)
    with pytest.raises(StorageError, match=r"t.npy' is truncated: it ends at byte"):
        stored.read((slice(150, 200), slice(0, 100)))


def test_stored_arrays_pickle_as_their_path(small_store):
    import pickle

    path, value = small_store
    stored = tc.from_zarr(path).value()
    assert isinstance(stored, ZarrArray)
    again = pickle.loads(pickle.dumps(stored))
    np.testing.assert_array_equal(again.read((slice(0, 16), slice(0, 16), slice(0, 40))),
                                  value[:16, :16])
