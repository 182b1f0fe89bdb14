"""Sparse benchmark: SpGEMM, SpMM, sparse MTTKRP, CP-ALS, PageRank, a sparse chain and
Funk-SVD; tensorc (local, and on 4 Ray nodes) against scipy.sparse, pydata sparse,
python-graphblas (SuiteSparse:GraphBLAS, multithreaded), Dask distributed with sparse
chunks and a hand-written numpy gather.

Cases (operands from ``tc.sparse.random``/a seeded generator, so every run sees the same
data):

* ``spgemm-N`` — ``ij,jk->ik`` of two N × N CSR matrices at ``--density`` (1 %): tensorc
  (``tc.einsum``, CSR in, CSR out), scipy (``A @ B``), pydata (``GCXS @ GCXS``; skipped
  above ``--pydata-max-n``, where its result alone outgrows memory);
* ``spmm-N`` — ``ij,jk->ik`` of the same A with a dense N × ``--cols`` (64) matrix: tensorc,
  scipy (``A @ D``), pydata (``COO @ ndarray``);
* ``tensorc-ray`` (matrix cases): the same ``tc.einsum`` on a private
  ``tc.init(num_nodes=N)`` cluster (``--nodes``, one CPU per node), the result gathered to the
  driver as the call returns it, each sparse operand a ``tc.asarray`` tensor made before
  timing (its pieces stored on the nodes by the warm-up call, as Dask's chunks are
  scattered before timing); ``dask`` (matrix cases): ``dask.array`` of pydata ``COO``
  chunks (``da.from_array(x, chunks=(N // nodes, N), asarray=False)``, the right operand
  one chunk) on a ``distributed.LocalCluster`` of ``--nodes`` one-thread worker processes,
  ``(A @ B).compute()`` (the chunks are scattered to the workers once, before timing);
* ``mttkrp-nell2`` — ``ijk,jf,kf->if`` on a generated NELL-2-like tensor (12,092 × 9,184 ×
  28,818; ``--nnz`` non-zeros, 2M by default, ``--large`` for 10M; each coordinate drawn
  with a power-law skew like the real tensor's, repeated coordinates summed) with rank
  ``--rank`` (16) factors: tensorc, pydata (``sparse.einsum``; skipped above
  ``--pydata-max-nnz``), and ``numpy-gather`` (``np.add.at(A, i, x[:, None] * B[j] *
  C[k])``, what a numpy user writes); tensorc takes the tensor as a ``tc.asarray``, also on
  Ray; Dask runs ``da.einsum`` on ``COO`` chunks of ``i`` persisted on the workers. scipy
  has no n-d arrays: an unfolded X times the Khatri-Rao product would need a
  9,184·28,818 × rank dense operand, so it is not run.
  ``--tns`` also times a ``.tns`` round trip of the tensor (``tc.sparse.save_tns`` /
  ``load_tns``);
* ``cpals`` — ``--sweeps`` (5) sweeps of CP-ALS at rank ``--rank`` on the NELL-2-like
  tensor (``--cp-shape`` for another shape): each sweep's three MTTKRPs (one per mode) by
  tensorc (``tc.einsum``, the factors back in numpy after each) or by the numpy gather,
  the R × R solves in numpy for both; ``tensorly`` is its sparse ``parafac`` from the same
  start (reported as not run where its MTTKRP's dense Khatri-Rao product does not fit);
* ``pagerank`` — ``--iterations`` (20) power-iteration steps on a directed graph of
  ``--graph-nodes`` (100,000) nodes and ``--edges`` (1M) edges whose targets follow a power
  law, each step ``Mᵀ r`` of the row-normalised CSR ``M``: tensorc (``tc.einsum("ij,i->j",
  M, r)`` with ``M = tc.asarray(M)`` made once, locally and on Ray: the vector comes back
  to numpy each step; the plan is made once, and on Ray ``M``'s pieces are stored on the
  nodes by the warm-up run and read from there), Dask (``Mᵀ`` as ``COO`` row chunks
  persisted on the workers, one ``compute`` a step), scipy (``M.T @ r``), pydata
  (``COO.T @ r``) and graphblas (``M.T.mxv(r)``);
* ``chain`` — the sparse chain: ``--hops`` (10) products ``R ← R A`` from ``R`` = one 1 in
  each of ``--seeds`` (64) rows (walk counts from 64 start nodes), ``A`` the PageRank
  graph's adjacency; each product's result is the next one's left operand (it fills up
  to fully dense by the sixth hop): tensorc (``A`` a ``tc.asarray``, locally and on Ray),
  scipy, pydata (``GCXS``), graphblas (``mxm``) and Dask (``A`` as ``COO`` column chunks
  persisted on the workers, the ten products one graph computed once);
* ``funksvd`` — ``--steps`` (5) gradient steps of Funk's SVD on a ``--users`` × ``--items``
  (20,000 × 10,000) ratings matrix at ``--density`` with power-law items, rank
  ``--funk-rank`` (64): ``E = R - (U Vᵀ at R's entries)``, ``U += η (E V - λ U)``,
  ``V += η (Eᵀ U - λ V)``. tensorc: the sampled product ``tc.einsum("ij,if,jf->ij",
  R != 0, U, V)``, ``R - P`` of sparse tensors, the two products by ``tc.einsum`` (locally
  and on Ray); scipy with a numpy gather for the sampled product; graphblas with a masked
  ``mxm``; Dask with ``R`` as ``COO`` row chunks persisted on the workers, the sampled
  product by ``map_blocks`` and the steps one graph computed once.

``graphblas`` (matrix cases, PageRank, chain, Funk-SVD) runs python-graphblas on
SuiteSparse:GraphBLAS with its default threads (both cores here), its operands converted
to its own objects before timing.

Each system gets one warm-up call (checked against the reference: scipy for the matrix
cases, numpy-gather for MTTKRP; a sparse result by its non-zero count and 256 sampled rows)
and ``--repeats`` timed calls (wall clock). Peak memory is the process's resident
high-water mark during the first timed call minus its resident size before it
(``tensorc.runtime.resident.PeakResident``: every allocation counts, numba's and C++'s
too; glibc's ``malloc_trim`` first returns memory freed by earlier calls, so reused memory
is counted). ``mem ratio`` is (operands + that peak) / (operands + result), operands and result
at their compressed sizes (a dense result at its dense size): 1.0 means no memory beyond
the answer; the target is at most 2. A program of several calls holds what it passes from
call to call (the chain two ``R``s, Funk-SVD its error matrix and gradients), so for
tensorc ``per call`` also gives the largest such ratio of any one ``tc.einsum`` call in
it, each at its own operands and result (one more, untimed run).

    python benchmarks/sparse.py [--cases spgemm,spmm,mttkrp,pagerank,cpals,chain,funksvd]
        [--n 10000,20000]
        [--density 0.01] [--cols 64] [--nnz 2000000 | --large] [--rank 16] [--repeats 3]
        [--systems tensorc,tensorc-ray,scipy,pydata,graphblas,dask,numpy-gather]
        [--nodes 4] [--seeds 64] [--hops 10] [--users 20000] [--items 10000]
        [--funk-rank 64] [--steps 5]
        [--tns] [--graph-nodes 100000] [--edges 1000000] [--iterations 20] [--sweeps 5]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
_path = sys.path[:]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
import sparse  # noqa: E402 - pydata's, not this file (benchmarks/sparse.py would shadow it)

try:  # Dask's, not benchmarks/distributed.py
    import distributed
except ImportError:  # the dask system is then refused when asked for
    distributed = None

try:  # SuiteSparse:GraphBLAS through python-graphblas (the multithreaded single-node bar)
    import graphblas
except ImportError:  # the graphblas system is then refused when asked for
    graphblas = None

sys.path[:] = _path
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from common import environment, format_table, write_json  # noqa: E402

import tensorc as tc  # noqa: E402
from tensorc.runtime.resident import PeakResident  # noqa: E402

NELL2 = (12_092, 9_184, 28_818)
SYSTEMS = ("tensorc", "tensorc-ray", "scipy", "pydata", "graphblas", "tensorly", "dask",
           "numpy-gather")
DEFAULT_SYSTEMS = ("tensorc", "scipy", "pydata", "graphblas", "numpy-gather")
_DASK: dict = {"nodes": 4}


def from_graphblas(value):
    """A graphblas matrix as a scipy CSR array, a vector as an ndarray; anything else as it
    is (for the checks: the timed calls keep graphblas's own objects)."""
    if graphblas is not None and isinstance(value, graphblas.Matrix):
        return sp.csr_array(graphblas.io.to_scipy_sparse(value, format="csr"))
    if graphblas is not None and isinstance(value, graphblas.Vector):
        return value.to_dense(fill_value=0)
    return value


def nbytes(value) -> int:
    """Compressed bytes of a sparse array (a ``tc.asarray`` tensor's: the array it holds),
    dense bytes of an ndarray."""
    value = from_graphblas(value)
    if isinstance(value, tc.sparse.SparseTensor):
        value = value.wrapped
    if sp.issparse(value):
        value = value.tocsr() if value.format != "csr" else value
        return value.data.nbytes + value.indices.nbytes + value.indptr.nbytes
    if isinstance(value, sparse.GCXS):
        return value.data.nbytes + value.indices.nbytes + value.indptr.nbytes
    if isinstance(value, sparse.COO):
        return value.data.nbytes + value.coords.nbytes
    return np.asarray(value).nbytes


def _rows(value, rows: np.ndarray) -> np.ndarray:
    if sp.issparse(value):
        return value.tocsr()[rows].toarray()
    if isinstance(value, sparse.SparseArray):
        return sp.csr_array(value.to_scipy_sparse())[rows].toarray()
    return np.asarray(value)[rows]


def check(result, reference) -> str:
    """``ok`` or what differs: non-zero counts of sparse results, then sampled rows."""
    result = from_graphblas(result)
    if sp.issparse(reference) and getattr(result, "nnz", None) != reference.nnz:
        return f"WRONG nnz {getattr(result, 'nnz', None)} != {reference.nnz}"
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(reference.shape[0], min(256, reference.shape[0]), replace=False))
    if not np.allclose(_rows(result, rows), _rows(reference, rows), rtol=1e-9, atol=1e-9):
        return "WRONG values"
    return "ok"


def release_free_memory() -> None:
    """Hand memory the allocator keeps after frees back to the system (glibc's
    ``malloc_trim``), so the next call's resident growth is what it really allocates."""
    with contextlib.suppress(OSError):  # not glibc: reused memory may then go uncounted
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def run_system(name: str, call, reference, operands_bytes: int, repeats: int) -> dict:
    started = time.perf_counter()
    result = call()
    first = time.perf_counter() - started
    verdict = "ok" if reference is None else check(result, reference)
    result_bytes = nbytes(result)
    del result
    times, peak = [], None
    for number in range(repeats):
        release_free_memory()
        with PeakResident() as resident:
            started = time.perf_counter()
            value = call()
            times.append(time.perf_counter() - started)
        del value
        if number == 0 and resident.peak is not None:
            peak = max(0, resident.peak - resident.before)
    call_ratio = per_call_memory(call) if name == "tensorc" else None
    row = {"system": name, "first_s": first, "min_s": min(times),
           "median_s": statistics.median(times), "peak_bytes": peak,
           "result_bytes": result_bytes, "operands_bytes": operands_bytes, "check": verdict}
    if peak is not None:
        row["mem_ratio"] = (operands_bytes + peak) / (operands_bytes + result_bytes)
    if call_ratio is not None:
        row["call_mem_ratio"] = call_ratio
    if name.startswith("tensorc"):
        stats = tc.last_stats()
        row["tasks"] = stats.get("tasks")
        row["blocking"] = stats.get("blocking")
        row["kernel"] = stats["steps"][0]["kernel"] if stats.get("steps") else None
        row["modelled_peak_bytes"] = stats.get("modelled_peak_bytes")
        for key in ("tasks_per_node", "nonzeros_per_node", "shipped_bytes", "remote_calls",
                    "node_peak_rss_bytes"):
            if key in stats:
                row[key] = stats[key]
    return row


def per_call_memory(call) -> float | None:
    """One more (untimed) run of a tensorc program with every ``tc.einsum`` call's peak
    measured on its own: the largest ``(operands + peak) / (operands + result)`` of them,
    each at its own operands' and result's compressed sizes (``None``: no call measured).
    A program of several calls (the chain, Funk-SVD, PageRank) holds the values it passes
    from call to call; this is what tensorc itself adds within one call."""
    einsum, ratios = tc.einsum, []

    def measured(subscripts, *operands, **options):
        before = sum(nbytes(op) for op in operands)
        release_free_memory()
        with PeakResident() as resident:
            result = einsum(subscripts, *operands, **options)
        if resident.peak is not None:
            ratios.append((before + max(0, resident.peak - resident.before))
                          / max(1, before + nbytes(result)))
        return result

    tc.einsum = measured
    try:
        call()
    finally:
        tc.einsum = einsum
    return max(ratios, default=None)


def report(case: str, rows: list[dict]) -> None:
    best = min(r["median_s"] for r in rows if r["check"] == "ok") if any(
        r["check"] == "ok" for r in rows) else None
    table = []
    for r in rows:
        ratio = f"{r['median_s'] / best:.2f}" if best else "-"
        peak = "-" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 1e6:,.0f}"
        mem = f"{r['mem_ratio']:.2f}" if "mem_ratio" in r else "-"
        per_call = f"{r['call_mem_ratio']:.2f}" if r.get("call_mem_ratio") else "-"
        table.append([r["system"], f"{r['median_s']:.3f}", f"{r['min_s']:.3f}",
                      f"{r['first_s']:.3f}", ratio, peak, mem, per_call, r["check"]])
    print(f"\n== {case}")
    print(format_table(["system", "median s", "min s", "first s", "/fastest", "peak MB",
                        "mem ratio", "per call", "check"], table))
    for r in rows:
        if r["system"].startswith("tensorc"):
            print(f"   {r['system']}: {r['tasks']} tasks, blocking {r['blocking']}, "
                  f"{r['kernel']}")
        if "tasks_per_node" in r:
            print(f"   {r['system']}: tasks per node {r['tasks_per_node']}, non-zeros per "
                  f"node {r['nonzeros_per_node']}, shipped {r['shipped_bytes'] / 1e6:,.0f} MB")
            peaks = [f"{p / 1e6:,.0f}" if p else "-" for p in r.get("node_peak_rss_bytes") or []]
            if peaks:  # each node worker's highest resident memory so far (the session's)
                print(f"   {r['system']}: node worker peak resident MB [{', '.join(peaks)}]")


def dask_client(nodes: int):
    """A ``distributed`` client of a LocalCluster of ``nodes`` one-thread workers (made
    once)."""
    if "client" not in _DASK:
        cluster = distributed.LocalCluster(n_workers=nodes, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        _DASK["client"] = distributed.Client(cluster)
    return _DASK["client"]


def dask_matmul(a, b):
    """``A @ B`` with pydata COO chunks on the Dask cluster: rows of A cut in ``nodes``
    chunks, B one chunk (a dense B as an ndarray); both persisted on the workers first."""
    import dask.array as da

    nodes = _DASK["nodes"]
    client = dask_client(nodes)
    n = a.shape[0]
    x = da.from_array(sparse.COO.from_scipy_sparse(a), chunks=(-(-n // nodes), a.shape[1]),
                      asarray=False)
    y = da.from_array(sparse.COO.from_scipy_sparse(b) if sp.issparse(b) else b,
                      chunks=b.shape, asarray=False)
    x, y = client.persist([x, y])
    return lambda: (x @ y).compute()


def dask_vector_step(m):
    """``r ↦ Mᵀ r`` on the Dask cluster: ``Mᵀ`` as pydata ``COO`` chunks of rows, cut in
    ``nodes`` and persisted on the workers once; ``r`` sent with each step."""
    import dask.array as da

    nodes = _DASK["nodes"]
    client = dask_client(nodes)
    transposed = sparse.COO.from_scipy_sparse(m.T.tocsr())
    x = client.persist(da.from_array(transposed, chunks=(-(-m.shape[1] // nodes), m.shape[0]),
                                     asarray=False))
    return lambda r: (x @ r).compute()


def dask_mttkrp(x, b, c):
    """``ijk,jf,kf->if`` by ``dask.array.einsum`` on the Dask cluster: the tensor as pydata
    ``COO`` chunks of ``i`` cut in ``nodes`` (each chunk's einsum is pydata's), the factors
    one chunk each; all persisted on the workers first."""
    import dask.array as da

    nodes = _DASK["nodes"]
    client = dask_client(nodes)
    tensor = da.from_array(x, chunks=(-(-x.shape[0] // nodes), *x.shape[1:]), asarray=False)
    tensor, left, right = client.persist([tensor, da.from_array(b, chunks=b.shape),
                                          da.from_array(c, chunks=c.shape)])
    def run():  # pydata's einsum returns COO even for a dense result: factors are dense
        result = da.einsum("ijk,jf,kf->if", tensor, left, right).compute()
        return result.todense() if isinstance(result, sparse.SparseArray) else result

    return run


def dask_chain(a, start, hops: int):
    """The sparse chain on the Dask cluster: ``A`` as pydata ``COO`` chunks of columns cut in
    ``nodes`` (persisted on the workers first), ``R`` one chunk; the ``hops`` products built
    as one graph and computed once (Dask's optimisation sees the whole chain)."""
    import dask.array as da

    nodes = _DASK["nodes"]
    client = dask_client(nodes)
    n = a.shape[1]
    graph = client.persist(da.from_array(sparse.COO.from_scipy_sparse(a),
                                         chunks=(a.shape[0], -(-n // nodes)), asarray=False))
    first = sparse.COO.from_scipy_sparse(start)

    def run():
        r = da.from_array(first, chunks=first.shape, asarray=False)
        for _ in range(hops):
            r = r @ graph
        return r.compute().tocsr()

    return run


def ray_einsum(*operands):
    """``tc.einsum`` on Ray, each sparse operand made a ``tc.asarray`` tensor first (before
    timing, as Dask's chunks are scattered before timing): its pieces are stored on the
    nodes by the warm-up call and read from there by the timed ones."""
    kept = [tc.asarray(op) if tc.sparse.is_sparse(op) else op for op in operands]
    return lambda: tc.einsum("ij,jk->ik", *kept)


def spgemm(n: int, density: float, systems, repeats: int, pydata_max: int) -> list[dict]:
    a = tc.sparse.random((n, n), density, seed=1, format="csr")
    b = tc.sparse.random((n, n), density, seed=2, format="csr")
    operands = nbytes(a) + nbytes(b)
    reference = a @ b
    rows = matrix_product_rows(a, b, reference, operands, systems, repeats)
    if "pydata" in systems and n <= pydata_max:
        ga, gb = sparse.GCXS.from_scipy_sparse(a), sparse.GCXS.from_scipy_sparse(b)
        rows.append(run_system("pydata", lambda: ga @ gb, reference, operands, repeats))
    return rows


def matrix_product_rows(a, b, reference, operands: int, systems, repeats: int) -> list[dict]:
    """``a @ b`` timed by each of tensorc (local and on Ray), Dask and scipy in ``systems``."""
    rows = []
    if "tensorc" in systems:
        rows.append(run_system("tensorc", lambda: tc.einsum("ij,jk->ik", a, b,
                                                            backend="local"),
                               reference, operands, repeats))
    if "tensorc-ray" in systems:
        rows.append(run_system("tensorc-ray", ray_einsum(a, b), reference, operands, repeats))
    if "dask" in systems:
        rows.append(run_system("dask", dask_matmul(a, b), reference, operands, repeats))
    if "scipy" in systems:
        rows.append(run_system("scipy", lambda: a @ b, reference, operands, repeats))
    if "graphblas" in systems:
        ga, gb = to_graphblas(a), to_graphblas(b)
        rows.append(run_system("graphblas", lambda: ga.mxm(gb).new(), reference, operands,
                               repeats))
    return rows


def to_graphblas(value):
    """A scipy sparse matrix or a dense ndarray as a graphblas ``Matrix`` (made before
    timing: a graphblas user keeps the library's own objects)."""
    if sp.issparse(value):
        return graphblas.io.from_scipy_sparse(value)
    return graphblas.Matrix.from_dense(value)


def spmm(n: int, density: float, cols: int, systems, repeats: int) -> list[dict]:
    a = tc.sparse.random((n, n), density, seed=1, format="csr")
    d = np.random.default_rng(3).random((n, cols))
    operands = nbytes(a) + d.nbytes
    reference = a @ d
    rows = matrix_product_rows(a, d, reference, operands, systems, repeats)
    if "pydata" in systems:
        x = sparse.COO.from_scipy_sparse(a)
        rows.append(run_system("pydata", lambda: x @ d, reference, operands, repeats))
    return rows


def nell2_like(nnz: int, seed: int = 0, skew: float = 2.0, shape=NELL2):
    """A NELL-2-shaped tensor with about ``nnz`` non-zeros, each coordinate drawn as
    ``floor(size · u^skew)`` (a power law: low indices hold most non-zeros, as in the real
    tensor), repeated coordinates summed."""
    rng = np.random.default_rng(seed)
    coords = np.stack([np.minimum((size * rng.random(nnz) ** skew).astype(np.int64), size - 1)
                       for size in shape])
    return tc.sparse.from_coo(coords, rng.random(nnz), shape)


def numpy_gather(x, mode: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The MTTKRP of the 3-d pydata tensor ``x`` in ``mode`` with the factors of the other
    two modes, as a numpy user writes it: ``np.add.at(out, i, x[:, None] * B[j] * C[k])``."""
    coords = x.coords
    others = [d for d in range(3) if d != mode]
    out = np.zeros((x.shape[mode], left.shape[1]))
    np.add.at(out, coords[mode], x.data[:, None] * left[coords[others[0]]]
              * right[coords[others[1]]])
    return out


def mttkrp(nnz: int, rank: int, systems, repeats: int, pydata_max: int, tns: bool) -> tuple[
        list[dict], dict]:
    started = time.perf_counter()
    x = nell2_like(nnz)
    made = time.perf_counter() - started
    rng = np.random.default_rng(4)
    b, c = rng.random((NELL2[1], rank)), rng.random((NELL2[2], rank))
    operands = nbytes(x) + b.nbytes + c.nbytes

    def gather():
        return numpy_gather(x, 0, b, c)

    reference = gather()
    rows = []
    kept = tc.asarray(x)
    rows += tensorc_rows(systems, lambda backend: lambda: tc.einsum(
        "ijk,jf,kf->if", kept, b, c, backend=backend), reference, operands, repeats)
    if "dask" in systems:
        rows.append(run_system("dask", dask_mttkrp(x, b, c), reference, operands, repeats))
    if "numpy-gather" in systems:
        rows.append(run_system("numpy-gather", gather, reference, operands, repeats))
    if "pydata" in systems and x.nnz <= pydata_max:
        rows.append(run_system("pydata", lambda: sparse.einsum("ijk,jf,kf->if", x, b, c),
                               reference, operands, max(1, min(repeats, 2))))
    info = {"nnz": int(x.nnz), "generate_s": made}
    plan = tc.plan("ijk,jf,kf->if", x, b, c)
    operand = plan.stats["operands"][0]
    info["blocks"] = {key: operand[key] for key in ("grid", "nonempty_blocks", "block_nnz_min",
                                                    "block_nnz_mean", "block_nnz_max")}
    if tns:
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "nell2.tns"
            started = time.perf_counter()
            tc.sparse.save_tns(path, x)
            info["tns_save_s"] = time.perf_counter() - started
            info["tns_bytes"] = path.stat().st_size
            started = time.perf_counter()
            back = tc.sparse.load_tns(path, shape=NELL2)
            info["tns_load_s"] = time.perf_counter() - started
            info["tns_round_trip"] = bool(np.array_equal(back.coords, x.coords)
                                          and np.array_equal(back.data, x.data))
    return rows, info


def cp_als(mttkrp, factors, iterations: int):
    """``iterations`` sweeps of CP-ALS: each factor from the MTTKRP ``mttkrp(mode, *others)``
    of the tensor with the other two and an R × R solve (numpy); the factors after."""
    a, b, c = factors
    for _ in range(iterations):
        a = np.linalg.solve((b.T @ b) * (c.T @ c), np.asarray(mttkrp(0, b, c)).T).T
        b = np.linalg.solve((a.T @ a) * (c.T @ c), np.asarray(mttkrp(1, a, c)).T).T
        c = np.linalg.solve((a.T @ a) * (b.T @ b), np.asarray(mttkrp(2, a, b)).T).T
    return np.concatenate([a, b, c])


CP_SUBSCRIPTS = ("ijk,jr,kr->ir", "ijk,ir,kr->jr", "ijk,ir,jr->kr")


def cp_als_rows(nnz: int, rank: int, iterations: int, systems, repeats: int,
                shape=NELL2) -> list[dict]:
    """CP-ALS on the NELL-2-like tensor: its three MTTKRPs a sweep by ``tc.einsum`` or the
    numpy gather, the rest numpy; the stacked factors checked against the gather's."""
    x = nell2_like(nnz, shape=shape)
    rng = np.random.default_rng(7)
    start = [rng.random((size, rank)) for size in shape]
    operands = nbytes(x) + sum(f.nbytes for f in start)

    def gather(mode, left, right):
        return numpy_gather(x, mode, left, right)

    def tensorc(mode, left, right):
        return tc.einsum(CP_SUBSCRIPTS[mode], x, left, right, backend="local")

    reference = cp_als(gather, start, iterations)
    rows = []
    if "tensorc" in systems:
        rows.append(run_system("tensorc", lambda: cp_als(tensorc, start, iterations),
                               reference, operands, repeats))
    if "numpy-gather" in systems:
        rows.append(run_system("numpy-gather", lambda: cp_als(gather, start, iterations),
                               reference, operands, repeats))
    if "tensorly" in systems:
        try:
            rows.append(run_system("tensorly", tensorly_cp(x, start, iterations), reference,
                                   operands, repeats))
        except MemoryError as err:  # its MTTKRP forms the dense Khatri-Rao product
            print(f"   tensorly: not run here: {str(err).splitlines()[0]}")
    return rows


def tensorly_cp(x, start, iterations: int):
    """tensorly's sparse CP-ALS (``tensorly.contrib.sparse.decomposition.parafac`` on a
    pydata ``COO``, its numpy backend) from the same starting factors, no tolerance stop:
    the same updates as :func:`cp_als`."""
    import tensorly
    from tensorly.contrib.sparse.decomposition import parafac

    tensorly.set_backend("numpy")
    rank = start[0].shape[1]

    def run():
        init = tensorly.cp_tensor.CPTensor((np.ones(rank), [f.copy() for f in start]))
        found = parafac(x, rank=rank, n_iter_max=iterations, init=init, tol=0)
        return np.concatenate(found.factors)

    return run


def power_law_graph(nodes: int, edges: int, seed: int = 0, skew: float = 2.0):
    """The row-normalised transition matrix of a directed graph (CSR, as scipy's product
    leaves it: not in canonical form) whose edges start anywhere and end by a power law
    (``floor(nodes · u^skew)``: a few nodes receive most links, as on the web), repeated
    edges counted once; and the mask of its dangling nodes (no out-links)."""
    rng = np.random.default_rng(seed)
    sources = rng.integers(0, nodes, edges)
    targets = np.minimum((nodes * rng.random(edges) ** skew).astype(np.int64), nodes - 1)
    adjacency = sp.csr_array((np.ones(edges), (sources, targets)), shape=(nodes, nodes))
    adjacency.data[:] = 1.0  # repeated edges were summed: once each
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    dangling = degree == 0
    scale = sp.diags_array(1.0 / np.where(dangling, 1.0, degree))
    return (scale @ adjacency).tocsr(), dangling


def pagerank(step, dangling: np.ndarray, iterations: int, damping: float = 0.85) -> np.ndarray:
    """``iterations`` power-iteration steps of PageRank, ``step(r)`` being ``Mᵀ r``; a
    dangling node's rank is spread evenly over all nodes."""
    n = dangling.shape[0]
    rank = np.full(n, 1.0 / n)
    for _ in range(iterations):
        spread = rank[dangling].sum() / n
        rank = damping * (np.asarray(step(rank)) + spread) + (1.0 - damping) / n
    return rank


def pagerank_rows(nodes: int, edges: int, iterations: int, systems, repeats: int) -> list[dict]:
    """PageRank by ``tc.einsum("ij,i->j", M, r)`` (locally and on Ray; ``M`` made a
    ``tc.asarray`` tensor once, before timing, as an iterative solver would), scipy's
    ``M.T @ r`` and pydata's ``COO`` matmul, each step's vector back in numpy."""
    m, dangling = power_law_graph(nodes, edges)
    operands = nbytes(m)
    reference = pagerank(lambda r: m.T @ r, dangling, iterations)
    rows = []
    kept = tc.asarray(m)  # planned once; on Ray its pieces stay on the nodes
    rows += tensorc_rows(systems, lambda backend: lambda: pagerank(
        lambda r: tc.einsum("ij,i->j", kept, r, backend=backend), dangling, iterations),
        reference, operands, repeats)
    if "dask" in systems:
        rows.append(run_system("dask", lambda: pagerank(dask_vector_step(m), dangling,
                                                        iterations),
                               reference, operands, repeats))
    if "scipy" in systems:
        rows.append(run_system("scipy", lambda: pagerank(lambda r: m.T @ r, dangling,
                                                         iterations),
                               reference, operands, repeats))
    if "pydata" in systems:
        transposed = sparse.COO.from_scipy_sparse(m).T
        rows.append(run_system("pydata", lambda: pagerank(lambda r: transposed @ r, dangling,
                                                          iterations),
                               reference, operands, repeats))
    if "graphblas" in systems:
        gm = to_graphblas(m)
        rows.append(run_system("graphblas", lambda: pagerank(
            lambda r: gm.T.mxv(graphblas.Vector.from_dense(r)).new().to_dense(fill_value=0),
            dangling, iterations), reference, operands, repeats))
    return rows


def tensorc_rows(systems, call_on, reference, operands: int, repeats: int) -> list[dict]:
    """The tensorc arms in ``systems``: ``call_on(backend)`` (a timed callable) run in this
    process (``"local"``) and on the session's Ray nodes (``None``)."""
    return [run_system(system, call_on(backend), reference, operands, repeats)
            for system, backend in (("tensorc", "local"), ("tensorc-ray", None))
            if system in systems]


def walk_starts(seeds: int, nodes: int) -> sp.csr_array:
    """The sparse chain's first ``R``: one 1 in each of ``seeds`` rows (CSR, ``seeds`` ×
    ``nodes``), at start nodes spread over the graph; each product ``R ← R · A`` then counts
    the walks one step longer."""
    return sp.csr_array((np.ones(seeds), (np.arange(seeds), np.arange(seeds) * (nodes // seeds))),
                        shape=(seeds, nodes))


def _repeat(step, value, times: int):
    for _ in range(times):
        value = step(value)
    return value


def chain_rows(nodes: int, edges: int, seeds: int, hops: int, systems, repeats: int
               ) -> list[dict]:
    """The sparse chain (``hops`` products from :func:`walk_starts`) on the PageRank graph's
    adjacency: tensorc (``tc.einsum`` of the last product and a ``tc.asarray`` of ``A``,
    locally and on Ray), scipy, pydata (``GCXS``) and graphblas, each product's result the
    next one's left operand."""
    m, _ = power_law_graph(nodes, edges)
    a = sp.csr_array((np.ones(m.nnz), m.indices, m.indptr), shape=m.shape)  # the adjacency
    start = walk_starts(seeds, nodes)
    operands = nbytes(a) + nbytes(start)
    reference = _repeat(lambda r: r @ a, start, hops)
    rows = []
    kept = tc.asarray(a)
    rows += tensorc_rows(systems, lambda backend: lambda: _repeat(
        lambda r: tc.einsum("ij,jk->ik", r, kept, backend=backend), start, hops),
        reference, operands, repeats)
    if "scipy" in systems:
        rows.append(run_system("scipy", lambda: _repeat(lambda r: r @ a, start, hops),
                               reference, operands, repeats))
    if "dask" in systems:
        rows.append(run_system("dask", dask_chain(a, start, hops), reference, operands,
                               repeats))
    if "pydata" in systems:
        ga, gs = sparse.GCXS.from_scipy_sparse(a), sparse.GCXS.from_scipy_sparse(start)
        rows.append(run_system("pydata", lambda: _repeat(lambda r: r @ ga, gs, hops),
                               reference, operands, repeats))
    if "graphblas" in systems:
        ga, gs = to_graphblas(a), to_graphblas(start)
        rows.append(run_system("graphblas", lambda: _repeat(lambda r: r.mxm(ga).new(), gs,
                                                            hops),
                               reference, operands, repeats))
    return rows


def ratings(users: int, items: int, density: float, seed: int = 7):
    """A ratings matrix (CSR, values 1-5) with ``density`` of its entries rated, items drawn
    by a power law (a few items hold most ratings)."""
    rng = np.random.default_rng(seed)
    count = int(users * items * density)
    rows = rng.integers(0, users, count)
    cols = np.minimum((items * rng.random(count) ** 1.5).astype(np.int64), items - 1)
    r = sp.csr_array((rng.integers(1, 6, count).astype(np.float64), (rows, cols)),
                     shape=(users, items))
    r.sum_duplicates()
    r.data[:] = np.minimum(r.data, 5.0)
    return r


def funk_svd(sampled, sparse_minus, times, steps: int, u, v, rate=1e-3, decay=0.05):
    """``steps`` gradient steps of Funk's SVD: ``E = R - (U Vᵀ at R's entries)``,
    ``U += rate (E V - decay U)``, ``V += rate (Eᵀ U - decay V)``; ``sampled(U, V)`` is
    the sampled product, ``sparse_minus(P)`` is ``R - P`` and ``times(E, U, V)`` the two
    products ``(E V, Eᵀ U)``, in the system's own types."""
    for _ in range(steps):
        error = sparse_minus(sampled(u, v))
        grad_u, grad_v = times(error, u, v)
        u, v = u + rate * (np.asarray(grad_u) - decay * u), v + rate * (
            np.asarray(grad_v) - decay * v)
    return np.concatenate([u, v])


def funk_rows(users: int, items: int, density: float, rank: int, steps: int, systems,
              repeats: int) -> list[dict]:
    """Funk-SVD gradient steps: tensorc (the sampled product ``tc.einsum("ij,if,jf->ij")``
    on R's pattern, ``R - P`` of sparse tensors, the two products by ``tc.einsum``), scipy
    with a numpy gather for the sampled product, and graphblas (a masked ``mxm``)."""
    r = ratings(users, items, density)
    rng = np.random.default_rng(8)
    u0, v0 = rng.random((users, rank)) * 0.1, rng.random((items, rank)) * 0.1
    operands = nbytes(r) + u0.nbytes + v0.nbytes
    rows_of = np.repeat(np.arange(users), np.diff(r.indptr))

    def scipy_sampled(u, v):
        return sp.csr_array((np.einsum("ij,ij->i", u[rows_of], v[r.indices]), r.indices,
                             r.indptr), shape=r.shape)

    def scipy_times(e, u, v):
        return e @ v, e.T @ u

    reference = funk_svd(scipy_sampled, lambda p: r - p, scipy_times, steps, u0, v0)
    rows = []
    if "tensorc" in systems or "tensorc-ray" in systems:
        kept = tc.asarray(r)
        pattern = kept != 0

        def tensorc_steps(backend):
            def times(e, u, v):
                return (tc.einsum("ij,jf->if", e, v, backend=backend),
                        tc.einsum("ij,if->jf", e, u, backend=backend))

            return lambda: funk_svd(
                lambda u, v: tc.einsum("ij,if,jf->ij", pattern, u, v, backend=backend),
                lambda p: kept - p, times, steps, u0, v0)

        rows += tensorc_rows(systems, tensorc_steps, reference, operands, repeats)
    if "scipy" in systems:
        rows.append(run_system("scipy", lambda: funk_svd(
            scipy_sampled, lambda p: r - p, scipy_times, steps, u0, v0),
            reference, operands, repeats))
    if "graphblas" in systems:
        gr = to_graphblas(r)

        def gb_sampled(u, v):
            out = graphblas.Matrix(float, *r.shape)
            out(gr.S) << to_graphblas(u).mxm(to_graphblas(v).T)
            return out

        def gb_times(e, u, v):
            return (e.mxm(to_graphblas(v)).new().to_dense(fill_value=0),
                    e.T.mxm(to_graphblas(u)).new().to_dense(fill_value=0))

        rows.append(run_system("graphblas", lambda: funk_svd(
            gb_sampled, lambda p: (gr - p).new(), gb_times, steps, u0, v0),
            reference, operands, repeats))
    if "dask" in systems:
        rows.append(run_system("dask", dask_funk(r, u0, v0, steps), reference, operands,
                               repeats))
    return rows


def _sampled_block(ratings, u, v):
    """The sampled product on one chunk of rows: ``U Vᵀ`` at the chunk's ratings (pydata
    ``COO``), by a numpy gather of the rows each rating meets."""
    rows, cols = ratings.coords
    return sparse.COO(ratings.coords, np.einsum("ij,ij->i", u[rows], v[cols]),
                      shape=ratings.shape)


def dask_funk(r, u0, v0, steps: int, rate=1e-3, decay=0.05):
    """Funk-SVD's steps on the Dask cluster: ``R`` as pydata ``COO`` chunks of rows cut in
    ``nodes`` (persisted on the workers first), ``U`` cut as ``R``'s rows, ``V`` one chunk;
    the sampled product by ``map_blocks`` (Dask has none), ``R - P``, ``E V`` and ``Eᵀ U``
    by dask.array; the steps built as one graph and computed once."""
    import dask.array as da

    nodes = _DASK["nodes"]
    client = dask_client(nodes)
    step = -(-r.shape[0] // nodes)
    ratings = client.persist(da.from_array(sparse.COO.from_scipy_sparse(r),
                                           chunks=(step, r.shape[1]), asarray=False))

    def run():
        u = da.from_array(u0, chunks=(step, u0.shape[1]))
        v = da.from_array(v0, chunks=v0.shape)
        for _ in range(steps):
            error = ratings - da.map_blocks(_sampled_block, ratings, u, v,
                                            dtype=u0.dtype, meta=sparse.COO.from_numpy(
                                                np.zeros((0, 0))))
            grad_u, grad_v = error @ v, error.T @ u
            u, v = u + rate * (grad_u - decay * u), v + rate * (grad_v - decay * v)
        return da.concatenate([u, v]).compute()

    return run


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="spgemm,spmm,mttkrp,pagerank,cpals,chain,funksvd")
    parser.add_argument("--n", default="10000,20000", help="matrix sizes (comma list)")
    parser.add_argument("--density", type=float, default=0.01)
    parser.add_argument("--cols", type=int, default=64)
    parser.add_argument("--nnz", type=int, default=2_000_000)
    parser.add_argument("--large", action="store_true", help="MTTKRP with 10M non-zeros")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    parser.add_argument("--nodes", type=int, default=4,
                        help="Ray nodes (tensorc-ray) and Dask workers (dask)")
    parser.add_argument("--pydata-max-n", type=int, default=10_000)
    parser.add_argument("--pydata-max-nnz", type=int, default=5_000_000)
    parser.add_argument("--tns", action="store_true", help="time a .tns round trip")
    parser.add_argument("--graph-nodes", type=int, default=100_000, help="PageRank's nodes")
    parser.add_argument("--edges", type=int, default=1_000_000, help="PageRank's edges")
    parser.add_argument("--iterations", type=int, default=20, help="PageRank's steps")
    parser.add_argument("--sweeps", type=int, default=5, help="CP-ALS sweeps")
    parser.add_argument("--cp-shape", default=",".join(map(str, NELL2)),
                        help="CP-ALS's tensor shape (NELL-2's by default)")
    parser.add_argument("--seeds", type=int, default=64, help="the chain's start nodes")
    parser.add_argument("--hops", type=int, default=10, help="the chain's products")
    parser.add_argument("--users", type=int, default=20_000, help="Funk-SVD's rows")
    parser.add_argument("--items", type=int, default=10_000, help="Funk-SVD's columns")
    parser.add_argument("--funk-rank", type=int, default=64, help="Funk-SVD's rank")
    parser.add_argument("--steps", type=int, default=5, help="Funk-SVD's gradient steps")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    systems = set(args.systems.split(","))
    unknown = systems - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; choose from {', '.join(SYSTEMS)}")
    if "graphblas" in systems:
        if graphblas is None:
            parser.error("the graphblas system needs python-graphblas (pip install "
                         "python-graphblas)")
        graphblas.init("suitesparse", blocking=True)
    _DASK["nodes"] = args.nodes
    if "tensorc-ray" in systems:
        tc.init(num_nodes=args.nodes)
    cases = args.cases.split(",")
    sizes = [int(n) for n in args.n.split(",")]
    results: dict = {"environment": environment(), "cases": {}}
    if "spgemm" in cases:
        for n in sizes:
            rows = spgemm(n, args.density, systems, args.repeats, args.pydata_max_n)
            report(f"spgemm-{n} (ij,jk->ik, {args.density:.0%} non-zeros)", rows)
            results["cases"][f"spgemm-{n}"] = rows
    if "spmm" in cases:
        for n in sizes:
            rows = spmm(n, args.density, args.cols, systems, args.repeats)
            report(f"spmm-{n} (ij,jk->ik, dense {n} x {args.cols})", rows)
            results["cases"][f"spmm-{n}"] = rows
    if "mttkrp" in cases:
        nnz = 10_000_000 if args.large else args.nnz
        rows, info = mttkrp(nnz, args.rank, systems, args.repeats, args.pydata_max_nnz,
                            args.tns)
        report(f"mttkrp-nell2 (ijk,jf,kf->if, {' x '.join(map(str, NELL2))}, "
               f"{info['nnz']:,} non-zeros, rank {args.rank})", rows)
        print(f"   tensor: {info}")
        results["cases"]["mttkrp-nell2"] = rows
        results["mttkrp_tensor"] = info
    if "cpals" in cases:
        nnz = 10_000_000 if args.large else args.nnz
        shape = tuple(int(d) for d in args.cp_shape.split(","))
        rows = cp_als_rows(nnz, args.rank, args.sweeps, systems, args.repeats, shape)
        report(f"cpals ({args.sweeps} CP-ALS sweeps, rank {args.rank}, a "
               f"{' x '.join(map(str, shape))} NELL-2-like tensor of {nnz:,} drawn "
               f"non-zeros)", rows)
        results["cases"]["cpals"] = rows
    if "pagerank" in cases:
        rows = pagerank_rows(args.graph_nodes, args.edges, args.iterations, systems,
                             args.repeats)
        report(f"pagerank ({args.iterations} steps of ij,i->j, {args.graph_nodes:,} nodes, "
               f"{args.edges:,} power-law edges)", rows)
        results["cases"]["pagerank"] = rows
    if "chain" in cases:
        rows = chain_rows(args.graph_nodes, args.edges, args.seeds, args.hops, systems,
                          args.repeats)
        report(f"chain ({args.hops} products R <- R A, {args.seeds} start rows, the "
               f"PageRank graph's adjacency)", rows)
        results["cases"]["chain"] = rows
    if "funksvd" in cases:
        rows = funk_rows(args.users, args.items, args.density, args.funk_rank, args.steps,
                         systems, args.repeats)
        report(f"funksvd ({args.steps} gradient steps, {args.users:,} x {args.items:,} at "
               f"{args.density:.0%}, rank {args.funk_rank})", rows)
        results["cases"]["funksvd"] = rows
    if args.json:
        write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
