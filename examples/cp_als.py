"""CP decomposition by alternating least squares (the MTTKRP workload), array API style.

``cp_als(xp, T, factors)`` updates the three factor matrices of a rank-R model of a 3-way
tensor; each update is an MTTKRP (``einsum("ijk,jr,kr->ir")``) and an R x R solve. Run as a
script it fits the same tensor with numpy and with tensorc and checks the factors agree.
"""

from __future__ import annotations

import sys

import numpy as np


def cp_als(xp, T, factors, iterations: int = 5):
    """Factors ``(A, B, C)`` after ``iterations`` ALS sweeps."""
    A, B, C = factors
    for _ in range(iterations):
        A = xp.linalg.solve((B.T @ B) * (C.T @ C), xp.einsum("ijk,jr,kr->ir", T, B, C).T).T
        B = xp.linalg.solve((A.T @ A) * (C.T @ C), xp.einsum("ijk,ir,kr->jr", T, A, C).T).T
        C = xp.linalg.solve((A.T @ A) * (B.T @ B), xp.einsum("ijk,ir,jr->kr", T, A, B).T).T
        if hasattr(C, "compute"):
            import tensorc as tc

            A, B, C = tc.compute(A, B, C)
    return A, B, C


def make_data(shape=(30, 24, 20), rank: int = 4, seed: int = 2):
    rng = np.random.default_rng(seed)
    truth = [rng.random((n, rank)) for n in shape]
    T = np.einsum("ir,jr,kr->ijk", *truth) + 0.01 * rng.random(shape)
    start = [rng.random((n, rank)) for n in shape]
    return T, start


def main() -> int:
    import tensorc as tc

    T, start = make_data()
    expected = cp_als(np, T, start)
    got = cp_als(tc, tc.asarray(T), [tc.asarray(f) for f in start])
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-7, atol=1e-9)
    model = np.einsum("ir,jr,kr->ijk", *(np.asarray(g) for g in got))
    error = np.linalg.norm(model - T) / np.linalg.norm(T)
    print(f"CP-ALS rank {start[0].shape[1]} of a {T.shape} tensor: relative error {error:.4f}")
    print("all results match numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
