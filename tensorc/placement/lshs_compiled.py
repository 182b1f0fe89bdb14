"""LSHS on arrays, compiled: the policy of :mod:`tensorc.placement.schedule` for large graphs.

Contract: :func:`lshs_arrays` places every task of a graph given as arrays (kind codes,
bytes, CSR inputs, the load nodes, hints, output layout nodes) exactly as
``schedule(..., scheduler="lshs")`` does task by task in Python — the same options, the same
objective ``max(peak) + max(net_in) + max(net_out)``, the same ties (fewest bytes copied,
then the lowest node id), the same local folds of reductions, copies from the holder that
has sent the least, frees at the last use — and returns the same figures as arrays. The
loop is compiled with numba (a dependency of pydata ``sparse``, imported only when a graph
is large enough to need it: ``schedule.COMPILED_TASKS``; this module is imported only
then), so a million-task graph is placed in
well under a second instead of ten.

State is kept as the Python :class:`~tensorc.placement.cluster_state.ClusterState` keeps it,
except that the nodes holding a block are a linked list in a pool of entries (``head`` per
block, ``nxt`` and ``where`` per entry) instead of a bit mask: a block has few holders, and a
mask of 1,024 bits is no machine word.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


@dataclass
class PlacedArrays:
    """What :func:`lshs_arrays` returns: per task its node; per node the peaks, traffic and
    final memory; the copies (one row each); the local folds (``fold_task``/``fold_node``
    per fold, its members ``fold_members[fold_ptr[g]:fold_ptr[g + 1]]``); the trade count."""

    node_of: np.ndarray
    peak: np.ndarray
    net_in: np.ndarray
    net_out: np.ndarray
    mem: np.ndarray
    transfers: np.ndarray  # rows (task, block, src, dst, nbytes)
    fold_task: np.ndarray
    fold_node: np.ndarray
    fold_ptr: np.ndarray
    fold_members: np.ndarray
    traded_tasks: int
    traded_bytes: int


def lshs_arrays(kind, nbytes, indptr, inputs, nodes, load_nodes, hints, layout,
                retained, cached_block, cached_node, strict, sampled) -> PlacedArrays:
    """Place a graph (module contract). Arrays are int64 except ``kind`` (int8, 0 = load);
    ``hints``/``layout`` hold -1 where a task has none; ``retained`` flags the blocks kept
    after their last use; ``cached_block``/``cached_node`` list copies already in place;
    ``sampled`` is how many nodes an input-free task is weighed on, on a larger cluster."""
    result = _place(
        np.ascontiguousarray(kind, np.int8), np.ascontiguousarray(nbytes, np.int64),
        np.ascontiguousarray(indptr, np.int64), np.ascontiguousarray(inputs, np.int64),
        np.int64(nodes), np.ascontiguousarray(load_nodes, np.int64),
        np.ascontiguousarray(hints, np.int64), np.ascontiguousarray(layout, np.int64),
        np.ascontiguousarray(retained, np.uint8), np.ascontiguousarray(cached_block, np.int64),
        np.ascontiguousarray(cached_node, np.int64), bool(strict), np.int64(sampled))
    (node_of, peak, net_in, net_out, mem, transfers, count, fold_task, fold_node, fold_ptr,
     fold_members, folds, traded) = result
    return PlacedArrays(node_of, peak, net_in, net_out, mem, transfers[:count],
                        fold_task[:folds], fold_node[:folds], fold_ptr[:folds + 1],
                        fold_members[:fold_ptr[folds]], int(traded[0]), int(traded[1]))


# The functions below mirror schedule._lshs and ClusterState step by step (their docstrings
# state the policy); numba compiles them on first use and caches the machine code.


@numba.njit(cache=True, nogil=True)
def _holds(head, nxt, where, block, node):
    entry = head[block]
    while entry >= 0:
        if where[entry] == node:
            return True
        entry = nxt[entry]
    return False


@numba.njit(cache=True, nogil=True)
def _source(head, nxt, where, block, net_out, extra_src, extra_val, extras):
    """The holder of ``block`` with the least net_out (plus this evaluation's extra sends),
    lowest id on ties."""
    best = -1
    best_out = 0
    entry = head[block]
    while entry >= 0:
        node = where[entry]
        sent = net_out[node]
        for e in range(extras):
            if extra_src[e] == node:
                sent += extra_val[e]
        if best < 0 or sent < best_out or (sent == best_out and node < best):
            best, best_out = node, sent
        entry = nxt[entry]
    return best


@numba.njit(cache=True, nogil=True)
def _place(kind, nbytes, indptr, inputs, nodes, load_nodes, hints, layout, retained_tasks,
           cached_block, cached_node, strict, sampled):
    tasks = kind.shape[0]
    reduce_inputs = 0
    for t in range(tasks):
        if kind[t] == 3:
            reduce_inputs += indptr[t + 1] - indptr[t]
    blocks = tasks + reduce_inputs // 2 + 1
    size = np.zeros(blocks, np.int64)
    size[:tasks] = nbytes
    uses = np.zeros(blocks, np.int64)
    for e in range(inputs.shape[0]):
        uses[inputs[e]] += 1
    retained = np.zeros(blocks, np.uint8)
    retained[:tasks] = retained_tasks
    home = np.full(blocks, -1, np.int64)
    head = np.full(blocks, -1, np.int64)
    capacity = blocks + inputs.shape[0] + reduce_inputs + cached_block.shape[0] + 1
    nxt = np.full(capacity, -1, np.int64)
    where = np.zeros(capacity, np.int64)
    entries = 0
    mem = np.zeros(nodes, np.int64)
    peak = np.zeros(nodes, np.int64)
    net_in = np.zeros(nodes, np.int64)
    net_out = np.zeros(nodes, np.int64)
    maxima = np.zeros(3, np.int64)  # max peak, max net_in, max net_out
    transfers = np.zeros((inputs.shape[0] + reduce_inputs + 1, 5), np.int64)
    count = 0
    node_of = np.zeros(tasks, np.int64)
    fold_task = np.zeros(reduce_inputs // 2 + 1, np.int64)
    fold_node = np.zeros(reduce_inputs // 2 + 1, np.int64)
    fold_ptr = np.zeros(reduce_inputs // 2 + 2, np.int64)
    fold_members = np.zeros(reduce_inputs + 1, np.int64)
    folds = 0
    next_block = tasks
    traded = np.zeros(2, np.int64)
    widest = 1
    for t in range(tasks):
        widest = max(widest, indptr[t + 1] - indptr[t] + 1)
    extra_src = np.zeros(widest, np.int64)  # this evaluation's sends per source node
    extra_val = np.zeros(widest, np.int64)
    mark = np.zeros(nodes, np.int64)  # stamp per node: already an option of this task
    stamp = 0
    options = np.zeros(nodes, np.int64)
    work = np.zeros(max(inputs.shape[0], 1), np.int64)  # a task's (folded) inputs
    distinct = np.zeros(max(inputs.shape[0], 1), np.int64)
    by_node = np.zeros(max(inputs.shape[0], 1), np.int64)
    order = np.zeros(max(inputs.shape[0], 1), np.int64)

    for t in range(tasks):  # loads first, on their nodes
        if kind[t] == 0:
            node = load_nodes[t]
            node_of[t] = node
            entries, count = _run(t, work, 0, node, t, size, uses, retained, home, head, nxt,
                                  where, entries, mem, peak, net_in, net_out, maxima,
                                  transfers, count)
    for c in range(cached_block.shape[0]):
        block, node = cached_block[c], cached_node[c]
        if node < 0 or node >= nodes or _holds(head, nxt, where, block, node):
            continue
        where[entries] = node
        nxt[entries] = head[block]
        head[block] = entries
        entries += 1
        mem[node] += size[block]
        if mem[node] > peak[node]:
            peak[node] = mem[node]
            if mem[node] > maxima[0]:
                maxima[0] = mem[node]

    for t in range(tasks):
        if kind[t] == 0:
            continue
        n = indptr[t + 1] - indptr[t]
        for k in range(n):
            work[k] = inputs[indptr[t] + k]
        if kind[t] == 3 and n > 1:  # local folds per producing node
            for k in range(n):
                by_node[k] = node_of[work[k]]
            order[:n] = np.argsort(by_node[:n], kind="mergesort")
            if by_node[order[0]] != by_node[order[n - 1]]:
                final = 0
                start = 0
                while start < n:
                    stop = start
                    while stop < n and by_node[order[stop]] == by_node[order[start]]:
                        stop += 1
                    if stop - start == 1:
                        distinct[final] = work[order[start]]
                        final += 1
                    else:
                        fold = next_block
                        next_block += 1
                        size[fold] = size[t]
                        uses[fold] = 1
                        group = np.empty(stop - start, np.int64)
                        for k in range(stop - start):
                            group[k] = work[order[start + k]]
                            fold_members[fold_ptr[folds] + k] = group[k]
                        fold_task[folds] = t
                        fold_node[folds] = by_node[order[start]]
                        fold_ptr[folds + 1] = fold_ptr[folds] + stop - start
                        folds += 1
                        entries, count = _run(fold, group, stop - start, by_node[order[start]],
                                              t, size, uses, retained, home, head, nxt, where,
                                              entries, mem, peak, net_in, net_out, maxima,
                                              transfers, count)
                        distinct[final] = fold
                        final += 1
                    start = stop
                n = final
                for k in range(n):
                    work[k] = distinct[k]
        # options
        stamp += 1
        choices = 0
        hint = hints[t]
        if hint >= 0:
            mark[hint] = stamp
            options[0] = hint
            choices = 1
            if not strict and n == 0:  # no inputs: every node holds them all
                for node in range(nodes):
                    if mark[node] != stamp:
                        mark[node] = stamp
                        options[choices] = node
                        choices += 1
            elif not strict:
                entry = head[work[0]]
                while entry >= 0:
                    node = where[entry]
                    everywhere = True
                    for k in range(1, n):
                        if not _holds(head, nxt, where, work[k], node):
                            everywhere = False
                            break
                    if everywhere and mark[node] != stamp:
                        mark[node] = stamp
                        options[choices] = node
                        choices += 1
                    entry = nxt[entry]
        else:
            for k in range(n):
                entry = head[work[k]]
                while entry >= 0:
                    node = where[entry]
                    if mark[node] != stamp:
                        mark[node] = stamp
                        options[choices] = node
                        choices += 1
                    entry = nxt[entry]
            lay = layout[t]
            if lay >= 0 and mark[lay] != stamp:
                mark[lay] = stamp
                options[choices] = lay
                choices += 1
        if choices == 0:
            if nodes <= sampled:
                for node in range(nodes):
                    options[node] = node
                choices = nodes
            else:
                start = (t * sampled) % nodes
                for k in range(sampled):
                    options[k] = (start + k) % nodes
                choices = sampled
        if choices == 1:
            best = options[0]
        else:
            distinct_count = 0
            for k in range(n):
                seen = False
                for j in range(distinct_count):
                    if distinct[j] == work[k]:
                        seen = True
                        break
                if not seen:
                    distinct[distinct_count] = work[k]
                    distinct_count += 1
            best = -1
            best_cost = best_moved = fewest = 0
            for c in range(choices):
                node = options[c]
                moved = 0
                top_out = maxima[2]
                extras = 0
                for k in range(distinct_count):
                    block = distinct[k]
                    if _holds(head, nxt, where, block, node):
                        continue
                    src = _source(head, nxt, where, block, net_out, extra_src, extra_val,
                                  extras)
                    found = -1
                    for e in range(extras):
                        if extra_src[e] == src:
                            found = e
                    if found < 0:
                        found = extras
                        extra_src[found] = src
                        extra_val[found] = 0
                        extras += 1
                    extra_val[found] += size[block]
                    sent = extra_val[found] + net_out[src]
                    if sent > top_out:
                        top_out = sent
                    moved += size[block]
                live = mem[node] + moved + size[t]
                received = net_in[node] + moved
                cost = (max(live, maxima[0]) + max(received, maxima[1]) + top_out)
                if best < 0 or moved < fewest:
                    fewest = moved
                if (best < 0 or cost < best_cost or (cost == best_cost and moved < best_moved)
                        or (cost == best_cost and moved == best_moved and node < best)):
                    best, best_cost, best_moved = node, cost, moved
            if best_moved > fewest:
                traded[0] += 1
                traded[1] += best_moved - fewest
        node_of[t] = best
        entries, count = _run(t, work, n, best, t, size, uses, retained, home, head, nxt,
                              where, entries, mem, peak, net_in, net_out, maxima, transfers,
                              count)
    return (node_of, peak, net_in, net_out, mem, transfers, count, fold_task, fold_node,
            fold_ptr, fold_members, folds, traded)


@numba.njit(cache=True, nogil=True)
def _run(block, work, n, node, task, size, uses, retained, home, head, nxt, where, entries,
         mem, peak, net_in, net_out, maxima, transfers, count):
    """ClusterState.run: compute ``block`` from ``work[:n]`` on ``node``."""
    moved = 0
    for k in range(n):
        source = work[k]
        if _holds(head, nxt, where, source, node):
            continue
        src = -1
        best_out = 0
        entry = head[source]
        while entry >= 0:
            holder = where[entry]
            if src < 0 or net_out[holder] < best_out or (net_out[holder] == best_out
                                                         and holder < src):
                src, best_out = holder, net_out[holder]
            entry = nxt[entry]
        nbytes = size[source]
        net_out[src] += nbytes
        if net_out[src] > maxima[2]:
            maxima[2] = net_out[src]
        moved += nbytes
        where[entries] = node
        nxt[entries] = head[source]
        head[source] = entries
        entries += 1
        transfers[count, 0] = task
        transfers[count, 1] = source
        transfers[count, 2] = src
        transfers[count, 3] = node
        transfers[count, 4] = nbytes
        count += 1
    if moved:
        net_in[node] += moved
        if net_in[node] > maxima[1]:
            maxima[1] = net_in[node]
    live = mem[node] + moved + size[block]
    mem[node] = live
    if not _holds(head, nxt, where, block, node):
        where[entries] = node
        nxt[entries] = head[block]
        head[block] = entries
        entries += 1
    home[block] = node
    if live > peak[node]:
        peak[node] = live
        if live > maxima[0]:
            maxima[0] = live
    for k in range(n):
        source = work[k]
        uses[source] -= 1
        if uses[source] == 0:
            entries = _free(source, size, retained, home, head, nxt, where, entries, mem)
    if uses[block] == 0:
        entries = _free(block, size, retained, home, head, nxt, where, entries, mem)
    return entries, count


@numba.njit(cache=True, nogil=True)
def _free(block, size, retained, home, head, nxt, where, entries, mem):
    """ClusterState._free: drop ``block`` from its holders (a retained one keeps home)."""
    entry = head[block]
    keep = home[block] if retained[block] else -1
    while entry >= 0:
        if where[entry] != keep:
            mem[where[entry]] -= size[block]
        entry = nxt[entry]
    if keep >= 0:
        where[entries] = keep
        nxt[entries] = -1
        head[block] = entries
        entries += 1
    else:
        head[block] = -1
    return entries
