"""The task DAG of a block program, derived symbolically and expanded on demand.

Contract: ``BlockDag(program, env)`` analyses a :class:`~tensorc.ir.block_program.BlockProgramIR`
for one environment ``env`` (every block count and size bound to an integer). A *task* is
one execution of one assignment: ``(sid, values)``, the statement's index in program order
and the values of its enclosing loop variables, outer first. Nothing is enumerated up front:

- :meth:`BlockDag.parents` finds, for each block a task reads, the task that wrote the
  version it sees (the latest write of that block before it in program order), or ``None``
  for an input's own block;
- :meth:`BlockDag.children` finds the tasks that read a version a task writes (every read
  of that block after the write, up to and including the next write of it), and whether
  that version is the block's final one;
- :meth:`BlockDag.roots` yields the tasks whose reads are all of inputs, found from the
  input blocks (the readers of each input block before its first write) plus the
  statements that read nothing, never by walking the whole iteration space;
- :meth:`BlockDag.final_writer` names the task whose write of a block is its last.

How a search works: the statements' enclosing loops and ``if`` branches form a path; a
task's *key* interleaves each level's position among its siblings with the loop value
there, so comparing keys is comparing program order. To find the instances of a statement
that touch block ``b``, the loop variables are bound outer first: a variable is solved from
a subscript that is affine in it (``a*x + c == b_k``) when the other names of that
subscript are already bound, and enumerated over its range otherwise (clipped by the
order bounds, in the order asked for), with each subscript checked as soon as its names
are bound. Loop bounds may use outer variables; strides and ``2**l`` levels are
evaluated, never assumed. :meth:`BlockDag.walk` enumerates every task in program order (for
tests, counting and small ``explain`` output).

Answers are kept (for at most :data:`MEMO_TASKS` tasks), so a DAG run again is expanded
from them. Errors are :class:`BlockDagError` (a code, a message and the span of the offending
read), which the layer that knows the source renders with file:line:col.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from tensorc.ir.block_program import (
    BlockProgramIR,
    BlockRef,
    BlockWrite,
    If,
    Loop,
    Statement,
    block_label,
    cond_function,
    eval_cond,
    eval_int,
    int_function,
    linear_in,
    names_in,
    reads_of,
)

Task = tuple[int, tuple[int, ...]]  # (statement id, loop values outer first)

MEMO_TASKS = 1 << 13
"""At most this many answers of each kind (tasks' parents, tasks' children, input blocks'
readers, roots) are kept once found, about 1.6 KB a task: a DAG the driver runs again (the
same program at the same block counts) is then not searched again."""


def _kept(memo: dict, key, find):
    """``memo[key]``, found by ``find(key)`` the first time and kept while ``memo`` holds
    fewer than :data:`MEMO_TASKS` answers."""
    found = memo.get(key)
    if found is None:
        found = find(key)
        if len(memo) < MEMO_TASKS:
            memo[key] = found
    return found


class BlockDagError(Exception):
    """A block program that cannot run for this environment (code, message, span)."""

    def __init__(self, code: str, message: str, span: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.span = span


@dataclass(frozen=True)
class _Level:
    position: int
    node: Statement  # Loop or If
    branch: int = 0  # for If: 0 = then, 1 = else


@dataclass(frozen=True)
class Site:
    """One assignment and the path of loops and branches that encloses it."""

    sid: int
    assign: BlockWrite
    levels: tuple[_Level, ...]
    position: int  # among its siblings

    @cached_property
    def loop_vars(self) -> tuple[str, ...]:
        return tuple(lv.node.var for lv in self.levels if isinstance(lv.node, Loop))


@dataclass(frozen=True)
class Edge:
    """A read of task ``reader``'s ref ``read`` that sees the version ``task`` wrote as its
    result ``result`` (``task`` is ``None`` for an input's own block)."""

    read: BlockRef
    coords: tuple[int, ...]
    task: Task | None
    result: int


def _flatten(body: tuple[Statement, ...], levels: tuple[_Level, ...], out: list[Site]) -> None:
    for position, stmt in enumerate(body):
        if isinstance(stmt, BlockWrite):
            out.append(Site(len(out), stmt, levels, position))
        elif isinstance(stmt, Loop):
            _flatten(stmt.body, (*levels, _Level(position, stmt)), out)
        else:
            _flatten(stmt.then, (*levels, _Level(position, stmt, 0)), out)
            _flatten(stmt.orelse, (*levels, _Level(position, stmt, 1)), out)


def sites_of(program: BlockProgramIR) -> list[Site]:
    """Every assignment of ``program`` in program order, with its enclosing path."""
    out: list[Site] = []
    _flatten(program.body, (), out)
    return out


class BlockDag:
    """The symbolic DAG of ``program`` for the block counts and sizes in ``env``."""

    def __init__(self, program: BlockProgramIR, env: dict[str, int]) -> None:
        self.program = program
        self.env = dict(env)
        self.sites = sites_of(program)
        self.reads = [reads_of(site.assign.value) for site in self.sites]
        self._prepared_refs: dict = {}
        self._compiled: dict = {}  # id of a loop or if node -> (node, its functions)
        self._writers: dict[str, list[tuple[Site, int]]] = {}
        self._readers: dict[str, list[tuple[Site, BlockRef]]] = {}
        self._parents: dict[Task, list[Edge]] = {}  # answers kept for a DAG run again
        self._children: dict[Task, list[tuple[list[Task], bool]]] = {}
        self._roots: tuple[Task, ...] | None = None
        self._input_readers: dict[tuple[str, tuple[int, ...]], list[Task]] = {}
        for site, reads in zip(self.sites, self.reads, strict=True):
            for index, ref in enumerate(site.assign.targets):
                self._writers.setdefault(ref.tensor, []).append((site, index))
            for ref in reads:
                self._readers.setdefault(ref.tensor, []).append((site, ref))

    # ---- keys and environments ----------------------------------------------------------

    def key(self, task: Task) -> tuple[int, ...]:
        """The task's position in program order (compare keys to compare order)."""
        site = self.sites[task[0]]
        values = iter(task[1])
        parts: list[int] = []
        for level in site.levels:
            parts.append(level.position)
            parts.append(next(values) if isinstance(level.node, Loop) else level.branch)
        parts.append(site.position)
        return tuple(parts)

    def task_env(self, task: Task) -> dict[str, int]:
        env = dict(self.env)
        env.update(zip(self.sites[task[0]].loop_vars, task[1], strict=True))
        return env

    def coords(self, ref: BlockRef, env: dict[str, int]) -> tuple[int, ...]:
        return tuple(f(env) for _, f, _, _ in self._prepared(None, ref))

    def written(self, task: Task) -> list[tuple[str, tuple[int, ...]]]:
        """The blocks a task writes, one per result, as ``(tensor, coords)``; a task that
        would write one block twice (``A{i}, A{j} = qr(...)`` with ``i == j``) is an
        ``E-cycle`` error: it would depend on itself."""
        env = self.task_env(task)
        site = self.sites[task[0]]
        blocks = [(ref.tensor, self.coords(ref, env)) for ref in site.assign.targets]
        for ref, (tensor, coords) in zip(site.assign.targets, blocks, strict=True):
            grid = self.program.block_grid(tensor, self.env)
            if grid is not None and any(not 0 <= c < g for c, g in zip(coords, grid,
                                                                     strict=True)):
                shown = block_label(tensor, coords)
                size = " x ".join(map(str, grid))
                raise BlockDagError("E-block", f"block {shown} is written outside "
                                    f"{tensor}'s {size} blocks", ref.span)
        if len(set(blocks)) != len(blocks):
            tensor, coords = next(b for b in blocks if blocks.count(b) > 1)
            shown = block_label(tensor, coords)
            raise BlockDagError("E-cycle", f"block {shown} is written twice by one task",
                                site.assign.span)
        return blocks

    # ---- the search ---------------------------------------------------------------------

    def _prepared(self, site: Site | None, ref: BlockRef) -> list:
        """Per subscript of ``ref``: ``(k, value function, loop variables of site it reads,
        {variable: (coefficient function, offset function)} where it is affine)``, built once
        (subscripts are evaluated millions of times; functions beat walking the tree)."""
        key = (None if site is None else site.sid, id(ref))
        found = self._prepared_refs.get(key)
        if found is None:
            loop_vars = set(site.loop_vars) if site is not None else set()
            found = []
            for k, expr in enumerate(ref.coords):
                unbound = frozenset(names_in(expr) & loop_vars)
                forms = {}
                for var in unbound:
                    form = linear_in(expr, var)
                    if form is not None:
                        forms[var] = (int_function(form[0]), int_function(form[1]))
                found.append((k, int_function(expr), unbound, forms))
            self._prepared_refs[key] = (ref, found)  # the ref kept alive keeps its id unique
            return found
        return found[1]

    def _condition(self, branch: If):
        found = self._compiled.get(id(branch))
        if found is None:
            found = (branch, cond_function(branch.cond))
            self._compiled[id(branch)] = found
        return found[1]

    def _bounds(self, loop: Loop):
        found = self._compiled.get(id(loop))
        if found is None:
            found = (loop, tuple(int_function(e) for e in (loop.start, loop.stop, loop.step)))
            self._compiled[id(loop)] = found
        return found[1]

    def instances(
        self,
        site: Site,
        ref: BlockRef,
        block: tuple[int, ...],
        *,
        after: tuple[int, ...] | None = None,
        before: tuple[int, ...] | None = None,
        before_inclusive: bool = False,
        descending: bool = False,
    ) -> Iterator[tuple[int, ...]]:
        """The loop values of ``site``'s tasks whose ``ref`` is ``block``, with keys
        strictly after ``after`` and before ``before`` (inclusive if asked), in order."""
        if len(ref.coords) != len(block):
            return iter(())
        pending = self._prepared(site, ref)
        env = dict(self.env)
        bounds = (after, before, before_inclusive, descending)
        return self._search(site, 0, 0, env, [], pending, block, bounds, after is not None,
                            before is not None)

    def _search(self, site, depth, kpos, env, values, pending, block, bounds, tie_lo, tie_hi):
        after, before, before_inclusive, descending = bounds
        # subscripts whose loop variables are all bound are checked now
        still = []
        for entry in pending:
            if entry[2] - env.keys():
                still.append(entry)
            elif entry[1](env) != block[entry[0]]:
                return
        pending = still
        if depth == len(site.levels):
            position = site.position
            if tie_lo and (position < after[kpos] or (position == after[kpos]
                                                       and len(after) == kpos + 1)):
                return
            if tie_hi and (position > before[kpos] or (
                    position == before[kpos] and len(before) == kpos + 1
                    and not before_inclusive)):
                return
            yield tuple(values)
            return
        level = site.levels[depth]
        position = level.position
        if tie_lo:
            if position < after[kpos]:
                return
            tie_lo = position == after[kpos]
        if tie_hi:
            if position > before[kpos]:
                return
            tie_hi = position == before[kpos]
        node = level.node
        if isinstance(node, If):
            if self._condition(node)(env) != (level.branch == 0):
                return
            branch = level.branch
            if tie_lo and branch < after[kpos + 1] or tie_hi and branch > before[kpos + 1]:
                return
            yield from self._search(site, depth + 1, kpos + 2, env, values, pending, block,
                                    bounds, tie_lo and branch == after[kpos + 1],
                                    tie_hi and branch == before[kpos + 1])
            return
        first, end, stride = self._bounds(node)
        start, stop, step = first(env), end(env), stride(env)
        if step <= 0:
            raise BlockDagError("E-loop", f"loop '{node.var}' has step {step}; it must be "
                                "positive", node.span)
        low = after[kpos + 1] if tie_lo else None
        high = before[kpos + 1] if tie_hi else None
        for value in self._candidates(node.var, start, stop, step, env, pending, block, low,
                                      high, descending):
            env[node.var] = value
            values.append(value)
            yield from self._search(site, depth + 1, kpos + 2, env, values, pending, block,
                                    bounds, tie_lo and value == low, tie_hi and value == high)
            values.pop()
            del env[node.var]

    @staticmethod
    def _candidates(var, start, stop, step, env, pending, block, low, high, descending):
        for k, _, unbound, forms in pending:
            if len(unbound) != 1 or var not in forms:
                continue
            coefficient, offset = forms[var][0](env), forms[var][1](env)
            if coefficient == 0:
                continue
            value, remainder = divmod(block[k] - offset, coefficient)
            if remainder or not start <= value < stop or (value - start) % step:
                return ()
            if (low is not None and value < low) or (high is not None and value > high):
                return ()
            return (value,)
        first, last = start, stop - 1
        if low is not None and low > first:
            first = start + -(-(low - start) // step) * step
        last = start + ((last - start) // step) * step if last >= start else start - step
        if high is not None and high < last:
            last = start + ((high - start) // step) * step if high >= start else start - step
        if first > last:
            return ()
        if descending:
            return range(last, first - 1, -step)
        return range(first, last + 1, step)

    # ---- the DAG ------------------------------------------------------------------------

    def _writer(self, tensor, block, *, before=None, after=None, latest: bool):
        """``(key, task, result)`` of the latest write of ``block`` before ``before`` (or
        the earliest after ``after``) over every statement writing ``tensor``; ``None``."""
        best = None
        for site, index in self._writers.get(tensor, ()):
            found = next(self.instances(site, site.assign.targets[index], block,
                                        before=before, after=after, descending=latest), None)
            if found is not None:
                task = (site.sid, found)
                key = self.key(task)
                if best is None or (key > best[0] if latest else key < best[0]):
                    best = (key, task, index)
        return best

    def parents(self, task: Task) -> list[Edge]:
        """One edge per distinct block subscript the task reads (two subscripts that name
        the same block, ``L{i, k}`` and ``L{j, k}`` when ``i == j``, are two edges to one
        version). The list is shared: do not change it."""
        return _kept(self._parents, task, self._find_parents)

    def _find_parents(self, task: Task) -> list[Edge]:
        env = self.task_env(task)
        key = self.key(task)
        edges = []
        for ref in self.reads[task[0]]:
            block = self.coords(ref, env)
            found = self._writer(ref.tensor, block, before=key, latest=True)
            if found is None:
                self._check_input_block(ref, block)
                edges.append(Edge(ref, block, None, 0))
            else:
                edges.append(Edge(ref, block, found[1], found[2]))
        return edges

    def _check_input_block(self, ref: BlockRef, block: tuple[int, ...]) -> None:
        spec = self.program.tensors[ref.tensor]
        shown = block_label(ref.tensor, block)
        if spec.kind != "input":
            raise BlockDagError("E-unwritten", f"block {shown} is read before any statement "
                                "writes it", ref.span)
        grid = self.program.block_grid(ref.tensor, self.env)
        if any(not 0 <= c < g for c, g in zip(block, grid, strict=True)):
            size = " x ".join(map(str, grid))
            raise BlockDagError("E-unwritten", f"block {shown} is outside {ref.tensor}'s "
                                f"{size} blocks", ref.span)

    def children(self, task: Task) -> list[tuple[list[Task], bool]]:
        """Per result of ``task``: the tasks that read that version (in program order) and
        whether it is the block's final version. The lists are shared: do not change them."""
        return _kept(self._children, task, self._find_children)

    def _find_children(self, task: Task) -> list[tuple[list[Task], bool]]:
        key = self.key(task)
        out = []
        for tensor, block in self.written(task):
            following = self._writer(tensor, block, after=key, latest=False)
            limit = following[0] if following else None
            readers: list[Task] = []
            for site, ref in self._readers.get(tensor, ()):
                for values in self.instances(site, ref, block, after=key, before=limit,
                                             before_inclusive=True):
                    child = (site.sid, values)
                    if child not in readers:
                        readers.append(child)
            readers.sort(key=self.key)
            out.append((readers, following is None))
        return out

    def input_readers(self, tensor: str, block: tuple[int, ...]) -> list[Task]:
        """Tasks that read ``tensor``'s own block ``block`` (before its first write). The
        list is shared: do not change it."""
        return _kept(self._input_readers, (tensor, block), self._find_input_readers)

    def _find_input_readers(self, key: tuple[str, tuple[int, ...]]) -> list[Task]:
        tensor, block = key
        first = self._writer(tensor, block, latest=False)
        limit = first[0] if first else None
        readers: list[Task] = []
        for site, ref in self._readers.get(tensor, ()):
            for values in self.instances(site, ref, block, before=limit, before_inclusive=True):
                task = (site.sid, values)
                if task not in readers:
                    readers.append(task)
        return readers

    def roots(self) -> Iterator[Task]:
        """Tasks with no parent task, in program order per source (each once)."""
        if self._roots is not None:
            yield from self._roots
            return
        found = []
        for task in self._find_roots():
            found.append(task)
            yield task
        if len(found) < MEMO_TASKS:
            self._roots = tuple(found)

    def _find_roots(self) -> Iterator[Task]:
        seen: set[Task] = set()
        for tensor in self.program.inputs():
            grid = self.program.block_grid(tensor, self.env)
            for block in _grid_coords(grid):
                for task in self.input_readers(tensor, block):
                    if task not in seen and all(e.task is None for e in self.parents(task)):
                        seen.add(task)
                        yield task
        for site, reads in zip(self.sites, self.reads, strict=True):
            if not reads:
                for values in self._domain(site):
                    yield (site.sid, values)

    def final_writer(self, tensor: str, block: tuple[int, ...]) -> tuple[Task, int] | None:
        """The task (and result index) whose write of ``block`` is the last, if any."""
        found = self._writer(tensor, block, latest=True)
        return None if found is None else (found[1], found[2])

    def _domain(self, site: Site) -> Iterator[tuple[int, ...]]:
        return self.instances(site, _NO_REF, ())

    def walk(self) -> Iterator[Task]:
        """Every task in program order (enumerates the whole iteration space)."""
        yield from _walk(self.program.body, dict(self.env), [], iter(range(len(self.sites))),
                         self.sites)


_NO_REF = BlockRef("", ())


def _grid_coords(grid: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    if not grid:
        yield ()
        return
    for first in range(grid[0]):
        for rest in _grid_coords(grid[1:]):
            yield (first, *rest)


def _walk(body, env, values, sids, sites):
    """Program-order enumeration; ``sids`` hands out statement ids in flattening order."""
    ids = _ids_of(body, sids)
    yield from _walk_ids(body, ids, env, values)


def _ids_of(body, sids):
    ids = []
    for stmt in body:
        if isinstance(stmt, BlockWrite):
            ids.append(next(sids))
        elif isinstance(stmt, Loop):
            ids.append(_ids_of(stmt.body, sids))
        else:
            ids.append((_ids_of(stmt.then, sids), _ids_of(stmt.orelse, sids)))
    return ids


def _walk_ids(body, ids, env, values):
    for stmt, sid in zip(body, ids, strict=True):
        if isinstance(stmt, BlockWrite):
            yield (sid, tuple(values))
        elif isinstance(stmt, Loop):
            start, stop, step = (eval_int(stmt.start, env), eval_int(stmt.stop, env),
                                 eval_int(stmt.step, env))
            if step <= 0:
                raise BlockDagError("E-loop", f"loop '{stmt.var}' has step {step}; it must be "
                                    "positive", stmt.span)
            for value in range(start, stop, step):
                env[stmt.var] = value
                values.append(value)
                yield from _walk_ids(stmt.body, sid, env, values)
                values.pop()
                del env[stmt.var]
        else:
            then_ids, else_ids = sid
            if eval_cond(stmt.cond, env):
                yield from _walk_ids(stmt.then, then_ids, env, values)
            else:
                yield from _walk_ids(stmt.orelse, else_ids, env, values)
