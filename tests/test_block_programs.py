"""Block programs run locally: the shipped programs against numpy / scipy, the DAG expanded
from the ready tasks, the chosen block counts, explain, the CLI and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import tensorc as tc
from tensorc.cli import main
from tensorc.driver.block_programs import BlockProgram, shipped
from tensorc.errors import LinAlgError, PlanError, ShapeError, TcError
from tensorc.planning.block_counts import MIN_BLOCK
from tensorc.programs import NAMES as PROGRAMS
from tensorc.session import executor_for

RNG = np.random.default_rng(7)
HEAD = "size N\nblocks NB of N\ninput  A : f64[N, N]\n"  # the declarations the error cases share


def spd(n: int) -> np.ndarray:
    x = RNG.random((n, n))
    return x @ x.T + n * np.eye(n)


@pytest.mark.parametrize(("n", "nb"), [(8, 1), (8, 4), (30, 4), (31, 7), (64, 8)])
def test_cholesky_matches_numpy(n, nb):
    a = spd(n)
    out = shipped("cholesky").run(A=a, NB=nb)
    np.testing.assert_allclose(out["L"], np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)
    assert tc.last_stats()["block_counts"] == {"NB": nb}
    assert tc.last_stats()["tasks"] == nb + nb * (nb - 1) // 2 + (nb - 1) * nb * (nb + 1) // 6


def test_input_is_not_changed_by_in_place_updates():
    a = spd(20)
    before = a.copy()
    shipped("cholesky").run(A=a, NB=4)
    np.testing.assert_array_equal(a, before)


@pytest.mark.parametrize(("m", "n", "mb"), [(60, 4, 1), (60, 4, 3), (100, 5, 5), (128, 8, 8)])
def test_tsqr_r_and_q(m, n, mb):
    a = RNG.random((m, n))
    r = shipped("tsqr").run(A=a, MB=mb)["R"]
    expected = np.linalg.qr(a, mode="r")
    np.testing.assert_allclose(np.abs(r), np.abs(expected), rtol=1e-9, atol=1e-12)
    out = shipped("tsqr_q").run(A=a, MB=mb)
    q, r2 = out["Q"], out["R"]
    np.testing.assert_allclose(q @ r2, a, atol=1e-12)
    np.testing.assert_allclose(q.T @ q, np.eye(n), atol=1e-12)
    np.testing.assert_array_equal(np.tril(r2, -1), 0)


def test_lu_without_pivoting():
    a = RNG.random((40, 40)) + 40 * np.eye(40)
    out = shipped("lu").run(A=a, NB=3)
    lower, upper = out["L"], out["U"]
    np.testing.assert_allclose(lower @ upper, a, rtol=1e-12)
    np.testing.assert_array_equal(np.diag(lower), 1.0)
    np.testing.assert_array_equal(np.triu(lower, 1), 0)
    np.testing.assert_array_equal(np.tril(upper, -1), 0)


@pytest.mark.parametrize(("nb", "kb"), [(1, 1), (3, 2), (5, 3)])
def test_lu_solve_in_one_program(nb, kb):
    a = RNG.random((30, 30)) + 30 * np.eye(30)
    b = RNG.random((30, 4))
    x = shipped("lu_solve").run(A=a, B=b, NB=nb, KB=kb)["X"]
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10)


@pytest.mark.parametrize(("nb", "kb"), [(1, 1), (3, 2), (5, 3)])
def test_triangular_solves(nb, kb):
    t = RNG.random((25, 25)) + 25 * np.eye(25)
    b = RNG.random((25, 6))
    low = shipped("lower_solve").run(L=np.tril(t), B=b, NB=nb, KB=kb)["X"]
    np.testing.assert_allclose(low, scipy.linalg.solve_triangular(np.tril(t), b, lower=True))
    up = shipped("upper_solve").run(U=np.triu(t), B=b, NB=nb, KB=kb)["X"]
    np.testing.assert_allclose(up, scipy.linalg.solve_triangular(np.triu(t), b))


def test_the_dag_is_expanded_from_the_ready_tasks_not_built_whole():
    nb = 24
    shipped("cholesky").run(A=spd(48), NB=nb)
    stats = tc.last_stats()
    assert stats["tasks"] == 2600
    assert stats["peak_frontier"] <= nb * nb // 2  # the trailing updates of one step at most


def test_parallel_and_serial_runs_agree():
    a = spd(40)
    serial = shipped("cholesky").run(A=a, NB=5, workers=1)["L"]
    parallel = shipped("cholesky").run(A=a, NB=5, workers=3)["L"]
    np.testing.assert_array_equal(serial, parallel)
    assert tc.last_stats()["workers"] == 3


def test_block_counts_are_chosen_by_the_cost_model():
    program = shipped("cholesky")
    choice = program.choose({"A": (4096, 4096)}, {}, executor=executor_for("local"))
    (count,) = choice.counts.values()
    assert 4096 // count >= MIN_BLOCK
    simulated = [c for c in choice.candidates if c.makespan is not None]
    best = min(simulated, key=lambda c: (c.makespan, c.tasks))
    assert best.counts == choice.counts and len(simulated) >= 3
    small = program.choose({"A": (300, 300)}, {}, executor=executor_for("local"))
    assert small.counts == {"NB": 1}  # too small to cut into BLAS-3 blocks


def test_count_simulation_starts_inputs_where_an_array_made_on_its_own_holds_them():
    """On 4 nodes the 8 row blocks of a TSQR input start on nodes 0-3 (block-cyclic), so
    each first-level QR runs where its block is and only R factors and the tree's small
    products move, not the tall blocks (they were all on node 0 in the simulation). Priced
    at the model's default figures."""
    from tensorc.codegen.block_layout import environment
    from tensorc.planning import cost
    from tensorc.planning.block_counts import simulate

    program = shipped("tsqr_q").program
    env, bounds = environment(program, {"A": (65536, 40)}, {"MB": 8})
    figures = cost.machine()
    cost.use_machine(None)  # the defaults
    try:
        found = simulate(program, env, bounds, nodes=4, cores=1)
        on_node_0 = simulate(program, env, bounds, nodes=4, cores=1,
                             input_node=lambda tensor, coords: 0)
    finally:
        cost.use_machine(figures)
    block = 8192 * 40 * 8
    assert found.moved_bytes < block  # R factors and P products only (0.3 MB)
    assert on_node_0.moved_bytes >= 2 * block  # tall blocks leave node 0 to spread the QRs


def test_count_simulation_reads_inputs_stored_in_another_cut_as_the_runtime_does():
    """An input already on the cluster in 8 row blocks (two a node) and a candidate cut in 2:
    each of the candidate's blocks is made by a task of its own that copies the stored
    blocks it spans from their nodes (the runtime's in-call ``Stitch``), so the copies and
    their time are simulated, not charged at a flat rate; the stored cut itself needs
    none."""
    from tensorc.codegen.block_layout import environment
    from tensorc.planning import cost
    from tensorc.planning.block_counts import simulate

    program = shipped("tsqr_q").program
    edges = tuple(range(0, 65537, 8192))
    stored = {"A": ((edges, (0, 40)), {(k, 0): k % 4 for k in range(8)})}
    figures = cost.machine()
    cost.use_machine(None)  # the defaults
    try:
        found = {}
        for count in (2, 8):
            env, bounds = environment(program, {"A": (65536, 40)}, {"MB": count})
            found[count] = (simulate(program, env, bounds, nodes=4, cores=1, stored=stored),
                            simulate(program, env, bounds, nodes=4, cores=1))
    finally:
        cost.use_machine(figures)
    block = 8192 * 40 * 8
    recut, plain = found[2]
    assert recut.tasks == plain.tasks  # the stitches are steps, not program tasks
    assert recut.moved_bytes >= 6 * block  # each half spans 4 nodes: 3 of its blocks move
    assert recut.makespan > plain.makespan
    kept, fresh = found[8]
    assert kept.tasks == fresh.tasks and kept.moved_bytes < block  # the stored cut: no stitch


def test_count_simulation_reads_stored_blocks_where_they_are_even_after_a_node_left():
    """A candidate cut as the stored input reads each block on the node that holds it (not
    a block-cyclic guess), and a block whose node the cluster no longer has is read as on
    node 0, as the runtime reads it (it raised IndexError)."""
    from tensorc.codegen.block_layout import environment
    from tensorc.planning import cost
    from tensorc.planning.block_counts import choose_counts, simulate

    program = shipped("cholesky").program
    env, bounds = environment(program, {"A": (2048, 2048)}, {"NB": 4})
    edges = (tuple(range(0, 2049, 512)),) * 2
    cyclic = {"A": (edges, {(i, j): 2 * (i % 2) + j % 2 for i in range(4) for j in range(4)})}
    on_node_0 = {"A": (edges, {(i, j): 0 for i in range(4) for j in range(4)})}
    gone = {"A": (edges, {(i, j): 5 for i in range(4) for j in range(4)})}  # 4 nodes now
    figures = cost.machine()
    cost.use_machine(None)  # the defaults
    try:
        spread = simulate(program, env, bounds, nodes=4, cores=1, stored=cyclic)
        together = simulate(program, env, bounds, nodes=4, cores=1, stored=on_node_0)
        lost = simulate(program, env, bounds, nodes=4, cores=1, stored=gone)
        choices = [choose_counts(program, {"A": (2048, 2048)}, nodes=4, cores=1,
                                 stored={"A": (edges, tuple(layout["A"][1].items()))})
                   for layout in (gone, on_node_0)]
    finally:
        cost.use_machine(figures)
    assert spread.moved_bytes != together.moved_bytes
    assert lost == together and choices[0] == choices[1]


def default_machine_choice(nodes: int, n: int, **changes):
    """``choose_counts`` for the shipped Cholesky at ``n`` on ``nodes`` simulated nodes of
    the model's default machine (separate machines), changed as given."""
    import dataclasses

    from tensorc.planning import cost
    from tensorc.planning.block_counts import choose_counts

    figures = cost.machine()
    cost.use_machine(dataclasses.replace(cost.DEFAULT_MACHINE, **changes))
    try:
        return choose_counts(shipped("cholesky").program, {"A": (n, n)}, nodes=nodes,
                             cores=8)
    finally:
        cost.use_machine(figures)


def test_at_scale_a_factorisation_is_placed_by_its_blocks_owners():
    """On 64 separate machines LSHS, choosing one task at a time, gathers the Cholesky onto
    the node of the first panel (every trailing update there needs one block copied, at
    its owner two), and the lower triangle crosses that node's link; each task on the
    node owning the block it writes (owner-computes) runs in a fraction of the time, and
    the choice says so."""
    choice = default_machine_choice(64, 16384)
    simulated = [c for c in choice.candidates if c.makespan is not None]
    assert {c.policy for c in choice.candidates} == {"lshs", "owner"}
    lshs = min(c.makespan for c in simulated if c.policy == "lshs")
    owner = min(c.makespan for c in simulated if c.policy == "owner")
    chosen = next(c for c in simulated if c.counts == choice.counts and c.policy == "owner")
    assert choice.policy == "owner" and chosen.makespan == owner < lshs / 2
    gathered = next(c for c in simulated if c.counts == {"NB": 16} and c.policy == "lshs")
    assert gathered.moved_bytes == gathered.busiest_in_bytes  # all of it into one node
    assert f"NB={choice.counts['NB']}, placed by owner: " in choice.describe()
    assert "<- chosen" in [line for line in choice.describe().splitlines()
                           if "placed by owner" in line and f"NB={choice.counts['NB']}," in line][0]


def test_nodes_sharing_a_machine_are_placed_by_lshs_alone():
    choice = default_machine_choice(4, 4096, host_of=(0, 0, 0, 0), host_cores=(2,))
    assert {c.policy for c in choice.candidates} == {"lshs"} and choice.policy == "lshs"
    apart = default_machine_choice(4, 4096)
    assert {c.policy for c in apart.candidates} == {"lshs", "owner"}


def test_larger_clusters_simulate_more_tasks():
    from tensorc.planning.block_counts import MAX_SIMULATED_TASKS, task_limit

    assert task_limit(4) == task_limit(375) == MAX_SIMULATED_TASKS == 3000
    assert task_limit(1024) == 8192  # NB = 32 (5,984 tasks) of a Cholesky is weighed
    choice = default_machine_choice(1024, 16384)
    assert {"NB": 32} in [c.counts for c in choice.candidates if c.makespan is not None]
    assert "NB=64: more than 8192 tasks, not simulated" in choice.describe()


def test_explain_shows_program_plan_and_dag():
    program = tc.compile("examples/tsqr.tc")
    assert isinstance(program, BlockProgram)
    text = program.explain("program")
    assert "Rs{l + 1, i} = qr_r(stack(Rs{l, i}, Rs{l, i + 2**(log2(MB) - 1 - l)}))" in text
    assert "for i in 0:2**(log2(MB) - 1 - l)" in text
    dag = program.explain("dag", M=40, N=3, MB=3)  # level 0 pairs blocks 2 apart
    assert "s1(0, 0) [l=0, i=0]" in dag and "Rs{0, 2} <- s0(2)" in dag
    assert "s2(0, 1) [l=0, i=1] Rs{l + 1, i} = Rs{l, i}" in dag
    plan = program.explain("plan", M=2**16, N=32)
    assert "<- chosen" in plan and "MB=1:" in plan
    bound = tc.compile("examples/cholesky.tc").explain("plan", N=16384, nodes=16)
    assert "communication lower bound (Cholesky, 16 node(s)): the busiest node receives at " \
           "least 59.4 MB" in bound
    chosen = next(line for line in bound.splitlines() if "<- chosen" in line)
    assert bound.startswith("== plan: NB=16, placed by owner\n")  # the default machine
    assert chosen.startswith("  NB=16, placed by owner: 816 tasks")
    # the busiest node of the chosen placement, not of LSHS at the same count
    assert bound.endswith("this plan's busiest receives 520.1 MB (simulated)")


@pytest.mark.parametrize("name", PROGRAMS)
def test_shipped_programs_are_the_examples_and_print_as_golden(name, golden):
    example = tc.compile(f"examples/{name}.tc")
    assert example.program.body == shipped(name).program.body
    golden(f"block_{name}", example.explain("program"))


def test_errors_name_what_is_wrong():
    program = shipped("cholesky")
    with pytest.raises(ShapeError, match=r"size N is 4 from A's dimension 0 but 5 from A's "
                                         r"dimension 1 \(shape \(4, 5\)\)"):
        program.run(A=np.ones((4, 5)))
    with pytest.raises(PlanError, match="unknown argument\\(s\\) B; the program takes A, NB"):
        program.run(A=spd(4), B=1)
    with pytest.raises(PlanError, match="missing input\\(s\\) A"):
        program.run(NB=2)
    with pytest.raises(ShapeError, match="block count NB = 9 must be between 1 and N = 4"):
        program.run(A=spd(4), NB=9)
    with pytest.raises(LinAlgError, match="Matrix is not positive definite") as err:
        program.run(A=-spd(8), NB=2)
    assert isinstance(err.value, np.linalg.LinAlgError)


def test_run_time_read_of_an_unwritten_block_is_located():
    source = HEAD + """output L : f64[N, N]
tensor S : f64
for k in 0:NB {
  S{k} = A{k, k}
  L{k, k} = S{k + 1}
}
"""
    program = tc.compile(source)
    with pytest.raises(TcError) as err:
        program.run(A=spd(4), NB=2)
    text = str(err.value)
    assert "error[E-unwritten]: block S{1} is read before any statement writes it" in text
    assert "--> <source>:8:13" in text
    assert "8 |   L{k, k} = S{k + 1}" in text


def test_a_task_writing_one_block_twice_is_a_cycle():
    source = HEAD + """output Q : f64[N, N]
for i in 0:NB {
  for j in 0:NB {
    Q{i, 0}, Q{j, 0} = qr(A{i, 0})
  }
}
"""
    with pytest.raises(TcError) as err:
        tc.compile(source).run(A=spd(4), NB=2)
    assert "error[E-cycle]: block Q{0, 0} is written twice by one task" in str(err.value)
    assert "--> <source>:7:5" in str(err.value)


def test_compile_refuses_element_plan_options_for_block_programs():
    with pytest.raises(TcError, match="a block program takes its block counts by name"):
        tc.compile("examples/cholesky.tc", grid={"i": 2})


def test_cli_checks_explains_and_runs_block_programs(capsys):
    assert main(["check", "examples/cholesky.tc"]) == 0
    assert "ok (1 input(s), 1 output(s))" in capsys.readouterr().out
    assert main(["explain", "examples/lu.tc", "--emit", "dag", "--set", "N=4",
                 "--set", "NB=2"]) == 0
    out = capsys.readouterr().out
    assert "L{k, k}, U{k, k} = lu(A{k, k})" in out and "A{1, 1} <- s3(0, 1, 1)" in out
    assert main(["run", "examples/tsqr.tc", "--random", "--set", "M=12",
                 "--set", "N=3", "--set", "MB=3"]) == 0
    assert "R : float64[3, 3]" in capsys.readouterr().out


def test_a_task_reading_only_unwritten_blocks_is_not_skipped():
    """L{k, k} reads S{k + 1}, written only later: the task at k = NB - 1 reads S{NB},
    which nothing writes; it is nobody's child and no root, and is still reported."""
    source = HEAD + """output L : f64[N, N]
tensor S : f64
for k in 0:NB {
  S{k} = A{k, k}
}
for k in 0:NB {
  L{k, k} = S{k + 1}
}
"""
    with pytest.raises(TcError) as err:
        tc.compile(source).run(A=spd(8), NB=4)
    assert "error[E-unwritten]: block S{4} is read before any statement writes it" in str(
        err.value)
    assert "--> <source>:10:13" in str(err.value)


def test_a_write_outside_the_blocks_of_a_tensor_is_an_error():
    source = HEAD + """output C : f64[N, N]
for i in 0:NB {
  C{i + 1, 0} = A{i, 0}
}
"""
    with pytest.raises(TcError) as err:
        tc.compile(source).run(A=spd(4), NB=2)
    assert "error[E-block]: block C{2, 0} is written outside C's 2 x 2 blocks" in str(
        err.value)


def test_a_step_that_is_zero_at_run_time_is_a_loop_error():
    source = HEAD + """output C : f64[N, N]
for i in 0:NB:NB - 2 {
  C{i, i} = A{i, i}
}
"""
    with pytest.raises(TcError, match=r"error\[E-loop\]: loop 'i' has step 0; it must be "
                                      r"positive"):
        tc.compile(source).run(A=spd(4), NB=2)


def test_the_count_simulation_places_within_a_node_s_memory_cap():
    # a 2048² Cholesky on 4 simulated nodes whose input sits on node 0: LSHS keeps the
    # factorisation there; capped at half of what it added to that node (the input is the
    # caller's), it spreads, moving blocks
    from tensorc.codegen.block_layout import environment
    from tensorc.planning import cost
    from tensorc.planning.block_counts import simulate

    program = shipped("cholesky").program
    env, bounds = environment(program, {"A": (2048, 2048)}, {"NB": 4})
    figures = cost.machine()
    cost.use_machine(None)  # the defaults
    try:
        free = simulate(program, env, bounds, nodes=4, cores=1,
                        input_node=lambda tensor, coords: 0)
        cap = free.plan_peak_bytes // 2
        capped = simulate(program, env, bounds, nodes=4, cores=1,
                          input_node=lambda tensor, coords: 0, memory_cap=cap)
    finally:
        cost.use_machine(figures)
    assert free.moved_bytes == 0 and free.plan_peak_bytes < free.peak_node_bytes
    assert capped.plan_peak_bytes <= cap and capped.moved_bytes > 0


def test_the_count_choice_keeps_to_a_node_s_memory_cap_where_a_candidate_does():
    # on 4 simulated nodes of separate machines both placements are weighed: unbudgeted,
    # owner-computes in 8 x 8 blocks wins; at three quarters of its plan peak it no longer
    # fits, and the choice is the fastest candidate that does (LSHS placing within it)
    from tensorc.planning import cost
    from tensorc.planning.block_counts import choose_counts

    program = shipped("cholesky").program
    figures = cost.machine()
    cost.use_machine(None)  # the defaults: separate machines
    try:
        free = choose_counts(program, {"A": (4096, 4096)}, nodes=4, cores=1)
        chosen = next(c for c in free.candidates
                      if c.counts == free.counts and c.policy == free.policy)
        cap = chosen.plan_peak_bytes * 3 // 4
        capped = choose_counts(program, {"A": (4096, 4096)}, nodes=4, cores=1,
                               memory_cap=cap)
    finally:
        cost.use_machine(figures)
    best = next(c for c in capped.candidates
                if c.counts == capped.counts and c.policy == capped.policy)
    assert chosen.plan_peak_bytes > cap >= best.plan_peak_bytes
