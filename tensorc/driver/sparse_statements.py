"""``.tc`` programs with sparse inputs: which statements run as sparse einsums, and running
them.

Contract:

- :func:`einsum_form` reads one statement's IR as an einsum when it is one: a product of
  tensor accesses (and numeric constants, ``-`` and division by a constant), summed over its
  right-only indices (``+=``, ``sum[..]`` starting from zero) or element-wise (``=``), with
  no earlier value merged in. Anything else (other operators or functions, ``max=``, a
  nested reduction, an ``op=`` into an earlier value) is not one (``None``).
- :func:`sparse_steps` walks an unrolled program in SSA order from the labels of its sparse
  inputs: a statement reading a sparse value must be an einsum and becomes a
  :class:`SparseStatement`; its result is sparse or dense by the sparse einsum rule
  (:func:`~tensorc.sparse.rules.sparse_result`), which decides what later statements read.
  A statement reading a sparse value that is not an einsum is an ``E-unsupported``
  diagnostic at its ``file:line:col``; every such statement is reported in one
  :class:`~tensorc.errors.TcError`. The walk needs only the declarations, so it runs before
  anything is computed.
- :func:`run_sparse_program` runs the statements in order: sparse steps through
  :func:`~tensorc.sparse.einsum.run_sparse_einsum` on the session's executor (on a Ray
  session each is one call per node, its result gathered here; consecutive sparse
  statements none of which reads another's result run together, one call per node for
  all of them; a ``SparseTensor`` input's pieces stay on the nodes between statements and
  runs), fills as fills, every other
  statement on the local executor as in a dense program. Results are cast to their
  target's dtype. Returns ``(values by output label, [(label, statistics)])``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from opt_einsum import get_symbol

from tensorc import session
from tensorc.frontend.diagnostics import Diagnostics, Source, Span
from tensorc.frontend.subscripts import EinsumSpec
from tensorc.frontend.tc_lower import Statement, Unrolled
from tensorc.ir.nodes import Arg, Const, Expr, Function, Join, Map, OpCall, ReduceByKey, Scan
from tensorc.runtime.statements import local_constant, output_labels
from tensorc.sparse.einsum import prepare_sparse_einsum, run_prepared, run_prepared_together
from tensorc.sparse.formats import is_sparse
from tensorc.sparse.rules import sparse_result


@dataclass(frozen=True)
class SparseStatement:
    """A statement run as a sparse einsum: ``subscripts`` over its operands in
    ``Statement.operands`` order (then ``scale`` as a scalar operand when it is not 1), and
    whether its result is sparse."""

    subscripts: str
    scale: int | float
    result_sparse: bool

    def describe(self) -> str:
        kind = "sparse" if self.result_sparse else "dense"
        return f"sparse einsum {self.subscripts!r} (result {kind})"


def _factors(fn: Expr, args: list[int]) -> int | float | None:
    """The constant coefficient of a product of ``Arg``s (their positions appended to
    ``args``), or ``None`` when ``fn`` is not such a product."""
    if isinstance(fn, Arg):
        args.append(fn.position)
        return 1
    if isinstance(fn, Const):
        value = fn.value
        return None if isinstance(value, bool) else value
    if isinstance(fn, OpCall) and fn.op == "mul":
        scale: int | float = 1
        for arg in fn.args:
            part = _factors(arg, args)
            if part is None:
                return None
            scale = scale * part
        return scale
    if isinstance(fn, OpCall) and fn.op == "neg":
        part = _factors(fn.args[0], args)
        return None if part is None else -part
    if isinstance(fn, OpCall) and fn.op == "div" and isinstance(fn.args[1], Const):
        divisor = fn.args[1].value
        part = _factors(fn.args[0], args)
        if part is None or isinstance(divisor, bool) or divisor == 0:
            return None
        return part / divisor
    return None


def einsum_form(program: Function) -> tuple[list[tuple[str, ...]], tuple[str, ...],
                                            int | float] | None:
    """``(index names per operand, output indices, scale)`` of a statement that is an einsum
    (see the module docstring), else ``None``."""
    node = program.output
    if isinstance(node, ReduceByKey) and node.monoid == "+" and isinstance(node.x, Map):
        key, fn, source = node.key, node.x.fn, node.x.x
    elif isinstance(node, Map):
        key, fn, source = node.key, node.fn, node.x
    else:
        return None
    scans = [source] if isinstance(source, Scan) else (
        list(source.inputs) if isinstance(source, Join) else [])
    if not scans or not all(isinstance(s, Scan) for s in scans):
        return None
    args: list[int] = []
    scale = _factors(fn, args)
    if scale is None or sorted(args) != list(range(len(scans))):
        return None
    position = {d.name: k for k, d in enumerate(program.inputs)}
    keys: list[tuple[str, ...]] = [()] * len(program.inputs)
    for scan in scans:
        keys[position[scan.tensor]] = scan.indices
    if len({scan.tensor for scan in scans}) != len(program.inputs):
        return None
    return keys, tuple(key), scale


def _subscripts(keys: list[tuple[str, ...]], output: tuple[str, ...], scale) -> str:
    letters: dict[str, str] = {}
    for name in [n for key in keys for n in key] + list(output):
        letters.setdefault(name, get_symbol(len(letters)))
    terms = ["".join(letters[n] for n in key) for key in keys]
    if scale != 1:
        terms.append("")
    return ",".join(terms) + "->" + "".join(letters[n] for n in output)


def _span(source: Source, statement: Statement) -> Span:
    line = source.line(statement.line)
    col = len(line) - len(line.lstrip()) + 1
    return Span(statement.line, col, statement.line, col + max(1, len(statement.text)))


def sparse_steps(unrolled: Unrolled, sparse_inputs: set[str],
                 source: Source) -> dict[str, SparseStatement]:
    """The statements of ``unrolled`` that run as sparse einsums, by label (see the module
    docstring); raises every statement that reads a sparse value and is not an einsum."""
    sparse_labels = set(sparse_inputs)
    steps: dict[str, SparseStatement] = {}
    diags = Diagnostics(source)
    reported: set[int] = set()
    for statement in unrolled.statements:
        if statement.program is None:
            continue
        flags = [label in sparse_labels for label in statement.operands]
        if not any(flags):
            continue
        form = einsum_form(statement.program)
        if form is None:
            if statement.line not in reported:  # a repeat unrolls one line many times
                reported.add(statement.line)
                names = ", ".join(dict.fromkeys(
                    label.split("@")[0] for label, f in zip(statement.operands, flags,
                                                            strict=True) if f))
                diags.error(
                    "E-unsupported", f"this statement reads the sparse {names}, but only a "
                    "product of tensors runs on sparse operands", _span(source, statement),
                    "sum it with '+=' or sum[...](...), or multiply element-wise with '='; "
                    "compute anything else from that product in a statement of its own")
            continue
        keys, output, scale = form
        spec = EinsumSpec(tuple(keys) + (((),) if scale != 1 else ()), output,
                          statement.program.sizes)
        result = sparse_result(spec, flags + ([False] if scale != 1 else []))
        steps[statement.label] = SparseStatement(_subscripts(keys, output, scale), scale, result)
        if result:
            sparse_labels.add(statement.label)
    diags.raise_if_any()
    return steps


def _plan_options(runner) -> dict:
    options = runner.options
    result: dict = {}
    if options.workers:
        result["workers"] = options.workers
    if options.memory_limit is not None:
        result["memory_limit"] = options.memory_limit
    return result


def _independent_runs(unrolled: Unrolled, steps: dict[str, SparseStatement]) -> dict:
    """Runs of two or more consecutive sparse statements, none reading a value another of
    the run writes: the first statement's label mapped to the run's labels."""
    runs: dict[str, list[str]] = {}
    current: list[str] = []
    written: set[str] = set()

    def close() -> None:
        if len(current) > 1:
            runs[current[0]] = list(current)

    for statement in unrolled.statements:
        label = statement.label
        if statement.program is not None and label in steps and not (
                written & set(statement.operands)):
            current.append(label)
            written.add(label)
            continue
        close()
        current, written = [], set()
        if statement.program is not None and label in steps:
            current, written = [label], {label}
    close()
    return runs


def _operands(statement: Statement, step: SparseStatement, env: dict) -> tuple:
    operands = [env[name] for name in statement.operands]
    if step.scale != 1:
        operands.append(step.scale)
    return tuple(operands)


def _store(env: dict, statement: Statement, value) -> None:
    want = np.dtype(statement.dtype)
    if is_sparse(value):
        env[statement.label] = value if value.dtype == want else value.astype(want)
    else:
        env[statement.label] = np.asarray(value, dtype=want)


def run_sparse_program(runner, unrolled: Unrolled, arrays: dict,
                       steps: dict[str, SparseStatement]) -> tuple[dict, list]:
    """Run ``unrolled`` on ``arrays`` (inputs by label); see the module docstring."""
    executor = session.executor_for("local", ())
    remote = not session.executor_for(None, ()).in_process
    together = _independent_runs(unrolled, steps) if remote else {}
    by_label = {statement.label: statement for statement in unrolled.statements}
    done: set[str] = set()
    env: dict[str, object] = dict(arrays)
    ran: list[tuple[str, dict]] = []
    for statement in unrolled.statements:
        label = statement.label
        if label in done:
            continue
        if statement.program is None:
            env[label] = local_constant(statement, env)
            continue
        step = steps.get(label)
        if step is None:
            one = Unrolled((statement,), ((label, label),))
            inputs = {name: env[name] for name in statement.operands}
            values, stats, _ = executor.run_statements(runner, one, inputs, {})
            env[label] = values[label]
            ran.extend(stats)
            continue
        labels = together.get(label, [label])
        prepared = [prepare_sparse_einsum(
            steps[each].subscripts, _operands(by_label[each], steps[each], env), out=None,
            optimize=runner.options.optimize, backend=None,
            dtype=by_label[each].program.dtype, order="K", casting="safe",
            plan_options=_plan_options(runner)) for each in labels]
        results = (run_prepared_together(prepared) if len(prepared) > 1 else
                   [run_prepared(prepared[0])])
        for each, (value, stats) in zip(labels, results, strict=True):
            _store(env, by_label[each], value)
            ran.append((each, {**stats, "sparse_einsum": steps[each].subscripts}))
            done.add(each)
    return {label: env[label] for label in output_labels(unrolled)}, ran
