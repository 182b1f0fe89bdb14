"""A tour of einsum and tensordot forms tensorc runs with numpy's semantics.

Run: ``.venv/bin/python examples/contractions.py`` (the tests run it too).
"""

from __future__ import annotations

import sys

import numpy as np

import tensorc as tc


def main() -> int:
    rng = np.random.default_rng(1)
    a = rng.random((30, 20))
    b = rng.random((20, 10))
    t = rng.random((4, 5, 6))
    w = rng.random((6, 3))[None]
    u = rng.random((5, 6, 2))
    checks = {
        "matmul, forced 3x2x2 blocks": (
            tc.einsum("ik,kj->ij", a, b, grid={"i": 3, "k": 2, "j": 2}),
            a @ b,
        ),
        "X^T X": (tc.einsum("ki,kj->ij", a, a), a.T @ a),
        "trace": (tc.einsum("ii", a[:20]), np.trace(a[:20])),
        "batched, ellipsis": (
            tc.einsum("...ij,...jk->...ik", t, w),
            np.einsum("...ij,...jk->...ik", t, w),
        ),
        "tensordot over two axes": (
            tc.tensordot(t, u, axes=([1, 2], [0, 1])),
            np.tensordot(t, u, axes=([1, 2], [0, 1])),
        ),
        "integer dtype stays integer": (
            tc.einsum("i,i", np.arange(5), np.arange(5)),
            np.einsum("i,i", np.arange(5), np.arange(5)),
        ),
    }
    for name, (got, expected) in checks.items():
        assert np.allclose(got, expected), name
        assert np.asarray(got).dtype == np.asarray(expected).dtype, name
        assert np.shape(got) == np.shape(expected), name
        print(f"{name}: shape {np.shape(got)}, dtype {np.asarray(got).dtype}")
    print("all results match numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
