"""``tc.compile`` and the :class:`Program` it returns: a checked ``.tc`` program you can run.

Contract:

- ``compile(path_or_source, *, grid=None, block_shape=None, workers=None, optimize="auto")``
  parses and checks the program (every error in one :class:`~tensorc.errors.TcError`) and
  returns a :class:`Program`. Plan options are keyed by index name and apply to every
  statement that uses the index; they override the ``@block``/``@grid`` hints.
- ``Program.run(**inputs)`` binds inputs (numpy arrays, cast to their declared dtype), params
  (overriding declared values) and sizes (from input shapes, declared values or keywords),
  unrolls and lowers the program for those values (cached), plans each statement (cached),
  and hands the statements to the session's executor
  (:meth:`~tensorc.runtime.executor.Executor.run_statements`), which runs them in SSA order,
  each result feeding later statements. Returns ``{output name: ndarray}``;
  ``tc.last_stats()`` then reports the whole run (:func:`tensorc.driver.stats.program_stats`).
- A program with inputs declared ``sparse`` (:attr:`Program.sparse_inputs`) takes scipy /
  pydata sparse arrays for them (a dense array there, or a sparse one for a dense input, is
  ``E-input``) and runs from this process, statements reading sparse values as sparse
  einsums on the session's executor (on Ray, each on the nodes), the others in this
  process (:mod:`tensorc.driver.sparse_statements`; those that are not products
  are ``E-unsupported`` at compile time).
- ``Program.explain(stage=None, **sizes_and_params)`` prints one stage: ``ast``, ``ir``,
  ``plan`` (the default), ``tasks``, ``schedule`` or ``dot`` (Graphviz text of the task graphs).
- A *block program* (a file with a ``blocks`` declaration or block accesses ``X{i, j}``)
  compiles to a :class:`~tensorc.driver.block_programs.BlockProgram` instead:
  ``run(**inputs, NB=...)``
  and ``explain(stage, **sizes_and_counts)`` with the stages ``program``, ``plan`` and
  ``dag``; outputs computed on Ray come back as ``tc.Array``. Of the plan options only
  ``workers`` applies to it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from tensorc import session, storage
from tensorc.driver import stats as run_stats
from tensorc.driver.block_programs import BlockProgram, compile_block_program
from tensorc.driver.sparse_statements import run_sparse_program, sparse_steps
from tensorc.driver.statements import Options, StatementRunner
from tensorc.errors import TcParseError
from tensorc.frontend import tc_ast as ast
from tensorc.frontend.block_check import is_block_program
from tensorc.frontend.diagnostics import Diagnostics, Source, Span, did_you_mean
from tensorc.frontend.tc_check import DTYPES, Checked, check
from tensorc.frontend.tc_lower import Statement, Unrolled, lower_program
from tensorc.frontend.tc_parse import parse
from tensorc.ir.printer import format_program
from tensorc.lazy.array_object import Array as LazyArray
from tensorc.lazy.graph import leaf
from tensorc.planning.options import check_plan_options
from tensorc.planning.plan import Plan
from tensorc.planning.program_layouts import LayoutPlan
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.sparse.construct import check_bounds, checked_coords
from tensorc.sparse.formats import held, is_sparse
from tensorc.stored import FanOut, StoredArray

STAGES = ("ast", "ir", "plan", "tasks", "schedule", "dot")
TASK_LINES = 400


def _read(path_or_source: str | os.PathLike) -> Source:
    if isinstance(path_or_source, os.PathLike) or (
        isinstance(path_or_source, str)
        and "\n" not in path_or_source
        and path_or_source.endswith(".tc")
    ):
        path = Path(path_or_source)
        try:
            return Source(str(path_or_source), path.read_text())
        except OSError as err:
            raise TcParseError(f"error: cannot read {path}: {err.strerror}") from err
    if not isinstance(path_or_source, str):
        raise TcParseError(f"tc.compile takes a path or source text, got {type(path_or_source)}")
    return Source("<source>", path_or_source)


def compile(  # noqa: A001 - the public name is tc.compile
    path_or_source: str | os.PathLike,
    *,
    grid: dict[str, int] | None = None,
    block_shape: dict[str, int] | None = None,
    workers: int | None = None,
    optimize: object = "auto",
    nodes: int | None = None,
    planner: str = "auto",
    memory_limit=None,
) -> Program | BlockProgram:
    """Parse and check a ``.tc`` program (a path ending in ``.tc``, or the source text).

    ``nodes`` plans the whole program for that many nodes (on Ray it defaults to the
    session's node count) with ``planner`` (see :func:`tensorc.plan`); ``memory_limit``
    (bytes or ``"2GB"``) is the budget of one worker for every statement (default: the
    session's); inputs given as stored arrays (``tc.from_zarr``, ``tc.load``) stream."""
    checked_options = check_plan_options({"nodes": nodes, "planner": planner,
                                          "workers": workers, "memory_limit": memory_limit})
    source = _read(path_or_source)
    if _is_block_source(source):
        if grid or block_shape or optimize != "auto":
            raise TcParseError(f"{source.name}: grid=, block_shape= and optimize= plan element "
                               "programs; a block program takes its block counts by name in "
                               "run(), e.g. run(A=a, NB=8)")
        return compile_block_program(source, _wrap_distributed, workers=workers)
    checked = check(source)
    options = Options(
        tuple(sorted((grid or {}).items())),
        tuple(sorted((block_shape or {}).items())),
        workers,
        optimize,
        nodes,
        planner,
        checked_options["memory_limit"],
    )
    program = Program(checked, options)
    if program.sparse_inputs:
        program.check_sparse_statements()
    return program


def _is_block_source(source: Source) -> bool:
    try:
        return is_block_program(parse(source))
    except TcParseError:
        return False  # the element checker reports the syntax errors


def _wrap_distributed(value):
    return LazyArray(leaf(value)) if isinstance(value, DistributedArray) else value


class Program:
    """A compiled ``.tc`` program; see the module docstring."""

    def __init__(self, checked: Checked, options: Options | None = None) -> None:
        self.checked = checked
        self.options = options or Options()
        self._unrolled: dict[tuple, Unrolled] = {}
        self.runner = StatementRunner(self.options)
        self.sparse_inputs = frozenset(
            n for n, d in checked.tensors.items() if d.kind == "input" and d.sparse is not None)
        """Inputs declared ``sparse``: the program then runs in this process, statements
        reading sparse values as sparse einsums (:mod:`tensorc.driver.sparse_statements`)."""

    @property
    def source(self) -> Source:
        return self.checked.source

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(n for n, d in self.checked.tensors.items() if d.kind == "input")

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(n for n, d in self.checked.tensors.items() if d.kind == "output")

    def declared_shape(self, name: str, sizes: dict[str, int]) -> tuple[int, ...]:
        dims = self.checked.tensors[name].dims
        return tuple(d.value if isinstance(d, ast.Num) else sizes[d.name] for d in dims)

    # -- binding -------------------------------------------------------------------------
    def bind(self, values: dict, need_inputs: bool = True):
        """``(arrays, sizes, params)`` for ``values``; every problem reported at once."""
        checked = self.checked
        diags = Diagnostics(checked.source)
        first = checked.module.decls[0].span if checked.module.decls else Span(1, 1, 1, 2)
        known = set(checked.tensors) | set(checked.params) | set(checked.sizes)
        for name in values:
            if name not in known or (name in checked.tensors and name not in self.input_names):
                hint = did_you_mean(name, self.input_names + tuple(checked.params)
                                    + tuple(checked.sizes)) or (
                    "inputs: " + ", ".join(self.input_names))
                diags.error("E-input", f"no input, param or size named '{name}'", first, hint)
        sizes: dict[str, int] = {}
        origin: dict[str, str] = {}
        for name, decl in checked.sizes.items():
            if name in values:
                value = values[name]
                if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                    diags.error("E-input", f"size {name} must be a non-negative integer, got "
                                f"{value!r}", decl.span)
                    continue
                if decl.value is not None and decl.value != value:
                    diags.error("E-input", f"size {name} is declared {decl.value} but {value} "
                                "was passed", decl.span, "sizes with a value are fixed")
                sizes[name], origin[name] = int(value), f"the argument {name}={value}"
            elif decl.value is not None:
                sizes[name], origin[name] = decl.value, "its declaration"
        arrays = {}
        for name in self.input_names:
            decl = checked.tensors[name]
            if name not in values:
                if need_inputs:
                    diags.error("E-input", f"missing input '{name}'", decl.span,
                                f"pass {name}=<array> to run")
                continue
            array = self._array(name, values[name], decl, diags, self.checked.source)
            if array is None and (decl.sparse is not None or is_sparse(values[name])):
                array = _shaped(values[name])  # refused, but its shape still binds sizes
                if array is None:
                    continue
            elif array is None:
                continue
            if len(array.shape) != len(decl.dims):
                diags.error("E-input", f"input '{name}' has shape {tuple(array.shape)} but is "
                            f"declared with rank {len(decl.dims)}", decl.span)
                continue
            for axis, (dim, extent) in enumerate(zip(decl.dims, array.shape, strict=True)):
                self._bind_dim(name, axis, dim, int(extent), decl, sizes, origin, diags)
            if not isinstance(array, _Shape):
                arrays[name] = array
        for name, decl in checked.sizes.items():
            if name not in sizes:
                diags.error("E-input", f"size {name} has no value", decl.span,
                            f"give it a value (size {name} = ...), pass {name}=..., or bind "
                            "it with an input's shape")
        params = {}
        for name, decl in checked.params.items():
            value = values.get(name, decl.value)
            if value is None:
                diags.error("E-input", f"param '{name}' has no value", decl.span,
                            f"pass {name}=... to run")
                continue
            params[name] = self._param(name, value, decl, diags)
        diags.raise_if_any()
        return arrays, sizes, params

    @staticmethod
    def _array(name: str, value, decl: ast.TensorDecl, diags: Diagnostics, source=None):
        if decl.sparse is not None or is_sparse(value):
            return _sparse_array(name, value, decl, diags, source)
        distributed = isinstance(value, StoredArray) or (  # stays where it is
            not isinstance(value, np.ndarray) and hasattr(value, "shape")
            and hasattr(value, "dtype") and hasattr(value, "block_shape"))
        if not distributed:
            try:
                value = np.asarray(value)
            except Exception:  # noqa: BLE001 - reported as a user error
                diags.error("E-input", f"input '{name}' is not an array", decl.span)
                return None
        want = _declared_dtype(name, value, decl, diags)
        if want is None:
            return None
        if distributed or value.dtype == want:
            return value
        return value.astype(want)

    @staticmethod
    def _bind_dim(name, axis, dim, extent, decl, sizes, origin, diags) -> None:
        where = f"dimension {axis} of input '{name}'"
        if isinstance(dim, ast.Num):
            if dim.value != extent:
                diags.error("E-input", f"input '{name}' has {extent} at dimension {axis} but "
                            f"is declared {dim.value}", decl.span)
            return
        symbol = dim.name
        if symbol not in sizes:
            sizes[symbol], origin[symbol] = extent, where
            return
        if sizes[symbol] == extent:
            return
        code = "E-input" if origin[symbol] in ("its declaration",) else "E-size"
        diags.error(code, f"size {symbol} is {sizes[symbol]} from {origin[symbol]} but "
                    f"{extent} from {where}", decl.span,
                    "every use of one size symbol must have the same extent")

    @staticmethod
    def _param(name: str, value, decl: ast.ParamDecl, diags: Diagnostics):
        array = np.asarray(value)
        if array.ndim != 0 or array.dtype.kind not in "biuf":
            diags.error("E-input", f"param '{name}' must be a scalar number, got {value!r}",
                        decl.span)
            return 0
        if decl.dtype == "bool":
            return bool(array)
        if decl.dtype in ("i32", "i64"):
            if array.dtype.kind == "f" and float(array) != int(array):
                diags.error("E-input", f"param '{name}' is {decl.dtype} but got {value!r}",
                            decl.span)
            return int(array)
        return float(array)

    # -- compilation for bound values ----------------------------------------------------
    def unrolled(self, sizes: dict[str, int], params: dict[str, object]) -> Unrolled:
        key = (tuple(sorted(sizes.items())), tuple(sorted(params.items())))
        result = self._unrolled.get(key)
        if result is None:
            result = lower_program(self.checked, sizes, params)
            self._unrolled[key] = result
        return result

    def plan(self, statement: Statement, nodes: int = 1, placed=None) -> Plan:
        """The (cached) plan of one statement's IR for ``nodes`` nodes, its operands at
        positions in ``placed`` already laid out there."""
        return self.runner.plan(statement, nodes, placed)

    def plan_layouts(self, unrolled: Unrolled, nodes: int, initial=None) -> LayoutPlan:
        """The whole-program plan for ``nodes`` nodes (cached): layouts flow between the
        statements (:mod:`tensorc.planning.program_layouts`); ``initial`` gives the layouts of
        inputs already on the cluster."""
        return self.runner.plan_layouts(unrolled, nodes, initial)

    # -- running -------------------------------------------------------------------------
    def run(self, **inputs) -> dict[str, np.ndarray]:
        """Run the program on ``inputs`` (arrays, params, sizes by name); outputs by name.
        ``tc.last_stats()`` then describes the whole run (every statement)."""
        started = time.perf_counter()
        lazy = any(isinstance(v, LazyArray) for v in inputs.values())
        if self.sparse_inputs:
            return self._run_sparse(inputs, started)
        arrays, unrolled, executor = self._bound(inputs)
        values, ran = self.runner.run(unrolled, arrays, executor)
        keep = executor.in_process or any(isinstance(v, DistributedArray) for v in arrays.values())
        outputs = {}
        for name, label in unrolled.outputs:
            value = values[label]
            distributed = isinstance(value, DistributedArray)
            outputs[name] = value if keep or not distributed else value.numpy()
            if lazy or isinstance(outputs[name], DistributedArray):
                outputs[name] = LazyArray(leaf(outputs[name]))
        self._record(ran, executor, started)
        return outputs

    def _run_sparse(self, inputs: dict, started: float) -> dict:
        """A program with sparse inputs: run in this process, on any session (see
        :mod:`tensorc.driver.sparse_statements`); outputs are numpy or sparse arrays."""
        inputs = {k: v.value() if isinstance(v, LazyArray) else v for k, v in inputs.items()}
        arrays, sizes, params = self.bind(inputs)
        placed = [n for n, v in arrays.items() if isinstance(v, (DistributedArray, StoredArray))]
        if placed:
            diags = Diagnostics(self.source)
            for name in placed:
                diags.error("E-input", f"input '{name}' is a distributed or stored array, but "
                            "a program with sparse inputs runs in this process",
                            self.checked.tensors[name].span,
                            f"pass a numpy array ({name}.numpy() gathers a tc.Array)")
            diags.raise_if_any()
        unrolled = self.unrolled(sizes, params)
        steps = sparse_steps(unrolled, set(self.sparse_inputs), self.source)
        values, ran = run_sparse_program(self.runner, unrolled, arrays, steps)
        backend = session.executor_for(None, ()).backend  # where the sparse einsums ran
        calls = sum(stats["node_calls"] if "node_calls" in stats else stats.get(
            "remote_calls", 0) for _, stats in ran)  # a merged group's calls counted once
        run_stats.record(run_stats.program_stats(
            ran, backend=backend, seconds=time.perf_counter() - started, remote_calls=calls))
        return {name: values[label] for name, label in unrolled.outputs}

    def check_sparse_statements(self) -> None:
        """Every statement that would read a sparse value and is not a product of tensors,
        as ``E-unsupported`` errors, before any size is known: the program is lowered with
        stand-in sizes (the statements' forms do not depend on them)."""
        sizes = {n: d.value if d.value is not None else 2 for n, d in self.checked.sizes.items()}
        params = {n: d.value if d.value is not None else (
            True if d.dtype == "bool" else 1) for n, d in self.checked.params.items()}
        sparse_steps(lower_program(self.checked, sizes, params), set(self.sparse_inputs),
                     self.source)

    def run_to_zarr(self, path, **inputs) -> str:
        """Run the program and write every output as a zarr array named after it inside a
        new zarr group at ``path`` (what ``tensorc run --output out.zarr`` does). Each
        output's blocks are written as they complete and never held whole, so outputs may
        be larger than memory (on Ray each node writes the blocks it computed); the group
        appears at ``path`` only when every output is in (a failed run leaves nothing
        there). Returns the path."""
        started = time.perf_counter()
        if self.sparse_inputs:
            raise TcParseError(f"{self.source.name}: run_to_zarr of a program with sparse "
                               f"inputs ({', '.join(sorted(self.sparse_inputs))}) is not "
                               "implemented; use run()")
        arrays, unrolled, executor = self._bound(inputs)
        shapes = {st.label: (st.shape, st.dtype) for st in unrolled.statements}
        specs = {name: shapes.get(label) or (arrays[label].shape, arrays[label].dtype)
                 for name, label in unrolled.outputs}
        with storage.streamed_zarr_group(path, specs) as sinks:
            names: dict[str, list] = {}
            for name, label in unrolled.outputs:
                names.setdefault(label, []).append(sinks[name])
            by_label = {label: FanOut(group) if len(group) > 1 else group[0]
                        for label, group in names.items()}
            _, ran = self.runner.run(unrolled, arrays, executor, by_label)
        self._record(ran, executor, started)
        return os.fspath(path)

    def _bound(self, inputs: dict):
        """``(arrays by label, unrolled statements, executor)`` of a run on ``inputs``."""
        inputs = {k: v.value() if isinstance(v, LazyArray) else v for k, v in inputs.items()}
        arrays, sizes, params = self.bind(inputs)
        unrolled = self.unrolled(sizes, params)
        return arrays, unrolled, session.executor_for(None, list(arrays.values()))

    def _record(self, ran: list, executor, started: float) -> None:
        run_stats.record(run_stats.program_stats(
            ran, backend=executor.backend, seconds=time.perf_counter() - started,
            remote_calls=self.runner.node_calls))

    # -- explaining ----------------------------------------------------------------------
    def explain(self, stage: str | None = None, **sizes_and_params) -> str:
        """Deterministic text of one compilation stage (default ``plan``)."""
        stage = stage or "plan"
        if stage not in STAGES:
            raise TcParseError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        if stage == "ast":
            return ast.format_ast(self.checked.module)
        _, sizes, params = self.bind(sizes_and_params, need_inputs=False)
        unrolled = self.unrolled(sizes, params)
        if self.sparse_inputs:
            return _explain_sparse(self, unrolled, stage)
        return _EXPLAIN[stage](self, unrolled)


class _Shape:
    """The shape of an input refused for its kind (dense for sparse, or sparse for dense),
    so it still binds its sizes and no second error follows from the first."""

    def __init__(self, shape) -> None:
        self.shape = tuple(int(d) for d in shape)


def _shaped(value) -> _Shape | None:
    try:
        return _Shape(np.shape(value) if not hasattr(value, "shape") else value.shape)
    except (TypeError, ValueError):
        return None


def _sparse_array(name: str, value, decl: ast.TensorDecl, diags: Diagnostics, source):
    """A value for an input declared sparse, or a sparse value for any input: a scipy or
    pydata sparse array for a ``sparse`` input (never a dense one: tensorc does not
    sparsify), with coordinates of one integer dtype inside its shape; refused for a dense
    input (tensorc does not densify). A ``SparseTensor`` (``tc.asarray``) is checked as the
    array it holds and passed on as itself when its dtype is the declared one (its plans
    and, on Ray, its pieces on the nodes are then reused by later runs)."""
    given = value
    value = held(value)
    declared = f"'{source.line(decl.span.line).strip()}'" if source is not None else "sparse"
    kind = f"{type(value).__module__.split('.')[0]}.{type(value).__name__}"
    if decl.sparse is None:
        diags.error("E-input", f"input '{name}' is a sparse {kind} but is declared dense",
                    decl.span, f"declare it sparse ('input {name} : ... sparse') to compute "
                    "on its non-zeros, or densify it yourself (tensorc never densifies)")
        return None
    if not is_sparse(value):
        diags.error("E-input", f"input '{name}' is declared sparse ({declared}) but a dense "
                    f"{kind} was passed", decl.span,
                    "pass a scipy.sparse or pydata sparse array (scipy.sparse.csr_array(a), "
                    "sparse.COO.from_numpy(a), tc.sparse.from_coo); tensorc never sparsifies "
                    "a dense array")
        return None
    want = _declared_dtype(name, value, decl, diags)
    if want is None:
        return None
    problem = _coordinate_problem(value)
    if problem is not None:
        diags.error("E-input", f"sparse input '{name}': {problem}", decl.span,
                    "build it with tc.sparse.from_coo, which checks its coordinates")
        return None
    if value.dtype != want:
        return value.astype(want)
    return given  # a SparseTensor as itself


def _declared_dtype(name: str, value, decl: ast.TensorDecl, diags: Diagnostics):
    """The dtype ``decl`` declares, or ``None`` (an ``E-input`` error reported) when
    ``value``'s dtype does not cast to it safely (or within its kind)."""
    want = np.dtype(DTYPES[decl.dtype])
    have = np.dtype(value.dtype)
    if not np.can_cast(have, want, "same_kind" if want.kind == have.kind else "safe"):
        diags.error("E-input", f"input '{name}' has dtype {have} but is declared "
                    f"{decl.dtype} ({want})", decl.span,
                    f"pass an array that casts safely to {want}")
        return None
    return want


def _coordinate_problem(value) -> str | None:
    """What is wrong with a sparse array's stored coordinates (out of bounds, negative,
    mixed index dtypes), or ``None``: the formats that store coordinates as given."""
    shape = tuple(int(d) for d in value.shape)
    fmt = getattr(value, "format", None)
    try:
        if fmt in ("csr", "csc") and len(shape) == 2:
            minor = np.asarray(value.indices)
            extent = shape[1] if fmt == "csr" else shape[0]
            bad = (minor < 0) | (minor >= extent)
            if bad.any():
                entry = int(np.argmax(bad))
                word = "column" if fmt == "csr" else "row"
                return (f"{fmt.upper()} {word} index {int(minor[entry])} (stored entry "
                        f"{entry}) is out of bounds for shape {shape}")
            return None
        if fmt == "coo" and hasattr(value, "coords"):
            rows = [np.asarray(c) for c in value.coords]
            bounds = shape
        elif fmt == "coo" and hasattr(value, "row"):
            rows, bounds = [np.asarray(value.row), np.asarray(value.col)], shape
        else:
            return None
        coords = checked_coords(rows)
        if coords.size:
            check_bounds(coords, bounds)
    except (TypeError, ValueError) as err:  # the checkers' TypeCheckError / ShapeError
        return str(err)
    return None


def _header(unrolled: Unrolled) -> list[str]:
    outputs = ", ".join(f"{name} = {label}" for name, label in unrolled.outputs)
    return [f"{len(unrolled.statements)} statement(s) in SSA order; outputs: {outputs}"]


def _title(statement: Statement) -> str:
    return f"== {statement.label} (line {statement.line}): {statement.text}"


def _explain_ir(program: Program, unrolled: Unrolled) -> str:
    lines = _header(unrolled)
    for statement in unrolled.statements:
        lines.append(_title(statement))
        if statement.program is None:
            shape = ",".join(str(d) for d in statement.shape)
            lines.append(f"  fill {statement.fill!r} : {statement.dtype}[{shape}]")
            continue
        bound = ", ".join(f"in{k} = {label}" for k, label in enumerate(statement.operands))
        lines.append(f"  operands {bound}")
        lines.append(format_program(statement.program))
    return "\n".join(lines)


def _plans(program: Program, unrolled: Unrolled) -> tuple[LayoutPlan | None, dict[str, Plan]]:
    """The plan every explain stage shows: the whole-program plan for ``nodes`` nodes
    (when the program is compiled with ``nodes`` > 1), else each statement's local plan."""
    nodes = program.options.nodes or 1
    if nodes > 1:
        layouts = program.plan_layouts(unrolled, nodes)
        return layouts, dict(layouts.plans)
    return None, {st.label: program.plan(st) for st in unrolled.statements
                  if st.program is not None}


def _explain_plan(program: Program, unrolled: Unrolled) -> str:
    lines = _header(unrolled)
    layouts, plans = _plans(program, unrolled)
    if layouts is not None:
        lines.extend(layouts.describe())
    for statement in unrolled.statements:
        if statement.program is None:
            lines.append(_title(statement))
            lines.append(f"  fill {statement.fill!r} (no tasks)")
            continue
        lines.append(plans[statement.label].explain())
    return "\n".join(lines)


def _explain_tasks(program: Program, unrolled: Unrolled) -> str:
    lines = _header(unrolled)
    _, plans = _plans(program, unrolled)
    for statement in unrolled.statements:
        lines.append(_title(statement))
        if statement.program is None:
            lines.append(f"  fill {statement.fill!r} (no tasks)")
            continue
        lines.append(plans[statement.label].graph.format(limit=TASK_LINES))
    return "\n".join(lines)


def _explain_schedule(program: Program, unrolled: Unrolled) -> str:
    layouts, plans = _plans(program, unrolled)
    if layouts is not None:
        return _explain_distributed_schedule(unrolled, layouts)
    lines = ["local executor: tasks run in graph order", *_header(unrolled)]
    for statement in unrolled.statements:
        if statement.program is None:
            lines.append(f"  {statement.label}: fill on the host, no tasks")
            continue
        graph = plans[statement.label].graph
        counts = ", ".join(f"{k} {v}" for k, v in graph.counts().items())
        last = len(graph.tasks) - 1
        lines.append(f"  {statement.label}: t0..t{last} in order ({counts})")
    return "\n".join(lines)


def _explain_distributed_schedule(unrolled: Unrolled, layouts: LayoutPlan) -> str:
    """Each statement's modelled LSHS schedule on the program's nodes: per-node loads, then
    the node of every task."""
    lines = [f"LSHS on {layouts.nodes} nodes (the schedule the plan modelled; on Ray each "
             "task is offered its node)", *_header(unrolled)]
    for statement in unrolled.statements:
        lines.append(_title(statement))
        if statement.program is None:
            lines.append(f"  fill {statement.fill!r}: made on its nodes, no tasks")
            continue
        placed = layouts.plans[statement.label].distribution.modelled.schedule
        lines.append(placed.format(limit=TASK_LINES))
    return "\n".join(lines)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _explain_dot(program: Program, unrolled: Unrolled) -> str:
    layouts, plans = _plans(program, unrolled)
    lines = ["digraph tensorc {", "  rankdir=LR;", "  node [shape=box, fontsize=10];"]
    for name in program.input_names:
        lines.append(f"  {_quote(name)} [shape=ellipse];")
    for number, statement in enumerate(unrolled.statements):
        label = statement.label
        lines.append(f"  {_quote(label)} [shape=ellipse];")
        if statement.program is None:
            fill = _quote(f"fill {label}")
            lines.append(f"  {fill} [label={_quote(f'fill {statement.fill!r}')}];")
            lines.append(f"  {fill} -> {_quote(label)};")
            continue
        plan = plans[label]
        graph = plan.graph
        node_of = plan.distribution.modelled.schedule.node_of if layouts is not None else None
        lines.append(f"  subgraph cluster_{number} {{")
        lines.append(f"    label={_quote(f'{label}: {statement.text}')};")
        for index, task in enumerate(graph.tasks):
            stage = str(task.key[0]).rsplit("-", 1)[0]
            coords = ",".join(str(c) for c in task.key[1:])
            text = f"t{index} {task.kind} {stage} ({coords})"
            if node_of is not None:  # the node LSHS placed it on, one colour per node
                text += f" @node {node_of[index]}"
                style = f", style=filled, colorscheme=set312, fillcolor={node_of[index] % 12 + 1}"
            else:
                style = ""
            lines.append(f"    {_quote(f'{label}/t{index}')} [label={_quote(text)}{style}];")
        lines.append("  }")
        for index, task in enumerate(graph.tasks):
            node = _quote(f"{label}/t{index}")
            for source in task.inputs:
                lines.append(f"  {_quote(f'{label}/t{source}')} -> {node};")
            if task.source is not None:
                lines.append(f"  {_quote(statement.operands[task.source[0]])} -> {node};")
        for task_index, _ in graph.outputs:
            lines.append(f"  {_quote(f'{label}/t{task_index}')} -> {_quote(label)};")
    lines.append("}")
    return "\n".join(lines)


def _explain_sparse(program: Program, unrolled: Unrolled, stage: str) -> str:
    """A program with sparse inputs: the IR (each sparse statement naming its einsum) or,
    for the other stages, the dense statements' plans and tasks; a sparse statement is
    planned by its operands' non-zeros when it runs (``tc.last_stats()`` then shows it)."""
    steps = sparse_steps(unrolled, set(program.sparse_inputs), program.source)
    if stage == "dot":
        raise TcParseError("explain('dot') of a program with sparse inputs is not "
                           "implemented: its sparse statements are planned when they run")
    lines = _header(unrolled)
    lines.append(f"sparse inputs: {', '.join(sorted(program.sparse_inputs))}; the program "
                 "runs in this process")
    for statement in unrolled.statements:
        lines.append(_title(statement))
        step = steps.get(statement.label)
        if statement.program is None:
            shape = ",".join(str(d) for d in statement.shape)
            lines.append(f"  fill {statement.fill!r} : {statement.dtype}[{shape}]")
            continue
        if stage == "ir":
            bound = ", ".join(f"in{k} = {label}" for k, label in enumerate(statement.operands))
            lines.append(f"  operands {bound}")
            lines.append(f"  runs as {step.describe() if step else 'a dense statement'}")
            lines.append(format_program(statement.program))
        elif step is not None:
            lines.append(f"  {step.describe()}: planned by its operands' non-zeros when it "
                         "runs (see tc.last_stats())")
        elif stage == "tasks":
            lines.append(program.plan(statement).graph.format(limit=TASK_LINES))
        else:
            lines.append(program.plan(statement).explain())
    return "\n".join(lines)


_EXPLAIN = {
    "ir": _explain_ir,
    "plan": _explain_plan,
    "tasks": _explain_tasks,
    "schedule": _explain_schedule,
    "dot": _explain_dot,
}
