"""The symbolic dependence analysis against brute-force enumeration of the shipped programs.

The brute force runs the program sequentially over its whole iteration space, remembers the
last writer of every block and derives each task's parents and children from that; the
symbolic analysis must give exactly the same DAG without enumerating anything.
"""

from __future__ import annotations

import pytest

from tensorc.codegen.block_dag import BlockDag, BlockDagError
from tensorc.codegen.block_layout import environment
from tensorc.driver.block_programs import shipped
from tensorc.frontend.block_check import parse_block_program
from tensorc.frontend.diagnostics import Source

CASES = [
    ("cholesky", {"A": (12, 12)}, [{"NB": nb} for nb in (1, 2, 3, 5, 6)]),
    ("lu", {"A": (12, 12)}, [{"NB": nb} for nb in (1, 2, 4, 5)]),
    ("tsqr", {"A": (40, 3)}, [{"MB": mb} for mb in (1, 2, 3, 5, 7, 8, 13)]),
    ("tsqr_q", {"A": (40, 3)}, [{"MB": mb} for mb in (1, 2, 3, 5, 6, 8, 11)]),
    ("lu_solve", {"A": (12, 12), "B": (12, 4)},
     [{"NB": nb, "KB": kb} for nb in (1, 3, 4) for kb in (1, 2)]),
    ("lower_solve", {"L": (10, 10), "B": (10, 6)},
     [{"NB": nb, "KB": kb} for nb in (1, 3, 4) for kb in (1, 2)]),
    ("upper_solve", {"U": (10, 10), "B": (10, 6)},
     [{"NB": nb, "KB": kb} for nb in (1, 3, 4) for kb in (1, 3)]),
]


def brute_force(dag: BlockDag):
    """Sequential execution: (tasks in order, parents, children, last writers)."""
    last: dict = {}
    parents: dict = {}
    children: dict = {}
    order = list(dag.walk())
    for task in order:
        env = dag.task_env(task)
        found = []
        for ref in dag.reads[task[0]]:
            block = dag.coords(ref, env)
            writer = last.get((ref.tensor, block))
            found.append((ref.tensor, block, writer))
            if writer is not None:
                children.setdefault(writer[0], set()).add(task)
        parents[task] = found
        for j, (tensor, block) in enumerate(dag.written(task)):
            last[(tensor, block)] = (task, j)
    return order, parents, children, last


def _dag(name, shapes, counts):
    program = shipped(name).program
    env, _ = environment(program, shapes, counts)
    return program, BlockDag(program, env)


@pytest.mark.parametrize(("name", "shapes", "counts"),
                         [(n, s, c) for n, s, cs in CASES for c in cs])
def test_symbolic_dag_equals_brute_force(name, shapes, counts):
    program, dag = _dag(name, shapes, counts)
    order, parents, children, last = brute_force(dag)
    assert order, "the program has tasks"
    for task in order:
        edges = dag.parents(task)
        got = [(e.read.tensor, e.coords, None if e.task is None else (e.task, e.result))
               for e in edges]
        assert got == parents[task], task
        for e in edges:
            if e.task is not None:
                assert dag.key(e.task) < dag.key(task), "a dependence points forward"
        per_result = dag.children(task)
        found = {child for readers, _ in per_result for child in readers}
        assert found == children.get(task, set()), task
        for j, (readers, final) in enumerate(per_result):
            tensor, block = dag.written(task)[j]
            assert final == (last[(tensor, block)] == (task, j)), (task, j)
            assert readers == sorted(readers, key=dag.key)
    roots = sorted(dag.roots(), key=dag.key)
    assert roots == [t for t in order if all(w is None for _, _, w in parents[t])]
    for tensor in program.outputs():
        for block in {b for (t, b) in last if t == tensor}:
            assert dag.final_writer(tensor, block) == last[(tensor, block)]


def test_cholesky_dag_shape():
    """Known counts: NB diagonal factors, NB(NB-1)/2 panel solves, and the trailing
    updates sum_k (NB-k-1)(NB-k)/2; the first task is the only root."""
    _, dag = _dag("cholesky", {"A": (8, 8)}, {"NB": 4})
    tasks = list(dag.walk())
    assert len(tasks) == 4 + 6 + 10  # 4 factors, 6 panel solves, 6 + 3 + 1 updates
    assert list(dag.roots()) == [(0, (0,))]
    # the update of A{2,1} at k=0 feeds the panel solve of L{2,1} at k=1
    children, final = dag.children((2, (0, 2, 1)))[0]
    assert children == [(1, (1, 2))] and final


def test_tsqr_tree_levels():
    """MB = 5: levels pair blocks half the tree apart, (0,4) at l=0, (0,2) (1,3) at l=1,
    (0,1) at l=2; blocks 1-3 are carried up a level by copies."""
    program, dag = _dag("tsqr", {"A": (50, 2)}, {"MB": 5})
    merges = [t for t in dag.walk() if t[0] == 1]
    assert [t[1] for t in merges] == [(0, 0), (1, 0), (1, 1), (2, 0)]
    copies = [t[1] for t in dag.walk() if t[0] == 2]
    assert copies == [(0, 1), (0, 2), (0, 3)]
    final = dag.final_writer("R", (0, 0))
    assert final is not None and final[0][0] == 3


def test_read_of_block_never_written_names_the_read():
    source = Source("bad.tc", """size N
blocks NB of N
input  A : f64[N, N]
output L : f64[N, N]
tensor S : f64
for k in 0:NB {
  S{k} = A{k, k}
  L{k, k} = S{k + 1}
}
""")
    program = parse_block_program(source)
    env, _ = environment(program, {"A": (4, 4)}, {"NB": 2})
    dag = BlockDag(program, env)
    with pytest.raises(BlockDagError) as err:
        dag.parents((1, (0,)))
    assert err.value.code == "E-unwritten"
    assert err.value.message == "block S{1} is read before any statement writes it"
    assert (err.value.span.line, err.value.span.col) == (8, 13)


def _answers(dag: BlockDag) -> tuple:
    import numpy as np

    readers = [dag.input_readers(tensor, block) for tensor in dag.program.inputs()
               for block in np.ndindex(*dag.program.block_grid(tensor, dag.env))]
    return ([(task, dag.parents(task), dag.children(task)) for task in dag.walk()],
            list(dag.roots()), readers)


@pytest.mark.parametrize("kept", [0, 3, 1 << 16])
def test_a_dag_asked_again_gives_the_same_answers_whether_kept_or_searched(monkeypatch,
                                                                          kept):
    from tensorc.codegen import block_dag

    monkeypatch.setattr(block_dag, "MEMO_TASKS", kept)
    for name, shapes, counts in (("cholesky", {"A": (12, 12)}, {"NB": 4}),
                                 ("tsqr", {"A": (40, 3)}, {"MB": 5})):
        _, dag = _dag(name, shapes, counts)
        first = _answers(dag)
        assert _answers(dag) == first == _answers(_dag(name, shapes, counts)[1])
        assert len(dag._parents) == min(kept, len(first[0]))
