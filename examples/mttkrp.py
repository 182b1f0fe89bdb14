"""MTTKRP both ways with tensorc, checked against numpy.

Run: ``.venv/bin/python examples/mttkrp.py`` (the tests run it too, at a small size).
"""

from __future__ import annotations

import sys

import numpy as np

import tensorc as tc


def main(n: int = 64, f: int = 16) -> int:
    rng = np.random.default_rng(0)
    x = rng.random((n, n, n))
    b = rng.random((n, f))
    c = rng.random((n, f))
    for subscripts, operands in [
        ("ijk,if,jf->if", (x, b, c)),  # k occurs only in X: summed inside X first
        ("ijk,jf,kf->if", (x, b, c)),  # textbook MTTKRP: one GEMM against the Khatri-Rao product
    ]:
        result = tc.einsum(subscripts, *operands)
        expected = np.einsum(subscripts, *operands, optimize=True)
        assert np.allclose(result, expected), subscripts
        stats = tc.last_stats()
        print(f"{subscripts}: matches numpy, {stats['tasks']} tasks ({stats['blocking']})")
    print("all results match numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:])))
