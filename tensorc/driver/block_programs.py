"""A compiled block program: plan its block counts, run it, explain it.

Contract: :class:`BlockProgram` wraps a checked
:class:`~tensorc.ir.block_program.BlockProgramIR` and its source. ``run(**inputs_and_counts)``
takes every input by name (ndarrays, evaluated ``tc.Array`` values given as
:class:`~tensorc.runtime.ray.arrays.DistributedArray`, or anything ``np.asarray`` accepts) and
optionally a block count by name (``NB=4``); counts not given are chosen by
:func:`~tensorc.planning.block_counts.choose_counts` (cached per shapes, cluster and, on
Ray, the session's memory budget of a node, which the choice and the placer keep where they
can), and with them how the run places its tasks when the session's scheduler is ``lshs`` and the
call names none (LSHS, or owner-computes where the count choice found that faster). It
builds the program's symbolic DAG for those counts and hands it to an executor
(:meth:`~tensorc.runtime.executor.Executor.run_block_program`): the Ray session's when an
input is a ``DistributedArray``, the local one otherwise, and returns the outputs by
name, each passed through the ``wrap`` function given at construction (``tc.compile`` wraps
them as ``tc.Array`` where ``Program.run`` would). ``tc.last_stats()`` describes the run.

``explain(stage, **shapes_and_counts)`` renders ``program`` (the statements), ``dag`` (every
task with its parents, for small sizes), ``plan`` (the chosen counts and every candidate's
simulated figures) or all of them.

Errors the dependence analysis finds at run time (a block read before any write, a block
outside an input) are reported like compile errors: code, file:line:col and a caret.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from tensorc import session
from tensorc.codegen.block_dag import BlockDag, BlockDagError
from tensorc.codegen.block_layout import environment
from tensorc.driver.stats import record
from tensorc.errors import PlanError
from tensorc.frontend.block_check import parse_block_program
from tensorc.frontend.diagnostics import Diagnostics, Source, make_error
from tensorc.ir.block_program import BlockProgramIR, block_label, format_statements
from tensorc.placement.recipes import DriverData
from tensorc.planning.block_counts import CountChoice, choose_counts
from tensorc.planning.cost import machine
from tensorc.planning.lower_bound import cholesky_lower_bound
from tensorc.programs import path as shipped_path
from tensorc.programs import source as shipped_source
from tensorc.runtime.executor import Executor
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.task_pool import available_cores

STAGES = ("program", "plan", "dag")
DAG_LISTING_LIMIT = 200
_PLANS: OrderedDict = OrderedDict()
_DAGS: OrderedDict = OrderedDict()
_DAGS_LOCK = threading.Lock()
DAGS_KEPT = 4
"""The task DAGs of the last few (program, block counts) run, kept with the parents and
children they found (at most :data:`~tensorc.codegen.block_dag.MEMO_TASKS` of each, about
13 MB a DAG at most), so a program run again at the same counts is not searched again."""
_SHIPPED: dict[str, tuple[BlockProgramIR, Source]] = {}


def _identity(value):
    return value


class BlockProgram:
    """A checked block program (see the module docstring)."""

    def __init__(self, program: BlockProgramIR, source: Source, wrap=_identity,
                 workers: int | None = None) -> None:
        self.program = program
        self.source = source
        self.wrap = wrap
        self.workers = workers

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(self.program.inputs())

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(self.program.outputs())

    def declared_shape(self, name: str, sizes: dict[str, int]) -> tuple[int, ...]:
        """The shape of tensor ``name`` for the given sizes."""
        dims = self.program.tensors[name].dims or ()
        missing = [d for d in dims if d not in sizes]
        if missing:
            raise PlanError(f"give the size(s) {', '.join(missing)} (e.g. --set {missing[0]}=8)")
        return tuple(int(sizes[d]) for d in dims)

    # -- planning -------------------------------------------------------------------------

    def choose(self, shapes: dict[str, tuple[int, ...]], fixed: dict[str, int], *,
               executor: Executor, preferred: dict[str, int] | None = None,
               nodes: int | None = None, stored: dict | None = None,
               memory_cap: int | None = None) -> CountChoice:
        """The block counts for these input shapes on ``executor`` (cached); ``nodes``
        plans for that many simulated nodes instead; ``stored``: how the inputs already on
        the cluster are cut and placed (:func:`stored_layouts`); ``memory_cap``: a node's
        budget, simulated as the placer keeps it."""
        if nodes is not None and nodes > 1:
            cores = machine().cores_per_node
        elif not executor.in_process:
            nodes, cores = executor.nodes, machine().cores_per_node
        else:
            nodes, cores = 1, available_cores()
        key = (id(self.program), tuple(sorted(shapes.items())), tuple(sorted(fixed.items())),
               tuple(sorted((preferred or {}).items())), tuple(sorted((stored or {}).items())),
               nodes, cores, machine(), memory_cap)
        found = _PLANS.get(key)
        if found is None or found[0] is not self.program:
            choice = choose_counts(self.program, shapes, nodes=nodes, cores=cores, fixed=fixed,
                                   preferred=preferred, stored=stored, memory_cap=memory_cap)
            found = (self.program, choice)
            _PLANS[key] = found
            while len(_PLANS) > 64:
                _PLANS.popitem(last=False)
        _PLANS.move_to_end(key)
        return found[1]

    def _dag(self, env: dict[str, int]) -> BlockDag:
        key = (id(self.program), tuple(sorted(env.items())))
        with _DAGS_LOCK:
            found = _DAGS.get(key)
            if found is None or found.program is not self.program:
                found = _DAGS[key] = BlockDag(self.program, env)
                while len(_DAGS) > DAGS_KEPT:
                    _DAGS.popitem(last=False)
            _DAGS.move_to_end(key)
        return found

    def _split(self, given: dict) -> tuple[dict, dict]:
        counts = {k: v for k, v in given.items() if k in self.program.blocks}
        inputs = {k: v for k, v in given.items() if k not in self.program.blocks}
        unknown = sorted(set(inputs) - set(self.program.inputs()))
        if unknown:
            names = ", ".join(self.program.inputs() + list(self.program.blocks))
            raise PlanError(f"{self.program.name}: unknown argument(s) {', '.join(unknown)}; "
                            f"the program takes {names}")
        missing = [n for n in self.program.inputs() if n not in inputs]
        if missing:
            raise PlanError(f"{self.program.name}: missing input(s) {', '.join(missing)}")
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise PlanError(f"block count {name} must be an integer, got {value!r}")
        return inputs, counts

    # -- running --------------------------------------------------------------------------

    def run(self, *, scheduler: str | None = None, workers: int | None = None, dtype=None,
            **inputs_and_counts) -> dict:
        """Run on the inputs; outputs by name (module docstring), in ``dtype`` when given
        (else as declared)."""
        started = time.perf_counter()
        inputs, fixed = self._split(inputs_and_counts)
        values = {name: _operand(v) for name, v in inputs.items()}
        distributed = any(isinstance(v, (DistributedArray, DriverData))
                          for v in values.values())
        executor = session.executor_for(None if distributed else "local", list(values.values()))
        shapes = {name: tuple(v.shape) for name, v in values.items()}
        preferred = _preferred(self.program, values)
        budget = _node_budget(executor)
        try:
            choice = self.choose(shapes, fixed, executor=executor, preferred=preferred,
                                 stored=stored_layouts(values), memory_cap=budget)
            planned = time.perf_counter()
            env, bounds = environment(self.program, shapes, choice.counts)
            dag = self._dag(env)
            placement = scheduler or session.current().scheduler
            if scheduler is None and placement == "lshs":  # the count choice may have found
                placement = choice.policy  # owner-computes faster; a call's lshs is lshs
            outputs, stats = executor.run_block_program(
                self.program, dag, values, bounds, scheduler=placement,
                workers=workers or self.workers, dtype=dtype, memory_limit=budget)
            stats["block_counts"] = {c: env[c] for c in self.program.blocks}
        except BlockDagError as err:
            raise self._diagnostic(err) from None
        stats["plan_seconds"] = planned - started
        stats["seconds"] = time.perf_counter() - started
        record(stats)
        if not executor.in_process:
            origin = _origin(self.program.name, stats["block_counts"], values)
            for value in outputs.values():
                if isinstance(value, DistributedArray):
                    value.origin = origin
        return {name: self.wrap(value) for name, value in outputs.items()}

    def _diagnostic(self, err: BlockDagError) -> Exception:
        diags = Diagnostics(self.source)
        diags.error(err.code, err.message, err.span)
        return make_error(diags.items)

    # -- explaining -----------------------------------------------------------------------

    def explain(self, stage: str | None = None, *, nodes: int | None = None,
                **shapes_and_counts) -> str:
        """The program, its plan and (for small sizes) its task DAG; module docstring.
        ``nodes`` plans for that many nodes without a cluster."""
        if stage is not None and stage not in STAGES:
            raise PlanError(f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}")
        try:
            return self._explain(stage, nodes, shapes_and_counts)
        except BlockDagError as err:
            raise self._diagnostic(err) from None

    def _explain(self, stage: str | None, nodes: int | None, shapes_and_counts: dict) -> str:
        parts = []
        if stage in (None, "program"):
            parts.append(f"== block program {self.program.name}\n"
                         + format_statements(self.program.body))
        if stage in ("plan", "dag") or (stage is None and shapes_and_counts):
            shapes, fixed = self._shapes(shapes_and_counts)
            executor = session.current().executor
            cap = None if nodes is not None else _node_budget(executor)  # as run() plans
            choice = self.choose(shapes, fixed, executor=executor, nodes=nodes, memory_cap=cap)
            env, _ = environment(self.program, shapes, choice.counts)
            if stage in (None, "plan"):
                parts.append(f"== plan: {choice.headline()}\n{choice.describe()}"
                             + self._bound_text(choice, shapes, nodes))
            if stage in (None, "dag"):
                parts.append("== dag\n" + self._dag_text(env))
        return "\n\n".join(parts)

    def _bound_text(self, choice: CountChoice, shapes: dict, nodes: int | None) -> str:
        """The communication lower bound, for the programs one is known for."""
        known = _shipped_program("cholesky")
        if (self.program.body, self.program.tensors) != (known.body, known.tensors):
            return ""
        nodes = nodes or session.current().executor.nodes
        bound = cholesky_lower_bound(shapes["A"][0], nodes, 8)
        busiest = choice.chosen().busiest_in_bytes or 0
        return (f"\ncommunication lower bound (Cholesky, {nodes} node(s)): the busiest node "
                f"receives at least {bound / 1e6:.1f} MB; this plan's busiest receives "
                f"{busiest / 1e6:.1f} MB (simulated)")

    def _shapes(self, given: dict) -> tuple[dict, dict]:
        fixed = {k: v for k, v in given.items() if k in self.program.blocks}
        sizes = {k: v for k, v in given.items() if k not in self.program.blocks}
        shapes = {}
        for name in self.program.inputs():
            if name in sizes and not isinstance(sizes[name], int):
                shapes[name] = tuple(np.shape(sizes[name]))
            else:
                dims = self.program.tensors[name].dims
                missing = [d for d in dims if d not in sizes]
                if missing:
                    raise PlanError(f"explain needs the size(s) {', '.join(missing)} "
                                    f"(e.g. explain('plan', {missing[0]}=1024))")
                shapes[name] = tuple(int(sizes[d]) for d in dims)
        return shapes, fixed

    def _dag_text(self, env: dict) -> str:
        dag = BlockDag(self.program, env)
        lines = []
        for count, task in enumerate(dag.walk()):
            if count == DAG_LISTING_LIMIT:
                lines.append(f"... (listing stops at {DAG_LISTING_LIMIT} tasks)")
                break
            site = dag.sites[task[0]]
            where = ", ".join(f"{v}={x}" for v, x in zip(site.loop_vars, task[1], strict=True))
            reads = []
            for e in dag.parents(task):
                block = block_label(e.read.tensor, e.coords)
                origin = "input" if e.task is None else _task_name(dag, e.task)
                reads.append(f"{block} <- {origin}")
            lines.append(f"{_task_name(dag, task)} [{where}] {site.assign}"
                         + (f"   reads {'; '.join(reads)}" if reads else ""))
        return "\n".join(lines)


def _task_name(dag: BlockDag, task) -> str:
    return f"s{task[0]}({', '.join(map(str, task[1]))})"


def _operand(value):
    if isinstance(value, (DistributedArray, DriverData)):
        return value
    unwrap = getattr(value, "value", None)
    if callable(unwrap) and hasattr(value, "__array_namespace__"):
        value = unwrap()
        if isinstance(value, DistributedArray):
            return value
    return np.asarray(value)


def _origin(name: str, counts: dict[str, int], values: dict) -> str:
    """What an output of a run on the cluster says of where it came from (``explain()``):
    the program, its block counts, and the inputs it read from the driver's data."""
    counts_text = ", ".join(f"{c}={n}" for c, n in counts.items())
    driver = [input_name for input_name, value in values.items()
              if isinstance(value, DriverData)]
    return (f"computed by block program {Path(name).name} ({counts_text})"
            + (f"; {', '.join(driver)} read from the driver's data (each block it read sent "
               "from the driver's node)" if driver else ""))


def _preferred(program: BlockProgramIR, values: dict) -> dict[str, int]:
    """Counts matching how distributed inputs are already cut (no re-blocking needed), or
    how driver data not made yet asked to be cut (its recipe's blocking)."""
    preferred: dict[str, int] = {}
    for name, value in values.items():
        dims = program.tensors[name].dims
        if isinstance(value, DriverData) and value.grid is not None and \
                len(value.grid) == len(dims):
            grids = value.grid  # a derived array has none, or not its shape's
        elif isinstance(value, DistributedArray):
            grids = value.grid
        else:
            continue
        for dim, grid in zip(dims, grids, strict=True):
            for count, size in program.blocks.items():
                if size == dim:
                    preferred.setdefault(count, grid)
    return preferred


def stored_layouts(values: dict) -> dict:
    """How the inputs already on the cluster are cut and placed: ``{name: (bounds,
    ((block, node), ...))}`` (what the count choice simulates reading them from)."""
    return {name: (value.layout.bounds,
                   tuple(sorted((c, n or 0) for c, n in value.layout.nodes.items())))
            for name, value in values.items() if isinstance(value, DistributedArray)}


def compile_block_program(source: Source, wrap=_identity,
                          workers: int | None = None) -> BlockProgram:
    """Parse and check a block program (raises the front end's diagnostics)."""
    return BlockProgram(parse_block_program(source), source, wrap, workers)


def _shipped(name: str) -> tuple[BlockProgramIR, Source]:
    if name not in _SHIPPED:
        source = Source(shipped_path(name), shipped_source(name))
        _SHIPPED[name] = (parse_block_program(source), source)
    return _SHIPPED[name]


def _shipped_program(name: str) -> BlockProgramIR:
    return _shipped(name)[0]


def shipped(name: str, wrap=_identity) -> BlockProgram:
    """One of the block programs tensorc ships (read and parsed once per process)."""
    return BlockProgram(*_shipped(name), wrap)


def _node_budget(executor) -> int | None:
    """The memory budget of one node a run on ``executor`` plans and places within: the
    session's on a cluster (its ``memory_limit``, else its default), none in this process
    (one process's block programs do not plan to it)."""
    return None if executor.in_process else session.current().memory_budget()[0]
