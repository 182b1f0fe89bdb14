"""The IR verifier: one rule per node type, messages that say what is wrong and where.

``verify(program)`` raises :class:`~tensorc.errors.IRVerificationError` on the first broken
invariant; passes are verified after every run under the tests. A broken invariant is always
a bug in a pass or a front end, never a user error.
"""

from __future__ import annotations

from collections.abc import Callable

from tensorc.errors import IRVerificationError
from tensorc.ir.keys import join_of, key_of
from tensorc.ir.nodes import (
    CALL_ARITY,
    CALL_OPS,
    MONOIDS,
    Arg,
    Const,
    Expr,
    Function,
    Join,
    Map,
    Merge,
    OpCall,
    ReduceByKey,
    Scan,
    post_order,
)


def _fail(node: object, message: str) -> None:
    raise IRVerificationError(f"{type(node).__name__}: {message} in {node!r}")


def _verify_scan(node: Scan, program: Function) -> None:
    try:
        decl = program.decl(node.tensor)
    except KeyError:
        _fail(node, f"scans undeclared tensor {node.tensor!r}")
        return
    if len(node.indices) != len(decl.shape):
        _fail(node, f"{len(node.indices)} indices for a rank-{len(decl.shape)} tensor")
    sizes = program.size_of
    for name, dim in zip(node.indices, decl.shape, strict=False):
        if sizes.get(name) != dim:
            _fail(node, f"index {name!r} has size {sizes.get(name)} but the dimension is {dim}")


def _verify_join(node: Join, program: Function) -> None:
    if len(node.inputs) < 2:
        _fail(node, "a join needs at least two inputs")
    shared = join_of(node.inputs).on
    if tuple(sorted(node.on)) != shared:
        _fail(node, f"joins on {node.on} but the inputs share {shared}")
    if node.path:
        _verify_path(node)


def _verify_path(node: Join) -> None:
    """A path takes positions of the shrinking operand list and ends with one operand."""
    remaining = len(node.inputs)
    for step in node.path:
        if not step or len(set(step)) != len(step) or any(
                not 0 <= p < remaining for p in step):
            _fail(node, f"path step {step} does not name distinct positions below {remaining}")
        remaining -= len(step) - 1
    if remaining != 1:
        _fail(node, f"path {node.path} leaves {remaining} operands")


def _arity(node: Map) -> int:
    return len(node.x.inputs) if isinstance(node.x, Join) else 1


def _verify_expr(expr: Expr, arity: int, node: Map) -> None:
    if isinstance(expr, Arg):
        if not 0 <= expr.position < arity:
            _fail(node, f"#{expr.position} out of range for {arity} value(s)")
    elif isinstance(expr, OpCall):
        if expr.op not in CALL_OPS:
            _fail(node, f"unknown operator {expr.op!r}")
        takes = CALL_ARITY[expr.op]
        if (len(expr.args) < 2) if takes is None else (len(expr.args) != takes):
            _fail(node, f"{expr.op!r} takes {takes or 'two or more'} argument(s), "
                        f"got {len(expr.args)}")
        for arg in expr.args:
            _verify_expr(arg, arity, node)
    elif not isinstance(expr, Const):
        _fail(node, f"not an expression: {expr!r}")


def _verify_map(node: Map, program: Function) -> None:
    if sorted(node.key) != sorted(key_of(node.x)) or len(set(node.key)) != len(node.key):
        _fail(node, f"key {node.key} is not a permutation of its input key {key_of(node.x)}")
    _verify_expr(node.fn, _arity(node), node)


def _verify_reduce(node: ReduceByKey, program: Function) -> None:
    if node.monoid not in MONOIDS:
        _fail(node, f"unknown monoid {node.monoid!r}")
    source = key_of(node.x)
    if len(set(node.key)) != len(node.key) or not set(node.key) <= set(source):
        _fail(node, f"key {node.key} is not a subset of its input key {source}")


def _verify_merge(node: Merge, program: Function) -> None:
    if node.monoid not in MONOIDS:
        _fail(node, f"unknown monoid {node.monoid!r}")
    if sorted(key_of(node.old)) != sorted(key_of(node.new)):
        _fail(node, f"merges key {key_of(node.new)} into key {key_of(node.old)}")


VERIFY_RULES: dict[type, Callable] = {
    Scan: _verify_scan,
    Join: _verify_join,
    Map: _verify_map,
    ReduceByKey: _verify_reduce,
    Merge: _verify_merge,
}


def verify(program: Function) -> Function:
    """Check every invariant of ``program``; return it unchanged so calls can chain."""
    names = [decl.name for decl in program.inputs]
    if len(set(names)) != len(names):
        raise IRVerificationError(f"Function: duplicate input names {names}")
    for node in post_order(program.output):
        VERIFY_RULES[type(node)](node, program)
    return program
