"""Running a block program: its DAG expanded from the ready tasks, locally or on Ray.

Contract: :func:`run_block_program(program, inputs, counts, backend=..., ...)` runs a
:class:`~tensorc.ir.block_program.LoopProgram` on ``inputs`` (ndarrays, or on Ray also
:class:`~tensorc.array.BlockArray`), each dimension of a size ``N`` with a block count ``NB``
cut into ``NB`` near-equal blocks (block ``k`` spans ``k*N//NB`` to ``(k+1)*N//NB``), and
returns ``(outputs by name, stats)``: ndarrays locally, ``BlockArray``s on Ray (blocks stay
on the nodes that computed them). Output blocks no statement writes are zeros.

The DAG is never built whole (:class:`~tensorc.codegen.block_dag.BlockDag` answers parents
and children symbolically):

- **local**: the ready tasks run on a thread pool (``workers`` threads, BLAS limited so the
  machine's cores are not oversubscribed); when a task finishes, its children are found, each
  new child learns how many parent tasks it waits for, and a child whose parents are all done
  becomes ready. A block version is dropped once every child has read it, unless it is the
  final version of an output block;
- **ray**: a task is submitted as soon as its parent tasks have been *submitted* (Ray
  waits for the data), placed on a node by :class:`~tensorc.placement.block_placement.
  BlockPlacer` (LSHS simulating time and bytes, or round-robin); at most ``window`` tasks are
  in flight, so the driver holds the frontier, not the graph. Blocks are Ray objects, so a
  lost block is recomputed from lineage.

Statistics (``tc.last_stats()`` after a run): ``tasks``, ``tasks_per_node``,
``inter_node_bytes`` (modelled copies, Ray), ``max_node_memory_bytes``, ``block_counts``,
``scheduler``, ``run_seconds``, ``backend``, ``peak_frontier`` (the most tasks the driver knew of
at once).
"""

from __future__ import annotations

import math
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np

from tensorc.array import BlockArray
from tensorc.codegen.block_dag import BlockDag
from tensorc.codegen.block_kernels import evaluate, result_flops, result_shapes
from tensorc.codegen.block_layout import block_slices, environment, grid_coords, tensor_bounds
from tensorc.errors import ExecutionError, ShapeError, TensorcError
from tensorc.frontend.tc_check import DTYPES
from tensorc.ir.block_program import LoopProgram, block_label
from tensorc.placement.block_placement import BlockPlacer
from tensorc.placement.blocks import Blocks
from tensorc.planning.cost import machine
from tensorc.runtime import ray_tasks
from tensorc.runtime.local import _BlasLimit, available_cores
from tensorc.runtime.ray_executor import submit

WINDOW = 256


def numpy_dtype(spec_dtype: str) -> np.dtype:
    return np.dtype(DTYPES.get(spec_dtype, spec_dtype))


class _Frontier:
    """The tasks the driver knows of: how many parent tasks each still waits for."""

    def __init__(self, dag: BlockDag) -> None:
        self.dag = dag
        self.waiting: dict = {}
        self.edges: dict = {}
        self.peak = 0

    def start(self) -> list:
        ready = []
        for task in self.dag.roots():
            self.edges[task] = self.dag.parents(task)
            ready.append(task)
        return ready

    def finished(self, children: list) -> list:
        """``children`` (of one task, deduplicated) each lose one parent; returns the ready."""
        ready = []
        for child in children:
            left = self.waiting.get(child)
            if left is None:
                edges = self.dag.parents(child)
                self.edges[child] = edges
                left = len({e.task for e in edges if e.task is not None})
            left -= 1
            if left:
                self.waiting[child] = left
            else:
                self.waiting.pop(child, None)
                ready.append(child)
        self.peak = max(self.peak, len(self.waiting) + len(ready))
        return ready


def _check_complete(dag: BlockDag, frontier: _Frontier, ran: int) -> None:
    """Every task of the program ran. A task whose reads are all of blocks no earlier
    statement writes is nobody's child and no root: counting the iteration space (a walk,
    no analysis) finds that, and the first such read is reported where it is written."""
    total = sum(1 for _ in dag.walk())
    if total == ran and not frontier.waiting:
        return
    for task in dag.walk():
        dag.parents(task)  # raises E-unwritten at the offending read
    raise ExecutionError(f"{total - ran} of the block program's {total} tasks never became "
                         "ready")


def _children(dag: BlockDag, task) -> tuple[list, list]:
    per_result = dag.children(task)
    distinct = []
    for readers, _ in per_result:
        for child in readers:
            if child not in distinct:
                distinct.append(child)
    return per_result, distinct


def _output_arrays(program, bounds, finals, fill) -> dict:
    out = {}
    for name in program.outputs():
        edges = tensor_bounds(program, name, bounds)
        out[name] = fill(name, edges, {c: finals.get((name, c)) for c in grid_coords(edges)})
    return out


def run_local(program: LoopProgram, dag: BlockDag, arrays: dict[str, np.ndarray], bounds,
              workers: int | None = None, dtype=None) -> tuple[dict[str, np.ndarray], dict]:
    """Run on this process (see the module docstring)."""
    started = time.perf_counter()
    cores = available_cores()
    workers = max(1, workers or cores)
    edges_of = {name: tensor_bounds(program, name, bounds) for name in program.inputs()}
    frontier = _Frontier(dag)
    versions: dict = {}
    uses: dict = {}
    finals: dict = {}
    tasks = 0

    def run(task, edges):
        values = {}
        for edge in edges:
            if edge.task is None:
                values[edge.read] = arrays[edge.read.tensor][
                    block_slices(edges_of[edge.read.tensor], edge.coords)]
            else:
                values[edge.read] = versions[(edge.task, edge.result)]
        return evaluate(dag.sites[task[0]].assign.value, values)

    def complete(task, results) -> list:
        for key in {(e.task, e.result) for e in frontier.edges.pop(task) if e.task is not None}:
            if key in uses:
                uses[key] -= 1
                if not uses[key]:
                    del uses[key]
                    versions.pop(key, None)
        per_result, distinct = _children(dag, task)
        written = dag.written(task)
        for j, ((readers, final), value) in enumerate(zip(per_result, results, strict=True)):
            tensor, coords = written[j]
            if final and program.tensors[tensor].kind == "output":
                finals[(tensor, coords)] = value
            if readers:
                versions[(task, j)] = value
                uses[(task, j)] = len(readers)
        return frontier.finished(distinct)

    ready = deque(frontier.start())
    with _BlasLimit(max(1, cores // workers)):
        if workers == 1:
            while ready:
                task = ready.popleft()
                ready.extend(complete(task, run(task, frontier.edges[task])))
                tasks += 1
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="tensorc-block") as pool:
                running = {}
                while ready or running:
                    while ready and len(running) < workers * 2:
                        task = ready.popleft()
                        running[pool.submit(run, task, frontier.edges[task])] = task
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        task = running.pop(future)
                        ready.extend(complete(task, future.result()))
                        tasks += 1

    _check_complete(dag, frontier, tasks)

    def fill(name, edges, blocks):
        shape = tuple(e[-1] for e in edges)
        out = np.zeros(shape, dtype=_output_dtype(program, name, dtype))
        for coords, value in blocks.items():
            if value is not None:
                _place(out, name, edges, coords, value)
        return out

    outputs = _output_arrays(program, bounds, finals, fill)
    stats = {"backend": "local", "tasks": tasks, "workers": workers,
             "blas_threads": max(1, cores // workers), "peak_frontier": frontier.peak,
             "run_seconds": time.perf_counter() - started, "inter_node_bytes": 0}
    return outputs, stats


def _check_block_shape(name: str, coords, shape, region) -> None:
    want = tuple(s.stop - s.start for s in region)
    if tuple(shape) != want:
        raise ShapeError(f"block {block_label(name, coords)} has shape {tuple(shape)}, but "
                         f"{name}'s block there is {want}")


def _output_dtype(program: LoopProgram, name: str, dtype) -> np.dtype:
    return np.dtype(dtype) if dtype is not None else numpy_dtype(program.tensors[name].dtype)


def _place(out: np.ndarray, name: str, edges, coords, value: np.ndarray) -> None:
    region = block_slices(edges, coords)
    _check_block_shape(name, coords, value.shape, region)
    out[region] = value


def _flops_and_shapes(dag: BlockDag, task, shapes_of_edges):
    expr = dag.sites[task[0]].assign.value
    shapes = result_shapes(expr, shapes_of_edges)
    return shapes, result_flops(expr, shapes_of_edges)


def run_ray(program: LoopProgram, dag: BlockDag, inputs: dict, bounds, cluster,
            scheduler: str = "lshs", window: int = WINDOW, dtype=None) -> tuple[dict, dict]:
    """Run on the Ray cluster (see the module docstring)."""
    started = time.perf_counter()
    figures = machine()
    nodes = cluster.nodes
    placer = BlockPlacer(nodes, figures.cores_per_node, scheduler,
                         flops_per_core=figures.blas_flops_per_core,
                         bytes_per_second=figures.network_bytes_per_second,
                         task_seconds=figures.task_seconds)
    source = _RayInputs(program, inputs, bounds, cluster, placer, dag)
    frontier = _Frontier(dag)
    refs: dict = {}
    ids: dict = {}
    shapes: dict = {}
    uses: dict = {}
    finals: dict = {}
    in_flight: deque = deque()
    tasks = 0

    def submit_task(task) -> list:
        nonlocal tasks
        edges = frontier.edges.pop(task)
        args, reads, inputs_ids, edge_shapes = [], [], [], {}
        for edge in edges:
            if edge.task is None:
                ref, block, shape = source.block(edge.read.tensor, edge.coords)
            else:
                key = (edge.task, edge.result)
                ref, block, shape = refs[key], ids[key], shapes[key]
            args.append(ref)
            reads.append(edge.read)
            inputs_ids.append(block)
            edge_shapes[edge.read] = shape
        for key in {(e.task, e.result) for e in edges if e.task is not None}:
            uses[key] -= 1
            if not uses[key]:
                del uses[key], refs[key]
        inputs_ids = list(dict.fromkeys(inputs_ids))  # one version read twice is one input
        out_shapes, flops = _flops_and_shapes(dag, task, edge_shapes)
        per_result, distinct = _children(dag, task)
        written = dag.written(task)
        itemsize = np.dtype(dtype or np.float64).itemsize
        out_ids = []
        for j, ((readers, final), shape) in enumerate(zip(per_result, out_shapes, strict=True)):
            keep = final and program.tensors[written[j][0]].kind == "output"
            out_ids.append(placer.add_version(math.prod(shape) * itemsize, len(readers),
                                              retained=keep))
        node = placer.place(inputs_ids, sum(placer.state.size[b] for b in out_ids), flops)
        placer.run(out_ids, inputs_ids, node, flops)
        results = len(out_shapes)
        made = submit(cluster, "block", node, dag.sites[task[0]].assign.value, tuple(reads),
                      *args, returns=results + 1)
        in_flight.append(made[-1])
        for j, ((readers, final), shape) in enumerate(zip(per_result, out_shapes, strict=True)):
            key = (task, j)
            tensor, coords = written[j]
            if final and program.tensors[tensor].kind == "output":
                finals[(tensor, coords)] = (made[j], node, shape)
            if readers:
                refs[key], ids[key], shapes[key] = made[j], out_ids[j], shape
                uses[key] = len(readers)
        tasks += 1
        return frontier.finished(distinct)

    ready = deque(frontier.start())
    while ready:
        ready.extend(submit_task(ready.popleft()))
        while len(in_flight) > window:
            _wait(in_flight.popleft())
    _wait(list(in_flight))
    _check_complete(dag, frontier, tasks)

    def fill(name, edges, blocks):
        kind = _output_dtype(program, name, dtype)
        placed = Blocks(tuple(e[-1] for e in edges), kind, edges)
        for coords, found in blocks.items():
            region = block_slices(edges, coords)
            if found is None:
                want = tuple(s.stop - s.start for s in region)
                ref, _ = ray_tasks.remote("generate").options(
                    num_returns=2).remote("full", want, kind.str, (0,), 0)
                node = 0
            else:
                ref, node, shape = found
                _check_block_shape(name, coords, shape, region)
            placed.refs[coords] = ref
            placed.nodes[coords] = node
        return BlockArray(placed, tuple(min(g, nodes) for g in placed.grid))

    outputs = _output_arrays(program, bounds, finals, fill)
    stats = {"backend": "ray", "tasks": tasks, "scheduler": scheduler,
             "tasks_per_node": list(placer.tasks_per_node),
             "inter_node_bytes": placer.moved_bytes(),
             "max_node_memory_bytes": max(placer.state.peak),
             "peak_frontier": frontier.peak, "run_seconds": time.perf_counter() - started}
    return outputs, stats


def _wait(refs) -> None:
    """``ray.get`` that raises a task's own tensorc error (``LinAlgError`` from a kernel)
    rather than Ray's wrapper around it."""
    import ray

    try:
        ray.get(refs)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, TensorcError):
            raise cause from None
        raise


class _RayInputs:
    """The input blocks on Ray, cut to the program's bounds on first use."""

    def __init__(self, program, inputs, bounds, cluster, placer, dag) -> None:
        self.program, self.inputs, self.cluster, self.placer = program, inputs, cluster, placer
        self.edges = {name: tensor_bounds(program, name, bounds) for name in program.inputs()}
        self.made: dict = {}
        self.dag = dag

    def block(self, name: str, coords: tuple[int, ...]):
        key = (name, coords)
        if key not in self.made:
            self.made[key] = self._make(name, coords)
        return self.made[key]

    def _make(self, name, coords):
        import ray

        edges = self.edges[name]
        region = block_slices(edges, coords)
        shape = tuple(s.stop - s.start for s in region)
        value = self.inputs[name]
        uses = len(self.dag.input_readers(name, coords))
        nbytes = math.prod(shape) * value.dtype.itemsize
        if isinstance(value, np.ndarray):
            ref = ray.put(np.ascontiguousarray(value[region]))
            return ref, self.placer.add_version(nbytes, uses, node=0, retained=True), shape
        stored = value.blocks
        if stored.bounds == edges:
            node = stored.nodes.get(coords, 0) or 0
            block = self.placer.add_version(nbytes, uses, node=node, retained=True)
            return stored.refs[coords], block, shape
        pieces = stored.pieces(region)
        layout = tuple((into, out_of) for _, into, out_of in pieces)
        node = stored.first_node(region)
        ref, _ = submit(self.cluster, "piece", node, shape, layout,
                        *(stored.refs[c] for c, _, _ in pieces))
        return ref, self.placer.add_version(nbytes, uses, node=node, retained=True), shape


def run_block_program(program: LoopProgram, inputs: dict, counts: dict[str, int], *,
                      backend: str = "local", cluster=None, scheduler: str = "lshs",
                      workers: int | None = None, dtype=None) -> tuple[dict, dict]:
    """Run ``program`` (module docstring); returns the outputs and the run's statistics
    (the caller records them). Outputs are ``dtype`` when given, else their declared
    dtype."""
    shapes = {name: tuple(value.shape) for name, value in inputs.items()}
    env, bounds = environment(program, shapes, counts)
    dag = BlockDag(program, env)
    if backend == "ray":
        outputs, stats = run_ray(program, dag, inputs, bounds, cluster, scheduler, dtype=dtype)
    else:
        arrays = {name: np.asarray(value) for name, value in inputs.items()}
        outputs, stats = run_local(program, dag, arrays, bounds, workers, dtype)
    stats["block_counts"] = {c: env[c] for c in program.blocks}
    return outputs, stats
