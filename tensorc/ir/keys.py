"""The key (output index names, in order) of every IR node: one rule per node type."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from tensorc.ir.nodes import Join, Map, Merge, Node, ReduceByKey, Scan


def unique(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``names`` without repeats, first occurrence kept."""
    return tuple(dict.fromkeys(names))


def _scan_key(node: Scan) -> tuple[str, ...]:
    return unique(node.indices)


def _join_key(node: Join) -> tuple[str, ...]:
    names: list[str] = []
    for child in node.inputs:
        names.extend(key_of(child))
    return unique(names)


def _map_key(node: Map) -> tuple[str, ...]:
    return node.key


def _reduce_key(node: ReduceByKey) -> tuple[str, ...]:
    return node.key


def _merge_key(node: Merge) -> tuple[str, ...]:
    return key_of(node.old)


def index_counts(nodes: Sequence[Node]) -> dict[str, int]:
    """In how many of ``nodes`` each index name occurs."""
    counts: dict[str, int] = {}
    for node in nodes:
        for name in key_of(node):
            counts[name] = counts.get(name, 0) + 1
    return counts


def join_of(inputs: Sequence[Node]) -> Join:
    """The join of ``inputs`` on every index two or more of them share (the only legal ``on``)."""
    counts = index_counts(inputs)
    return Join(tuple(inputs), tuple(sorted(n for n, c in counts.items() if c > 1)))


KEY_RULES: dict[type, Callable] = {
    Scan: _scan_key,
    Join: _join_key,
    Map: _map_key,
    ReduceByKey: _reduce_key,
    Merge: _merge_key,
}


@lru_cache(maxsize=4096)
def key_of(node: Node) -> tuple[str, ...]:
    """The index names that key ``node``'s collection, in order."""
    return KEY_RULES[type(node)](node)
