"""A node that dies mid-run does not lose the result (its own cluster, last in the suite).

Soft node affinity lets Ray run the dead node's tasks elsewhere, and lineage reconstruction
recomputes the blocks that died with it — input blocks made by ``tc.random`` included.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import tensorc as tc


@pytest.mark.last
def test_node_removed_mid_run_still_gives_the_right_answer():
    tc.shutdown()  # the shared cluster is done: this test kills nodes of its own
    session = tc.init(num_nodes=4)
    try:
        def operands():
            return (tc.random((128, 128, 128), grid=(8, 8, 8), seed=11),
                    tc.random((128, 24), grid=(8, 1), seed=12),
                    tc.random((128, 24), grid=(8, 1), seed=13))

        # equal seeds and blocking give equal values: gather one set for the reference, so
        # the set under test keeps its only copies on the nodes that made them
        expected = np.einsum("ijk,jf,kf->if", *[a.numpy() for a in operands()], optimize=True)
        inputs = operands()
        cluster = session.cluster.local_cluster
        victim = next(iter(cluster.worker_nodes))  # any node but the head (the driver)
        outcome: dict = {}

        def call():
            try:
                result = tc.einsum("ijk,jf,kf->if", *inputs)
                outcome["finished"] = time.monotonic()
                outcome["value"] = result.numpy()
            except Exception as err:  # noqa: BLE001 - reported below
                outcome["error"] = err

        worker = threading.Thread(target=call)
        worker.start()
        time.sleep(0.3)
        cluster.remove_node(victim, allow_graceful=False)
        removed = time.monotonic()
        worker.join(timeout=240)
        assert not worker.is_alive(), "the call hung after a node died"
        if "error" in outcome:
            error = outcome["error"]
            assert isinstance(error, tc.ExecutionError), repr(error)
            pytest.fail(f"the call raised instead of recovering: {error}")
        assert removed < outcome["finished"], "the node died after the run ended: not mid-run"
        np.testing.assert_allclose(outcome["value"], expected, rtol=1e-10)
    finally:
        tc.shutdown()
