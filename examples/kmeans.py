"""k-means (Lloyd's algorithm) in array API style: ``cluster(xp, X, centres)``.

Run as a script it clusters the same points with numpy and with tensorc (lazy arrays; the
distances, assignments and new centres of an iteration form one program) and checks that
the centres agree.
"""

from __future__ import annotations

import sys

import numpy as np


def cluster(xp, X, centres, iterations: int = 10):
    """Centres after ``iterations`` Lloyd steps from ``centres`` (k x d)."""
    k = centres.shape[0]
    for _ in range(iterations):
        # squared distances without an n x k x d temporary: |x|^2 - 2 x.c + |c|^2
        distances = (xp.sum(X * X, axis=1)[:, None] - 2.0 * (X @ centres.T)
                     + xp.sum(centres * centres, axis=1)[None, :])
        nearest = xp.argmin(distances, axis=1)
        member = xp.astype(nearest[:, None] == xp.arange(k)[None, :], X.dtype)  # n x k
        counts = xp.sum(member, axis=0)
        sums = member.T @ X
        centres = sums / xp.maximum(counts, 1.0)[:, None]
        if hasattr(centres, "compute"):
            centres = centres.compute()
    return centres


def make_data(n: int = 1500, d: int = 4, k: int = 5, seed: int = 1):
    rng = np.random.default_rng(seed)
    truth = rng.normal(scale=6.0, size=(k, d))
    X = truth[rng.integers(0, k, size=n)] + rng.normal(size=(n, d))
    return X, X[:k].copy()


def main() -> int:
    import tensorc as tc

    X, start = make_data()
    expected = cluster(np, X, start)
    got = cluster(tc, tc.asarray(X), tc.asarray(start))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-9, atol=1e-9)
    print(f"k-means: {X.shape[0]} points, k={start.shape[0]}, centres agree with numpy")
    print("all results match numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
